// LAContext over a scripted helper connection: every error the helper can
// report reaches the app under Apple's code, invalidate() during and after
// an evaluation, the private reply queue, the presentation the request
// carries, and the conversation relayed to a presenter.
import Foundation
import XCTest
import LocalAuth
import LibcSystem
@testable import LocalAuthentication

// Both modules name Apple's types; the app's view is the one under test.
typealias LAError = LocalAuthentication.LAError
typealias LAPolicy = LocalAuthentication.LAPolicy

/// A value shared with the reply closure.
final class Shared<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var stored: Value
    init(_ value: Value) { stored = value }
    var value: Value {
        get { lock.lock(); defer { lock.unlock() }; return stored }
        set { lock.lock(); stored = newValue; lock.unlock() }
    }
}

/// A helper that answers from a script. `script` runs on the context's
/// queue with the request, the conversation and the control descriptor.
final class ScriptedConnection: HelperConnection, @unchecked Sendable {
    let script: (HelperRequest, inout PresenterConversation, Int32?) -> HelperVerdict
    private let lock = NSLock()
    private var _requests: [HelperRequest] = []
    var requests: [HelperRequest] { lock.lock(); defer { lock.unlock() }; return _requests }

    init(_ script: @escaping (HelperRequest, inout PresenterConversation, Int32?) -> HelperVerdict) {
        self.script = script
    }

    convenience init(answer: HelperVerdict) {
        self.init { _, _, _ in answer }
    }

    func run(_ request: HelperRequest, conversation: PresenterConversation, control: Int32?) -> HelperVerdict {
        lock.lock(); _requests.append(request); lock.unlock()
        var conversation = conversation
        return script(request, &conversation, control)
    }

    func runSecret(_ request: HelperRequest, conversation: PresenterConversation, control: Int32?, outgoing: SecretBuffer?,
                   incoming: SecretBuffer?) -> (SecretVerdict, [[UInt8]]) {
        (.helper(.failed("no secrets here")), [])
    }
}

/// A presenter that records what it was shown and answers from a list.
final class RecordingPresenter: LAPresenter, @unchecked Sendable {
    var shown: [(String, Bool)] = []
    var asked: [String] = []
    var answers: [(LAPasswordAnswer, String)]
    var control: LAEvaluationControl?
    var began = 0, dismissed = 0
    var fallbackTitles: [String] = []

    init(answers: [(LAPasswordAnswer, String)] = []) { self.answers = answers }

    func begin(reason: String, cancelTitle: String?, fallbackTitle: String?, control: LAEvaluationControl) {
        began += 1
        self.control = control
    }
    func show(_ message: String, isError: Bool) { shown.append((message, isError)) }
    func askPassword(_ prompt: String, into password: LAPassword) -> LAPasswordAnswer {
        asked.append(prompt)
        guard !answers.isEmpty else { return .cancel }
        let (answer, text) = answers.removeFirst()
        password.set(Array(text.utf8))
        return answer
    }
    func dismiss() { dismissed += 1 }
    func offerFallback(title: String) { fallbackTitles.append(title) }
}

func evaluated(_ pam: PAMCode, _ error: LAErrorCode? = nil, method: AuthenticationMethod? = nil,
               domainState: [UInt8] = []) -> HelperVerdict {
    HelperVerdict(ResultFrame(status: .evaluated, pamCode: pam.rawValue, error: error, method: method, domainState: domainState))
}

final class LAContextTests: XCTestCase {
    func evaluate(_ context: LAContext, _ policy: LAPolicy = .deviceOwnerAuthentication,
                  reason: String = "confirm the payment") -> (Bool, Error?, Bool) {
        let done = expectation(description: "reply")
        let result = Shared<(Bool, Error?, Bool)>((false, nil, true))
        context.evaluatePolicy(policy, localizedReason: reason) { success, error in
            result.value = (success, error, Thread.isMainThread)
            done.fulfill()
        }
        wait(for: [done], timeout: 10)
        return result.value
    }

    func context(_ connection: ScriptedConnection, presenter: LAPresenter? = RecordingPresenter()) -> LAContext {
        let context = LAContext(connection: connection)
        context.presenter = presenter
        return context
    }

    /// Every error the helper reports arrives under Apple's code.
    func testEveryErrorReachesTheAppUnderItsCode() {
        for engineError in LAErrorCode.allCases {
            let connection = ScriptedConnection(answer: evaluated(ResultTable.pamCode(for: engineError), engineError))
            let (success, error, _) = evaluate(context(connection))
            XCTAssertFalse(success, engineError.name)
            let laError = error as? LAError
            XCTAssertEqual(laError?.code.rawValue, Int(engineError.rawValue), engineError.name)
            XCTAssertEqual((error as NSError?)?.domain, LAErrorDomain)
            XCTAssertTrue(laError.map { LAError.Code(rawValue: Int(engineError.rawValue))! ~= $0 } ?? false)
        }
    }

    /// Every way the helper can end reaches the app as the verdict's app
    /// table says (the module and the command-line tool read the same verdict).
    func testEveryHelperEndingReachesTheAppAsTheVerdictSays() {
        var verdicts: [HelperVerdict] = [
            evaluated(.success, method: .biometry), evaluated(.success, method: .passcode, domainState: [7]), evaluated(.ignore),
            evaluated(.authError), .unavailable("not installed"), .failed("garbage"),
        ]
        for status in HelperStatus.allCases where status != .evaluated {
            verdicts.append(HelperVerdict(ResultFrame(status: status, pamCode: PAMCode.systemError.rawValue)))
        }
        for engineError in LAErrorCode.allCases { verdicts.append(evaluated(ResultTable.pamCode(for: engineError), engineError)) }
        for verdict in verdicts {
            let (success, error, _) = evaluate(context(ScriptedConnection(answer: verdict)))
            let expected = verdict.appError
            XCTAssertEqual(success, expected == nil, "\(verdict)")
            XCTAssertEqual((error as? LAError)?.code.rawValue, expected.map { Int($0.error.rawValue) }, "\(verdict)")
        }
    }

    func testCodesAreApples() {
        let expected: [(LAError.Code, Int)] = [
            (.authenticationFailed, -1), (.userCancel, -2), (.userFallback, -3), (.systemCancel, -4), (.passcodeNotSet, -5),
            (.biometryNotAvailable, -6), (.biometryNotEnrolled, -7), (.biometryLockout, -8), (.appCancel, -9),
            (.invalidContext, -10), (.biometryDisconnected, -13), (.notInteractive, -1004)]
        XCTAssertEqual(expected.count, LAError.Code.allCases.count)
        for (code, raw) in expected { XCTAssertEqual(code.rawValue, raw) }
        XCTAssertEqual(LAPolicy.deviceOwnerAuthenticationWithBiometrics.rawValue, 1)
        XCTAssertEqual(LAPolicy.deviceOwnerAuthentication.rawValue, 2)
        XCTAssertEqual(LAErrorDomain, "com.apple.LocalAuthentication")
    }

    func testSuccessRepliesTrueOnAPrivateQueueWithTheDomainState() {
        let state: [UInt8] = Array(repeating: 7, count: 32)
        let connection = ScriptedConnection(answer: evaluated(.success, method: .biometry, domainState: state))
        let context = context(connection)
        let (success, error, onMain) = evaluate(context)
        XCTAssertTrue(success)
        XCTAssertNil(error)
        XCTAssertFalse(onMain)
        XCTAssertEqual(context.evaluatedPolicyDomainState, Data(state))
        XCTAssertEqual(context.domainState.biometry.stateHash, Data(state))
        XCTAssertEqual(context.biometryType, .touchID)
    }

    func testTheRequestCarriesThePolicyAndThePresentation() {
        let connection = ScriptedConnection(answer: evaluated(.success, method: .passcode))
        let context = context(connection)
        context.localizedFallbackTitle = "Use Passphrase"
        context.localizedCancelTitle = "Not now"
        _ = evaluate(context, .deviceOwnerAuthenticationWithBiometrics, reason: "unlock the vault")
        let request = connection.requests.first
        XCTAssertEqual(request?.action, .evaluate)
        XCTAssertEqual(request?.service, Array("localauth-app".utf8))
        let fields = Dictionary(uniqueKeysWithValues: (request?.presentation ?? []).map { (String(decoding: $0.0, as: UTF8.self),
                                                                                           String(decoding: $0.1, as: UTF8.self)) })
        XCTAssertEqual(fields, ["policy": "biometrics", "reason": "unlock the vault", "fallback_title": "Use Passphrase",
                                "cancel_title": "Not now"])
    }

    func testAnEmptyFallbackTitleIsPassedOnToHideTheFallback() {
        let connection = ScriptedConnection(answer: evaluated(.success, method: .biometry))
        let context = context(connection)
        context.localizedFallbackTitle = ""
        _ = evaluate(context)
        let fallback = connection.requests.first?.presentation.first { $0.0 == Array("fallback_title".utf8) }
        XCTAssertEqual(fallback?.1, [])
    }

    func testPreflightNeverPromptsAndSetsTheBiometryType() {
        let presenter = RecordingPresenter()
        let ok = ScriptedConnection(answer: evaluated(.success, method: .biometry, domainState: [1, 2, 3]))
        let context = context(ok, presenter: presenter)
        var error: NSError?
        XCTAssertTrue(context.canEvaluatePolicy(.deviceOwnerAuthenticationWithBiometrics, error: &error))
        XCTAssertNil(error)
        XCTAssertEqual(ok.requests.first?.action, .check)
        XCTAssertEqual(context.biometryType, .touchID)
        XCTAssertEqual(context.evaluatedPolicyDomainState, Data([1, 2, 3]))
        XCTAssertEqual(presenter.began, 0)

        let none = ScriptedConnection(answer: evaluated(.authInfoUnavailable, .biometryNotAvailable))
        let other = self.context(none)
        XCTAssertFalse(other.canEvaluatePolicy(.deviceOwnerAuthenticationWithBiometrics, error: &error))
        XCTAssertEqual(error?.code, LAError.Code.biometryNotAvailable.rawValue)
        XCTAssertEqual(LAError(_nsError: error!)?.code, .biometryNotAvailable)
        XCTAssertEqual(other.biometryType, .none)
    }

    func testAMissingHelperIsBiometryNotAvailableAndABrokenOneASystemCancel() {
        var error: NSError?
        let missing = context(ScriptedConnection(answer: .unavailable("not installed")))
        XCTAssertFalse(missing.canEvaluatePolicy(.deviceOwnerAuthentication, error: &error))
        XCTAssertEqual(error?.code, LAError.Code.biometryNotAvailable.rawValue)
        let (success, failure, _) = evaluate(context(ScriptedConnection(answer: .failed("garbage"))))
        XCTAssertFalse(success)
        XCTAssertEqual((failure as? LAError)?.code, .systemCancel)
    }

    func testAServiceTheAdministratorDidNotEnableIsBiometryNotAvailable() {
        let (success, error, _) = evaluate(context(ScriptedConnection(answer: evaluated(.ignore))))
        XCTAssertFalse(success)
        XCTAssertEqual((error as? LAError)?.code, .biometryNotAvailable)
    }

    func testARefusedRequestIsInvalidContext() {
        let refused = HelperVerdict(ResultFrame(status: .refused, pamCode: PAMCode.systemError.rawValue, error: .invalidContext))
        let (_, error, _) = evaluate(context(ScriptedConnection(answer: refused)))
        XCTAssertEqual((error as? LAError)?.code, .invalidContext)
    }

    func testInteractionNotAllowedNeverShowsAnything() {
        let presenter = RecordingPresenter()
        let connection = ScriptedConnection { request, conversation, control in
            XCTAssertNil(control)
            let secret = SecretBuffer()
            XCTAssertEqual(conversation.ask("any prompt", into: secret), .failed)   // no presenter behind it
            return evaluated(.conversationError, .notInteractive)
        }
        let context = context(connection, presenter: presenter)
        context.interactionNotAllowed = true
        let (success, error, _) = evaluate(context)
        XCTAssertFalse(success)
        XCTAssertEqual((error as? LAError)?.code, .notInteractive)
        XCTAssertEqual(connection.requests.map(\.action), [.evaluate])
        XCTAssertEqual(connection.requests.map(\.interactive), [false])
        XCTAssertEqual(presenter.began, 0)
        XCTAssertTrue(presenter.shown.isEmpty && presenter.asked.isEmpty)
    }

    func testInteractionNotAllowedStillReportsWhatIsMissing() {
        let context = context(ScriptedConnection(answer: evaluated(.authInfoUnavailable, .biometryNotEnrolled)))
        context.interactionNotAllowed = true
        let (_, error, _) = evaluate(context, .deviceOwnerAuthenticationWithBiometrics)
        XCTAssertEqual((error as? LAError)?.code, .biometryNotEnrolled)
    }

    /// invalidate() while the helper waits: the app's cancel goes down the
    /// control descriptor, the evaluation ends with appCancel, and every
    /// later call with invalidContext.
    func testInvalidateDuringAnEvaluationIsAppCancelAndAfterIsInvalidContext() {
        let waiting = expectation(description: "the helper waits")
        let connection = ScriptedConnection { _, _, control in
            waiting.fulfill()
            guard let control, let byte = Syscalls.readByte(control) else { return .failed("no control") }
            XCTAssertEqual(byte, ClientChoice.appCancel.rawValue)
            return evaluated(.conversationError, .appCancel)
        }
        let context = context(connection)
        let done = expectation(description: "reply")
        let code = Shared<LAError.Code?>(nil)
        context.evaluatePolicy(.deviceOwnerAuthentication, localizedReason: "sign in") { _, error in
            code.value = (error as? LAError)?.code
            done.fulfill()
        }
        wait(for: [waiting], timeout: 10)
        context.invalidate()
        wait(for: [done], timeout: 10)
        XCTAssertEqual(code.value, .appCancel)

        let (_, after, _) = evaluate(context)
        XCTAssertEqual((after as? LAError)?.code, .invalidContext)
        var error: NSError?
        XCTAssertFalse(context.canEvaluatePolicy(.deviceOwnerAuthentication, error: &error))
        XCTAssertEqual(error?.code, LAError.Code.invalidContext.rawValue)
        XCTAssertEqual(connection.requests.count, 1)
    }

    /// The presenter's buttons reach the helper as the person's choices;
    /// the fallback button only once the helper offered the fallback (a
    /// press before that goes nowhere), and the offer reaches the presenter
    /// with its title.
    func testThePresentersButtonsBecomeChoices() {
        for (press, expected) in [(ClientChoice.userCancel, LAErrorCode.userCancel), (.userFallback, .userFallback)] {
            let presenter = RecordingPresenter()
            let connection = ScriptedConnection { _, conversation, control in
                guard let buttons = presenter.control, let control else { return .failed("no control") }
                buttons.fallback()                     // not offered yet: nothing is sent
                XCTAssertFalse(buttons.isFallbackOffered)
                conversation.offerFallback("Use Passphrase")
                XCTAssertTrue(buttons.isFallbackOffered)
                press == .userCancel ? buttons.cancel() : buttons.fallback()
                guard let byte = Syscalls.readByte(control) else { return .failed("no byte") }
                return byte == press.rawValue ? evaluated(.conversationError, expected) : .failed("wrong byte \(byte)")
            }
            let (_, error, _) = evaluate(context(connection, presenter: presenter), .deviceOwnerAuthenticationWithBiometrics)
            XCTAssertEqual((error as? LAError)?.code.rawValue, Int(expected.rawValue))
            XCTAssertEqual(presenter.began, 1)
            XCTAssertEqual(presenter.dismissed, 1)
            XCTAssertEqual(presenter.fallbackTitles, ["Use Passphrase"])
        }
    }

    /// Messages and prompts of the helper's conversation reach the
    /// presenter; the password goes to the helper and is wiped.
    func testTheConversationIsRelayedAndThePasswordWiped() {
        let presenter = RecordingPresenter(answers: [(.entered, "right-pw-1")])
        let typed = NSLock()
        var got: [UInt8] = []
        let connection = ScriptedConnection { _, conversation, _ in
            conversation.tell("Touch the reader.", .info)
            conversation.tell("Fingerprint not recognized.", .error)
            let secret = SecretBuffer()
            XCTAssertEqual(conversation.ask("Enter Password: ", into: secret), .entered)
            typed.lock(); got = secret.withBytes { Array(UnsafeBufferPointer(start: $0, count: $1)) }; typed.unlock()
            return evaluated(.success, method: .passcode)
        }
        let (success, _, _) = evaluate(context(connection, presenter: presenter))
        XCTAssertTrue(success)
        XCTAssertEqual(presenter.shown.map(\.0), ["Touch the reader.", "Fingerprint not recognized."])
        XCTAssertEqual(presenter.shown.map(\.1), [false, true])
        XCTAssertEqual(presenter.asked, ["Enter Password: "])
        typed.lock(); XCTAssertEqual(got, Array("right-pw-1".utf8)); typed.unlock()
    }

    func testFallbackAndCancelAtAPrompt() {
        for (answer, expected) in [(LAPasswordAnswer.fallback, PromptAnswer.fallback), (.cancel, .failed)] {
            let presenter = RecordingPresenter(answers: [(answer, "")])
            let connection = ScriptedConnection { _, conversation, _ in
                let secret = SecretBuffer()
                let got = conversation.ask("Password, or press Enter to use your fingerprint: ", into: secret)
                return got == expected ? evaluated(.ignore, .userFallback) : .failed("\(got)")
            }
            let (_, error, _) = evaluate(context(connection, presenter: presenter), .deviceOwnerAuthenticationWithBiometrics)
            XCTAssertEqual((error as? LAError)?.code, .userFallback)
        }
    }

    func testAnOversizedPasswordIsNeverTruncated() {
        let presenter = RecordingPresenter(answers: [(.entered, String(repeating: "x", count: LAPassword.capacity + 5))])
        let connection = ScriptedConnection { _, conversation, _ in
            let secret = SecretBuffer()
            _ = conversation.ask("Enter Password: ", into: secret)
            return secret.overflowed && secret.count == 0 ? evaluated(.authError, .authenticationFailed) : .failed("truncated")
        }
        let (_, error, _) = evaluate(context(connection, presenter: presenter))
        XCTAssertEqual((error as? LAError)?.code, .authenticationFailed)
    }

    func testTheReuseWindowGoesToTheHelperInWholeSeconds() {
        let connection = ScriptedConnection(answer: evaluated(.success, method: .passcode))
        let context = context(connection)
        _ = evaluate(context)
        context.touchIDAuthenticationAllowableReuseDuration = 90.7
        _ = evaluate(context)
        context.touchIDAuthenticationAllowableReuseDuration = 1000
        context.interactionNotAllowed = true
        let (success, _, _) = evaluate(context)
        XCTAssertTrue(success)                       // the helper found a recent unlock
        XCTAssertEqual(connection.requests.map(\.reuseSeconds), [0, 90, 300])
        XCTAssertEqual(connection.requests.map(\.interactive), [true, true, false])
    }

    func testTheReuseDurationIsCappedAtFiveMinutes() {
        let context = LAContext(connection: ScriptedConnection(answer: .failed("unused")))
        XCTAssertEqual(context.touchIDAuthenticationAllowableReuseDuration, 0)
        context.touchIDAuthenticationAllowableReuseDuration = 120
        XCTAssertEqual(context.touchIDAuthenticationAllowableReuseDuration, 120)
        context.touchIDAuthenticationAllowableReuseDuration = 301
        XCTAssertEqual(context.touchIDAuthenticationAllowableReuseDuration, LATouchIDAuthenticationMaximumAllowableReuseDuration)
        context.touchIDAuthenticationAllowableReuseDuration = -5
        XCTAssertEqual(context.touchIDAuthenticationAllowableReuseDuration, 0)
        context.touchIDAuthenticationAllowableReuseDuration = .nan
        XCTAssertEqual(context.touchIDAuthenticationAllowableReuseDuration, 0)
        XCTAssertEqual(LATouchIDAuthenticationMaximumAllowableReuseDuration, 300)
    }

    func testTheAsyncFormThrowsTheError() async {
        let context = context(ScriptedConnection(answer: evaluated(.authInfoUnavailable, .biometryLockout)))
        do {
            _ = try await context.evaluatePolicy(.deviceOwnerAuthenticationWithBiometrics, localizedReason: "unlock")
            XCTFail("no error")
        } catch LAError.biometryLockout {
        } catch {
            XCTFail("\(error)")
        }
        let ok = self.context(ScriptedConnection(answer: evaluated(.success, method: .biometry)))
        let success = try? await ok.evaluatePolicy(.deviceOwnerAuthentication, localizedReason: "unlock")
        XCTAssertEqual(success, true)
    }
}
