// Apple's LocalAuthentication vocabulary, reproduced for PAM: the policies,
// the error codes with Apple's raw values, and how an evaluation ended.

/// What must be proven. Mirrors `EvaluationPolicy`.
public enum EvaluationPolicy: Equatable {
    /// `deviceOwnerAuthenticationWithBiometrics`: fingerprint only; the
    /// fallback hands control back to the next module of the stack.
    case biometrics
    /// `deviceOwnerAuthentication`: fingerprint, or the passcode.
    case owner

    /// The name in options, on the command line and in JSON.
    public var name: String {
        switch self {
        case .biometrics: return "biometrics"
        case .owner: return "owner"
        }
    }

    /// The policy with `name` ("owner" or "biometrics"), compared as bytes.
    public init?<C: Collection>(name: C) where C.Element == UInt8 {
        if bytesEqual(name, "owner") { self = .owner }
        else if bytesEqual(name, "biometrics") { self = .biometrics }
        else { return nil }
    }
}

/// Why an evaluation did not succeed. Raw values are Apple's `LAErrorCode.Code`s.
public enum LAErrorCode: Int32, Error, Equatable, CaseIterable {
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
    case failure(LAErrorCode)
    /// Something inside failed and nothing is left to try (never success).
    case internalError
}
