// Apple's LARightStore, LAPersistedRight and LASecret on Linux: rights
// saved under an identifier with a secret that only their requirement
// releases, kept by the setuid helper in a root-only store for the app's
// user alone (docs/DESIGN.md, "Secrets"). The identifier is the store's
// item name, so `localauth secret list` shows an app's rights too.
import Foundation
import LocalAuth
import LibcSystem
import LocalAuthTerminal

/// A right saved in the store, with its secret.
open class LAPersistedRight: LARight, @unchecked Sendable {
    /// The secret the right protects: readable while the right is authorized.
    open var secret: LASecret { _secret }

    let identifier: String
    /// False for a right found by its identifier: the store keeps its
    /// requirement, which the helper enforces and does not tell.
    let requirementKnown: Bool
    private var _secret: LASecret!
    /// The secret as the helper released it, until deauthorize or release.
    /// (A SecretBuffer wipes itself when released.)
    let released = SecretBuffer(limit: SecretItemFormat.maxSecretBytes)

    init(identifier: String, requirement: LAAuthenticationRequirement?, connection: HelperConnection) {
        self.identifier = identifier
        requirementKnown = requirement != nil
        super.init(requirement: requirement ?? .default, connection: connection)
        _secret = LASecret(right: self)
    }

    /// A load of the secret: one evaluation, with the item's name added to
    /// the reason by the helper; what it released, or the error.
    override func grant(reason: String) -> Result<SecretBuffer?, any Error> {
        var request = HelperRequest()
        request.action = .secretLoad
        request.service = literalBytes(KnownServices.app)
        request.tty = Terminal.onStandardInput()
        request.item = utf8Bytes(identifier)
        request.present(.reason, utf8Bytes(reason))
        let incoming = SecretBuffer(limit: SecretItemFormat.maxSecretBytes)
        let sheet = SheetSettings(presenter: presenter, reason: reason)
        let ran = Sheet.run(sheet, sheets: sheets) { conversation, control in
            connection.runSecret(request, conversation: conversation, control: control, outgoing: nil, incoming: incoming).0
        }
        switch ran {
        case .failure(let error):
            incoming.wipe()
            return .failure(error)
        case .success(let verdict):
            if let error = verdict.laError {
                incoming.wipe()
                return .failure(error)
            }
            return .success(incoming)
        }
    }

    override func keep(_ secret: SecretBuffer?) {
        released.wipe()
        secret?.move(into: released)
    }

    override func forget() {
        released.wipe()
    }

    /// The secret's bytes while authorized.
    func secretData() -> Result<Data, LAError> {
        locked {
            guard stateValue == .authorized else {
                return .failure(LAError(.notInteractive, message: "The right is not authorized: call authorize(localizedReason:) first."))
            }
            return .success(released.withBytes { Data(bytes: $0, count: $1) })
        }
    }
}

/// The data a persisted right protects.
open class LASecret: NSObject, @unchecked Sendable {
    private weak var right: LAPersistedRight?

    init(right: LAPersistedRight) {
        self.right = right
        super.init()
    }

    /// The secret, while its right is authorized; else an `LAError`. The
    /// `Data` is the app's: this library cannot wipe it.
    open func loadData() async throws -> Data {
        try await awaitCompletion { loadData(completion: $0) }
    }

    open func loadData(completion: @escaping @Sendable (Data?, (any Error)?) -> Void) {
        guard let right else { return completion(nil, LAError(.invalidContext, message: "The right is gone.")) }
        switch right.secretData() {
        case .success(let data): completion(data, nil)
        case .failure(let error): completion(nil, error)
        }
    }
}

/// A secret handed to the queue that sends it (it is wiped there).
private struct Carried: @unchecked Sendable {
    let buffer: SecretBuffer
    init(_ buffer: SecretBuffer) { self.buffer = buffer }
}

/// The store of the app user's rights.
open class LARightStore: NSObject, @unchecked Sendable {
    /// The one store.
    public static let shared = LARightStore(connection: SetuidHelperConnection())

    let connection: HelperConnection
    /// Who shows the sheet of a save that asks the password (the user's
    /// first secret; Linux only); nil: the terminal the app runs in.
    open var presenter: LAPresenter? {
        get { lock.lock(); defer { lock.unlock() }; return _presenter }
        set { lock.lock(); _presenter = newValue; lock.unlock() }
    }
    private let lock = NSLock()
    private var _presenter: LAPresenter? = nil
    private let sheets = OpenSheets()

    init(connection: HelperConnection) {
        self.connection = connection
        super.init()
    }

    /// The right saved under `identifier`; an `LAError` when there is none.
    open func right(forIdentifier identifier: String) async throws -> LAPersistedRight {
        try await awaitCompletion { self.right(forIdentifier: identifier, completion: $0) }
    }

    open func right(forIdentifier identifier: String, completion handler: @escaping @Sendable (LAPersistedRight?, (any Error)?) -> Void) {
        DispatchQueue.global().async { [self] in
            switch list() {
            case .failure(let error): handler(nil, error)
            case .success(let names):
                guard names.contains(utf8Bytes(identifier)) else {
                    return handler(nil, LAError(.invalidContext, message: SecretStatus.absent.sentence))
                }
                handler(LAPersistedRight(identifier: identifier, requirement: nil, connection: connection), nil)
            }
        }
    }

    /// Saves `right` under `identifier` with no secret (an empty one).
    open func saveRight(_ right: LARight, identifier: String) async throws -> LAPersistedRight {
        try await saveRight(right, identifier: identifier, secret: Data())
    }

    open func saveRight(_ right: LARight, identifier: String,
                        completion handler: @escaping @Sendable (LAPersistedRight?, (any Error)?) -> Void) {
        saveRight(right, identifier: identifier, secret: Data(), completion: handler)
    }

    /// Saves `right` under `identifier` with `secret` (at most 4096 bytes),
    /// replacing what was saved there. The user's first secret asks the
    /// account's password once.
    open func saveRight(_ right: LARight, identifier: String, secret: Data) async throws -> LAPersistedRight {
        try await awaitCompletion { self.saveRight(right, identifier: identifier, secret: secret, completion: $0) }
    }

    open func saveRight(_ right: LARight, identifier: String, secret: Data,
                        completion handler: @escaping @Sendable (LAPersistedRight?, (any Error)?) -> Void) {
        // A right found by its identifier does not know its requirement:
        // saving it would quietly make a finger-only secret finger-or-password.
        if let persisted = right as? LAPersistedRight, !persisted.requirementKnown {
            return handler(nil, LAError(.invalidContext, message: "A right found by its identifier keeps the store's requirement: "
                                        + "save a new LARight(requirement:) to store a secret."))
        }
        let outgoing = SecretBuffer(limit: SecretItemFormat.maxSecretBytes)
        let fits = secret.withUnsafeBytes { raw in
            outgoing.fill(length: raw.count) { storage in
                if raw.count > 0 { storage.update(from: raw.bindMemory(to: UInt8.self).baseAddress!, count: raw.count) }
                return true
            }
        }
        guard fits else {
            return handler(nil, LAError(.invalidContext, message: "A secret holds at most \(SecretItemFormat.maxSecretBytes) bytes."))
        }
        let carried = Carried(outgoing)
        DispatchQueue.global().async { [self] in
            let outgoing = carried.buffer
            defer { outgoing.wipe() }
            var request = HelperRequest()
            request.action = .secretStore
            request.access = right.requirement.secretRequirement
            let (verdict, _) = runSecret(request, identifier: identifier, outgoing: outgoing, presenter: right.presenter ?? presenter)
            if let error = verdict.laError { return handler(nil, error) }
            handler(LAPersistedRight(identifier: identifier, requirement: right.requirement, connection: connection), nil)
        }
    }

    /// Removes `right` and its secret.
    open func removeRight(_ right: LAPersistedRight) async throws {
        try await removeRight(forIdentifier: right.identifier)
    }

    open func removeRight(_ right: LAPersistedRight, completion handler: @escaping @Sendable ((any Error)?) -> Void) {
        removeRight(forIdentifier: right.identifier, completion: handler)
    }

    /// Removes the right saved under `identifier` and its secret.
    open func removeRight(forIdentifier identifier: String) async throws {
        try await awaitCompletion { self.removeRight(forIdentifier: identifier, completion: $0) }
    }

    open func removeRight(forIdentifier identifier: String, completion handler: @escaping @Sendable ((any Error)?) -> Void) {
        DispatchQueue.global().async { [self] in
            var request = HelperRequest()
            request.action = .secretDelete
            handler(runSecret(request, identifier: identifier).0.laError)
        }
    }

    /// Removes every right of this user (every secret of theirs, the
    /// command line's too).
    open func removeAllRights() async throws {
        try await awaitCompletion { self.removeAllRights(completion: $0) }
    }

    open func removeAllRights(completion handler: @escaping @Sendable ((any Error)?) -> Void) {
        DispatchQueue.global().async { [self] in
            switch list() {
            case .failure(let error): handler(error)
            case .success(let names):
                for name in names {
                    var request = HelperRequest()
                    request.action = .secretDelete
                    let verdict = runSecret(request, item: name).0
                    if case .item(.absent) = verdict { continue }
                    if let error = verdict.laError { return handler(error) }
                }
                handler(nil)
            }
        }
    }

    // MARK: - Work

    func list() -> Result<[[UInt8]], any Error> {
        var request = HelperRequest()
        request.action = .secretList
        let (verdict, names) = runSecret(request, item: [])
        if let error = verdict.laError { return .failure(error) }
        return .success(names)
    }

    func runSecret(_ request: HelperRequest, identifier: String, outgoing: SecretBuffer? = nil,
                   presenter: LAPresenter? = nil) -> (SecretVerdict, [[UInt8]]) {
        runSecret(request, item: utf8Bytes(identifier), outgoing: outgoing, presenter: presenter)
    }

    /// One secret action. Only a store can ask (the user's first secret:
    /// the password); the others never show a sheet.
    func runSecret(_ request: HelperRequest, item: [UInt8], outgoing: SecretBuffer? = nil,
                   presenter: LAPresenter? = nil) -> (SecretVerdict, [[UInt8]]) {
        var request = request
        request.service = literalBytes(KnownServices.app)
        request.item = item
        if request.action != .secretList, !SecretItemFormat.isValidIdentifier(item) {
            return (.helper(.refused), [])   // an identifier is 1 to 256 bytes of UTF-8 without control characters
        }
        guard request.action == .secretStore else {
            request.interactive = false
            return connection.runSecret(request, conversation: PresenterConversation(presenter: nil), control: nil,
                                        outgoing: outgoing, incoming: nil)
        }
        request.tty = Terminal.onStandardInput()
        let reason = "Save a secret"
        request.present(.reason, utf8Bytes(reason))
        let ran = Sheet.run(SheetSettings(presenter: presenter, reason: reason), sheets: sheets) { conversation, control in
            connection.runSecret(request, conversation: conversation, control: control, outgoing: outgoing, incoming: nil)
        }
        switch ran {
        case .success(let answer): return answer
        case .failure(let error):
            // No sheet can be shown: the store goes on without one (it asks
            // nothing unless this is the user's first secret).
            guard error.code == .notInteractive else { return (.helper(.failed(error.localizedDescription)), []) }
            request.interactive = false
            return connection.runSecret(request, conversation: PresenterConversation(presenter: nil), control: nil,
                                        outgoing: outgoing, incoming: nil)
        }
    }
}
