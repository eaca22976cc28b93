// Apple's LARight on Linux: a right the person grants by the finger or the
// password, as its requirement says. A right that is not persisted is one
// evaluation through the helper, like LAContext's; a persisted right
// (LARightStore) is authorized by loading its secret, one evaluation in
// which the helper releases the secret only after what the item requires.
import Foundation
import LocalAuth
import LibcSystem
import LocalAuthTerminal

/// What the person must do to grant a right.
open class LAAuthenticationRequirement: NSObject, @unchecked Sendable {
    /// The store's name for the requirement (`SecretRequirement`).
    let secretRequirement: SecretRequirement

    init(_ requirement: SecretRequirement) {
        secretRequirement = requirement
        super.init()
    }

    /// The finger, or the account's password.
    open class var `default`: LAAuthenticationRequirement { LAAuthenticationRequirement(.matchOrPassword) }
    /// The finger only (any finger enrolled now or later).
    open class var biometry: LAAuthenticationRequirement { LAAuthenticationRequirement(.match) }
    /// The finger only, of the fingers enrolled when the right was saved:
    /// once they change, the right is unusable and its secret deleted.
    open class var biometryCurrentSet: LAAuthenticationRequirement { LAAuthenticationRequirement(.matchOfCurrentSet) }

    /// The finger, with `fallback`: `.default` (none) or `.devicePasscode`
    /// (the account's password after a finger that was not recognized).
    open class func biometry(fallback: LABiometryFallbackRequirement) -> LAAuthenticationRequirement {
        LAAuthenticationRequirement(fallback.allowsPassword ? .matchThenPassword : .match)
    }

    open override func isEqual(_ object: Any?) -> Bool {
        (object as? LAAuthenticationRequirement)?.secretRequirement == secretRequirement
    }

    open override var hash: Int { Int(secretRequirement.rawValue) }
}

/// What may stand in for the finger.
open class LABiometryFallbackRequirement: NSObject, @unchecked Sendable {
    let allowsPassword: Bool

    init(allowsPassword: Bool) {
        self.allowsPassword = allowsPassword
        super.init()
    }

    /// Nothing: the finger only.
    open class var `default`: LABiometryFallbackRequirement { LABiometryFallbackRequirement(allowsPassword: false) }
    /// The account's password (Apple's device passcode).
    open class var devicePasscode: LABiometryFallbackRequirement { LABiometryFallbackRequirement(allowsPassword: true) }
}

open class LARight: NSObject, @unchecked Sendable {
    /// Where the right stands.
    public enum State: Int, Sendable {
        case unknown = 0
        case authorizing = 1
        case authorized = 2
        case notAuthorized = 3
    }

    /// Where the right stands now.
    open var state: State { locked { stateValue } }
    /// The app's own number for the right.
    open var tag: Int {
        get { locked { _tag } }
        set { locked { _tag = newValue } }
    }
    /// Who shows the sheet (a GUI app's own presenter; Linux only); nil:
    /// the terminal the app runs in.
    open var presenter: LAPresenter? {
        get { locked { _presenter } }
        set { locked { _presenter = newValue } }
    }

    let requirement: LAAuthenticationRequirement
    let connection: HelperConnection
    let sheets = OpenSheets()
    private let lock = NSLock()
    /// `state`, read and written under the lock.
    var stateValue: State = .unknown
    /// Counts deauthorize calls: an authorization that began before the
    /// last one keeps nothing.
    private var generation = 0
    private var _tag = 0
    private var _presenter: LAPresenter? = nil

    /// A right with the default requirement: the finger, or the password.
    public override convenience init() {
        self.init(requirement: .default)
    }

    public convenience init(requirement: LAAuthenticationRequirement) {
        self.init(requirement: requirement, connection: SetuidHelperConnection())
    }

    init(requirement: LAAuthenticationRequirement, connection: HelperConnection) {
        self.requirement = requirement
        self.connection = connection
        super.init()
    }

    /// Asks the person to grant the right (the sheet shows
    /// `localizedReason`); throws an `LAError` when they do not. Each call
    /// is one evaluation, counted as every prompt is.
    open func authorize(localizedReason: String) async throws {
        try await awaitCompletion { authorize(localizedReason: localizedReason, completion: $0) }
    }

    open func authorize(localizedReason: String, completion: @escaping @Sendable ((any Error)?) -> Void) {
        precondition(!localizedReason.isEmpty, "Non-empty localizedReason must be provided.")
        let began = locked { () -> Int in
            stateValue = .authorizing
            return generation
        }
        DispatchQueue.global().async { [self] in
            let granted = grant(reason: localizedReason)
            // The outcome and what it released land together, and only if
            // no deauthorize came in between; a failure keeps nothing of an
            // earlier authorization either.
            let error: (any Error)? = locked {
                guard generation == began else {
                    if case .success(let secret?) = granted { secret.wipe() }
                    return LAError(.appCancel, message: "The right was deauthorized while it was being authorized.")
                }
                switch granted {
                case .success(let secret):
                    keep(secret)
                    stateValue = .authorized
                    return nil
                case .failure(let error):
                    forget()
                    stateValue = .notAuthorized
                    return error
                }
            }
            completion(error)
        }
    }

    /// Whether the right could be granted now (a reader with a finger for
    /// a finger-only right); never asks and never counts.
    open func checkCanAuthorize() async throws {
        try await awaitCompletion { checkCanAuthorize(completion: $0) }
    }

    open func checkCanAuthorize(completion: @escaping @Sendable ((any Error)?) -> Void) {
        DispatchQueue.global().async { [self] in
            var request = HelperRequest()
            request.action = .check
            request.service = literalBytes(KnownServices.app)
            request.present(.policy, utf8Bytes(requirement.secretRequirement.policy.name))
            let verdict = connection.run(request, conversation: PresenterConversation(presenter: nil), control: nil)
            completion(verdict.laError)
        }
    }

    /// Gives the right back: a persisted right's secret is wiped from this
    /// process, and a new `authorize` is needed for it.
    open func deauthorize() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            deauthorize { continuation.resume() }
        }
    }

    open func deauthorize(completion: @escaping @Sendable () -> Void) {
        locked {
            generation += 1
            forget()
            stateValue = .notAuthorized
        }
        sheets.cancelOpen()
        completion()
    }

    // MARK: - For the persisted right

    /// One evaluation of the requirement: what it released (nothing here)
    /// when granted, else the error. A persisted right overrides it with a
    /// load of its secret.
    func grant(reason: String) -> Result<SecretBuffer?, any Error> {
        var request = HelperRequest()
        request.service = literalBytes(KnownServices.app)
        request.tty = Terminal.onStandardInput()
        request.present(.policy, utf8Bytes(requirement.secretRequirement.policy.name))
        request.present(.reason, utf8Bytes(reason))
        let sheet = SheetSettings(presenter: presenter, reason: reason)
        switch Sheet.run(sheet, sheets: sheets, { conversation, control in
            connection.run(request, conversation: conversation, control: control)
        }) {
        case .success(let verdict): return verdict.laError.map { .failure($0) } ?? .success(nil)
        case .failure(let error): return .failure(error)
        }
    }

    /// Keeps what an authorization released (a persisted right's secret);
    /// called under the lock.
    func keep(_ released: SecretBuffer?) {}

    /// What a persisted right holds goes (nothing here); called under the lock.
    func forget() {}

    func locked<T>(_ body: () -> T) -> T {
        lock.lock()
        defer { lock.unlock() }
        return body()
    }
}
