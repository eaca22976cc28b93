import XCTest
@testable import LocalAuth

/// The helper's first step for each secret action, as a table: what it
/// answers at once, refuses, or asks (and how), before anything is charged.
final class SecretPolicyTests: XCTestCase {
    typealias Row = (label: String, facts: SecretFacts, step: SecretStep)

    static func facts(_ action: HelperAction, _ requirement: SecretRequirement = .matchOrPassword, present: Bool = true,
                      key: SecretKeyState = .opens, opens: Bool? = true, missing: LAErrorCode? = nil, known: Bool = true,
                      interactive: Bool = true) -> SecretFacts {
        SecretFacts(action: action, requirement: requirement, itemPresent: present, key: key, itemOpens: opens, fingerMissing: missing,
                    enrollmentKnown: known, interactive: interactive)
    }

    static var rows: [Row] { [
        ("list", facts(.secretList), .act),
        ("delete", facts(.secretDelete), .act),
        ("delete absent", facts(.secretDelete, present: false), .answer(.absent)),
        ("load default", facts(.secretLoad), .evaluate(.owner, passwordOnly: false)),
        ("load biometry", facts(.secretLoad, .match), .evaluate(.biometrics, passwordOnly: false)),
        ("load current set", facts(.secretLoad, .matchOfCurrentSet), .evaluate(.biometrics, passwordOnly: false)),
        ("load biometry then password", facts(.secretLoad, .matchThenPassword), .evaluate(.owner, passwordOnly: false)),
        ("load absent", facts(.secretLoad, present: false), .answer(.absent)),
        ("load invalidated", facts(.secretLoad, .matchOfCurrentSet, opens: false), .answer(.invalidated)),
        ("load damaged", facts(.secretLoad, .match, opens: false), .answer(.storeFailed)),
        ("load current set, enrollment unknown", facts(.secretLoad, .matchOfCurrentSet, opens: nil, known: false),
         .deny(.biometryNotAvailable)),
        ("load biometry, enrollment unknown", facts(.secretLoad, .match, known: false), .evaluate(.biometrics, passwordOnly: false)),
        ("load without interaction", facts(.secretLoad, interactive: false), .deny(.notInteractive)),
        ("load, key needs the password", facts(.secretLoad, key: .needsPassword, opens: nil), .evaluate(.owner, passwordOnly: true)),
        ("load biometry, key needs the password", facts(.secretLoad, .match, key: .needsPassword, opens: nil), .answer(.keyNeedsPassword)),
        ("load, key lost", facts(.secretLoad, key: .lost, opens: nil), .answer(.storeFailed)),
        ("store, key opens", facts(.secretStore, present: false), .act),
        ("store, first key", facts(.secretStore, present: false, key: .none), .evaluate(.owner, passwordOnly: true)),
        ("store, first key, no interaction", facts(.secretStore, present: false, key: .none, interactive: false), .deny(.notInteractive)),
        ("store, key needs the password", facts(.secretStore, key: .needsPassword), .evaluate(.owner, passwordOnly: true)),
        ("store, key lost", facts(.secretStore, key: .lost), .answer(.storeFailed)),
        ("store biometry, none enrolled", facts(.secretStore, .match, missing: .biometryNotEnrolled), .deny(.biometryNotEnrolled)),
        ("store biometry, no reader", facts(.secretStore, .matchThenPassword, missing: .biometryNotAvailable), .deny(.biometryNotAvailable)),
        ("store default, no reader", facts(.secretStore, missing: .biometryNotAvailable), .act),
        ("store current set, enrollment unknown", facts(.secretStore, .matchOfCurrentSet, known: false), .deny(.biometryNotAvailable)),
        ("an evaluation is no secret action", facts(.evaluate), .deny(.invalidContext)),
    ] }

    func testEveryRow() {
        for row in SecretPolicyTests.rows { XCTAssertEqual(SecretPolicy.firstStep(row.facts), row.step, row.label) }
    }

    /// Whatever the facts, a load never asks less than its item requires:
    /// a biometry item is never opened by the password alone, and nothing
    /// is released without an evaluation.
    func testALoadNeverAsksLessThanItsItem() {
        for requirement in SecretRequirement.allCases {
            for key in [SecretKeyState.opens, .needsPassword, .none, .lost] {
                for opens in [Bool?.none, true, false] {
                    for known in [true, false] {
                        for interactive in [true, false] {
                            let step = SecretPolicy.firstStep(SecretPolicyTests.facts(.secretLoad, requirement, key: key, opens: opens,
                                                                                      known: known, interactive: interactive))
                            let label = "\(requirement) \(key) \(String(describing: opens)) \(known) \(interactive)"
                            XCTAssertNotEqual(step, .act, label)
                            if case .evaluate(let policy, let passwordOnly) = step {
                                if requirement.policy == .biometrics { XCTAssertEqual(policy, .biometrics, label); XCTAssertFalse(passwordOnly, label) }
                                XCTAssertTrue(interactive, label)
                            }
                        }
                    }
                }
            }
        }
    }

    func testOnlyAMatchReleasesAFingerOnlyItem() {
        for requirement in SecretRequirement.allCases {
            XCTAssertTrue(SecretPolicy.releases(requirement, by: .biometry), "\(requirement)")
            XCTAssertEqual(SecretPolicy.releases(requirement, by: .passcode), requirement.policy == .owner, "\(requirement)")
        }
        XCTAssertFalse(SecretPolicy.releases(.match, by: .passcode))
        XCTAssertFalse(SecretPolicy.releases(.matchOfCurrentSet, by: .passcode))
    }

    func testAFingerHeldBackDoesNotStopAStore() {
        XCTAssertNil(SecretPolicy.fingerMissing(.success([1])))
        XCTAssertNil(SecretPolicy.fingerMissing(.failure(.biometryLockout)))
        XCTAssertEqual(SecretPolicy.fingerMissing(.failure(.biometryNotEnrolled)), .biometryNotEnrolled)
        XCTAssertEqual(SecretPolicy.fingerMissing(.failure(.biometryNotAvailable)), .biometryNotAvailable)
    }
}
