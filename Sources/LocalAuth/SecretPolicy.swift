// The helper's decisions for a secret action (docs/DESIGN.md, "Secrets"),
// as pure functions of what it knows before it asks anything: answer at
// once, refuse, ask (which policy, the password alone or not), or act. The
// helper only performs them; SecretPolicyTests walks them as a table.

/// Where the user's secrets key stands, read before anything is asked.
public enum SecretKeyState: Equatable, Sendable {
    /// The machine's copy opens it: no password is needed for the key.
    case opens
    /// Only the password's copy can open it (the machine key was made anew).
    case needsPassword
    /// No copy at all: the user has never stored a secret.
    case none
    /// Copies exist and none can open: the machine's does not, and there is
    /// no password's copy. The items are lost.
    case lost
}

/// What the helper knows before it asks anything.
public struct SecretFacts: Equatable {
    public var action: HelperAction
    /// The stored item's requirement (a load), the requested one (a store).
    public var requirement: SecretRequirement
    /// Whether an item is stored under the request's identifier.
    public var itemPresent: Bool
    public var key: SecretKeyState
    /// For a load whose key opens: whether the item opens now (nil: not
    /// tried). An enrollment-bound item that does not is invalidated.
    public var itemOpens: Bool?
    /// What the biometrics preflight says is missing (nil: a finger can be
    /// used, or is only locked out or held back for now).
    public var fingerMissing: LAErrorCode?
    /// Whether fprintd said which fingers are enrolled (the digest is known).
    public var enrollmentKnown: Bool
    /// False: the client asked that nothing be shown.
    public var interactive: Bool

    public init(action: HelperAction, requirement: SecretRequirement, itemPresent: Bool, key: SecretKeyState,
                itemOpens: Bool? = nil, fingerMissing: LAErrorCode? = nil, enrollmentKnown: Bool = true, interactive: Bool = true) {
        self.action = action
        self.requirement = requirement
        self.itemPresent = itemPresent
        self.key = key
        self.itemOpens = itemOpens
        self.fingerMissing = fingerMissing
        self.enrollmentKnown = enrollmentKnown
        self.interactive = interactive
    }
}

/// The first step of a secret action.
public enum SecretStep: Equatable {
    /// Answer with this status, asking nothing and charging nothing.
    case answer(SecretStatus)
    /// Refuse with this error, asking nothing and charging nothing.
    case deny(LAErrorCode)
    /// Evaluate `policy` (the password alone with `passwordOnly`), then act.
    case evaluate(EvaluationPolicy, passwordOnly: Bool)
    /// Act without asking (list, delete, a store under a key that opens).
    case act
}

public enum SecretPolicy {
    /// The first step. A load asks what its item's requirement asks, with
    /// no reuse window; the password alone where only the password can
    /// open the key (a biometry-only item then waits for a request that
    /// brings the password, since the password must not stand in for its
    /// finger). A store asks nothing, except the password when the key
    /// needs it (the user's first item makes the key with both copies).
    /// An enrollment-bound item is never judged while the enrollment is
    /// not known: a reader that does not answer must not delete it.
    public static func firstStep(_ facts: SecretFacts) -> SecretStep {
        switch facts.action {
        case .evaluate, .check: return .deny(.invalidContext)
        case .secretList: return .act
        case .secretDelete: return facts.itemPresent ? .act : .answer(.absent)
        case .secretStore:
            if facts.requirement.needsEnrolledFinger, let missing = facts.fingerMissing { return .deny(missing) }
            if facts.requirement.bindsEnrollment && !facts.enrollmentKnown { return .deny(.biometryNotAvailable) }
            switch facts.key {
            case .opens: return .act
            case .none, .needsPassword: return facts.interactive ? .evaluate(.owner, passwordOnly: true) : .deny(.notInteractive)
            case .lost: return .answer(.storeFailed)
            }
        case .secretLoad:
            guard facts.itemPresent else { return .answer(.absent) }
            if facts.requirement.bindsEnrollment && !facts.enrollmentKnown { return .deny(.biometryNotAvailable) }
            switch facts.key {
            case .opens:
                if facts.itemOpens == false { return .answer(facts.requirement.bindsEnrollment ? .invalidated : .storeFailed) }
                return facts.interactive ? .evaluate(facts.requirement.policy, passwordOnly: false) : .deny(.notInteractive)
            case .needsPassword:
                guard facts.requirement.policy == .owner else { return .answer(.keyNeedsPassword) }
                return facts.interactive ? .evaluate(.owner, passwordOnly: true) : .deny(.notInteractive)
            case .none, .lost: return .answer(.storeFailed)
            }
        }
    }

    /// Whether a grant by `method` may release an item of `requirement`: a
    /// biometry-only item only by a match, whatever the evaluation said
    /// (the engine's biometrics policy never grants by password; this
    /// holds even if it did).
    public static func releases(_ requirement: SecretRequirement, by method: AuthenticationMethod) -> Bool {
        requirement.policy == .owner || method == .biometry
    }

    /// Whether the preflight's error means the finger is missing for a
    /// store (none enrolled, no reader), rather than held back for now
    /// (a lockout, the restart rule), which does not stop a store.
    public static func fingerMissing(_ preflight: Result<[UInt8], LAErrorCode>) -> LAErrorCode? {
        guard case .failure(let error) = preflight else { return nil }
        return error == .biometryNotEnrolled || error == .biometryNotAvailable ? error : nil
    }
}
