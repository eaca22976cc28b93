// Apple's LAContext on Linux: preflight and evaluation of a policy for the
// person running the app, through the setuid localauth-helper, so that an
// app's attempts count in the same record as sudo's and the screen
// lockers' (the same limits, lockout and back-off; no way to reset them
// or to evaluate for another account).
import Foundation
import LocalAuth
import LibcSystem
import LocalAuthTerminal


open class LAContext: NSObject, @unchecked Sendable {
    /// The reason shown when none is passed to an evaluation.
    open var localizedReason: String {
        get { locked { _localizedReason } }
        set { locked { _localizedReason = newValue } }
    }
    /// The fallback button's title; nil for the default ("Enter
    /// Password"), empty to hide the fallback.
    open var localizedFallbackTitle: String? {
        get { locked { _fallbackTitle } }
        set { locked { _fallbackTitle = newValue } }
    }
    /// The cancel button's title; nil for the default.
    open var localizedCancelTitle: String? {
        get { locked { _cancelTitle } }
        set { locked { _cancelTitle = newValue } }
    }
    /// When true, an evaluation that would need the person fails with
    /// `notInteractive` and shows nothing.
    open var interactionNotAllowed: Bool {
        get { locked { _interactionNotAllowed } }
        set { locked { _interactionNotAllowed = newValue } }
    }
    /// How long a successful unlock of this account in this login session
    /// may stand in for a new one, in seconds: 0 (the default) to 300.
    open var touchIDAuthenticationAllowableReuseDuration: TimeInterval {
        get { locked { _reuseDuration } }
        set {
            let clamped = newValue.isNaN ? 0 : min(max(newValue, 0), LATouchIDAuthenticationMaximumAllowableReuseDuration)
            locked { _reuseDuration = clamped }
        }
    }
    /// The biometry found by the last preflight or evaluation.
    open var biometryType: LABiometryType { locked { _biometryType } }
    /// A digest of the enrolled fingers as the last preflight or
    /// successful evaluation found them; it changes when they change.
    open var evaluatedPolicyDomainState: Data? { locked { _domainState } }
    /// The same digest, with the biometry type.
    open var domainState: LADomainState {
        locked { LADomainState(biometry: LADomainStateBiometry(biometryType: _biometryType, stateHash: _domainState)) }
    }
    /// Who shows the conversation (a GUI app's own presenter); nil: the
    /// terminal the app runs in.
    open var presenter: LAPresenter? {
        get { locked { _presenter } }
        set { locked { _presenter = newValue } }
    }

    private let connection: HelperConnection
    private let queue = DispatchQueue(label: "localauth.LAContext.reply")
    private let lock = NSLock()
    private var _localizedReason = ""
    private var _fallbackTitle: String? = nil
    private var _cancelTitle: String? = nil
    private var _interactionNotAllowed = false
    private var _reuseDuration: TimeInterval = 0
    private var _biometryType: LABiometryType = .none
    private var _domainState: Data? = nil
    private var _presenter: LAPresenter? = nil
    /// The evaluations now running, and whether invalidate() was called.
    private let sheets = OpenSheets()

    public override init() {
        connection = SetuidHelperConnection()
        super.init()
    }

    init(connection: HelperConnection) {
        self.connection = connection
        super.init()
    }

    /// Whether `policy` can be evaluated now; never prompts and never
    /// counts an attempt. On false, `error` says why.
    open func canEvaluatePolicy(_ policy: LAPolicy, error: NSErrorPointer) -> Bool {
        switch preflight(policy) {
        case .success: return true
        case .failure(let failure):
            error?.pointee = failure as NSError
            return false
        }
    }

    /// Evaluates `policy`: the fingerprint, then (policy owner) the
    /// password. `reply` runs on a private queue. An empty `localizedReason`
    /// is a programming error and stops the app, as on Apple's systems.
    open func evaluatePolicy(_ policy: LAPolicy, localizedReason: String,
                             reply: @escaping @Sendable (Bool, (any Error)?) -> Void) {
        locked { _domainState = nil }
        precondition(!localizedReason.isEmpty, "Non-empty localizedReason must be provided.")
        queue.async { [self] in
            switch evaluate(policy, reason: localizedReason) {
            case .success: reply(true, nil)
            case .failure(let error): reply(false, error)
            }
        }
    }

    /// Evaluates `policy`; throws an `LAError` when it does not succeed.
    open func evaluatePolicy(_ policy: LAPolicy, localizedReason: String) async throws -> Bool {
        try await withCheckedThrowingContinuation { continuation in
            evaluatePolicy(policy, localizedReason: localizedReason) { success, error in
                if let error { continuation.resume(throwing: error) } else { continuation.resume(returning: success) }
            }
        }
    }

    /// Ends a running evaluation with `appCancel` (the reader is released,
    /// the pending attempt given back when no finger was judged); every
    /// later call fails with `invalidContext`.
    open func invalidate() {
        sheets.invalidate()
    }

    // MARK: - Work

    private func preflight(_ policy: LAPolicy) -> Result<Void, LAError> {
        if sheets.isInvalidated { return .failure(LAError(.invalidContext)) }
        var request = HelperRequest()
        request.action = .check
        request.service = literalBytes(KnownServices.app)
        request.present(.policy, literalBytes(policy.helperName))
        let outcome = connection.run(request, conversation: PresenterConversation(presenter: nil), control: nil)
        let verdict = verdict(of: outcome)
        locked {
            switch verdict {
            case .success(let state):
                _biometryType = .touchID
                _domainState = state
            case .failure(let error):
                _biometryType = error.code == .biometryNotAvailable ? .none : .touchID
                if error.code != .passcodeNotSet { _domainState = nil }
            }
        }
        return verdict.map { _ in () }
    }

    private func evaluate(_ policy: LAPolicy, reason: String) -> Result<Void, LAError> {
        let settings = locked { (sheets.isInvalidated, _interactionNotAllowed, _fallbackTitle, _cancelTitle, _presenter, _reuseDuration) }
        if settings.0 { return .failure(LAError(.invalidContext)) }
        var request = HelperRequest()
        request.service = literalBytes(KnownServices.app)
        request.reuseSeconds = Int(settings.5.rounded(.down))
        if settings.1 {
            // Nothing may be shown: the reuse window, or what is missing,
            // else notInteractive.
            request.interactive = false
            request.present(.policy, literalBytes(policy.helperName))
            let verdict = verdict(of: connection.run(request, conversation: PresenterConversation(presenter: nil), control: nil))
            if case .success(let state) = verdict { locked { _biometryType = .touchID; _domainState = state ?? _domainState } }
            return verdict.map { _ in () }
        }
        request.tty = Terminal.onStandardInput()
        // The helper shows apps Apple's sheet (scan mode) unless the
        // administrator's configuration says otherwise.
        request.present(.policy, literalBytes(policy.helperName))
        request.present(.reason, utf8Bytes(reason))
        if let fallback = settings.2 { request.present(.fallbackTitle, utf8Bytes(fallback)) }
        if let cancel = settings.3 { request.present(.cancelTitle, utf8Bytes(cancel)) }
        let sheet = SheetSettings(presenter: settings.4, reason: reason, fallbackTitle: settings.2, cancelTitle: settings.3)
        let ran = Sheet.run(sheet, sheets: sheets) { conversation, control in
            connection.run(request, conversation: conversation, control: control)
        }
        let outcome: HelperVerdict
        switch ran {
        case .success(let verdict): outcome = verdict
        case .failure(let error): return .failure(error)
        }
        let verdict = verdict(of: outcome)
        if case .success(let state) = verdict { locked { _biometryType = .touchID; _domainState = state } }
        return verdict.map { _ in () }
    }

    /// The helper's answer as the app sees it: the domain state on success,
    /// else the error.
    func verdict(of verdict: HelperVerdict) -> Result<Data?, LAError> {
        if case .granted(_, let state) = verdict { return .success(state.isEmpty ? nil : Data(state)) }
        return .failure(verdict.laError ?? LAError(.authenticationFailed))
    }

    private func locked<T>(_ body: () -> T) -> T {
        lock.lock()
        defer { lock.unlock() }
        return body()
    }
}

extension LAPolicy {
    /// The policy's name in the helper's request.
    var helperName: StaticString {
        switch self {
        case .deviceOwnerAuthenticationWithBiometrics: return "biometrics"
        case .deviceOwnerAuthentication: return "owner"
        }
    }
}
