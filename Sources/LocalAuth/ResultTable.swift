// The two tables an outcome goes through: to a PAM return code (the module)
// and to an exit code (the command-line tool). Each is walked by a test.

/// The Linux-PAM return codes this module uses. Raw values are Linux-PAM's
/// (`_pam_types.h`); a test compares each with the C constant.
public enum PAMCode: Int32, Equatable, CaseIterable, Sendable {
    case success = 0
    case systemError = 4
    case authError = 7
    case credentialsInsufficient = 8
    case authInfoUnavailable = 9
    case conversationError = 19
    case ignore = 25

    /// The name a PAM file gives this code in a bracket control
    /// (`authinfo_unavail=ignore`).
    public var libpamName: String {
        switch self {
        case .success: return "success"
        case .systemError: return "system_err"
        case .authError: return "auth_err"
        case .credentialsInsufficient: return "cred_insufficient"
        case .authInfoUnavailable: return "authinfo_unavail"
        case .conversationError: return "conv_err"
        case .ignore: return "ignore"
        }
    }
}

/// The one table from outcomes to PAM codes (docs/DESIGN.md, "Result codes").
///
/// `PAM_IGNORE` is never an answer of `pam_sm_authenticate`: under
/// `required` or `requisite` libpam passes an ignore through, so after
/// lines that succeed for anyone (gdm-fingerprint's pam_succeed_if) a
/// module that ignores has let the stack succeed with no credential.
/// Where the module steps aside for the password line (out of scope, the
/// biometrics fallback, no reader) it says `PAM_AUTHINFO_UNAVAIL`, which
/// `required` turns into a failure, `requisite` into the end of the stack,
/// and which the shipped lines map to `ignore` by name.
public enum ResultTable {
    /// The code for "not mine: let the password line decide".
    public static let stepAside: PAMCode = .authInfoUnavailable

    /// The last step of every `pam_sm_authenticate` answer, whichever path
    /// made it: an ignore (from any path, an older helper included) becomes
    /// the step-aside code, and a value libpam does not define, which it
    /// would treat as a failure anyway, becomes `PAM_SYSTEM_ERR`.
    public static func authenticationAnswer(_ code: Int32) -> Int32 {
        guard let known = PAMCode(rawValue: code) else { return PAMCode.systemError.rawValue }
        return known == .ignore ? stepAside.rawValue : known.rawValue
    }

    /// A password refused unchecked because its back-off is running. Not
    /// `PAM_AUTH_ERR`: sudo retries that up to `passwd_tries` times, saying
    /// "Sorry, try again." and "3 incorrect password attempts" for tries the
    /// person never made; `PAM_CRED_INSUFFICIENT` ends its loop at once, so
    /// the wait is said once. A failure under every control flag; a policy
    /// owner line must end the stack on it as on PAM_AUTH_ERR, which the
    /// lint requires of every answer but the step-aside.
    public static let refusedDuringBackoff: PAMCode = .credentialsInsufficient

    /// The PAM code for an LAErrorCode. `PAM_MAXTRIES` is deliberately absent:
    /// sudo turns it into instant retries and sshd disconnects on it.
    public static func pamCode(for error: LAErrorCode) -> PAMCode {
        switch error {
        case .authenticationFailed: return .authError
        case .userFallback: return stepAside
        case .userCancel, .appCancel, .notInteractive: return .conversationError
        case .systemCancel, .biometryNotAvailable, .biometryNotEnrolled, .biometryLockout,
             .biometryDisconnected, .passcodeNotSet:
            return .authInfoUnavailable
        case .invalidContext: return .systemError
        }
    }

    public static func pamCode(for outcome: Outcome) -> PAMCode {
        switch outcome {
        case .outOfScope: return stepAside
        case .success: return .success
        case .failure(let error): return pamCode(for: error)
        case .internalError: return .systemError
        }
    }
}

/// The `localauth` command's documented exit codes (localauth(1)).
public enum ExitCode: Int32, Equatable, CaseIterable, Sendable {
    case success = 0
    case failure = 1
    case usage = 2
    case permissionDenied = 3
    case unknownUser = 4
    case passcodeNotSet = 10
    case biometryNotAvailable = 11
    case biometryNotEnrolled = 12
    case biometryLockout = 13
    // `localauth evaluate`: one code for each remaining error.
    case authenticationFailed = 14
    case userCancel = 15
    case userFallback = 16
    case systemCancel = 17
    case appCancel = 18
    case invalidContext = 19
    case biometryDisconnected = 20
    case notInteractive = 21
    // `localauth secret`: the item's own ends (SecretStatus).
    case secretAbsent = 30
    case secretInvalidated = 31
    case secretQuotaReached = 32
    case secretKeyNeedsPassword = 33
    case secretStoreFailed = 34
}

/// The one table from a preflight's error to the exit code of `localauth check`.
public enum ExitCodeTable {
    public static func exitCode(for error: LAErrorCode) -> ExitCode {
        switch error {
        case .passcodeNotSet: return .passcodeNotSet
        case .biometryNotAvailable: return .biometryNotAvailable
        case .biometryNotEnrolled: return .biometryNotEnrolled
        case .biometryLockout: return .biometryLockout
        case .authenticationFailed, .userCancel, .userFallback, .systemCancel, .appCancel, .invalidContext,
             .biometryDisconnected, .notInteractive:
            return .failure
        }
    }

    /// The one table from a secret action's item status to the exit code of
    /// `localauth secret` (`done` is 0; `denied` takes its error's code).
    public static func secretExitCode(for status: SecretStatus) -> ExitCode {
        switch status {
        case .done: return .success
        case .absent: return .secretAbsent
        case .invalidated: return .secretInvalidated
        case .quotaReached: return .secretQuotaReached
        case .keyNeedsPassword: return .secretKeyNeedsPassword
        case .storeFailed: return .secretStoreFailed
        case .denied: return .failure
        }
    }

    /// The one table from an evaluation's error to the exit code of
    /// `localauth evaluate`: every error has its own.
    public static func evaluationExitCode(for error: LAErrorCode) -> ExitCode {
        switch error {
        case .passcodeNotSet: return .passcodeNotSet
        case .biometryNotAvailable: return .biometryNotAvailable
        case .biometryNotEnrolled: return .biometryNotEnrolled
        case .biometryLockout: return .biometryLockout
        case .authenticationFailed: return .authenticationFailed
        case .userCancel: return .userCancel
        case .userFallback: return .userFallback
        case .systemCancel: return .systemCancel
        case .appCancel: return .appCancel
        case .invalidContext: return .invalidContext
        case .biometryDisconnected: return .biometryDisconnected
        case .notInteractive: return .notInteractive
        }
    }
}
