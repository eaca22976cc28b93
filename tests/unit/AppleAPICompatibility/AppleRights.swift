// Source written against Apple's LARight, LARightStore and LASecret only
// (macOS 13, iOS 16): no name here is particular to Linux. The first two
// functions are the examples of Apple's LARightStore page, as they are
// written there. Compiled in every build of the package.
import Foundation
import LocalAuthentication

func storeBackendAccessToken(_ token: Data) async throws {
    let loginRight = LARight()
    _ = try await LARightStore.shared.saveRight(loginRight, identifier: "access-token", secret: token)
}

func fetchBackendAccessToken() async throws -> Data {
    let loginRight = try await LARightStore.shared.right(forIdentifier: "access-token")
    try await loginRight.authorize(localizedReason: "Access sandcastle competition designs")
    return try await loginRight.secret.loadData()
}

public final class AppleRightsUsage {
    public init() {}

    public func requirements() -> [LAAuthenticationRequirement] {
        [.default, .biometry, .biometryCurrentSet, .biometry(fallback: .default), .biometry(fallback: .devicePasscode),
         LAAuthenticationRequirement.biometry(fallback: LABiometryFallbackRequirement.devicePasscode)]
    }

    public func login() async -> String {
        let right = LARight(requirement: .biometry(fallback: .devicePasscode))
        right.tag = 7
        do {
            try await right.checkCanAuthorize()
            try await right.authorize(localizedReason: "Sign in to your account")
        } catch let error as LAError where error.code == .biometryLockout {
            return "locked"
        } catch {
            return "\(error)"
        }
        let described: String
        switch right.state {
        case .unknown: described = "unknown"
        case .authorizing: described = "authorizing"
        case .authorized: described = "authorized"
        case .notAuthorized: described = "not authorized"
        @unknown default: described = "other"
        }
        await right.deauthorize()
        return described
    }

    public func persisted() async throws -> Int {
        let store = LARightStore.shared
        let saved = try await store.saveRight(LARight(requirement: .biometryCurrentSet), identifier: "vault")
        _ = try await store.saveRight(LARight(), identifier: "note", secret: Data("hello".utf8))
        let right = try await store.right(forIdentifier: "note")
        try await right.authorize(localizedReason: "Read the note")
        let data = try await right.secret.loadData()
        try await store.removeRight(saved)
        try await store.removeRight(forIdentifier: "note")
        try await store.removeAllRights()
        return data.count
    }

    public func callbacks(_ done: @escaping @Sendable (String) -> Void) {
        let right = LARight()
        right.authorize(localizedReason: "Confirm") { error in
            right.checkCanAuthorize { _ in
                right.deauthorize { done(error == nil ? "ok" : "no") }
            }
        }
        LARightStore.shared.right(forIdentifier: "note") { persisted, error in
            persisted?.secret.loadData { data, error in done("\(data?.count ?? 0) \(error.map { "\($0)" } ?? "")") }
            LARightStore.shared.saveRight(LARight(), identifier: "x", secret: Data()) { _, _ in }
            LARightStore.shared.saveRight(LARight(), identifier: "y") { _, _ in }
            if let persisted { LARightStore.shared.removeRight(persisted) { _ in } }
            LARightStore.shared.removeRight(forIdentifier: "x") { _ in }
            LARightStore.shared.removeAllRights { _ in }
        }
    }
}
