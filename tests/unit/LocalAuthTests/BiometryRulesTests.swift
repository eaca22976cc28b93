// When the finger is not enough (the password-required rules) and whose
// touch it is (logind's session, screen lock and lid): each rule as a row,
// then through the engine with the manual clock, a simulated reboot and a
// scripted logind.
import XCTest
@testable import LocalAuth

let hour: Int64 = 3600
let enrolled: [UInt8] = [0xD0, 0x0D]

/// A record whose last correct password, match and unlock are the given
/// ages (seconds before `clock`'s now, in its boot); nil: never.
func recordWith(clock: ManualClock, passcodeAge: Int64?, fingerAge: Int64? = nil, unlockAge: Int64? = nil,
                digest: [UInt8] = enrolled, passcodeBoot: UInt8? = nil) -> StateRecord {
    var record = storedRecord()
    let now = Moment(boot: clock.boot, wall: clock.wall, bootID: clock.bootIdentifier)
    if let passcodeAge {
        record.notePasscodeSuccess(Moment(boot: now.boot - passcodeAge * 1_000_000_000, wall: now.wall - passcodeAge,
                                          bootID: passcodeBoot.map { [UInt8](repeating: $0, count: 16) } ?? now.bootID),
                                   enrollment: digest)
    }
    if let fingerAge {
        record.lastFingerprintSuccessBootNanoseconds = now.boot - fingerAge * 1_000_000_000
        record.lastFingerprintSuccessBootID = now.bootID
    }
    let lastUnlock = unlockAge ?? [passcodeAge, fingerAge].compactMap { $0 }.min()
    if let lastUnlock {
        record.lastUnlockBootNanoseconds = now.boot - lastUnlock * 1_000_000_000
        record.lastUnlockBootID = unlockAge == nil ? record.lastPasscodeSuccessBootID : now.bootID
        record.lastUnlockMethod = .passcode
    }
    return record
}

final class BiometryRulesTests: XCTestCase {
    struct Row {
        var name: String
        var record: (ManualClock) -> StateRecord
        var options: (inout Options) -> Void = { _ in }
        var domainState: [UInt8] = enrolled
        var expected: PasscodeRequirement?
    }

    var passcodeRows: [Row] { [
        Row(name: "a fresh record, first prompt of the boot: the password first",
            record: { _ in storedRecord() }, expected: .afterRestart),
        Row(name: "a correct password in this boot: the finger is enough",
            record: { recordWith(clock: $0, passcodeAge: 60) }, expected: nil),
        Row(name: "the last correct password was in an earlier boot",
            record: { recordWith(clock: $0, passcodeAge: 60, passcodeBoot: 9) }, expected: .afterRestart),
        Row(name: "the boot rule off: a fresh record uses the finger (no success ever starts no interval)",
            record: { _ in storedRecord() }, options: { $0.passcodeAfterBoot = false }, expected: nil),
        Row(name: "the boot rule off: a password in an earlier boot counts at least this boot's age",
            record: { recordWith(clock: $0, passcodeAge: 60, passcodeBoot: 9) },
            options: { $0.passcodeAfterBoot = false; $0.unlockIntervalSeconds = 3600 }, expected: .noUnlockFor(3600)),
        Row(name: "47 h 59 min without an unlock: still the finger",
            record: { recordWith(clock: $0, passcodeAge: 48 * hour - 60) }, expected: nil),
        Row(name: "48 h without an unlock of any kind",
            record: { recordWith(clock: $0, passcodeAge: 48 * hour) }, expected: .noUnlockFor(48 * 3600)),
        Row(name: "unlock_interval shortened to 1 h",
            record: { recordWith(clock: $0, passcodeAge: hour) }, options: { $0.unlockIntervalSeconds = 3600 },
            expected: .noUnlockFor(3600)),
        Row(name: "156 h without the password and 4 h without a match",
            record: { recordWith(clock: $0, passcodeAge: 156 * hour, fingerAge: 4 * hour, unlockAge: 60) },
            expected: .passcodeUnusedFor(156 * 3600)),
        Row(name: "156 h without the password but a match 3 h ago: the finger",
            record: { recordWith(clock: $0, passcodeAge: 156 * hour, fingerAge: 3 * hour, unlockAge: 60) }, expected: nil),
        Row(name: "155 h without the password and no match for days: the finger",
            record: { recordWith(clock: $0, passcodeAge: 155 * hour, fingerAge: 100 * hour, unlockAge: 60) }, expected: nil),
        Row(name: "156 h without the password and never a match",
            record: { recordWith(clock: $0, passcodeAge: 156 * hour, unlockAge: 60) }, expected: .passcodeUnusedFor(156 * 3600)),
        Row(name: "the enrolled prints changed since the last correct password",
            record: { recordWith(clock: $0, passcodeAge: 60) }, domainState: [0xBE, 0xEF], expected: .enrollmentChanged),
        Row(name: "a password recorded while fprintd could not say: the enrollment counts as changed",
            record: { recordWith(clock: $0, passcodeAge: 60, digest: []) }, expected: .enrollmentChanged),
        Row(name: "the restart reason comes before the enrollment reason",
            record: { recordWith(clock: $0, passcodeAge: 60, passcodeBoot: 9) }, domainState: [0xBE, 0xEF], expected: .afterRestart),
        Row(name: "a success dated after now (a time namespace) counts as now",
            record: { recordWith(clock: $0, passcodeAge: -100 * hour) }, expected: nil),
        Row(name: "no boot id to compare: the password first",
            record: { clock in clock.bootIdentifier = RecordFormat.zeroID; return recordWith(clock: clock, passcodeAge: 60) },
            expected: .afterRestart),
    ] }

    func testEveryPasscodeRequirementRow() {
        for row in passcodeRows {
            let clock = ManualClock()
            let record = row.record(clock)
            var options = Options()
            row.options(&options)
            let moment = Moment(boot: clock.boot, wall: clock.wall, bootID: clock.bootIdentifier)
            XCTAssertEqual(BiometryRules.passcodeRequirement(record, moment: moment, domainState: row.domainState, options: options),
                           row.expected, row.name)
        }
    }

    func testTheWallClockDecidesNothing() {
        for jump in [-400 * 24 * hour, -48 * hour, 0, 48 * hour, 400 * 24 * hour] {
            let clock = ManualClock()
            let fresh = recordWith(clock: clock, passcodeAge: 60)
            let stale = recordWith(clock: clock, passcodeAge: 48 * hour)
            clock.wall += jump
            let moment = Moment(boot: clock.boot, wall: clock.wall, bootID: clock.bootIdentifier)
            XCTAssertNil(BiometryRules.passcodeRequirement(fresh, moment: moment, domainState: enrolled, options: Options()), "\(jump)")
            XCTAssertEqual(BiometryRules.passcodeRequirement(stale, moment: moment, domainState: enrolled, options: Options()),
                           .noUnlockFor(48 * 3600), "\(jump)")
        }
    }

    // MARK: Through the engine

    func testAfterABootThePasswordComesFirstThenTheFingerWorksAgain() {
        let w = World(options: Options())
        var result = w.prompt(answers: [rightAnswer])
        XCTAssertEqual(result.outcome, .success(.passcode))
        XCTAssertEqual(w.sensor.openCalls, 0, "the reader is not used in the first prompt of a boot")
        XCTAssertTrue(w.prompter.saw("Your password is required after a restart."))
        XCTAssertEqual(w.prompt(script: [.match]).outcome, .success(.biometry))
        w.clock.reboot(id: 7)
        result = w.prompt(answers: [rightAnswer])
        XCTAssertEqual(result.outcome, .success(.passcode))
        XCTAssertEqual(w.sensor.openCalls, 1, "after the reboot: the password again")
        XCTAssertEqual(w.prompt(script: [.match]).outcome, .success(.biometry))
        XCTAssertEqual(w.sensor.openCalls, 2)
    }

    func testPolicyBiometricsHandsOverWithLockoutAndPromptModeAsksOnlyThePassword() {
        let w = World(options: Options())
        XCTAssertEqual(w.prompt(policy: .biometrics).outcome, .failure(.biometryLockout))
        XCTAssertEqual(w.prompt(mode: .prompt, answers: [rightAnswer]).outcome, .success(.passcode))
        XCTAssertEqual(w.prompter.asked.filter { $0 == Text.firstPrompt }, [], "no 'press Enter for the finger' while it cannot be used")
        XCTAssertEqual(w.prompt(policy: .biometrics, script: [.match]).outcome, .success(.biometry))
    }

    func testEachReasonHasItsOwnMessage() {
        let clock = ManualClock()
        let cases: [(StateRecord, [UInt8], String)] = [
            (storedRecord(), enrolled, "Your password is required after a restart."),
            (recordWith(clock: clock, passcodeAge: 48 * hour), enrolled, "Your password is required: you have not unlocked for 48 hours."),
            (recordWith(clock: clock, passcodeAge: 156 * hour, unlockAge: 60), enrolled,
             "Your password is required: it has not been used for 156 hours."),
            (recordWith(clock: clock, passcodeAge: 60), [0xBE, 0xEF], "Your password is required: the enrolled fingerprints changed."),
        ]
        for (record, state, message) in cases {
            let w = World(options: Options(), sensor: FakeSensor(.available(domainState: state)), store: FakeStore(record), clock: clock)
            XCTAssertEqual(w.prompt(answers: [rightAnswer]).outcome, .success(.passcode), message)
            XCTAssertTrue(w.prompter.saw(message), "\(w.prompter.told)")
            XCTAssertEqual(w.sensor.openCalls, 0)
            XCTAssertTrue(w.log.has(.notice, "password required"), message)
            XCTAssertEqual(w.prompt(script: [.match]).outcome, .success(.biometry), "the password lifted it: \(message)")
        }
    }

    func testCanEvaluateExplainsTheRequirement() {
        let w = World(options: Options())
        var engine = w.engine()
        let answer = engine.canEvaluateExplained(.biometrics, user: alice, service: bytes("sudo"))
        XCTAssertEqual(answer.result, .failure(.biometryLockout))
        XCTAssertEqual(answer.block?.statusText, "password required: after restart")
        let owner = engine.canEvaluateExplained(.owner, user: alice, service: bytes("sudo"))
        XCTAssertEqual(owner.result, .success([]), "the owner policy still has the password")
        XCTAssertEqual(w.prompter.asked, [])
        XCTAssertEqual(w.store.writes, 0)
    }

    // MARK: Whose touch it is

    func session(uid: UInt32 = 1000, active: Bool = true, remote: Bool = false, seat: String = "seat0",
                 locked: Bool = false) -> SessionFacts {
        SessionFacts(id: bytes("c1"), uid: uid, active: active, remote: remote, seat: bytes(seat), locked: locked)
    }

    func testEveryTouchRow() {
        let rows: [(String, SeatObservation, String, (inout Options) -> Void, TouchDenial?)] = [
            ("no logind: the rules do not apply", .noLogind, "sudo", { _ in }, nil),
            ("logind does not answer: no finger", .unanswered, "sudo", { _ in }, .logindUnanswered),
            ("the user's active local session on a seat", .seen(session: session(), lidClosed: false), "sudo", { _ in }, nil),
            ("in no session", .seen(session: nil, lidClosed: false), "sudo", { _ in }, .notActiveSession),
            ("another user's session", .seen(session: session(uid: 1001), lidClosed: false), "sudo", { _ in }, .notActiveSession),
            ("a session that is not the seat's active one", .seen(session: session(active: false), lidClosed: false), "sudo",
             { _ in }, .notActiveSession),
            ("a remote session", .seen(session: session(remote: true), lidClosed: false), "sudo", { _ in }, .notActiveSession),
            ("a session on no seat", .seen(session: session(seat: ""), lidClosed: false), "sudo", { _ in }, .notActiveSession),
            ("locked screen: sudo behind it gets the password", .seen(session: session(locked: true), lidClosed: false), "sudo",
             { _ in }, .screenLocked),
            ("locked screen: the locker uses the reader", .seen(session: session(locked: true), lidClosed: false), "i3lock",
             { _ in }, nil),
            ("locked screen: an app does not", .seen(session: session(locked: true), lidClosed: false), "localauth-app",
             { _ in }, .screenLocked),
            ("locked screen: a locker taken out of locker_services", .seen(session: session(locked: true), lidClosed: false),
             "i3lock", { $0.lockerServices = [bytes("swaylock")] }, .screenLocked),
            ("locked screen: a locker outside services is no locker", .seen(session: session(locked: true), lidClosed: false),
             "i3lock", { $0.services = [bytes("sudo")] }, .screenLocked),
            ("lid closed", .seen(session: session(), lidClosed: true), "sudo", { _ in }, .lidClosed),
            ("lid closed, even for the locker", .seen(session: session(locked: true), lidClosed: true), "i3lock", { _ in }, .lidClosed),
            ("lid closed with skip_when_lid_closed off", .seen(session: session(), lidClosed: true), "sudo",
             { $0.skipWhenLidClosed = false }, nil),
        ]
        for (name, observation, service, configure, expected) in rows {
            var options = Options()
            configure(&options)
            XCTAssertEqual(BiometryRules.touchDenial(observation, user: alice, service: bytes(service), options: options), expected, name)
        }
    }

    func testAUserManagersProcessStandsInItsAccountsOneSeatedSessionWhileNoneIsRemote() {
        func named(_ id: String, uid: UInt32 = 1000, active: Bool = true, remote: Bool = false, seat: String = "seat0") -> SessionFacts {
            SessionFacts(id: bytes(id), uid: uid, active: active, remote: remote, seat: bytes(seat), locked: false)
        }
        let rows: [(String, [SessionFacts], String?)] = [
            ("the account's one session at the seat", [named("c1")], "c1"),
            ("with a seatless local one beside it (cron, the user manager's own)", [named("c1"), named("c2", seat: "")], "c1"),
            ("another account's sessions do not count", [named("c1"), named("c9", uid: 1001, remote: true)], "c1"),
            ("an ssh login of the account, open or closing", [named("c1"), named("c2", remote: true, seat: "")], nil),
            ("a remote session listed first", [named("c2", remote: true, seat: ""), named("c1")], nil),
            ("its session is not the seat's active one", [named("c1", active: false)], nil),
            ("no session at all (lingering)", [], nil),
            ("only another account's", [named("c9", uid: 1001)], nil),
            ("active sessions on two seats", [named("c1"), named("c3", seat: "seat1")], nil),
            ("a second session at the seat, inactive (a locked desktop and a text console)",
             [named("c1"), named("c4", active: false)], nil),
            ("the same, listed the other way round", [named("c4", active: false), named("c1")], nil),
            ("a session on no seat only", [named("c2", seat: "")], nil),
        ]
        for (name, sessions, expected) in rows {
            let standIn = BiometryRules.userManagerStandIn(sessions, account: 1000)
            XCTAssertEqual(standIn.map { String(decoding: $0.id, as: UTF8.self) }, expected, name)
            if let standIn {
                XCTAssertNil(BiometryRules.touchDenial(.seen(session: standIn, lidClosed: false), user: alice, service: bytes("sudo"),
                                                       options: Options()), name)
            }
        }
    }

    func testALockedScreenSendsSudoToThePasswordAndLetsTheLockerUseTheReader() {
        let w = World(seat: FakeSeat(.seen(session: session(locked: true), lidClosed: false)))
        XCTAssertEqual(w.prompt(answers: [rightAnswer]).outcome, .success(.passcode))
        XCTAssertEqual(w.sensor.openCalls, 0)
        XCTAssertTrue(w.prompter.saw("The screen is locked"), "\(w.prompter.told)")
        XCTAssertTrue(w.prompter.saw("sudo needs your password"), "\(w.prompter.told)")
        XCTAssertEqual(w.prompt(mode: .prompt, service: "i3lock", answers: [.empty], script: [.match]).outcome, .success(.biometry))
        XCTAssertEqual(w.sensor.openCalls, 1)
    }

    func testAClosedLidSkipsTheReaderForThisPromptOnly() {
        let seat = FakeSeat(.seen(session: session(), lidClosed: true))
        let w = World(seat: seat)
        XCTAssertEqual(w.prompt(policy: .biometrics).outcome, .failure(.biometryNotAvailable))
        XCTAssertEqual(w.prompt(answers: [rightAnswer]).outcome, .success(.passcode))
        XCTAssertTrue(w.prompter.saw("The lid is closed"))
        XCTAssertEqual(w.sensor.openCalls, 0)
        seat.observation = .seen(session: session(), lidClosed: false)
        XCTAssertEqual(w.prompt(script: [.match]).outcome, .success(.biometry), "lid open again: the finger")
        XCTAssertEqual(w.store.fingerprintFailures, 0, "a skipped reader charges nothing")
    }

    func testAScreenLockedDuringTheWaitKeepsTheMatchFromCounting() {
        let seat = FakeSeat(.seen(session: session(), lidClosed: false))
        let w = World(seat: seat)
        w.sensor.onVerify = { seat.observation = .seen(session: self.session(locked: true), lidClosed: false) }
        XCTAssertEqual(w.prompt(answers: [rightAnswer], script: [.match]).outcome, .success(.passcode))
        XCTAssertTrue(w.prompter.saw("The screen is locked"), "\(w.prompter.told)")
        XCTAssertEqual(w.store.fingerprintFailures, 0, "the right finger is refunded, not counted")
        XCTAssertNotEqual(w.store.record?.lastUnlockMethod, .biometry)
        XCTAssertTrue(w.log.has(.notice, "not used"))
    }

    /// R14 at a login screen: a root caller acting for a name, outside that
    /// account's session, hears of an enrolled, locked or password-bound
    /// account exactly what it hears of an unknown name: the password
    /// prompt alone. A caller in its own session (sudo) is told why.
    func testALoginScreenHearsNothingOfTheAccountsReader() {
        let outside = SeatObservation.seen(session: nil, lidClosed: false)
        let rows: [(String, StateRecord, SeatObservation, FakeSensor)] = [
            ("locked", storedRecord(f: 5), outside, FakeSensor()),
            ("enrolled", storedRecord(), outside, FakeSensor()),
            ("lid closed too", storedRecord(f: 5), .seen(session: nil, lidClosed: true), FakeSensor()),
            ("logind silent", storedRecord(f: 5), .unanswered, FakeSensor()),
            ("no finger enrolled", storedRecord(), outside, FakeSensor(.notEnrolled)),
        ]
        for (label, record, observation, sensor) in rows {
            let w = World(sensor: sensor, store: FakeStore(record), seat: FakeSeat(observation))
            XCTAssertEqual(w.prompt(mode: .prompt, service: "lightdm", answers: [rightAnswer], actsForAName: true).outcome,
                           .success(.passcode), label)
            XCTAssertEqual(w.prompter.told, [], "\(label): \(w.prompter.told)")
            XCTAssertEqual(w.prompter.asked, [Text.passcodePrompt], label)
            XCTAssertEqual(w.sensor.openCalls, 0, label)
            // Every name's prompt asks logind once, so that the time to the
            // prompt does not tell them apart either.
            XCTAssertEqual(w.seat.observeCalls, 1, "\(label): logind asked once")
            let unknown = World(seat: FakeSeat(observation))
            _ = unknown.prompt(mode: .prompt, scope: .unknownUser, service: "lightdm", answers: [rightAnswer], actsForAName: true)
            XCTAssertEqual(unknown.prompter.told, w.prompter.told, label)
            XCTAssertEqual(unknown.prompter.asked, w.prompter.asked, label)
            XCTAssertEqual(unknown.seat.observeCalls, 1, label)
        }
        // sudo in a session that is not the active one: told why.
        let w = World(store: FakeStore(storedRecord(f: 5)), seat: FakeSeat(outside))
        _ = w.prompt(answers: [rightAnswer])
        XCTAssertTrue(w.prompter.saw(Text.locked), "\(w.prompter.told)")
    }

    /// An app's sheet loses the person when the session locks or stops
    /// being the user's active local one; logind's silence changes nothing.
    func testWhenAnAppLosesThePerson() {
        let rows: [(String, SeatObservation, Bool)] = [
            ("the user's active session", .seen(session: session(), lidClosed: false), false),
            ("the lid closed: the sheet stays", .seen(session: session(), lidClosed: true), false),
            ("locked", .seen(session: session(locked: true), lidClosed: false), true),
            ("switched away", .seen(session: session(active: false), lidClosed: false), true),
            ("another user's session", .seen(session: session(uid: 1001), lidClosed: false), true),
            ("no session", .seen(session: nil, lidClosed: false), true),
            ("logind silent", .unanswered, false),
            ("no logind", .noLogind, false),
        ]
        for (label, observation, lost) in rows {
            XCTAssertEqual(BiometryRules.appLostThePerson(observation, user: alice), lost, label)
        }
        XCTAssertTrue(BiometryRules.cancelsWhenThePersonLeaves(service: bytes("localauth-app")))
        XCTAssertFalse(BiometryRules.cancelsWhenThePersonLeaves(service: bytes("i3lock")))
    }

    /// The session locks while an app's sheet waits: systemCancel, the
    /// attempt given back, a log line. sudo's wait is not an app's sheet.
    func testASessionLockedDuringAnAppsSheetCancelsIt() {
        let seat = FakeSeat(.seen(session: session(), lidClosed: false))
        let w = World(seat: seat)
        w.sensor.onVerify = { seat.observation = .seen(session: self.session(locked: true), lidClosed: false) }
        let result = w.prompt(mode: .scan, service: "localauth-app", script: [SensorStep(.timeout)])
        XCTAssertEqual(result.outcome, .failure(.systemCancel))
        XCTAssertEqual(w.store.fingerprintFailures, 0, "given back")
        XCTAssertTrue(w.log.has(.notice, "cancelled: the session locked"), "\(w.log)")
        XCTAssertEqual(w.prompter.asked, [])

        seat.observation = .seen(session: session(), lidClosed: false)
        let sudo = World(seat: seat)
        sudo.sensor.onVerify = { seat.observation = .seen(session: self.session(locked: true), lidClosed: false) }
        _ = sudo.prompt(policy: .biometrics, script: [SensorStep(.timeout)])
        XCTAssertFalse(sudo.log.has(.notice, "cancelled: the session locked"))
        XCTAssertTrue(sudo.prompter.saw(Text.timedOut))
    }

    func testLogindIsNotAskedWhenTheFingerIsUnusableAnyway() {
        let w = World(sensor: FakeSensor(.notEnrolled), seat: FakeSeat(.unanswered))
        XCTAssertEqual(w.prompt(answers: [rightAnswer]).outcome, .success(.passcode))
        XCTAssertEqual(w.seat.observeCalls, 0)
        XCTAssertFalse(w.prompter.saw("session manager"))
    }
}
