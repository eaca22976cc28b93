// Unlocking an app's vault with the fingerprint only (policy biometrics),
// and the app's own password when the person chooses the fallback or the
// fingerprint cannot be used: the pattern of Apple's documentation, where
// userFallback hands the way in back to the app.
import Foundation
import LocalAuthentication

/// The vault's own password: in a real app a key derivation over a stored
/// salt; here the environment (LOCALAUTH_EXAMPLE_VAULT_PASSWORD) or a
/// fixed demonstration value.
let vaultPassword = ProcessInfo.processInfo.environment["LOCALAUTH_EXAMPLE_VAULT_PASSWORD"] ?? "open sesame"

func unlockWithVaultPassword() -> Int32 {
    print("Vault password: ", terminator: "")
    guard let typed = readLine() else { return 1 }
    if typed == vaultPassword {
        print("Vault unlocked with its password.")
        return 0
    }
    print("Wrong vault password.")
    return 1
}

@main
struct BiometricUnlock {
    static func main() async {
        let context = LAContext()
        context.localizedFallbackTitle = "Enter Vault Password"
        var error: NSError?
        guard context.canEvaluatePolicy(.deviceOwnerAuthenticationWithBiometrics, error: &error) else {
            print("Fingerprint not usable (\(error.flatMap { LAError(_nsError: $0) }.map { "\($0.code)" } ?? "?")).")
            exit(unlockWithVaultPassword())
        }
        do {
            _ = try await context.evaluatePolicy(.deviceOwnerAuthenticationWithBiometrics,
                                                 localizedReason: "Unlock the vault")
            print("Vault unlocked with the fingerprint.")
            exit(0)
        } catch LAError.userFallback {
            exit(unlockWithVaultPassword())
        } catch LAError.biometryLockout {
            print("Fingerprint locked.")
            exit(unlockWithVaultPassword())
        } catch LAError.userCancel {
            print("Cancelled.")
            exit(3)
        } catch {
            print("Not unlocked: \(error.localizedDescription)")
            exit(1)
        }
    }
}
