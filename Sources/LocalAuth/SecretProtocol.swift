// How a secret action ends on the helper's wire (version 4), declared once:
// the SECRET_STATUS byte, what each status tells the person, and the one
// reading of SECRET_STATUS and RESULT together that every client (the
// command-line tool, the app library) maps. docs/HELPER-PROTOCOL.md is the
// reference; docs/DESIGN.md, "Secrets", says why.

/// How a secret action ended, sent as one byte just before its RESULT.
public enum SecretStatus: UInt8, Equatable, CaseIterable, Sendable {
    /// Stored, loaded (the SECRET came first), deleted or listed.
    case done = 0
    /// There is no item under that identifier: nothing was asked or charged.
    case absent = 1
    /// An item bound to the enrolled fingers that no longer opens: the
    /// enrollment changed since it was stored. It is deleted.
    case invalidated = 2
    /// The caller already keeps the most items a user may.
    case quotaReached = 3
    /// The user's key cannot be opened by the machine's copy any more (a
    /// machine key made anew): a request that passes the password opens it
    /// and mends the copy.
    case keyNeedsPassword = 4
    /// The store could not be read or written (the log says why).
    case storeFailed = 5
    /// The evaluation did not grant: the RESULT's error says why.
    case denied = 6

    /// What the person reads (the tool's error line, the app's message).
    public var sentence: String {
        switch self {
        case .done: return "Done."
        case .absent: return "There is no secret under that name."
        case .invalidated:
            return "The enrolled fingers changed since this secret was stored, and it was bound to them: it has been deleted."
        case .quotaReached: return "You already keep \(SecretItemFormat.maxItemsPerUser) secrets: delete one first."
        case .keyNeedsPassword:
            return "Your secrets must be opened with your password once on this computer (its key was made anew): "
                + "use a secret that takes the password, or store one with --access default."
        case .storeFailed: return "The secrets could not be read or written (the system log says why). Nothing changed."
        case .denied: return "Not authenticated."
        }
    }
}

/// A secret action's end as its client reads it: the SECRET_STATUS and the
/// RESULT, decoded once.
public enum SecretVerdict: Equatable {
    /// Done; `method` is how the evaluation granted it (a load, a first
    /// store that asked the password), nil where none ran.
    case done(AuthenticationMethod?)
    /// The item's status said no (absent, invalidated, quota, key, store).
    case item(SecretStatus)
    /// The evaluation said no, for this reason.
    case denied(LAErrorCode)
    /// The helper gave no answer about the item: out of scope, cannot be
    /// used, refused, failed.
    case helper(HelperVerdict)

    /// The verdict of a status (nil: the helper sent none) and a RESULT.
    /// A status that does not fit its RESULT is the helper's failure.
    public init(status: SecretStatus?, result: ResultFrame) {
        let verdict = HelperVerdict(result)
        guard let status else {
            if case .granted = verdict { self = .helper(.failed("it granted a secret action without its status")) }
            else { self = .helper(verdict) }
            return
        }
        switch (status, verdict) {
        case (.done, .granted(let method, _)): self = .done(method)
        case (.done, _) where result.status == .secretHandled && result.pamCode == PAMCode.success.rawValue: self = .done(nil)
        case (.denied, .denied(let error, _)): self = .denied(error)
        case (.done, _), (.denied, _): self = .helper(.failed("its status did not fit its RESULT"))
        default:
            self = result.status == .secretHandled && result.pamCode != PAMCode.success.rawValue
                ? .item(status) : .helper(.failed("its status did not fit its RESULT"))
        }
    }

    /// The RESULT that follows `status` (the encoding side of `init`): a
    /// success or an evaluation's failure stands as evaluated; an item's
    /// status is handled without one.
    public static func result(_ status: SecretStatus, outcome: Outcome?) -> ResultFrame {
        switch (status, outcome) {
        case (.done, .success(let method)?):
            return ResultFrame(status: .evaluated, pamCode: PAMCode.success.rawValue, method: method)
        case (.done, _): return ResultFrame(status: .secretHandled, pamCode: PAMCode.success.rawValue)
        case (.denied, .failure(let error)?):
            return ResultFrame(status: .evaluated, pamCode: ResultTable.pamCode(for: error).rawValue, error: error)
        default: return ResultFrame(status: .secretHandled, pamCode: PAMCode.authError.rawValue)
        }
    }

    /// The error an app sees (Apple's LARight and LARightStore): nil for
    /// done. An item's status is not an evaluation's: Apple has no code for
    /// a missing or deleted right, and none is invented; each gets the
    /// closest one, with the status's sentence as its message.
    public var appError: (error: LAErrorCode, message: String?)? {
        switch self {
        case .done: return nil
        case .denied(let error): return (error, nil)
        case .helper(let verdict): return verdict.appError ?? (.systemCancel, "The helper granted without an answer for the secret.")
        case .item(let status): return (status.appError, status.sentence)
        }
    }
}

extension SecretStatus {
    /// The closest of Apple's codes for an item's status (`SecretVerdict.appError`).
    public var appError: LAErrorCode {
        switch self {
        case .done, .denied: return .authenticationFailed   // never an item's status on its own
        // The right is not there (never stored, removed, or deleted when
        // the enrolled fingers changed): the app's handle is no good.
        case .absent, .invalidated, .quotaReached: return .invalidContext
        // The finger cannot open it until the password is given once, as
        // after a lockout.
        case .keyNeedsPassword: return .biometryLockout
        case .storeFailed: return .systemCancel
        }
    }
}
