// Apple's rights over a scripted helper that keeps items in memory (the
// real helper's store is the integration tier's, tests/apps): the request
// each call sends, the state a right goes through, the secret released
// only by an authorization and gone after deauthorize, and every item
// status reaching the app under the code the one table gives it.
import Foundation
import XCTest
import LocalAuth
import LibcSystem
@testable import LocalAuthentication

/// A helper whose store is a dictionary; `evaluation` answers each
/// authorize and each load (nil: granted by the finger).
final class ScriptedSecretHelper: HelperConnection, @unchecked Sendable {
    private let lock = NSLock()
    var items: [[UInt8]: ([UInt8], SecretRequirement)] = [:]
    var evaluation: LAErrorCode? = nil
    var status: SecretStatus? = nil
    /// Loads wait for this before they answer (set outside the lock).
    var gate: DispatchSemaphore? = nil
    var loading = DispatchSemaphore(value: 0)
    private(set) var requests: [HelperRequest] = []

    func run(_ request: HelperRequest, conversation: PresenterConversation, control: Int32?) -> HelperVerdict {
        lock.lock(); defer { lock.unlock() }
        requests.append(request)
        if let evaluation { return evaluated(ResultTable.pamCode(for: evaluation), evaluation) }
        return evaluated(.success, method: .biometry)
    }

    func runSecret(_ request: HelperRequest, conversation: PresenterConversation, control: Int32?, outgoing: SecretBuffer?,
                   incoming: SecretBuffer?) -> (SecretVerdict, [[UInt8]]) {
        if request.action == .secretLoad, let gate {
            loading.signal()
            gate.wait()
        }
        lock.lock(); defer { lock.unlock() }
        requests.append(request)
        if let status { return (.item(status), []) }
        switch request.action {
        case .secretStore:
            items[request.item] = (outgoing?.withBytes { Array(UnsafeBufferPointer(start: $0, count: $1)) } ?? [], request.access)
            return (.done(nil), [])
        case .secretLoad:
            guard let (secret, _) = items[request.item] else { return (.item(.absent), []) }
            if let evaluation { return (.denied(evaluation), []) }
            secret.withUnsafeBufferPointer { incoming?.assign(from: $0.baseAddress ?? UnsafePointer(bitPattern: 1)!, length: $0.count) }
            return (.done(.biometry), [])
        case .secretDelete:
            return (items.removeValue(forKey: request.item) == nil ? .item(.absent) : .done(nil), [])
        case .secretList:
            return (.done(nil), items.keys.sorted { $0.lexicographicallyPrecedes($1) })
        default:
            return (.helper(.refused), [])
        }
    }
}

final class LARightTests: XCTestCase {
    func store(_ helper: ScriptedSecretHelper) -> LARightStore {
        let store = LARightStore(connection: helper)
        store.presenter = RecordingPresenter()
        return store
    }

    func right(_ helper: ScriptedSecretHelper, _ requirement: LAAuthenticationRequirement = .default) -> LARight {
        let right = LARight(requirement: requirement, connection: helper)
        right.presenter = RecordingPresenter()
        return right
    }

    func code(_ body: () async throws -> Void) async -> LAError.Code? {
        do {
            try await body()
            return nil
        } catch let error as LAError {
            return error.code
        } catch {
            XCTFail("not an LAError: \(error)")
            return nil
        }
    }

    /// Each requirement is evaluated under its policy, and the state follows.
    func testARightIsOneEvaluationUnderItsRequirementsPolicy() async {
        let rows: [(LAAuthenticationRequirement, String, String)] = [
            (.default, "owner", "default"), (.biometry, "biometrics", "biometry"),
            (.biometryCurrentSet, "biometrics", "biometry-current-set"), (.biometry(fallback: .default), "biometrics", "biometry"),
            (.biometry(fallback: .devicePasscode), "owner", "biometry-then-password"),
        ]
        for (requirement, policy, access) in rows {
            let helper = ScriptedSecretHelper()
            let right = right(helper, requirement)
            XCTAssertEqual(right.state, .unknown)
            let failed = await code { try await right.authorize(localizedReason: "Sign in") }
            XCTAssertNil(failed)
            XCTAssertEqual(right.state, .authorized)
            XCTAssertEqual(helper.requests.map { $0.action }, [.evaluate])
            let sent = helper.requests[0].presentation.first { $0.0 == Array("policy".utf8) }?.1
            XCTAssertEqual(sent.map { String(decoding: $0, as: UTF8.self) }, policy)
            XCTAssertEqual("\(requirement.secretRequirement.name)", access)
            await right.deauthorize()
            XCTAssertEqual(right.state, .notAuthorized)
        }
        XCTAssertEqual(LAAuthenticationRequirement.biometry, LAAuthenticationRequirement.biometry(fallback: .default))
        XCTAssertNotEqual(LAAuthenticationRequirement.default, LAAuthenticationRequirement.biometry)
    }

    func testADeniedRightIsNotAuthorizedWithTheHelpersCode() async {
        let helper = ScriptedSecretHelper()
        helper.evaluation = .biometryLockout
        let right = right(helper, .biometry)
        let failed = await code { try await right.authorize(localizedReason: "Sign in") }
        XCTAssertEqual(failed, .biometryLockout)
        XCTAssertEqual(right.state, .notAuthorized)
        helper.evaluation = .biometryNotEnrolled
        let preflight = await code { try await right.checkCanAuthorize() }
        XCTAssertEqual(preflight, .biometryNotEnrolled)
        XCTAssertEqual(helper.requests.last?.action, .check)
    }

    /// Save with a secret, find the right again, authorize it (a load), read
    /// the secret; after deauthorize it cannot be read.
    func testASavedSecretIsReadOnlyWhileItsRightIsAuthorized() async throws {
        let helper = ScriptedSecretHelper()
        let store = store(helper)
        let saved = try await store.saveRight(LARight(requirement: .biometryCurrentSet), identifier: "access-token",
                                              secret: Data("token-1".utf8))
        XCTAssertEqual(helper.items[Array("access-token".utf8)]?.0, Array("token-1".utf8))
        XCTAssertEqual(helper.items[Array("access-token".utf8)]?.1, .matchOfCurrentSet)
        XCTAssertEqual(saved.state, .unknown)
        let early = await code { _ = try await saved.secret.loadData() }
        XCTAssertEqual(early, .notInteractive)

        let found = try await store.right(forIdentifier: "access-token")
        found.presenter = RecordingPresenter()
        try await found.authorize(localizedReason: "Access your account")
        XCTAssertEqual(helper.requests.last?.action, .secretLoad)
        XCTAssertEqual(helper.requests.last?.item, Array("access-token".utf8))
        XCTAssertEqual(found.state, .authorized)
        let data = try await found.secret.loadData()
        XCTAssertEqual(data, Data("token-1".utf8))
        await found.deauthorize()
        let after = await code { _ = try await found.secret.loadData() }
        XCTAssertEqual(after, .notInteractive)
        XCTAssertEqual(found.released.count, 0)
    }

    func testAMissingRightAndEachItemStatusReachTheAppUnderTheTablesCode() async {
        let helper = ScriptedSecretHelper()
        let store = store(helper)
        let missing = await code { _ = try await store.right(forIdentifier: "nothing") }
        XCTAssertEqual(missing, .invalidContext)
        for status in SecretStatus.allCases where status != .done && status != .denied {
            helper.status = status
            let failed = await code { _ = try await store.saveRight(LARight(), identifier: "x", secret: Data("s".utf8)) }
            XCTAssertEqual(failed?.rawValue, Int(status.appError.rawValue), "\(status)")
        }
    }

    func testRemovingOneAndAll() async throws {
        let helper = ScriptedSecretHelper()
        let store = store(helper)
        let first = try await store.saveRight(LARight(), identifier: "one")
        _ = try await store.saveRight(LARight(), identifier: "two", secret: Data("2".utf8))
        _ = try await store.saveRight(LARight(), identifier: "three", secret: Data("3".utf8))
        XCTAssertEqual(helper.items[Array("one".utf8)]?.0, [])
        try await store.removeRight(first)
        try await store.removeRight(forIdentifier: "two")
        XCTAssertEqual(Array(helper.items.keys), [Array("three".utf8)])
        let gone = await code { try await store.removeRight(forIdentifier: "two") }
        XCTAssertEqual(gone, .invalidContext)
        try await store.removeAllRights()
        XCTAssertTrue(helper.items.isEmpty)
    }

    /// Too large a secret or a bad identifier sends nothing.
    func testBadInputSendsNothing() async {
        let helper = ScriptedSecretHelper()
        let store = store(helper)
        let large = await code {
            _ = try await store.saveRight(LARight(), identifier: "big", secret: Data(count: SecretItemFormat.maxSecretBytes + 1))
        }
        XCTAssertEqual(large, .invalidContext)
        let badName = await code { _ = try await store.saveRight(LARight(), identifier: "", secret: Data("s".utf8)) }
        XCTAssertEqual(badName, .invalidContext)
        XCTAssertTrue(helper.requests.isEmpty)
        XCTAssertTrue(helper.items.isEmpty)
    }

    /// A deauthorize while the load is under way wins: the authorization
    /// fails with appCancel and keeps nothing; a later failure wipes what
    /// an earlier success kept.
    func testDeauthorizeDuringAnAuthorizationKeepsNothing() async throws {
        let helper = ScriptedSecretHelper()
        let store = store(helper)
        _ = try await store.saveRight(LARight(), identifier: "vault", secret: Data("v-1".utf8))
        let right = try await store.right(forIdentifier: "vault")
        right.presenter = RecordingPresenter()
        let gate = DispatchSemaphore(value: 0)
        helper.gate = gate
        let finished = expectation(description: "authorize ended")
        let outcome = Shared<(any Error)?>(nil)
        right.authorize(localizedReason: "Open") { error in
            outcome.value = error
            finished.fulfill()
        }
        helper.loading.wait()
        await right.deauthorize()
        gate.signal()
        await fulfillment(of: [finished], timeout: 10)
        XCTAssertEqual((outcome.value as? LAError)?.code, .appCancel)
        XCTAssertEqual(right.state, .notAuthorized)
        XCTAssertEqual(right.released.count, 0)
        let read = await code { _ = try await right.secret.loadData() }
        XCTAssertEqual(read, .notInteractive)

        helper.gate = nil
        try await right.authorize(localizedReason: "Open")
        XCTAssertEqual(right.released.count, 3)
        helper.evaluation = .userCancel
        let failed = await code { try await right.authorize(localizedReason: "Open") }
        XCTAssertEqual(failed, .userCancel)
        XCTAssertEqual(right.released.count, 0)
        XCTAssertEqual(right.state, .notAuthorized)
    }

    /// A right found by its identifier does not know the store's
    /// requirement: saving it is refused rather than loosening it.
    func testSavingAFoundRightIsRefused() async throws {
        let helper = ScriptedSecretHelper()
        let store = store(helper)
        _ = try await store.saveRight(LARight(requirement: .biometry), identifier: "finger", secret: Data("f".utf8))
        let found = try await store.right(forIdentifier: "finger")
        let sent = helper.requests.count
        let refused = await code { _ = try await store.saveRight(found, identifier: "finger", secret: Data("g".utf8)) }
        XCTAssertEqual(refused, .invalidContext)
        XCTAssertEqual(helper.requests.count, sent)
        XCTAssertEqual(helper.items[Array("finger".utf8)]?.1, .match)
        XCTAssertEqual(helper.items[Array("finger".utf8)]?.0, Array("f".utf8))
    }
}
