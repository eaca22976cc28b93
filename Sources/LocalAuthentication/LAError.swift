// Apple's LAError for Linux: the same domain, codes, names and pattern
// matching, so that `catch LAError.userFallback` and `switch error.code`
// written for Apple's LocalAuthentication compile and behave the same;
// the one reading of the helper's answers as that error, and the awaiting
// of a completion handler's error, that the context and the rights share.
import Foundation
import LocalAuth
import LibcSystem

/// The error domain of every error this library reports.
public let LAErrorDomain = "com.apple.LocalAuthentication"

/// An error from evaluating a policy. `code` says what happened; the codes
/// and their raw values are Apple's.
public struct LAError: Error, Hashable, CustomNSError, LocalizedError, Sendable {
    /// Apple's error codes.
    public enum Code: Int, Sendable, CaseIterable {
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
    }

    public let code: Code
    /// A sentence for the person, in English.
    public let message: String

    public init(_ code: Code, message: String? = nil) {
        self.code = code
        self.message = message ?? LAError.defaultMessage(code)
    }

    /// The error carried by an `NSError` of this domain (as
    /// `canEvaluatePolicy(_:error:)` reports it); nil for another domain
    /// or an unknown code.
    public init?(_nsError error: NSError) {
        guard error.domain == LAErrorDomain, let code = Code(rawValue: error.code) else { return nil }
        self.init(code, message: error.localizedDescription)
    }

    public static var errorDomain: String { LAErrorDomain }
    public var errorCode: Int { code.rawValue }
    public var errorUserInfo: [String: Any] { [NSLocalizedDescriptionKey: message] }
    public var errorDescription: String? { message }

    public static func == (left: LAError, right: LAError) -> Bool { left.code == right.code }
    public func hash(into hasher: inout Hasher) { hasher.combine(code) }

    public static var authenticationFailed: Code { .authenticationFailed }
    public static var userCancel: Code { .userCancel }
    public static var userFallback: Code { .userFallback }
    public static var systemCancel: Code { .systemCancel }
    public static var passcodeNotSet: Code { .passcodeNotSet }
    public static var biometryNotAvailable: Code { .biometryNotAvailable }
    public static var biometryNotEnrolled: Code { .biometryNotEnrolled }
    public static var biometryLockout: Code { .biometryLockout }
    public static var appCancel: Code { .appCancel }
    public static var invalidContext: Code { .invalidContext }
    public static var biometryDisconnected: Code { .biometryDisconnected }
    public static var notInteractive: Code { .notInteractive }
    @available(*, deprecated, renamed: "biometryNotAvailable")
    public static var touchIDNotAvailable: Code { .biometryNotAvailable }
    @available(*, deprecated, renamed: "biometryNotEnrolled")
    public static var touchIDNotEnrolled: Code { .biometryNotEnrolled }
    @available(*, deprecated, renamed: "biometryLockout")
    public static var touchIDLockout: Code { .biometryLockout }

    static func defaultMessage(_ code: Code) -> String {
        switch code {
        case .authenticationFailed: return "Authentication failed."
        case .userCancel: return "Canceled by user."
        case .userFallback: return "Fallback authentication mechanism selected."
        case .systemCancel: return "Canceled by the system."
        case .passcodeNotSet: return "No password is set for this account."
        case .biometryNotAvailable: return "Fingerprint is not available."
        case .biometryNotEnrolled: return "No fingers are enrolled."
        case .biometryLockout: return "Fingerprint is locked out; the password is required."
        case .appCancel: return "Canceled by the application."
        case .invalidContext: return "The context was invalidated."
        case .biometryDisconnected: return "The fingerprint reader was disconnected."
        case .notInteractive: return "Interaction is not allowed."
        }
    }
}

extension LAError {
    /// The engine's error under Apple's code (the raw values are the same).
    init(engine engineError: LAErrorCode, message: String? = nil) {
        self.init(Code(rawValue: Int(engineError.rawValue)) ?? .authenticationFailed, message: message)
    }
}

extension HelperVerdict {
    /// The error an app sees (LAContext's and the rights'): nil when granted.
    var laError: LAError? {
        if case .granted = self { return nil }
        guard let (error, message) = appError else { return LAError(.authenticationFailed) }
        return LAError(engine: error, message: message)
    }
}

extension SecretVerdict {
    /// The error an app sees for a secret action: nil when done.
    var laError: LAError? { appError.map { LAError(engine: $0.error, message: $0.message) } }
}

/// A call with a completion handler, awaited: its value, or its error
/// (`invalidContext` where it gave neither).
func awaitCompletion<T: Sendable>(_ start: (@escaping @Sendable (T?, (any Error)?) -> Void) -> Void) async throws -> T {
    try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
        start { value, error in
            if let value { continuation.resume(returning: value) } else { continuation.resume(throwing: error ?? LAError(.invalidContext)) }
        }
    }
}

/// A call whose completion handler gives only an error, awaited.
func awaitCompletion(_ start: (@escaping @Sendable ((any Error)?) -> Void) -> Void) async throws {
    try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
        start { error in
            if let error { continuation.resume(throwing: error) } else { continuation.resume() }
        }
    }
}

/// `catch LAError.userCancel { … }` and `case LAError.userCancel:` over any error.
public func ~= (code: LAError.Code, error: any Error) -> Bool {
    if let error = error as? LAError { return error.code == code }
    let bridged = error as NSError
    return bridged.domain == LAErrorDomain && bridged.code == code.rawValue
}

/// A pointer to an optional `NSError`, as Apple's `canEvaluatePolicy(_:error:)`
/// takes (`var error: NSError?` … `error: &error`). Foundation on Linux has
/// no such type.
public typealias NSErrorPointer = UnsafeMutablePointer<NSError?>?
