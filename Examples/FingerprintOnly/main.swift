// Approving a sign-in with the fingerprint alone: the app hides the
// fallback (an empty localizedFallbackTitle), so the sheet offers only the
// reader and Cancel, before and after a miss. Three misses end it with
// authenticationFailed; the fingerprint locks after five, as everywhere.
import Foundation
import LocalAuthentication

let device = CommandLine.arguments.dropFirst().first ?? "a new device"
let context = LAContext()
context.localizedFallbackTitle = ""

var preflightError: NSError?
guard context.canEvaluatePolicy(.deviceOwnerAuthenticationWithBiometrics, error: &preflightError) else {
    print("Sign-ins cannot be approved with a fingerprint here: \(preflightError?.localizedDescription ?? "unknown reason")")
    exit(2)
}

let finished = DispatchSemaphore(value: 0)
nonisolated(unsafe) var status: Int32 = 1
context.evaluatePolicy(.deviceOwnerAuthenticationWithBiometrics,
                       localizedReason: "Approve the sign-in from \(device)") { success, error in
    defer { finished.signal() }
    if success {
        print("Sign-in from \(device) approved.")
        status = 0
        return
    }
    switch (error as? LAError)?.code {
    case .userCancel?: print("Sign-in from \(device) not approved: cancelled.")
    case .authenticationFailed?: print("Sign-in from \(device) not approved: fingerprint not recognized.")
    case .biometryLockout?: print("Sign-in from \(device) not approved: the fingerprint is locked; unlock it with your password.")
    default: print("Sign-in from \(device) not approved: \(error?.localizedDescription ?? "unknown error")")
    }
}
finished.wait()
exit(status)
