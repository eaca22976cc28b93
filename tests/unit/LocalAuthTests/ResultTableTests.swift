import XCTest
import PAMConstants
import LocalAuth

/// The one table from outcomes to PAM codes.
final class ResultTableTests: XCTestCase {
    func testEveryLAErrorHasItsPAMCode() {
        let expected: [LAErrorCode: PAMCode] = [
            .authenticationFailed: .authError,
            .userCancel: .conversationError,
            .userFallback: .authInfoUnavailable,
            .systemCancel: .authInfoUnavailable,
            .passcodeNotSet: .authInfoUnavailable,
            .biometryNotAvailable: .authInfoUnavailable,
            .biometryNotEnrolled: .authInfoUnavailable,
            .biometryLockout: .authInfoUnavailable,
            .appCancel: .conversationError,
            .invalidContext: .systemError,
            .biometryDisconnected: .authInfoUnavailable,
            .notInteractive: .conversationError,
        ]
        XCTAssertEqual(Set(LAErrorCode.allCases), Set(expected.keys), "a new LAErrorCode needs a row here")
        for error in LAErrorCode.allCases {
            XCTAssertEqual(ResultTable.pamCode(for: error), expected[error], error.name)
            XCTAssertEqual(ResultTable.pamCode(for: .failure(error)), expected[error], error.name)
            XCTAssertNotEqual(ResultTable.pamCode(for: error), .success, "\(error.name) must never succeed")
        }
    }

    func testAppleRawValuesAndNames() {
        let expected: [(LAErrorCode, Int32, String)] = [
            (.authenticationFailed, -1, "authenticationFailed"), (.userCancel, -2, "userCancel"), (.userFallback, -3, "userFallback"),
            (.systemCancel, -4, "systemCancel"), (.passcodeNotSet, -5, "passcodeNotSet"),
            (.biometryNotAvailable, -6, "biometryNotAvailable"), (.biometryNotEnrolled, -7, "biometryNotEnrolled"),
            (.biometryLockout, -8, "biometryLockout"), (.appCancel, -9, "appCancel"), (.invalidContext, -10, "invalidContext"),
            (.biometryDisconnected, -13, "biometryDisconnected"), (.notInteractive, -1004, "notInteractive"),
        ]
        XCTAssertEqual(expected.count, LAErrorCode.allCases.count)
        for (error, raw, name) in expected {
            XCTAssertEqual(error.rawValue, raw)
            XCTAssertEqual(error.name, name)
            XCTAssertEqual(LAErrorCode(rawValue: raw), error)
        }
    }

    func testEveryOutcomeKind() {
        XCTAssertEqual(ResultTable.pamCode(for: .outOfScope), .authInfoUnavailable)
        XCTAssertEqual(ResultTable.pamCode(for: .success(.biometry)), .success)
        XCTAssertEqual(ResultTable.pamCode(for: .success(.passcode)), .success)
        XCTAssertEqual(ResultTable.pamCode(for: .internalError), .systemError)
        XCTAssertEqual(EvaluationResult(.internalError).pamCode, .systemError)
        XCTAssertEqual(EvaluationResult(.failure(.userFallback)).pamCode, .authInfoUnavailable)
        XCTAssertEqual(EvaluationResult(.success(.passcode)).pamCode, .success)
        XCTAssertFalse(EvaluationResult(.success(.passcode)).failDelay)
        // A password refused during its back-off: sudo's retries end at once.
        XCTAssertEqual(EvaluationResult(.failure(.authenticationFailed), refusedDuringBackoff: true).pamCode, .credentialsInsufficient)
        XCTAssertEqual(EvaluationResult(.failure(.authenticationFailed)).pamCode, .authError)
        // Only a success is PAM_SUCCESS.
        var outcomes: [Outcome] = [.outOfScope, .internalError, .success(.biometry), .success(.passcode)]
        outcomes += LAErrorCode.allCases.map { Outcome.failure($0) }
        for outcome in outcomes {
            let isSuccess: Bool
            if case .success = outcome { isSuccess = true } else { isSuccess = false }
            XCTAssertEqual(ResultTable.pamCode(for: outcome) == .success, isSuccess, "\(outcome)")
        }
    }

    /// No outcome is PAM_IGNORE, and the answer every entry point gives
    /// passes nothing through as an ignore: under `required` an ignore after
    /// lines that succeed for anyone would be a login with no credential.
    func testNoAuthenticationAnswerIsIgnore() {
        var outcomes: [Outcome] = [.outOfScope, .internalError, .success(.biometry), .success(.passcode)]
        outcomes += LAErrorCode.allCases.map { Outcome.failure($0) }
        for outcome in outcomes { XCTAssertNotEqual(ResultTable.pamCode(for: outcome), .ignore, "\(outcome)") }
        XCTAssertEqual(ResultTable.authenticationAnswer(PAM_IGNORE), PAM_AUTHINFO_UNAVAIL)
        XCTAssertEqual(ResultTable.stepAside, .authInfoUnavailable)
        for code in PAMCode.allCases where code != .ignore {
            XCTAssertEqual(ResultTable.authenticationAnswer(code.rawValue), code.rawValue, "\(code)")
        }
        // Codes libpam does not define here, or at all, fail.
        for code: Int32 in [-1, PAM_BUF_ERR, PAM_ABORT, PAM_INCOMPLETE, PAM_NEW_AUTHTOK_REQD, 32, 1000, Int32.min] {
            XCTAssertEqual(ResultTable.authenticationAnswer(code), PAM_SYSTEM_ERR, "\(code)")
        }
    }

    func testPAMCodesAreLinuxPAMs() {
        XCTAssertEqual(PAMCode.success.rawValue, PAM_SUCCESS)
        XCTAssertEqual(PAMCode.systemError.rawValue, PAM_SYSTEM_ERR)
        XCTAssertEqual(PAMCode.authError.rawValue, PAM_AUTH_ERR)
        XCTAssertEqual(PAMCode.credentialsInsufficient.rawValue, PAM_CRED_INSUFFICIENT)
        XCTAssertEqual(PAMCode.authInfoUnavailable.rawValue, PAM_AUTHINFO_UNAVAIL)
        XCTAssertEqual(PAMCode.conversationError.rawValue, PAM_CONV_ERR)
        XCTAssertEqual(PAMCode.ignore.rawValue, PAM_IGNORE)
        XCTAssertEqual(PAMCode.allCases.count, 7, "a new PAMCode needs its C constant checked here")
        // PAM_MAXTRIES is deliberately never used (docs/DESIGN.md, "Result codes").
        for code in PAMCode.allCases { XCTAssertNotEqual(code.rawValue, PAM_MAXTRIES) }
    }

    /// The one table from a preflight's error to `localauth check`'s exit code.
    func testEveryLAErrorHasItsExitCode() {
        let expected: [LAErrorCode: ExitCode] = [
            .authenticationFailed: .failure, .userCancel: .failure, .userFallback: .failure, .systemCancel: .failure,
            .passcodeNotSet: .passcodeNotSet, .biometryNotAvailable: .biometryNotAvailable,
            .biometryNotEnrolled: .biometryNotEnrolled, .biometryLockout: .biometryLockout, .appCancel: .failure,
            .invalidContext: .failure, .biometryDisconnected: .failure, .notInteractive: .failure,
        ]
        XCTAssertEqual(Set(LAErrorCode.allCases), Set(expected.keys), "a new LAErrorCode needs a row here")
        for error in LAErrorCode.allCases {
            XCTAssertEqual(ExitCodeTable.exitCode(for: error), expected[error], error.name)
            XCTAssertNotEqual(ExitCodeTable.exitCode(for: error), .success, "\(error.name) must never exit 0")
        }
        // The documented numbers (localauth(1)).
        let documented: [(ExitCode, Int32)] = [
            (.success, 0), (.failure, 1), (.usage, 2), (.permissionDenied, 3), (.unknownUser, 4), (.passcodeNotSet, 10),
            (.biometryNotAvailable, 11), (.biometryNotEnrolled, 12), (.biometryLockout, 13), (.authenticationFailed, 14),
            (.userCancel, 15), (.userFallback, 16), (.systemCancel, 17), (.appCancel, 18), (.invalidContext, 19),
            (.biometryDisconnected, 20), (.notInteractive, 21), (.secretAbsent, 30), (.secretInvalidated, 31),
            (.secretQuotaReached, 32), (.secretKeyNeedsPassword, 33), (.secretStoreFailed, 34),
        ]
        XCTAssertEqual(documented.count, ExitCode.allCases.count)
        for (code, number) in documented { XCTAssertEqual(code.rawValue, number) }
    }

    /// `localauth secret`: each item status its own exit code, none shared
    /// with an evaluation's error; only done exits 0.
    func testEverySecretStatusHasItsExitCode() {
        let evaluationCodes = Set(LAErrorCode.allCases.map { ExitCodeTable.evaluationExitCode(for: $0) })
        var seen: Set<ExitCode> = []
        for status in SecretStatus.allCases where status != .denied {
            let code = ExitCodeTable.secretExitCode(for: status)
            XCTAssertEqual(code == .success, status == .done, "\(status)")
            XCTAssertFalse(evaluationCodes.contains(code), "\(status)")
            XCTAssertTrue(seen.insert(code).inserted, "\(status) shares its code")
        }
    }

    /// `localauth evaluate`: every error its own exit code, none shared with
    /// success or the tool's own failures, the preflight's four unchanged.
    func testEveryLAErrorHasItsOwnEvaluationExitCode() {
        let expected: [LAErrorCode: ExitCode] = [
            .authenticationFailed: .authenticationFailed, .userCancel: .userCancel, .userFallback: .userFallback,
            .systemCancel: .systemCancel, .passcodeNotSet: .passcodeNotSet, .biometryNotAvailable: .biometryNotAvailable,
            .biometryNotEnrolled: .biometryNotEnrolled, .biometryLockout: .biometryLockout, .appCancel: .appCancel,
            .invalidContext: .invalidContext, .biometryDisconnected: .biometryDisconnected, .notInteractive: .notInteractive,
        ]
        XCTAssertEqual(Set(LAErrorCode.allCases), Set(expected.keys), "a new LAErrorCode needs a row here")
        var seen: Set<Int32> = []
        for error in LAErrorCode.allCases {
            let code = ExitCodeTable.evaluationExitCode(for: error)
            XCTAssertEqual(code, expected[error], error.name)
            XCTAssertTrue(seen.insert(code.rawValue).inserted, "\(error.name) shares its exit code")
            XCTAssertFalse([ExitCode.success, .failure, .usage, .permissionDenied, .unknownUser].contains(code), error.name)
            if [.passcodeNotSet, .biometryNotAvailable, .biometryNotEnrolled, .biometryLockout].contains(error) {
                XCTAssertEqual(code, ExitCodeTable.exitCode(for: error), "evaluate and check agree on \(error.name)")
            }
        }
    }

    func testPolicyNames() {
        for policy in [EvaluationPolicy.owner, .biometrics] {
            XCTAssertEqual(EvaluationPolicy(name: Array(policy.name.utf8)), policy)
        }
        XCTAssertNil(EvaluationPolicy(name: Array("Owner".utf8)))
        XCTAssertNil(EvaluationPolicy(name: Array("owner ".utf8)))
    }
}
