// Confirming a payment with LocalAuthentication, written as for Apple's
// platforms: preflight, evaluate with a custom fallback title, and a case
// for every error. On Linux the same source runs over localauth: the
// fingerprint through fprintd, the fallback the account's password, the
// counts shared with sudo and the screen lockers.
import Foundation
import LocalAuthentication

let amount = CommandLine.arguments.dropFirst().first ?? "42.00 EUR"
let context = LAContext()
context.localizedFallbackTitle = "Use Password"
context.localizedCancelTitle = "Cancel Payment"

var preflightError: NSError?
guard context.canEvaluatePolicy(.deviceOwnerAuthentication, error: &preflightError) else {
    print("Payments cannot be confirmed here: \(preflightError?.localizedDescription ?? "unknown reason")")
    exit(1)
}
if context.biometryType == .touchID {
    print("Touch the fingerprint reader to pay \(amount).")
}

let finished = DispatchSemaphore(value: 0)
nonisolated(unsafe) var status: Int32 = 1
context.evaluatePolicy(.deviceOwnerAuthentication, localizedReason: "Confirm the payment of \(amount)") { success, error in
    defer { finished.signal() }
    if success {
        print("Payment of \(amount) confirmed.")
        status = 0
        return
    }
    guard let error = error as? LAError else {
        print("Payment not confirmed: \(error?.localizedDescription ?? "unknown error")")
        return
    }
    switch error.code {
    case .authenticationFailed: print("Payment not confirmed: the identity could not be verified.")
    case .userCancel: print("Payment cancelled.")
    case .userFallback: print("Payment not confirmed: the fallback was chosen.")
    case .systemCancel: print("Payment not confirmed: the system cancelled (time out, or the reader stopped).")
    case .passcodeNotSet: print("Payment not confirmed: this account has no password.")
    case .biometryNotAvailable: print("Payment not confirmed: no fingerprint reader.")
    case .biometryNotEnrolled: print("Payment not confirmed: no fingers enrolled.")
    case .biometryLockout: print("Payment not confirmed: the fingerprint is locked; the password unlocks it.")
    case .appCancel: print("Payment cancelled by the app.")
    case .invalidContext: print("Payment not confirmed: the request was no longer valid.")
    case .biometryDisconnected: print("Payment not confirmed: the reader was disconnected.")
    case .notInteractive: print("Payment not confirmed: no way to ask.")
    @unknown default: print("Payment not confirmed: \(error.localizedDescription)")
    }
}
finished.wait()
exit(status)
