import XCTest
import LocalAuth

/// Stories that span several prompts, clocks and the store's details. One
/// `World` is one machine; each `prompt` is one `pam_sm_authenticate`.
final class EngineTests: XCTestCase {

    // MARK: R5: Apple's 3 + 2 across prompts

    func testLockoutAcrossPromptsAndUnlockByPasscode() {
        let w = World()
        var result = w.prompt(answers: [wrongAnswer], script: [.noMatch, .noMatch, .noMatch])
        XCTAssertEqual(result.pamCode, .authError)
        XCTAssertEqual(w.sensor.verifyCalls, 3)
        XCTAssertEqual(w.store.fingerprintFailures, 3)
        XCTAssertEqual(w.store.passcodeFailures, 1)

        // The application's retry: only 2 more fingerprint attempts.
        result = w.prompt(answers: [wrongAnswer], script: [.noMatch, .noMatch])
        XCTAssertEqual(result.pamCode, .authError)
        XCTAssertEqual(w.sensor.verifyCalls, 5)
        XCTAssertEqual(w.store.fingerprintFailures, 5)
        XCTAssertEqual(w.store.passcodeFailures, 2)
        XCTAssertTrue(w.prompter.saw(Text.locked, kind: .error))
        XCTAssertEqual(w.sensor.openCalls, 2)

        // Locked: no timer unlocks it.
        w.clock.advance(seconds: 7 * 24 * 3600)
        result = w.prompt(answers: [rightAnswer])
        XCTAssertEqual(result.outcome, .success(.passcode))
        XCTAssertEqual(w.sensor.openCalls, 2, "a locked sensor is never claimed")
        XCTAssertEqual(w.sensor.verifyCalls, 5)
        XCTAssertEqual(w.store.fingerprintFailures, 0)
        XCTAssertEqual(w.store.passcodeFailures, 0)

        // The correct passcode unlocked it: 3 attempts again.
        result = w.prompt(policy: .biometrics, script: [.noMatch, .noMatch, .noMatch])
        XCTAssertEqual(result.outcome, .failure(.authenticationFailed))
        XCTAssertEqual(w.sensor.openCalls, 3)
        XCTAssertEqual(w.sensor.verifyCalls, 8)
        XCTAssertEqual(w.store.fingerprintFailures, 3)
        XCTAssertTrue(w.sensor.script.isEmpty)
        XCTAssertTrue(w.prompter.answers.isEmpty)
    }

    // MARK: R16 prompt mode for conversations that hold messages

    func testInstructionInPromptSendsNoMessageBeforeTheWait() {
        var options = unitOptions
        options.instructionInPrompt = true
        let w = World(options: options)
        let result = w.prompt(mode: .prompt, service: "xscreensaver", answers: [.empty], script: [.noMatch, .match])
        XCTAssertEqual(result.outcome, .success(.biometry))
        XCTAssertEqual(w.prompter.asked, ["xscreensaver needs to confirm your identity (alice). " + Text.firstPrompt])
        XCTAssertEqual(w.prompter.told, [Told(text: Text.noMatchTryAgain, kind: .error)], "no instruction before the wait")

        let byDefault = World()
        byDefault.prompt(mode: .prompt, service: "xscreensaver", answers: [.empty], script: [.match])
        XCTAssertEqual(byDefault.prompter.asked, ["xscreensaver needs to confirm your identity (alice). " + Text.firstPrompt],
                       "on by default for xscreensaver")
        var off = unitOptions
        off.instructionInPrompt = false
        let plain = World(options: off)
        plain.prompt(mode: .prompt, service: "xscreensaver", answers: [.empty], script: [.match])
        XCTAssertEqual(plain.prompter.asked, [Text.firstPrompt])
        XCTAssertTrue(plain.prompter.saw(Text.place, kind: .info), "without the option the instruction is a message")
        let other = World()
        other.prompt(mode: .prompt, service: "i3lock", answers: [.empty], script: [.match])
        XCTAssertEqual(other.prompter.asked, [Text.firstPrompt])
    }

    func testLockedBiometricsHandOverEveryTimeUntilReset() {
        let w = World(store: FakeStore(storedRecord(f: 5)))
        for _ in 0..<3 {
            XCTAssertEqual(w.prompt(policy: .biometrics).outcome, .failure(.biometryLockout))
        }
        XCTAssertEqual(w.sensor.openCalls, 0)
        XCTAssertEqual(w.prompter.count(Text.locked), 3)
        var engine = w.engine()
        XCTAssertTrue(engine.ledger.resetAfterPasswordSuccess(alice, enrollment: [0xD0, 0x0D]))
        XCTAssertEqual(w.prompt(policy: .biometrics, script: [.match]).outcome, .success(.biometry))
        XCTAssertEqual(w.sensor.openCalls, 1)
    }

    // MARK: R9 back-off

    /// The iOS schedule: 5 → 1 min, 6 → 5 min, 7 and 8 → 15 min, 9+ → 1 h.
    func testBackoffScheduleRefusesWithoutAskingUntilTheWaitIsOver() {
        let w = World(sensor: FakeSensor(.unreachable))
        for attempt in 1...4 {
            let result = w.prompt(answers: [wrongAnswer])
            XCTAssertEqual(result.outcome, .failure(.authenticationFailed))
            XCTAssertTrue(result.failDelay)
            XCTAssertEqual(w.store.passcodeFailures, attempt)
            XCTAssertEqual(w.store.record?.backoffRemainingMilliseconds, 0, "no wait before the 5th")
        }
        let schedule: [(failures: Int, seconds: Int64, text: String)] = [
            (5, 60, "1 minute"), (6, 300, "5 minutes"), (7, 900, "15 minutes"), (8, 900, "15 minutes"),
            (9, 3600, "1 hour"), (10, 3600, "1 hour"),
        ]
        for step in schedule {
            let asked = w.prompter.asked.count
            let checks = w.verifier.verifyCalls
            XCTAssertEqual(w.prompt(answers: [wrongAnswer]).pamCode, .authError)
            XCTAssertEqual(w.prompter.asked.count, asked + 1, "the entry after a finished wait is asked")
            XCTAssertEqual(w.verifier.verifyCalls, checks + 1)
            XCTAssertEqual(w.store.passcodeFailures, step.failures)
            XCTAssertEqual(w.store.record?.backoffRemainingMilliseconds, step.seconds * 1000)

            // Refused without asking, saying how long.
            let told = w.prompter.told.count
            let refused = w.prompt()
            XCTAssertEqual(refused.outcome, .failure(.authenticationFailed))
            XCTAssertEqual(refused.pamCode, .credentialsInsufficient, "sudo stops at once")
            XCTAssertFalse(refused.failDelay)
            XCTAssertEqual(w.prompter.asked.count, asked + 1, "refused without asking")
            XCTAssertEqual(w.verifier.verifyCalls, checks + 1)
            XCTAssertEqual(w.verifier.beginCalls, checks + 1)
            XCTAssertEqual(w.store.passcodeFailures, step.failures, "a refusal is not charged")
            XCTAssertEqual(Array(w.prompter.told[told...]), [Told(text: Text.waitPrefix + step.text + ".", kind: .error)])

            // One second before the end: still refused.
            w.clock.advance(seconds: step.seconds - 1)
            XCTAssertEqual(w.prompt().pamCode, .credentialsInsufficient)
            XCTAssertEqual(w.prompter.told.last, Told(text: Text.waitPrefix + "1 second.", kind: .error))
            XCTAssertEqual(w.prompter.asked.count, asked + 1)
            w.clock.advance(seconds: 1)
        }
        XCTAssertTrue(w.prompter.answers.isEmpty)
        XCTAssertFalse(w.prompter.answersExhausted)
    }

    func testCorrectPasscodeAfterTheWaitClearsEverything() {
        let w = World(sensor: FakeSensor(.unreachable), store: FakeStore(storedRecord(f: 5, p: 4)))
        w.prompt(answers: [wrongAnswer])
        XCTAssertEqual(w.prompt().pamCode, .credentialsInsufficient)
        w.clock.advance(seconds: 60)
        XCTAssertEqual(w.prompt(answers: [rightAnswer]).outcome, .success(.passcode))
        XCTAssertEqual(w.store.record?.passcodeFailures, 0)
        XCTAssertEqual(w.store.record?.fingerprintFailures, 0)
        XCTAssertEqual(w.store.record?.backoffRemainingMilliseconds, 0)
        // The next wrong passcode starts from zero again: no wait.
        w.prompt(answers: [wrongAnswer])
        XCTAssertEqual(w.store.passcodeFailures, 1)
        XCTAssertEqual(w.prompt(answers: [wrongAnswer]).pamCode, .authError)
        XCTAssertEqual(w.verifier.verifyCalls, 4)
    }

    func testMaxBackoffCapsTheSchedule() {
        var options = unitOptions
        options.maxBackoffSeconds = 600
        let w = World(options: options, sensor: FakeSensor(.unreachable), store: FakeStore(storedRecord(p: 8)))
        w.prompt(answers: [wrongAnswer])
        XCTAssertEqual(w.store.passcodeFailures, 9)
        XCTAssertEqual(w.store.record?.backoffRemainingMilliseconds, 600_000)
        w.prompt()
        XCTAssertEqual(w.prompter.told.last?.text, Text.waitPrefix + "10 minutes.")
        XCTAssertEqual(options.backoffSeconds(afterFailures: 5), 60)
        XCTAssertEqual(options.backoffSeconds(afterFailures: 6), 300)
        XCTAssertEqual(options.backoffSeconds(afterFailures: 7), 600)
        XCTAssertEqual(options.backoffSeconds(afterFailures: 100), 600)
    }

    /// A record may hold any wait (a valid checksum says nothing about
    /// sense), and max_backoff may have been lowered since it was stored:
    /// the owner is never kept out longer than max_backoff (R12, R13).
    func testAStoredWaitNeverOutlastsMaxBackoff() {
        for (stored, maxBackoff) in [(Int64(1) << 62, 3600), (Int64(3_600_000), 120)] {
            var options = unitOptions
            options.maxBackoffSeconds = maxBackoff
            let clock = ManualClock()
            var record = storedRecord(p: 5)
            record.backoffRemainingMilliseconds = stored
            record.backoffAnchorBootNanoseconds = clock.boot
            record.backoffBootID = clock.bootIdentifier
            let w = World(options: options, sensor: FakeSensor(.unreachable), store: FakeStore(record), clock: clock)
            XCTAssertEqual(w.prompt().outcome, .failure(.authenticationFailed))
            XCTAssertEqual(w.prompter.told.last?.text, Text.waitPrefix + durationText(Int64(maxBackoff) * 1000) + ".")
            w.clock.advance(seconds: Int64(maxBackoff) - 1)
            XCTAssertEqual(w.prompt().outcome, .failure(.authenticationFailed))
            XCTAssertEqual(w.verifier.verifyCalls, 0)
            w.clock.advance(seconds: 1)
            XCTAssertEqual(w.prompt(answers: [rightAnswer]).outcome, .success(.passcode), "stored \(stored)")
        }
    }

    func testCustomBackoffSchedule() {
        var parser = OptionParser()
        parser.applyArguments([bytes("passcode_backoff=3:30s,4:2m")])
        parser.finish()
        XCTAssertEqual(parser.diagnostics, [])
        let w = World(options: parser.options, sensor: FakeSensor(.unreachable))
        for _ in 1...3 { w.prompt(answers: [wrongAnswer]) }
        XCTAssertEqual(w.store.passcodeFailures, 3)
        w.prompt()
        XCTAssertEqual(w.prompter.told.last?.text, Text.waitPrefix + "30 seconds.")
        w.clock.advance(seconds: 30)
        w.prompt(answers: [wrongAnswer])
        w.prompt()
        XCTAssertEqual(w.prompter.told.last?.text, Text.waitPrefix + "2 minutes.")
        XCTAssertEqual(w.verifier.verifyCalls, 4)
    }

    func testRootIsExemptFromBackoffButCountsAreKept() {
        let w = World(sensor: FakeSensor(.unreachable))
        for _ in 1...12 { XCTAssertEqual(w.prompt(rootUser, answers: [wrongAnswer]).pamCode, .authError) }
        XCTAssertEqual(w.verifier.verifyCalls, 12)
        XCTAssertEqual(w.prompter.asked.count, 12)
        XCTAssertEqual(w.store.passcodeFailures, 12)
        XCTAssertFalse(w.prompter.saw(Text.waitPrefix))
    }

    func testEvenDenyRootMakesRootWait() {
        var options = unitOptions
        options.evenDenyRoot = true
        let w = World(options: options, sensor: FakeSensor(.unreachable))
        for _ in 1...5 { w.prompt(rootUser, answers: [wrongAnswer]) }
        XCTAssertEqual(w.prompt(rootUser).pamCode, .credentialsInsufficient)
        XCTAssertEqual(w.verifier.verifyCalls, 5)
        XCTAssertEqual(w.prompter.asked.count, 5)
        XCTAssertEqual(w.prompter.told.last, Told(text: Text.waitPrefix + "1 minute.", kind: .error))
    }

    /// R3's parallel test, sequentially: 32 prompts with wrong passcodes run
    /// exactly 5 verifications; the other 27 are refused uncharged.
    func testThirtyTwoWrongPasscodesRunExactlyFiveVerifications() {
        let w = World(sensor: FakeSensor(.unreachable))
        var refused = 0
        for _ in 1...32 {
            let asked = w.prompter.asked.count
            let result = w.prompt(answers: w.prompter.answers.isEmpty ? [wrongAnswer] : [])
            let wasRefused = w.prompter.asked.count == asked
            XCTAssertEqual(result.pamCode, wasRefused ? .credentialsInsufficient : .authError)
            if wasRefused { refused += 1 }
        }
        XCTAssertEqual(w.verifier.verifyCalls, 5)
        XCTAssertEqual(w.store.passcodeFailures, 5)
        XCTAssertEqual(refused, 27)

        let root = World(sensor: FakeSensor(.unreachable))
        for _ in 1...32 { root.prompt(rootUser, answers: [wrongAnswer]) }
        XCTAssertEqual(root.verifier.verifyCalls, 32)
        XCTAssertEqual(root.store.passcodeFailures, 32)
    }

    /// Prompt mode: the typed answers all count against the same limit.
    func testPromptModeTypedPasscodesAreLimitedToo() {
        let w = World()
        for _ in 1...10 { w.prompt(mode: .prompt, answers: [wrongAnswer]) }
        XCTAssertEqual(w.verifier.verifyCalls, 5)
        XCTAssertEqual(w.store.passcodeFailures, 5)
        XCTAssertEqual(w.prompter.asked, Array(repeating: Text.firstPrompt, count: 10))
        XCTAssertEqual(w.prompter.count(Text.waitPrefix), 5)
        XCTAssertEqual(w.sensor.openCalls, 0)
    }

    // MARK: R13 time

    func testWallClockJumpsNeitherEndNorStretchAWait() {
        let w = World(sensor: FakeSensor(.unreachable), store: FakeStore(storedRecord(p: 4)))
        w.prompt(answers: [wrongAnswer])
        XCTAssertEqual(w.store.passcodeFailures, 5)

        w.clock.wall += 10 * 24 * 3600      // forward: must not end the wait
        w.prompt()
        XCTAssertEqual(w.prompter.told.last?.text, Text.waitPrefix + "1 minute.")
        w.clock.wall -= 365 * 24 * 3600     // backward: must not stretch it
        w.clock.boot += 30_000_000_000
        w.prompt()
        XCTAssertEqual(w.prompter.told.last?.text, Text.waitPrefix + "30 seconds.")
        w.clock.wall = 0
        w.clock.boot += 30_000_000_000
        XCTAssertEqual(w.prompt(answers: [wrongAnswer]).failDelay, true, "the wait ended on the boot clock")
        XCTAssertEqual(w.verifier.verifyCalls, 2)
        XCTAssertEqual(w.prompter.asked.count, 2)
    }

    func testANewBootResumesTheStoredRemainder() {
        let w = World(sensor: FakeSensor(.unreachable), store: FakeStore(storedRecord(p: 4)))
        w.prompt(answers: [wrongAnswer])
        let firstBoot = w.clock.bootIdentifier
        XCTAssertEqual(w.store.record?.backoffBootID, firstBoot)
        XCTAssertEqual(w.store.record?.backoffRemainingMilliseconds, 60_000)

        w.clock.reboot(id: 9, uptimeSeconds: 3)
        w.prompt()
        XCTAssertEqual(w.prompter.told.last?.text, Text.waitPrefix + "1 minute.", "not zero after a reboot")
        let record = w.store.record
        XCTAssertEqual(record?.backoffBootID, w.clock.bootIdentifier, "re-anchored on the new boot")
        XCTAssertEqual(record?.backoffAnchorBootNanoseconds, w.clock.boot)
        XCTAssertEqual(record?.backoffRemainingMilliseconds, 60_000, "not longer than the stored remainder")

        w.clock.advance(seconds: 45)
        w.prompt()
        XCTAssertEqual(w.prompter.told.last?.text, Text.waitPrefix + "15 seconds.")
        w.clock.advance(seconds: 15)
        XCTAssertEqual(w.prompt(answers: [rightAnswer]).outcome, .success(.passcode))
        XCTAssertEqual(w.verifier.verifyCalls, 2)
    }

    /// R16: Ctrl-C chosen as the fallback is taken; a cancel is left pending
    /// for the application.
    func testOnlyAFallbackConsumesTheCtrlC() {
        let cancel = World()
        XCTAssertEqual(cancel.prompt(script: [SensorStep(.interrupted)]).outcome, .failure(.userCancel))
        XCTAssertEqual(cancel.sensor.consumeInterruptCalls, 0)
        let fallback = World()
        XCTAssertEqual(fallback.prompt(policy: .biometrics, script: [.noMatch, SensorStep(.interrupted)]).outcome,
                       .failure(.userFallback))
        XCTAssertEqual(fallback.sensor.consumeInterruptCalls, 1)
    }

    /// R13: a refused prompt saves the wait's progress, so a reboot resumes
    /// from what was left then, not from the full wait.
    func testARebootResumesFromTheLastSavedProgress() {
        var options = unitOptions
        options.backoff = [BackoffStep(failures: 5, seconds: 3600)]
        let w = World(options: options, sensor: FakeSensor(.unreachable), store: FakeStore(storedRecord(p: 4)))
        w.prompt(answers: [wrongAnswer])
        XCTAssertEqual(w.store.record?.backoffRemainingMilliseconds, 3_600_000)
        w.clock.advance(seconds: 59 * 60)
        w.prompt()
        XCTAssertEqual(w.prompter.told.last?.text, Text.waitPrefix + "1 minute.")
        XCTAssertEqual(w.store.record?.backoffRemainingMilliseconds, 60_000, "progress saved by the refusal")
        w.clock.reboot(id: 7, uptimeSeconds: 5)
        w.prompt()
        XCTAssertEqual(w.prompter.told.last?.text, Text.waitPrefix + "1 minute.", "resumed, not restarted")
        w.clock.advance(seconds: 60)
        XCTAssertEqual(w.prompt(answers: [rightAnswer]).outcome, .success(.passcode))
    }

    /// A boot whose id could not be read (all zeros every boot): the boot
    /// clock starting below the anchor marks the new boot. The wait neither
    /// ends nor stands still until the new clock passes the old anchor.
    func testABootClockBelowTheAnchorResumesTheRemainder() {
        let w = World(sensor: FakeSensor(.unreachable), store: FakeStore(storedRecord(p: 4)))
        w.clock.bootIdentifier = [UInt8](repeating: 0, count: 16)
        w.clock.boot = 4 * 24 * 3600 * 1_000_000_000       // four days of uptime
        w.prompt(answers: [wrongAnswer])
        w.clock.boot = 10_000_000_000                      // "rebooted", same unreadable id
        w.prompt()
        XCTAssertEqual(w.prompter.told.last?.text, Text.waitPrefix + "1 minute.")
        XCTAssertEqual(w.store.record?.backoffAnchorBootNanoseconds, 10_000_000_000)
        XCTAssertEqual(w.store.record?.backoffRemainingMilliseconds, 60_000)
        w.clock.advance(seconds: 30)
        w.prompt()
        XCTAssertEqual(w.prompter.told.last?.text, Text.waitPrefix + "30 seconds.")
        w.clock.advance(seconds: 30)
        XCTAssertEqual(w.prompt(answers: [rightAnswer]).outcome, .success(.passcode))
        XCTAssertEqual(w.verifier.verifyCalls, 2)
    }

    func testTheFingerprintPhaseHasOneDeadline() {
        var options = unitOptions
        options.timeoutSeconds = 12
        let w = World(options: options)
        let start = w.clock.boot
        w.sensor.onVerify = { w.clock.advance(seconds: 5) }
        let result = w.prompt(policy: .biometrics, script: [.noMatch, .noMatch, SensorStep(.timeout)])
        XCTAssertEqual(result.outcome, .failure(.systemCancel))
        XCTAssertEqual(w.sensor.deadlines, Array(repeating: start + 12_000_000_000, count: 3))
        XCTAssertEqual(w.store.fingerprintFailures, 2)
    }

    /// Another prompt of the same user succeeds while this one waits for a
    /// finger: the counts it reset decide how many attempts are left, not
    /// the record this prompt read at its start (which said one, and then
    /// "locked").
    func testAttemptsLeftFollowTheRecordAsEachChargeFindsIt() {
        let w = World(store: FakeStore(storedRecord(f: 4)))
        var verifies = 0
        w.sensor.onVerify = {
            verifies += 1
            if verifies == 1 {   // the other prompt's password success
                _ = try? w.store.withRecord(uid: alice.uid, userName: alice.name) { record, _ in
                    record?.fingerprintFailures = 0
                    record?.passcodeFailures = 0
                }
            }
        }
        let result = w.prompt(script: [.noMatch, .noMatch, .noMatch], passcode: SecretBuffer())
        XCTAssertEqual(w.sensor.verifyCalls, 3, "three tries, as for a fresh count")
        XCTAssertFalse(w.prompter.saw(Text.locked), "\(w.prompter.told)")
        XCTAssertEqual(w.store.fingerprintFailures, 2, "the two misses after the reset")
        XCTAssertNotEqual(result.outcome, .success(.biometry))
    }

    // MARK: R17 after a match

    /// After a match the reader is let go (stop and release sent) before
    /// logind is asked whether the touch counts; whatever logind says, the
    /// reader is not used again, and a match it refuses leaves nothing charged.
    func testTheReaderIsLetGoWhileLogindIsAskedAfterAMatch() {
        for refused in [false, true] {
            let seat = FakeSeat(.noLogind)
            let w = World(store: FakeStore(storedRecord(f: 1)), seat: seat)
            var letGoAtObserve: [Int] = []
            seat.onObserve = {
                letGoAtObserve.append(w.sensor.letGoCalls)
                // logind gives no answer once the match has come.
                if refused && w.sensor.verifyCalls > 0 { seat.observation = .unanswered }
            }
            let result = w.prompt(policy: .biometrics, script: [.match])
            XCTAssertEqual(result.outcome, refused ? .failure(.biometryNotAvailable) : .success(.biometry), "refused \(refused)")
            XCTAssertEqual(letGoAtObserve.count, 2, "refused \(refused): logind asked before the claim and after the match")
            XCTAssertEqual(letGoAtObserve, [0, 1], "refused \(refused): let go after the match, before logind was asked")
            XCTAssertEqual(w.sensor.verifyCalls, 1)
            XCTAssertEqual(w.store.fingerprintFailures, refused ? 1 : 0, "refused \(refused): the match refused leaves F as it was")
        }
    }

    // MARK: R12

    func testDamagedRecordFailsClosedButNeverLocksTheOwnerOut() {
        let w = World(store: .damaged(.badChecksum))
        let first = w.prompt()
        XCTAssertEqual(first.outcome, .failure(.authenticationFailed))
        XCTAssertTrue(w.log.has(.warning, "checksum mismatch"))
        XCTAssertEqual(w.store.writes, 1, "the replacement is stored at once")
        XCTAssertEqual(w.store.record?.fingerprintFailures, 5)
        XCTAssertEqual(w.store.record?.passcodeFailures, 5)
        XCTAssertEqual(w.prompter.asked, [])
        XCTAssertEqual(w.sensor.openCalls, 0)

        w.clock.advance(seconds: 60)
        XCTAssertEqual(w.prompt(answers: [rightAnswer]).outcome, .success(.passcode))
        XCTAssertEqual(w.prompter.asked, [Text.passcodePrompt])
        XCTAssertEqual(w.store.fingerprintFailures, 0)
        XCTAssertEqual(w.store.passcodeFailures, 0)
        XCTAssertEqual(w.prompt(script: [.match]).outcome, .success(.biometry), "fingerprint usable again")
    }

    func testDamagedRecordThenWrongPasscodeContinuesTheSchedule() {
        let w = World(store: .damaged(.foreign))
        w.prompt()
        w.clock.advance(seconds: 60)
        w.prompt(answers: [wrongAnswer])
        XCTAssertEqual(w.store.passcodeFailures, 6)
        w.prompt()
        XCTAssertEqual(w.prompter.told.last?.text, Text.waitPrefix + "5 minutes.")
        XCTAssertTrue(w.log.has(.warning, "reused uid"))
    }

    // MARK: R3 store failures mid-way

    func testAChargeThatCannotBeWrittenStopsThePhase() {
        let w = World()
        w.store.writesBeforeFailure = 1
        let result = w.prompt(script: [.noMatch])
        XCTAssertEqual(result.outcome, .internalError)
        XCTAssertEqual(result.pamCode, .systemError)
        XCTAssertEqual(w.sensor.verifyCalls, 1, "the second attempt was never started")
        XCTAssertEqual(w.store.fingerprintFailures, 1)
        XCTAssertEqual(w.verifier.beginCalls, 0)
        XCTAssertEqual(w.sensor.closeCalls, 1)
        XCTAssertTrue(w.log.has(.error, "attempt refused"))
    }

    func testEveryAttemptIsOnDiskBeforeItsVerdict() {
        let w = World()
        var seen: [[FailureEntry.Kind]] = []
        w.sensor.onVerify = { seen.append(w.store.record?.recentFailures.map(\.kind) ?? []) }
        w.verifier.probe = {
            seen.append(w.store.record?.recentFailures.map(\.kind) ?? [])
            return w.store.passcodeFailures
        }
        w.prompt(answers: [wrongAnswer], script: [.noMatch, SensorStep(.interrupted)])
        XCTAssertEqual(seen, [[.fingerprint], [.fingerprint, .fingerprint], [.fingerprint, .passcode]])
        XCTAssertEqual(w.verifier.probedAtVerify, [1])
        let entries = w.store.record?.recentFailures ?? []
        XCTAssertEqual(entries.map(\.kind), [.fingerprint, .passcode])
        for entry in entries {
            XCTAssertEqual(entry.service, bytes("sudo"))
            XCTAssertEqual(entry.tty, bytes("/dev/pts/3"))
            XCTAssertEqual(entry.wallSeconds, w.clock.wall)
        }
        XCTAssertEqual(Set(entries.map(\.sequence)).count, entries.count, "each attempt has its own sequence")
    }

    func testTheWinningAttemptLeavesNoFailureEntry() {
        let w = World()
        w.prompt(script: [.noMatch, .match])
        XCTAssertEqual(w.store.record?.recentFailures.count, 1, "the earlier no-match stays listed")
        XCTAssertEqual(w.store.record?.fingerprintFailures, 0)
        XCTAssertEqual(w.store.record?.lastFingerprintSuccessWallSeconds, w.clock.wall)
        XCTAssertEqual(w.store.record?.lastPasscodeSuccessWallSeconds, 0)
    }

    func testPasscodeSuccessRecordsTimeBootAndEnrollmentDigest() {
        let domain = (1...40).map { UInt8($0) }
        let w = World(sensor: FakeSensor(.available(domainState: domain)))
        w.clock.wall = 1_800_000_123
        XCTAssertEqual(w.prompt(answers: [rightAnswer], script: [.noMatch, .noMatch, .noMatch]).outcome, .success(.passcode))
        let record = w.store.record
        XCTAssertEqual(record?.lastPasscodeSuccessWallSeconds, 1_800_000_123)
        XCTAssertEqual(record?.lastPasscodeSuccessBootID, w.clock.bootIdentifier)
        XCTAssertEqual(record?.lastPasscodeSuccessDigest, Array(domain.prefix(32)))
        XCTAssertEqual(record?.recentFailures.count, 3, "the passcode's own entry is removed")
    }

    /// fprintd refuses every caller while polkit is down: the person is
    /// told the reader is not available, and a password typed then keeps
    /// the enrollment of the last password that read it, so the next
    /// prompt, once fprintd answers again, takes the finger (no "the
    /// enrolled fingerprints changed").
    func testAnErrorFromFprintdIsNeverRecordedAsAnEnrollment() {
        let enrolled: [UInt8] = [0xD0, 0x0D]
        let w = World(sensor: FakeSensor(.available(domainState: enrolled)))
        XCTAssertEqual(w.prompt(answers: [rightAnswer], script: [.noMatch, .noMatch, .noMatch]).outcome, .success(.passcode))
        XCTAssertEqual(w.store.record?.lastPasscodeSuccessDigest, RecordFormat.storedDigest(enrolled))
        w.sensor.availabilityValue = .failing
        let during = w.prompt(answers: [rightAnswer])
        XCTAssertEqual(during.outcome, .success(.passcode))
        XCTAssertTrue(w.prompter.saw(Text.failing, kind: .error), "the person hears why the finger is not asked for")
        XCTAssertEqual(w.store.record?.lastPasscodeSuccessDigest, RecordFormat.storedDigest(enrolled), "the error is not an enrollment")
        w.sensor.availabilityValue = .available(domainState: enrolled)
        XCTAssertEqual(w.prompt(script: [.match]).outcome, .success(.biometry), "the finger again, with no password rule")
        XCTAssertFalse(w.prompter.saw("enrolled fingerprints changed"))
        // A real change is still one: fprintd says "no prints", then a finger is enrolled.
        w.sensor.availabilityValue = .notEnrolled
        XCTAssertEqual(w.prompt(answers: [rightAnswer]).outcome, .success(.passcode))
        XCTAssertEqual(w.store.record?.lastPasscodeSuccessDigest, RecordFormat.zeroDigest, "no prints is an enrollment")
        w.sensor.availabilityValue = .available(domainState: enrolled)
        XCTAssertEqual(w.prompt(answers: [rightAnswer]).outcome, .success(.passcode))
        XCTAssertEqual(w.prompter.count("Your password is required: the enrolled fingerprints changed."), 1)
        // The password module's success (authsucc) follows the same rule.
        var engine = w.engine()
        XCTAssertTrue(engine.ledger.resetAfterPasswordSuccess(alice, enrollment: nil))
        XCTAssertEqual(w.store.record?.lastPasscodeSuccessDigest, RecordFormat.storedDigest(enrolled))
    }

    /// The reader's error is said to a known and an unknown name alike: it
    /// comes from fprintd whatever the name (R14).
    func testAFailingReaderIsSaidToUnknownNamesToo() {
        for mode in [InteractionMode.terminal, .prompt] {
            let known = World(sensor: FakeSensor(.failing))
            let unknown = World(sensor: FakeSensor(.failing))
            let knownResult = known.prompt(mode: mode, answers: [wrongAnswer])
            let unknownResult = unknown.prompt(mode: mode, scope: .unknownUser, answers: [rightAnswer])
            XCTAssertEqual(unknownResult, knownResult, "\(mode)")
            XCTAssertEqual(unknown.prompter.told, known.prompter.told, "\(mode)")
            XCTAssertTrue(known.prompter.saw(Text.failing, kind: .error), "\(mode)")
        }
    }

    func testPasscodeBufferIsWipedUnlessItIsTheAuthToken() {
        func run(_ configure: (World) -> Void, answers: [Answer], mode: InteractionMode = .terminal, policy: EvaluationPolicy = .owner)
            -> (EvaluationResult, SecretBuffer) {
            let w = World(sensor: FakeSensor(.unreachable))
            configure(w)
            let buffer = SecretBuffer()
            let result = w.prompt(policy: policy, mode: mode, answers: answers, passcode: buffer)
            return (result, buffer)
        }
        var (result, buffer) = run({ _ in }, answers: [rightAnswer])
        XCTAssertEqual(result.outcome, .success(.passcode))
        XCTAssertTrue(buffer.equals(bytes("correct horse")), "kept for PAM_AUTHTOK")
        (result, buffer) = run({ _ in }, answers: [wrongAnswer])
        XCTAssertEqual(result.pamCode, .authError)
        XCTAssertTrue(buffer.isEmpty)
        (result, buffer) = run({ $0.verifier.beginResult = false }, answers: [rightAnswer])
        XCTAssertEqual(result.outcome, .failure(.passcodeNotSet))
        XCTAssertTrue(buffer.isEmpty)
        (result, buffer) = run({ $0.store.failWrites = true }, answers: [rightAnswer])
        XCTAssertEqual(result.outcome, .internalError)
        XCTAssertTrue(buffer.isEmpty)
        (result, buffer) = run({ $0.verifier.forcedVerdict = .noVerdict }, answers: [rightAnswer])
        XCTAssertEqual(result.outcome, .failure(.passcodeNotSet))
        XCTAssertTrue(buffer.isEmpty)
        (result, buffer) = run({ $0.sensor.availabilityValue = .available(domainState: []) },
                               answers: [rightAnswer], mode: .prompt, policy: .biometrics)
        XCTAssertEqual(result.outcome, .failure(.userFallback))
        XCTAssertTrue(buffer.isEmpty)
        // A typed passcode refused by the back-off.
        let w = World(store: FakeStore(storedRecord(p: 4)))
        w.prompt(mode: .prompt, answers: [wrongAnswer])
        let refused = SecretBuffer()
        XCTAssertEqual(w.prompt(mode: .prompt, answers: [rightAnswer], passcode: refused).pamCode, .credentialsInsufficient)
        XCTAssertTrue(refused.isEmpty)
        // The unknown user's dummy check.
        let unknown = World()
        let dummy = SecretBuffer()
        XCTAssertEqual(unknown.prompt(scope: .unknownUser, answers: [rightAnswer], passcode: dummy).pamCode, .authError)
        XCTAssertTrue(dummy.isEmpty)
    }

    /// A passcode stack that gives no verdict refunds the whole charge: the
    /// count and the back-off that the charge started.
    func testNoVerdictRefundsTheChargeAndItsWait() {
        let w = World(sensor: FakeSensor(.unreachable), store: FakeStore(storedRecord(p: 4)))
        w.verifier.forcedVerdict = .noVerdict
        XCTAssertEqual(w.prompt(answers: [wrongAnswer]).outcome, .failure(.passcodeNotSet))
        XCTAssertEqual(w.store.passcodeFailures, 4)
        XCTAssertEqual(w.store.record?.backoffRemainingMilliseconds, 0)
        XCTAssertEqual(w.store.record?.recentFailures.count, 0)
        w.verifier.forcedVerdict = nil
        XCTAssertEqual(w.prompt(answers: [rightAnswer]).outcome, .success(.passcode), "no wait was earned")
    }

    /// An in-scope request without its user is the adapter's bug: refuse, touch nothing.
    func testInScopeRequestWithoutAUserIsAnInternalError() {
        let w = World()
        var engine = w.engine()
        var request = w.request()
        request.user = nil
        let result = engine.evaluate(request, policy: .owner, passcode: SecretBuffer())
        XCTAssertEqual(result.outcome, .internalError)
        XCTAssertEqual(result.pamCode, .systemError)
        XCTAssertEqual(w.store.transactions, 0)
        XCTAssertEqual(w.prompter.asked, [])
        XCTAssertEqual(w.sensor.availabilityCalls, 0)
    }

    // MARK: R14

    func testUnknownUserLooksLikeAKnownUserWithoutBiometrics() {
        for mode in [InteractionMode.terminal, .prompt] {
            for answer in [wrongAnswer, rightAnswer, .empty] {
                let known = World(sensor: FakeSensor(.notEnrolled))
                let unknown = World(sensor: FakeSensor(.available(domainState: [1])))
                let knownResult = known.prompt(mode: mode, answers: [answer == rightAnswer ? wrongAnswer : answer])
                let unknownResult = unknown.prompt(mode: mode, scope: .unknownUser, answers: [answer])
                XCTAssertEqual(unknownResult, knownResult, "\(mode) \(answer)")
                XCTAssertEqual(unknown.prompter.asked, known.prompter.asked)
                XCTAssertEqual(unknown.prompter.told, known.prompter.told)
                XCTAssertEqual(unknown.verifier.verifyCalls, known.verifier.verifyCalls, "a dummy verification runs")
                XCTAssertEqual(unknown.store.passcodeFailures, known.store.passcodeFailures, "counted alike")
                XCTAssertTrue(unknown.store.keys.allSatisfy { $0.0 == StateRecord.lookAlikeUID }, "never a real uid")
                // The same work before the first prompt, so that time does not tell them apart.
                XCTAssertEqual(unknown.sensor.availabilityCalls, known.sensor.availabilityCalls, "the same fprintd queries")
                XCTAssertEqual(unknown.sensor.openCalls, 0)
                XCTAssertEqual(unknown.store.transactions, known.store.transactions, "the same record reads under the lock")
                if answer != .empty {
                    XCTAssertEqual(unknown.verifier.begunFor, [bytes("alice")])
                    XCTAssertEqual(unknownResult.outcome, .failure(.authenticationFailed))
                    XCTAssertTrue(unknownResult.failDelay)
                }
            }
        }
    }

    /// R14: five wrong entries for an unknown name earn the same wait as for
    /// a known user, so the refusal cannot tell names apart.
    func testUnknownNamesEarnTheSameBackoffAsKnownUsers() {
        let known = World(sensor: FakeSensor(.unreachable))
        let unknown = World(sensor: FakeSensor(.unreachable))
        for _ in 0..<5 {
            known.prompt(answers: [wrongAnswer])
            unknown.prompt(scope: .unknownUser, answers: [wrongAnswer])
        }
        let knownRefusal = known.prompt(answers: [wrongAnswer])
        let unknownRefusal = unknown.prompt(scope: .unknownUser, answers: [wrongAnswer])
        XCTAssertEqual(unknownRefusal, knownRefusal)
        XCTAssertEqual(unknown.prompter.told.last?.text, Text.waitPrefix + "1 minute.")
        XCTAssertEqual(unknown.prompter.told, known.prompter.told)
        XCTAssertEqual(unknown.prompter.asked.count, known.prompter.asked.count)
    }

    /// A refund of an attempt charged before a success must not take away a
    /// later attempt's charge (its own count was reset by the success).
    func testARefundAfterASuccessNeverPaysForALaterCharge() {
        let w = World(sensor: FakeSensor(.unreachable))
        var engine = w.engine()
        guard case .charged(let early) = engine.ledger.chargePasscode(alice, w.request()) else { return XCTFail("not charged") }
        XCTAssertEqual(w.prompt(answers: [rightAnswer]).outcome, .success(.passcode))
        var later = w.engine()
        guard case .charged = later.ledger.chargePasscode(alice, w.request()) else { return XCTFail("not charged") }
        XCTAssertEqual(w.store.passcodeFailures, 1)
        later.ledger.refund(alice, kind: .passcode, sequence: early)
        XCTAssertEqual(w.store.passcodeFailures, 1, "the early attempt's count was already reset")
    }

    // MARK: Text

    func testReasonExpandsUserAndServiceAndNeutralisesControlBytes() {
        var options = unitOptions
        options.reason = bytes("Unlock %s for %u at 100%")
        let w = World(options: options)
        w.prompt(service: "swaylock", script: [.match])
        XCTAssertEqual(w.prompter.told.first?.text, "Unlock swaylock for alice at 100%. " + Text.place)

        let plain = World()
        let hostile = UserIdentity(uid: 1001, name: [0x65, 0x76, 0x1B, 0x5B, 0x32, 0x4A, 0x0A, 0xFF, 0x65])
        plain.prompt(hostile, script: [.match])
        XCTAssertEqual(plain.prompter.told.first?.text, "sudo needs to confirm your identity (ev?[2J??e). " + Text.place)
    }

    // MARK: canEvaluatePolicy

    func testCanEvaluateNeverPromptsNorCharges() {
        struct Case {
            var availability: SensorAvailability
            var f: Int
            var passcode: Bool
            var biometrics: Result<[UInt8], LAErrorCode>
            var owner: Result<[UInt8], LAErrorCode>
        }
        let state: [UInt8] = [0xAB, 0xCD]
        let cases = [
            Case(availability: .available(domainState: state), f: 0, passcode: true, biometrics: .success(state), owner: .success(state)),
            Case(availability: .available(domainState: state), f: 4, passcode: false, biometrics: .success(state), owner: .success(state)),
            Case(availability: .available(domainState: state), f: 5, passcode: true, biometrics: .failure(.biometryLockout), owner: .success([])),
            Case(availability: .available(domainState: state), f: 5, passcode: false, biometrics: .failure(.biometryLockout),
                 owner: .failure(.passcodeNotSet)),
            Case(availability: .notEnrolled, f: 0, passcode: true, biometrics: .failure(.biometryNotEnrolled), owner: .success([])),
            Case(availability: .noDevice, f: 0, passcode: true, biometrics: .failure(.biometryNotAvailable), owner: .success([])),
            Case(availability: .unreachable, f: 0, passcode: false, biometrics: .failure(.biometryNotAvailable),
                 owner: .failure(.passcodeNotSet)),
        ]
        for (index, item) in cases.enumerated() {
            for policy in [EvaluationPolicy.biometrics, .owner] {
                let w = World(sensor: FakeSensor(item.availability), verifier: FakeVerifier(begin: item.passcode),
                              store: FakeStore(storedRecord(f: item.f, p: 2)))
                var engine = w.engine()
                let answer = engine.canEvaluate(policy, user: alice)
                XCTAssertEqual(answer, policy == .owner ? item.owner : item.biometrics, "case \(index) \(policy)")
                XCTAssertEqual(w.prompter.asked, [], "case \(index): prompted")
                XCTAssertEqual(w.prompter.told, [], "case \(index): said something")
                XCTAssertEqual(w.sensor.openCalls, 0, "case \(index): claimed the reader")
                XCTAssertEqual(w.verifier.verifyCalls, 0)
                XCTAssertEqual(w.verifier.endCalls, w.verifier.beginResult ? w.verifier.beginCalls : 0)
                XCTAssertEqual(w.store.writes, 0, "case \(index): charged")
                XCTAssertEqual(w.store.fingerprintFailures, item.f)
                XCTAssertEqual(w.store.passcodeFailures, 2)
            }
        }
        let broken = World()
        broken.store.failReads = true
        var engine = broken.engine()
        XCTAssertEqual(engine.canEvaluate(.owner, user: alice), .failure(.invalidContext))
    }

    func testDomainStateFollowsEnrollment() {
        let w = World(sensor: FakeSensor(.available(domainState: [1, 2, 3])))
        var engine = w.engine()
        let before = engine.canEvaluate(.biometrics, user: alice)
        w.sensor.availabilityValue = .available(domainState: [1, 2, 4])
        let after = engine.canEvaluate(.biometrics, user: alice)
        XCTAssertEqual(before, .success([1, 2, 3]))
        XCTAssertEqual(after, .success([1, 2, 4]))
    }

    // MARK: R11

    func testResetAfterPasswordSuccessClearsCountsAndWait() {
        var record = storedRecord(f: 5, p: 7)
        record.backoffRemainingMilliseconds = 900_000
        record.backoffBootID = ManualClock().bootIdentifier
        record.backoffAnchorBootNanoseconds = ManualClock().boot
        let w = World(store: FakeStore(record))
        var engine = w.engine()
        XCTAssertTrue(engine.ledger.resetAfterPasswordSuccess(alice, enrollment: [0xD0, 0x0D]))
        XCTAssertEqual(w.store.record?.fingerprintFailures, 0)
        XCTAssertEqual(w.store.record?.passcodeFailures, 0)
        XCTAssertEqual(w.store.record?.backoffRemainingMilliseconds, 0)
        XCTAssertEqual(w.prompter.asked, [])
        XCTAssertEqual(w.prompter.told, [])
        XCTAssertEqual(w.sensor.availabilityCalls + w.verifier.beginCalls, 0)
        XCTAssertEqual(w.prompt(answers: [rightAnswer], script: [.noMatch, .noMatch, .noMatch]).outcome, .success(.passcode))
        XCTAssertEqual(w.sensor.verifyCalls, 3, "unlocked: 3 attempts again")
    }

    func testThePasswordModulesSuccessIsRecordedAsACorrectPasswordEvenWithoutARecord() {
        let w = World(options: Options())
        var engine = w.engine()
        XCTAssertTrue(engine.ledger.resetAfterPasswordSuccess(alice, enrollment: [0xD0, 0x0D]))
        XCTAssertEqual(w.store.writes, 1)
        XCTAssertEqual(w.store.record?.lastPasscodeSuccessBootID, w.clock.bootIdentifier)
        XCTAssertEqual(w.store.record?.lastUnlockMethod, .passcode)
        // The boot rule is satisfied by it: the finger works in the next prompt.
        XCTAssertEqual(w.prompt(policy: .biometrics, script: [.match]).outcome, .success(.biometry))
    }

    func testLocalauthResetOfAnAbsentRecordWritesNothing() {
        let w = World()
        var engine = w.engine()
        XCTAssertTrue(engine.ledger.resetCounts(alice))
        XCTAssertEqual(w.store.writes, 0)
        XCTAssertNil(w.store.record)
    }

    func testResetThatCannotBeWrittenReportsFailure() {
        let w = World(store: FakeStore(storedRecord(f: 5, p: 1)))
        w.store.failWrites = true
        var engine = w.engine()
        XCTAssertFalse(engine.ledger.resetAfterPasswordSuccess(alice, enrollment: [0xD0, 0x0D]))
        XCTAssertEqual(w.store.record?.fingerprintFailures, 5)
        XCTAssertTrue(w.log.has(.error, "cannot reset"))
    }

    // MARK: An app's reuse window

    /// A success stands in for an app's prompt only in the same logind
    /// session and boot, within the window on the boot clock, with no
    /// failure since; the wall clock changes nothing.
    func testTheReuseWindowNeedsARecentSuccessInTheSameSession() {
        let w = World()
        XCTAssertEqual(w.prompt(script: [.match], session: "3").outcome, .success(.biometry))
        var ledger = w.engine().ledger
        XCTAssertEqual(ledger.recentUnlock(alice, session: bytes("3"), withinSeconds: 60), .biometry)
        XCTAssertNil(ledger.recentUnlock(alice, session: bytes("4"), withinSeconds: 60), "another session")
        XCTAssertNil(ledger.recentUnlock(alice, session: [], withinSeconds: 60), "no session")
        XCTAssertNil(ledger.recentUnlock(alice, session: bytes("3"), withinSeconds: 0), "no window")

        w.clock.advance(seconds: 61)
        XCTAssertNil(ledger.recentUnlock(alice, session: bytes("3"), withinSeconds: 60), "the window passed")
        XCTAssertEqual(ledger.recentUnlock(alice, session: bytes("3"), withinSeconds: 300), .biometry)
        w.clock.wall += 30 * 86_400
        XCTAssertEqual(ledger.recentUnlock(alice, session: bytes("3"), withinSeconds: 300), .biometry, "wall clock forward")
        w.clock.wall -= 60 * 86_400
        XCTAssertEqual(ledger.recentUnlock(alice, session: bytes("3"), withinSeconds: 300), .biometry, "wall clock back")
        w.clock.boot -= 3_600_000_000_000
        XCTAssertNil(ledger.recentUnlock(alice, session: bytes("3"), withinSeconds: 300), "a success in the future")
        w.clock.boot += 3_600_000_000_000

        let savedBoot = w.clock.bootIdentifier
        w.clock.bootIdentifier = [UInt8](repeating: 9, count: 16)
        XCTAssertNil(ledger.recentUnlock(alice, session: bytes("3"), withinSeconds: 300), "another boot")
        w.clock.bootIdentifier = savedBoot

        // A failure since the success ends the window.
        _ = w.prompt(answers: [wrongAnswer], script: [.noMatch, .noMatch, .noMatch], session: "3")
        XCTAssertNil(ledger.recentUnlock(alice, session: bytes("3"), withinSeconds: 300), "a failure since")
        // A password success in another session moves it there.
        XCTAssertEqual(w.prompt(answers: [rightAnswer], script: [.noMatch, .noMatch], session: "c7").outcome, .success(.passcode))
        XCTAssertEqual(ledger.recentUnlock(alice, session: bytes("c7"), withinSeconds: 10), .passcode)
        XCTAssertNil(ledger.recentUnlock(alice, session: bytes("3"), withinSeconds: 300))
    }
}
