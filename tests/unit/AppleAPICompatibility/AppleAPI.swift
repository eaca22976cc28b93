// Source written against Apple's LocalAuthentication only: no name here is
// particular to Linux. It is compiled in every build of the package, so a
// change that would make an app's Apple code need edits fails the build.
import Foundation
import LocalAuthentication

public final class AppleAPIUsage {
    public init() {}

    public func configure(_ context: LAContext) {
        context.localizedReason = "Sign in"
        context.localizedFallbackTitle = "Enter Password"
        context.localizedFallbackTitle = ""
        context.localizedCancelTitle = "Not Now"
        context.interactionNotAllowed = false
        context.touchIDAuthenticationAllowableReuseDuration = LATouchIDAuthenticationMaximumAllowableReuseDuration
    }

    public func preflight(_ context: LAContext) -> (Bool, Int?, Data?, Data?) {
        var error: NSError?
        let can = context.canEvaluatePolicy(.deviceOwnerAuthenticationWithBiometrics, error: &error)
        let owner = context.canEvaluatePolicy(LAPolicy.deviceOwnerAuthentication, error: nil)
        if let error, error.domain == LAErrorDomain, error.code == LAError.biometryNotEnrolled.rawValue {
            _ = LAError(_nsError: error)?.code
        }
        let described: String
        switch context.biometryType {
        case .none: described = "none"
        case .touchID: described = "Touch ID"
        case .faceID: described = "Face ID"
        case .opticID: described = "Optic ID"
        @unknown default: described = "unknown"
        }
        _ = described
        return (can && owner, error?.code, context.evaluatedPolicyDomainState, context.domainState.biometry.stateHash)
    }

    public func evaluate(_ context: LAContext, done: @escaping @Sendable (String) -> Void) {
        context.evaluatePolicy(.deviceOwnerAuthentication, localizedReason: "Confirm the payment") { success, error in
            if success { return done("ok") }
            guard let error = error as? LAError else { return done("other") }
            switch error.code {
            case .authenticationFailed, .userCancel, .userFallback, .systemCancel, .passcodeNotSet, .biometryNotAvailable,
                 .biometryNotEnrolled, .biometryLockout, .appCancel, .invalidContext, .biometryDisconnected, .notInteractive:
                done("\(error.code.rawValue) \(error.errorCode) \(error.localizedDescription)")
            @unknown default:
                done("unknown")
            }
        }
    }

    public func evaluateAsync(_ context: LAContext) async -> String {
        do {
            let success = try await context.evaluatePolicy(.deviceOwnerAuthenticationWithBiometrics, localizedReason: "Unlock")
            return success ? "ok" : "no"
        } catch LAError.userFallback {
            return "fallback"
        } catch let error as LAError where error.code == .biometryLockout {
            return "locked"
        } catch {
            return (error as NSError).domain
        }
    }

    public func finish(_ context: LAContext) {
        context.invalidate()
    }
}
