// Every way a run of the helper can end, decoded once into a verdict and
// walked through the three clients' tables (the module, the command-line
// tool, the app library): one row per ending, so the same failure means the
// same thing everywhere and a new ending must be given a row.
import XCTest
@testable import LocalAuth

final class HelperVerdictTests: XCTestCase {
    /// How a run ended: a RESULT, or what the client made of a run that
    /// sent none (a helper missing or not setuid, one that died or hung).
    enum Ending {
        case frame(ResultFrame)
        case noFrame(HelperVerdict)

        var verdict: HelperVerdict {
            switch self {
            case .frame(let frame): return HelperVerdict(frame)
            case .noFrame(let verdict): return verdict
            }
        }
    }

    typealias Row = (label: String, ending: Ending, verdict: HelperVerdict, pam: PAMCode, command: CommandAnswer, app: LAErrorCode?)

    static var evaluated: HelperStatus { .evaluated }
    static func answered(_ status: HelperStatus, _ code: PAMCode, _ error: LAErrorCode? = nil, _ method: AuthenticationMethod? = nil,
                         failDelay: Bool = false, state: [UInt8] = []) -> Ending {
        .frame(ResultFrame(status: status, pamCode: code.rawValue, error: error, method: method, failDelay: failDelay, domainState: state))
    }

    static var rows: [Row] {
        var rows: [Row] = [
            ("finger", answered(evaluated, .success, nil, .biometry, state: [1, 2]), .granted(.biometry, domainState: [1, 2]),
             .success, .granted(.biometry, domainState: [1, 2]), nil),
            ("password", answered(evaluated, .success, nil, .passcode), .granted(.passcode, domainState: []),
             .success, .granted(.passcode, domainState: []), nil),
            ("out of scope", answered(evaluated, ResultTable.pamCode(for: .outOfScope)), .outOfScope,
             ResultTable.stepAside, .notAuthenticated(.biometryNotAvailable), .biometryNotAvailable),
            ("missing or not setuid", .noFrame(.unavailable("not installed")), .unavailable("not installed"),
             ResultTable.stepAside, .toolFailure("localauth-helper cannot be used: not installed"), .biometryNotAvailable),
            ("not root", answered(.notPrivileged, .authInfoUnavailable),
             .unavailable("it does not run as root (a nosuid mount, no_new_privs or a container?)"), ResultTable.stepAside,
             .toolFailure("localauth-helper cannot be used: it does not run as root (a nosuid mount, no_new_privs or a container?)"),
             .biometryNotAvailable),
            ("refused", answered(.refused, .systemError, .invalidContext), .refused, .systemError,
             .toolFailure("localauth-helper refused the request"), .invalidContext),
            ("internal error", answered(.internalError, .systemError), .failed("it hit an internal error"), .systemError,
             .toolFailure("localauth-helper failed: it hit an internal error"), .systemCancel),
            ("died mid-way", .noFrame(.failed("the helper ended without a result")), .failed("the helper ended without a result"), .systemError,
             .toolFailure("localauth-helper failed: the helper ended without a result"), .systemCancel),
            ("a failure without a reason", answered(evaluated, .authError), .failed("it gave no answer for this account"),
             .systemError, .toolFailure("localauth-helper failed: it gave no answer for this account"), .systemCancel),
            // A secret action's end, which only its client reads with the
            // SECRET_STATUS before it (SecretVerdict): never a grant here.
            ("a secret action handled", answered(.secretHandled, .success), .failed("it answered a secret action"), .systemError,
             .toolFailure("localauth-helper failed: it answered a secret action"), .systemCancel),
        ]
        for error in LAErrorCode.allCases {
            rows.append(("denied: \(error.name)", answered(evaluated, ResultTable.pamCode(for: error), error, failDelay: true),
                         .denied(error, failDelay: true), ResultTable.pamCode(for: error), .notAuthenticated(error), error))
        }
        return rows
    }

    func testEveryEndingMeansTheSameInEveryClient() {
        for row in HelperVerdictTests.rows {
            let verdict = row.ending.verdict
            XCTAssertEqual(verdict, row.verdict, row.label)
            XCTAssertEqual(verdict.pamCode, row.pam, row.label)
            XCTAssertEqual(verdict.commandAnswer, row.command, row.label)
            XCTAssertEqual(verdict.appError?.error, row.app, row.label)
            // Only a grant is a grant, in every table.
            let granted = { if case .granted = verdict { return true } else { return false } }()
            XCTAssertEqual(verdict.pamCode == .success, granted, row.label)
            XCTAssertEqual(verdict.appError == nil, granted, row.label)
        }
    }

    /// Every status the helper can send has a row.
    func testEveryHelperStatusHasARow() {
        for status in HelperStatus.allCases {
            XCTAssertTrue(HelperVerdictTests.rows.contains { row in
                if case .frame(let frame) = row.ending { return frame.status == status }
                return false
            }, "\(status)")
        }
    }

    /// Every ending the helper's engine can have, from the helper's side:
    /// the RESULT it encodes for the outcome, on the wire and back, is the
    /// verdict the module, the tool and an app read, and it means what the
    /// engine meant (the module's own answer for the same outcome).
    func testEveryOutcomeEncodesToTheVerdictOfItsMeaning() {
        var outcomes: [Outcome] = [.success(.biometry), .success(.passcode), .outOfScope, .internalError]
        outcomes += LAErrorCode.allCases.map { .failure($0) }
        for outcome in outcomes {
            for failDelay in [false, true] {
                let label = "\(outcome) delay \(failDelay)"
                let sent = ResultFrame(status: .evaluated, outcome: outcome, failDelay: failDelay)
                guard let received = ResultFrame.decode(sent.encoded()) else { XCTFail("\(label): does not decode"); continue }
                XCTAssertEqual(received, sent, label)
                let verdict = HelperVerdict(received)
                switch outcome {
                case .success(let method):
                    XCTAssertEqual(verdict, .granted(method, domainState: []), label)
                case .failure(let error):
                    XCTAssertEqual(verdict, .denied(error, failDelay: failDelay), label)
                case .outOfScope:
                    XCTAssertEqual(verdict, .outOfScope, label)
                case .internalError:
                    XCTAssertEqual(verdict, .failed("it hit an internal error"), label)
                }
                // The module answers as it would have in-process.
                XCTAssertEqual(ResultTable.authenticationAnswer(verdict.pamCode.rawValue),
                               ResultTable.authenticationAnswer(ResultTable.pamCode(for: outcome).rawValue), label)
            }
        }
    }
}
