// The wrapper many apps put around LocalAuthentication: one call, four
// callbacks (success, fallback, error, not supported), so that the rest of
// the app never sees LAError. The same source builds for Apple's platforms.
import Foundation
import LocalAuthentication

/// Biometric authentication behind four callbacks, each called once, on
/// the library's private queue.
struct BiometricGate {
    var fallbackTitle: String? = nil

    func authenticate(reason: String,
                      onSuccess: @escaping @Sendable () -> Void,
                      onFallback: @escaping @Sendable () -> Void,
                      onError: @escaping @Sendable (LAError) -> Void,
                      onNotSupported: @escaping @Sendable (String) -> Void) {
        let context = LAContext()
        context.localizedFallbackTitle = fallbackTitle
        var error: NSError?
        guard context.canEvaluatePolicy(.deviceOwnerAuthenticationWithBiometrics, error: &error) else {
            onNotSupported(error?.localizedDescription ?? "no fingerprint reader")
            return
        }
        context.evaluatePolicy(.deviceOwnerAuthenticationWithBiometrics, localizedReason: reason) { success, error in
            if success { return onSuccess() }
            guard let error = error as? LAError else { return onError(LAError(.authenticationFailed)) }
            if error.code == .userFallback { return onFallback() }
            onError(error)
        }
    }
}

let finished = DispatchSemaphore(value: 0)
nonisolated(unsafe) var status: Int32 = 1
let gate = BiometricGate(fallbackTitle: CommandLine.arguments.dropFirst().first)
gate.authenticate(reason: "Open your notes",
                  onSuccess: { print("success: notes open."); status = 0; finished.signal() },
                  onFallback: { print("fallback: the app asks for its own passphrase."); status = 16; finished.signal() },
                  onError: { error in print("error: \(error.code.rawValue)."); status = 1; finished.signal() },
                  onNotSupported: { why in print("not supported: \(why)"); status = 2; finished.signal() })
finished.wait()
exit(status)
