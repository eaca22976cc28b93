/// Apple's LocalAuthentication vocabulary, reproduced for PAM.

/// What must be proven. Mirrors `LAPolicy`.
public enum LAPolicy: Equatable {
    /// `deviceOwnerAuthenticationWithBiometrics`: fingerprint only; the
    /// fallback hands control back to the next module of the stack.
    case biometrics
    /// `deviceOwnerAuthentication`: fingerprint, or the passcode.
    case owner
}

/// Why an evaluation did not succeed. Raw values are Apple's `LAError.Code`s.
public enum LAError: Int32, Error, Equatable, CaseIterable {
    case authenticationFailed = -1
    case userCancel = -2
    case userFallback = -3
    case systemCancel = -4
    case passcodeNotSet = -5
    case biometryNotAvailable = -6
    case biometryNotEnrolled = -7
    case biometryLockout = -8
    case appCancel = -9
    case invalidContext = -10
    case biometryDisconnected = -13
    case notInteractive = -1004

    /// Apple's name, for logs and for the command-line tool.
    public var name: String {
        switch self {
        case .authenticationFailed: return "authenticationFailed"
        case .userCancel: return "userCancel"
        case .userFallback: return "userFallback"
        case .systemCancel: return "systemCancel"
        case .passcodeNotSet: return "passcodeNotSet"
        case .biometryNotAvailable: return "biometryNotAvailable"
        case .biometryNotEnrolled: return "biometryNotEnrolled"
        case .biometryLockout: return "biometryLockout"
        case .appCancel: return "appCancel"
        case .invalidContext: return "invalidContext"
        case .biometryDisconnected: return "biometryDisconnected"
        case .notInteractive: return "notInteractive"
        }
    }
}

/// How a prompt was won.
public enum AuthenticationMethod: Equatable {
    case biometry
    case passcode
}

/// The end of one evaluation, before it is turned into a PAM code.
public enum Outcome: Equatable {
    /// The module does not act here (R1): no record touched.
    case outOfScope
    case success(AuthenticationMethod)
    case failure(LAError)
    /// Something inside failed and nothing is left to try (never success).
    case internalError
}

/// The Linux-PAM return codes this module uses. Raw values are Linux-PAM's
/// (`_pam_types.h`); a test compares each with the C constant.
public enum PAMCode: Int32, Equatable, CaseIterable {
    case success = 0
    case systemError = 4
    case authError = 7
    case authInfoUnavailable = 9
    case conversationError = 19
    case ignore = 25
}

/// SPEC §4: the one table from outcomes to PAM codes.
public enum ResultTable {
    /// The PAM code for an LAError. `PAM_MAXTRIES` is deliberately absent:
    /// sudo turns it into instant retries and sshd disconnects on it.
    public static func pamCode(for error: LAError) -> PAMCode {
        switch error {
        case .authenticationFailed: return .authError
        case .userFallback: return .ignore
        case .userCancel, .appCancel, .notInteractive: return .conversationError
        case .systemCancel, .biometryNotAvailable, .biometryNotEnrolled, .biometryLockout,
             .biometryDisconnected, .passcodeNotSet:
            return .authInfoUnavailable
        case .invalidContext: return .systemError
        }
    }

    public static func pamCode(for outcome: Outcome) -> PAMCode {
        switch outcome {
        case .outOfScope: return .ignore
        case .success: return .success
        case .failure(let error): return pamCode(for: error)
        case .internalError: return .systemError
        }
    }
}
