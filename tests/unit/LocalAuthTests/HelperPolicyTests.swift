// The setuid helper's decisions as tables: whose account a request is for,
// which options and scope it runs with, which path answers it, and what a
// late frame or a cancel makes of the outcome.
import XCTest
@testable import LocalAuth

final class HelperPolicyTests: XCTestCase {
    func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }

    func request(_ service: String = "swaylock", action: HelperAction = .evaluate, user: String = "", reuse: Int = 0,
                 interactive: Bool = true, presentation: [(String, String)] = []) -> HelperRequest {
        var request = HelperRequest()
        request.service = bytes(service)
        request.action = action
        request.user = bytes(user)
        request.reuseSeconds = reuse
        request.interactive = interactive
        request.presentation = presentation.map { (bytes($0.0), bytes($0.1)) }
        return request
    }

    /// Only the caller's own account; another only for root; a name without
    /// an account only for root's evaluation (the look-alike); a refusal
    /// that does not say whether the name exists; one lookup whatever the
    /// answer.
    func testWhoseAccount() {
        let accounts = ["alice": UserIdentity(uid: 1000, name: Array("alice".utf8)),
                        "bob": UserIdentity(uid: 1001, name: Array("bob".utf8))]
        typealias Answer = Result<HelperPolicy.Target, HelperRequest.Refusal>
        let refused = Answer.failure(.notAllowed(bytes("user")))
        let rows: [(String, UInt32, String?, String, HelperAction, Answer, Int)] = [
            ("own account, unnamed", 1000, "alice", "", .evaluate, .success(.account(accounts["alice"]!)), 0),
            ("own account, named", 1000, "alice", "alice", .evaluate, .success(.account(accounts["alice"]!)), 0),
            ("another existing account", 1000, "alice", "bob", .evaluate, refused, 0),
            ("a name that does not exist", 1000, "alice", "nobody-here", .evaluate, refused, 0),
            ("a caller without a name", 1234, nil, "", .evaluate, refused, 0),
            ("root names an existing account", 0, "root", "bob", .evaluate, .success(.account(accounts["bob"]!)), 1),
            ("root evaluates a missing name: the look-alike", 0, "root", "nobody-here", .evaluate,
             .success(.unknownName(bytes("nobody-here"))), 1),
            ("root's preflight of a missing name", 0, "root", "nobody-here", .check, refused, 1),
            ("root, unnamed", 0, "root", "", .evaluate, .success(.account(UserIdentity(uid: 0, name: bytes("root")))), 0),
        ]
        for (label, uid, name, requested, action, expected, lookups) in rows {
            var looked = 0
            let got = HelperPolicy.target(callerUID: uid, callerName: name.map(bytes), requested: bytes(requested), action: action,
                                          lookup: { looked += 1; return accounts[String(decoding: $0, as: UTF8.self)] })
            XCTAssertEqual(got, expected, label)
            XCTAssertEqual(looked, lookups, label)
        }
    }

    /// The caller shapes the prompt and may only narrow: a shorter timeout,
    /// fewer services; the security keys stay the administrator's.
    func testOptionsAndScopeOfARequest() {
        var configured = Options()
        configured.timeoutSeconds = 30
        let rows: [(String, HelperRequest, (Options) -> Bool, (Options) -> Bool)] = [
            ("a shorter timeout is taken", request(presentation: [("timeout", "5")]), { $0.timeoutSeconds == 5 }, { _ in true }),
            ("a longer timeout is not", request(presentation: [("timeout", "300")]), { $0.timeoutSeconds == 30 }, { _ in true }),
            ("fewer services", request(presentation: [("services", "swaylock")]), { $0.services == [Array("swaylock".utf8)] },
             { $0.covers(service: Array("swaylock".utf8)) }),
            ("no service added", request(presentation: [("services", "swaylock,evil")]),
             { !$0.covers(service: Array("evil".utf8)) }, { !$0.covers(service: Array("evil".utf8)) }),
            ("a preflight is in scope for any service", request("cups", action: .check), { _ in true },
             { $0.covers(service: Array("cups".utf8)) }),
            ("an evaluation is not", request("cups"), { _ in true }, { !$0.covers(service: Array("cups".utf8)) }),
        ]
        for (label, request, optionsHold, scopeHolds) in rows {
            let (options, scope, _) = HelperPolicy.options(configured: configured, request: request)
            XCTAssertTrue(optionsHold(options), label)
            XCTAssertTrue(scopeHolds(scope), label)
            XCTAssertEqual(options.lockout, configured.lockout, label)
            XCTAssertEqual(options.stateDir, configured.stateDir, label)
            XCTAssertEqual(options.passcodeService, configured.passcodeService, label)
        }
        XCTAssertEqual(HelperPolicy.hardDeadlineSeconds(configured), 30 + 2 * 120 + 30)
    }

    /// The mode of an evaluation through the helper: scan and the password
    /// alone when asked, the password alone for a password service, prompt
    /// otherwise; never terminal (the helper has no terminal).
    func testModeThroughTheHelper() {
        let rows: [(String, String?, String, InteractionMode)] = [
            ("nothing asked", nil, "i3lock", .prompt),
            ("scan asked", "scan", "gdm-fingerprint", .scan),
            ("the password asked", "password", "i3lock", .password),
            ("terminal asked: no terminal here", "terminal", "i3lock", .prompt),
            ("prompt asked", "prompt", "i3lock", .prompt),
            ("a password service", nil, "gdm-password", .password),
            ("a password service, terminal asked", "terminal", "gdm-password", .password),
            ("an app: Apple's sheet", nil, "localauth-app", .scan),
            ("an app asking for prompt mode", "prompt", "localauth-app", .prompt),
        ]
        for (label, asked, service, expected) in rows {
            let presentation = asked.map { [("mode", $0)] } ?? []
            let (options, _, _) = HelperPolicy.options(configured: Options(), request: request(service, presentation: presentation))
            XCTAssertEqual(HelperPolicy.mode(options, service: Array(service.utf8)), expected, label)
        }
    }

    /// Which path answers a request: the reuse window only for apps.
    func testThePathOfARequest() {
        let rows: [(String, HelperRequest, HelperPolicy.Path)] = [
            ("a preflight", request(action: .check), .preflight),
            ("a preflight ignores reuse", request("localauth-app", action: .check, reuse: 10), .preflight),
            ("a locker's prompt", request(), .evaluate),
            ("a locker cannot reuse", request(reuse: 10), .evaluate),
            ("an app with a reuse window", request("localauth-app", reuse: 10), .reuse(seconds: 10, then: .evaluate)),
            ("an app that may not show anything", request("localauth-app", interactive: false), .withoutPrompt),
            ("both", request("localauth-app", reuse: 300, interactive: false), .reuse(seconds: 300, then: .withoutPrompt)),
            ("a PAM service that may not show anything", request(interactive: false), .withoutPrompt),
        ]
        for (label, request, expected) in rows { XCTAssertEqual(HelperPolicy.path(request), expected, label) }
    }

    /// Without a prompt: what is missing, else notInteractive.
    func testAnswerWithoutAPrompt() {
        XCTAssertEqual(HelperPolicy.errorWithoutPrompt(preflight: .success([1])), .notInteractive)
        for error in LAErrorCode.allCases {
            XCTAssertEqual(HelperPolicy.errorWithoutPrompt(preflight: .failure(error)), error, error.name)
        }
    }

    /// A late frame and a cancel: only the app's cancel turns a failure
    /// into appCancel; nothing turns anything into a success.
    func testLateFramesAndCancel() {
        for type in FrameType.allCases {
            let expected: HelperPolicy.LateFrame = type == .cancel ? .appCancel
                : (type == .userCancel || type == .userFallback || type == .passwordTyped ? .ignored : .violation)
            XCTAssertEqual(HelperPolicy.lateFrame(type), expected, "\(type)")
        }
        let outcomes: [Outcome] = [.success(.biometry), .success(.passcode), .outOfScope, .internalError]
            + LAErrorCode.allCases.map { .failure($0) }
        for outcome in outcomes {
            for cancelled in [false, true] {
                let reported = HelperPolicy.reported(outcome, appCancelled: cancelled)
                switch outcome {
                case .failure where cancelled: XCTAssertEqual(reported, .failure(.appCancel), "\(outcome)")
                default: XCTAssertEqual(reported, outcome, "\(outcome) cancelled: \(cancelled)")
                }
            }
            XCTAssertEqual(HelperPolicy.carriesDomainState(outcome, service: Array("localauth-app".utf8)),
                           { if case .success = outcome { return true } else { return false } }(), "\(outcome)")
            XCTAssertFalse(HelperPolicy.carriesDomainState(outcome, service: Array("swaylock".utf8)), "\(outcome)")
        }
    }

    /// Which /proc/PID/stat lines are helpers left unreaped: the exited
    /// state (Z) and the helper's own command name, read between the first
    /// "(" and the last ")" (a name may hold either).
    func testUnreapedHelpersAreExitedProcessesUnderTheHelpersName() {
        let rows: [(String, Bool)] = [
            ("4242 (localauth-ended) Z 4000 4242 4242 0 -1", true),
            ("4242 (localauth-ended) S 4000 4242 4242 0 -1", false),     // still running: a slot bounds it
            ("4242 (localauth-ended) R 4000 4242 4242 0 -1", false),
            ("4242 (localauth-helpe) Z 4000 4242 4242 0 -1", false),     // killed before it ended as the caller's
            ("4242 (sh) Z 4000 4242 4242 0 -1", false),                   // another program's zombie
            ("4242 (localauth-end) Z 4000", false),                       // a name that only starts alike
            ("4242 (x) Z (localauth-ended) Z 1", false),                  // the name is up to the last ")"
            ("4242 (localauth-ended)", false),
            ("4242 localauth-ended Z", false),
            ("", false),
        ]
        for (line, expected) in rows {
            XCTAssertEqual(HelperBounds.isUnreaped(stat: bytes(line), command: bytes(HelperBounds.endedName)), expected, line)
        }
        // One name, declared twice: the C shim's end at the deadline uses it too.
        let header = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../../Sources/CLibc/include/libc_shim.h")
        let text = (try? String(contentsOf: header, encoding: .utf8)) ?? ""
        XCTAssertTrue(text.contains("#define LA_ENDED_HELPER_NAME \"\(HelperBounds.endedName)\""), "the C shim's ended helper name")
        XCTAssertLessThanOrEqual(HelperBounds.endedName.utf8.count, 15, "the kernel keeps 15 bytes of a name")
        XCTAssertFalse(HelperBounds.refusesUnreaped(HelperBounds.unreaped - 1))
        XCTAssertTrue(HelperBounds.refusesUnreaped(HelperBounds.unreaped))
    }
}
