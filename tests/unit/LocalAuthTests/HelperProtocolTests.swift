import XCTest
import LocalAuth

/// The helper's wire: headers and their caps, HELLO, the request's fields
/// (presentation only), the RESULT and what makes one garbage, and the
/// options a caller's presentation can and cannot change.
final class HelperProtocolTests: XCTestCase {
    /// The refusal of a header, nil when it was accepted.
    func refusal(_ header: [UInt8]) -> ProtocolViolation? {
        if case .failure(let violation) = HelperWire.parseHeader(header) { return violation }
        return nil
    }

    func testHeadersRoundTripAndAreCapped() {
        for type in FrameType.allCases {
            let header = HelperWire.header(type, length: 17)
            guard case .success(let parsed) = HelperWire.parseHeader(header) else { return XCTFail("\(type)") }
            XCTAssertEqual(parsed.type, type)
            XCTAssertEqual(parsed.length, 17)
        }
        XCTAssertEqual(HelperWire.header(.textInfo, length: 0x0102_0304), [0x10, 0x01, 0x02, 0x03, 0x04])
        XCTAssertEqual(refusal(HelperWire.header(.textInfo, length: HelperWire.maxPayload + 1)), .oversized(.textInfo))
        XCTAssertEqual(refusal(HelperWire.header(.reply, length: HelperWire.maxReply + 1)), .oversized(.reply))
        guard case .success = HelperWire.parseHeader(HelperWire.header(.reply, length: HelperWire.maxReply)) else { return XCTFail() }
        XCTAssertEqual(refusal([0x7F, 0, 0, 0, 0]), .unknownType(0x7F))
        XCTAssertEqual(refusal([0x01, 0, 0]), .truncated)
        // A length with the top bit set is not a negative number.
        XCTAssertEqual(refusal([0x10, 0xFF, 0xFF, 0xFF, 0xFF]), .oversized(.textInfo))
    }

    func testHello() {
        // Version 4 is spoken, and versions 1 to 3 still: a helper answers
        // in the client's version; before it knows it (a refusal), in the oldest.
        XCTAssertEqual(HelloFrame.clientVersion(HelloFrame.client()), 4)
        XCTAssertEqual(HelloFrame.clientVersion(bytes("LAH") + [1]), 1)
        XCTAssertEqual(HelloFrame.clientVersion(bytes("LAH") + [2]), 2)
        XCTAssertEqual(HelloFrame.clientVersion(bytes("LAH") + [3]), 3)
        XCTAssertNil(HelloFrame.clientVersion(bytes("LAH") + [5]))
        XCTAssertNil(HelloFrame.clientVersion(bytes("LAH") + [0]))
        XCTAssertNil(HelloFrame.clientVersion(HelloFrame.client() + [0]))
        XCTAssertEqual(HelloFrame.helperHello(HelloFrame.helper(silenceMilliseconds: 40_000, version: 2))?.silence, 40_000)
        XCTAssertEqual(HelloFrame.helperHello(HelloFrame.helper(silenceMilliseconds: 40_000))?.version, 1)
        XCTAssertNil(HelloFrame.helperHello(HelloFrame.client()))
        XCTAssertNil(HelloFrame.helperHello(bytes("LAH") + [5, 0, 0, 0, 1]))
    }

    func testRequestRoundTrip() {
        var request = HelperRequest()
        request.action = .check
        request.service = bytes("swaylock")
        request.user = bytes("alice")
        request.tty = bytes(":0")
        request.presentation = [(bytes("reason"), bytes("Unlock = now")), (bytes("fallback_title"), [])]
        XCTAssertEqual(HelperRequest.decode(request.encoded()), .success(request))
        request.reuseSeconds = 300
        request.interactive = false
        XCTAssertEqual(HelperRequest.decode(request.encoded()), .success(request))
        request.clientReadsKeys = true
        XCTAssertEqual(HelperRequest.decode(request.encoded()), .success(request))
    }

    func testReuseAndInteractiveAcceptOnlyTheirValues() {
        for bad in ["reuse=301", "reuse=-1", "reuse=", "reuse=1e2", "reuse=0300", "reuse=99999", "interactive=maybe", "interactive=",
                    "keys=", "keys=yes", "keys=helper", "keys=client\u{0}"] {
            XCTAssertEqual(HelperRequest.decode(bytes("service=localauth-app\0\(bad)")), .failure(.malformed), bad)
        }
        XCTAssertEqual(try HelperRequest.decode(bytes("service=localauth-app\0reuse=0")).get().reuseSeconds, 0)
        XCTAssertEqual(try HelperRequest.decode(bytes("service=localauth-app\0reuse=42")).get().reuseSeconds, 42)
        XCTAssertEqual(try HelperRequest.decode(bytes("service=localauth-app\0interactive=yes")).get().interactive, true)
        XCTAssertEqual(try HelperRequest.decode(bytes("service=localauth-app\0keys=client")).get().clientReadsKeys, true)
        XCTAssertEqual(try HelperRequest.decode(bytes("service=localauth-app")).get().clientReadsKeys, false)
    }

    /// `localauth evaluate`'s touch or type: keys edit a line nothing shows;
    /// Enter sends PASSWORD_TYPED, Ctrl-C and Ctrl-D on an empty line cancel.
    func testKeysTypedWhileTheReaderWaits() {
        let typed = TypedWhileWaiting()
        for byte in bytes("pw-x") { XCTAssertNil(typed.key(byte)) }
        XCTAssertNil(typed.key(0x7F))                          // backspace
        XCTAssertTrue(typed.midLine)
        XCTAssertNil(typed.key(0x04))                          // Ctrl-D on a line: ignored
        XCTAssertEqual(typed.key(0x0D), .passwordTyped)
        XCTAssertFalse(typed.midLine)
        XCTAssertNil(typed.key(0x61))                          // after Enter: waits for the prompt
        let secret = SecretBuffer()
        XCTAssertTrue(typed.take(into: secret))
        XCTAssertTrue(secret.equals(bytes("pw-")))
        XCTAssertTrue(typed.line.isEmpty)
        XCTAssertFalse(typed.take(into: secret), "taken twice")
        XCTAssertEqual(typed.key(0x0D), .passwordTyped)       // Enter alone: the prompt asks
        XCTAssertFalse(typed.take(into: secret))
        XCTAssertNil(typed.key(0x61))
        XCTAssertEqual(typed.key(0x03), .userCancel)
        XCTAssertTrue(typed.line.isEmpty, "a cancel wipes the line")
        XCTAssertEqual(typed.key(0x04), .userCancel)          // Ctrl-D on an empty line
        XCTAssertEqual(HelperPolicy.lateFrame(.passwordTyped), .ignored)
        XCTAssertEqual(ClientChoice.passwordTyped.frame, .passwordTyped)
    }

    /// A client names the presentation keys from the option table; a key
    /// the helper would refuse is never sent.
    func testPresentSendsOnlyPresentationKeys() {
        var request = HelperRequest()
        request.service = bytes("localauth-app")
        request.present(.reason, bytes("Pay 3 EUR"))
        request.present(.lockout, bytes("99"))
        request.present(.stateDir, bytes("/tmp"))
        request.present(.policy, bytes("owner"))
        XCTAssertEqual(request.presentation.map { String(decoding: $0.0, as: UTF8.self) }, ["reason", "policy"])
        XCTAssertEqual(HelperRequest.decode(request.encoded()).map { $0.presentation.count }, .success(2))
    }

    func testRequestRefusesEverySecurityKeyAndNonsense() {
        for key in ["state_dir", "passcode_service", "lockout", "max_tries", "passcode_backoff", "max_backoff",
                    "even_deny_root", "conf", "password_services", "locker_services", "answer_timeout", "debug", "authsucc", "fallback_after", "bogus"] {
            XCTAssertEqual(HelperRequest.decode(bytes("service=i3lock\0\(key)=x")), .failure(.notAllowed(bytes(key))), key)
        }
        XCTAssertEqual(HelperRequest.decode(bytes("user=alice")), .failure(.missingService))
        XCTAssertEqual(HelperRequest.decode(bytes("service=i3lock\0noequals")), .failure(.malformed))
        XCTAssertEqual(HelperRequest.decode(bytes("service=../x")), .failure(.malformed))
        XCTAssertEqual(HelperRequest.decode(bytes("service=i3lock\0action=reset")), .failure(.malformed))
        XCTAssertEqual(HelperRequest.decode(bytes("service=i3lock\0user=")), .failure(.malformed))
        let many = (0..<33).map { _ in "reason=x" }.joined(separator: "\0")
        XCTAssertEqual(HelperRequest.decode(bytes("service=i3lock\0" + many)), .failure(.malformed))
    }

    func testResultRoundTripAndGarbage() {
        let results = [
            ResultFrame(status: .evaluated, pamCode: 0, method: .biometry),
            ResultFrame(status: .evaluated, pamCode: 0, method: .passcode, domainState: [1, 2, 3]),
            ResultFrame(status: .evaluated, pamCode: 7, error: .authenticationFailed, failDelay: true),
            ResultFrame(status: .refused, pamCode: 4, error: .invalidContext),
            ResultFrame(status: .notPrivileged, pamCode: 9),
        ]
        for result in results { XCTAssertEqual(ResultFrame.decode(result.encoded()), result) }
        let success = ResultFrame(status: .evaluated, pamCode: 0, method: .biometry).encoded()
        var noMethod = success
        noMethod[9] = 0
        XCTAssertNil(ResultFrame.decode(noMethod), "a success that does not say how")
        var withError = success
        withError[5...8] = [0xFF, 0xFF, 0xFF, 0xFF]
        XCTAssertNil(ResultFrame.decode(withError), "a success with an error")
        var notEvaluated = success
        notEvaluated[0] = HelperStatus.refused.rawValue
        XCTAssertNil(ResultFrame.decode(notEvaluated), "a refusal claiming success")
        var unknownError = ResultFrame(status: .evaluated, pamCode: 7, error: .authenticationFailed).encoded()
        unknownError[5...8] = [0, 0, 0x10, 0]
        XCTAssertNil(ResultFrame.decode(unknownError))
        XCTAssertNil(ResultFrame.decode(Array(success.prefix(10))))
        XCTAssertNil(ResultFrame.decode(success + [UInt8](repeating: 0, count: ResultFrame.maxDomainState + 1)))
        var badStatus = success
        badStatus[0] = 9
        XCTAssertNil(ResultFrame.decode(badStatus))
    }

    /// Out of scope is an evaluated non-success with no error, whether the
    /// helper says it with the step-aside code or (an older helper) ignore.
    func testOutOfScopeIsAStepAsideWithNoError() {
        let stepAside = ResultTable.pamCode(for: .outOfScope).rawValue
        XCTAssertTrue(ResultFrame(status: .evaluated, pamCode: stepAside).isOutOfScope)
        XCTAssertTrue(ResultFrame(status: .evaluated, pamCode: PAMCode.ignore.rawValue).isOutOfScope)
        XCTAssertFalse(ResultFrame(status: .evaluated, pamCode: stepAside, error: .userFallback).isOutOfScope)
        XCTAssertFalse(ResultFrame(status: .evaluated, pamCode: PAMCode.success.rawValue).isOutOfScope)
        XCTAssertFalse(ResultFrame(status: .evaluated, pamCode: PAMCode.authError.rawValue).isOutOfScope)
        XCTAssertFalse(ResultFrame(status: .internalError, pamCode: stepAside).isOutOfScope)
    }

    func testPresentationChangesOnlyPresentation() {
        var configured = Options()
        configured.timeoutSeconds = 20
        configured.lockout = 4
        configured.stateDir = bytes("/var/lib/localauth")
        let fields: [([UInt8], [UInt8])] = [
            (bytes("reason"), bytes("Unlock the screen")), (bytes("fallback_title"), bytes("Use Password")),
            (bytes("cancel_title"), bytes("Back")), (bytes("policy"), bytes("biometrics")), (bytes("timeout"), bytes("300")),
            (bytes("state_dir"), bytes("/tmp/x")), (bytes("lockout"), bytes("20")),
        ]
        let (options, _) = configured.withPresentation(fields)
        XCTAssertEqual(options.reason, bytes("Unlock the screen"))
        XCTAssertEqual(options.fallbackTitle, bytes("Use Password"))
        XCTAssertEqual(options.cancelTitle, bytes("Back"))
        XCTAssertEqual(options.policy, .biometrics)
        XCTAssertEqual(options.timeoutSeconds, 20, "a caller cannot lengthen the timeout")
        XCTAssertEqual(options.lockout, 4)
        XCTAssertEqual(options.stateDir, bytes("/var/lib/localauth"))
        XCTAssertEqual(configured.withPresentation([(bytes("timeout"), bytes("5"))]).options.timeoutSeconds, 5)
        let narrowed = configured.withPresentation([(bytes("services"), bytes("i3lock,mylocker"))]).options
        XCTAssertEqual(narrowed.services, [bytes("i3lock")], "a caller narrows the services, never adds one")
    }

    func testAnswerTimeoutOnlyFromTheConfigurationFile() {
        var parser = OptionParser()
        parser.applyConfigFile(bytes("answer_timeout = 1m\n"))
        parser.applyArguments([bytes("answer_timeout=10m")])
        parser.finish()
        XCTAssertEqual(parser.options.answerTimeoutSeconds, 60)
        XCTAssertTrue(parser.diagnostics.contains { $0.contains("only valid in the configuration file") })
        var clamped = OptionParser()
        clamped.applyConfigFile(bytes("answer_timeout = 1s\n"))
        clamped.finish()
        XCTAssertEqual(clamped.options.answerTimeoutSeconds, 5)
    }
}
