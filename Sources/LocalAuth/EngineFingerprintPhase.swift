// The engine's fingerprint phase: the reader's attempts, each charged
// before it is judged (R3), what ends them, and touch or type (R16). The
// rest of the evaluation is in Engine.swift.

extension Engine {
    enum BiometricPhaseEnd: Equatable {
        case success
        case fallback
        case cancelled
        /// Every attempt this prompt allows failed.
        case triesUsed
        /// Ended without a verdict (timeout, device gone): the error to report.
        case ended(LAErrorCode)
        /// The app lost the person (the session locked, a switch of user):
        /// the whole evaluation ends, the password is not asked.
        case personLeft
        /// The store could not count the attempt: nothing was judged.
        case unrecorded
        /// Touch or type: the person typed the password and pressed Enter
        /// while the reader waited.
        case typed
        /// Touch or type: Enter on an empty line; the password is asked.
        case passwordWanted
    }

    /// The reader's wait. With `touchOrType` (policy owner; terminal mode,
    /// or a dialog whose prompt stays open) the password can be typed while
    /// the reader waits, when the prompter can take it: Enter after a
    /// password ends the wait with it, Ctrl-C cancels, and no message
    /// offers Ctrl-C as the way to the password.
    mutating func biometricPhase(_ request: Request, user: UserIdentity, record: StateRecord,
                                 touchOrType: Bool) -> BiometricPhaseEnd {
        // While the password back-off would refuse a typed password
        // unchecked, typing is not offered. At a terminal the keys are still
        // read: Enter (or a password) ends the wait at once and the wait is
        // said, and Ctrl-C cancels even where a program keeps it from being
        // a signal (vlock). A dialog has no other prompt.
        let offersTyping = request.promptStaysOpen || ledger.backoffRemaining(user) == 0
        let typable = touchOrType && (offersTyping || request.mode == .terminal)
        // A terminal's keys are taken from before the reader is claimed
        // (nothing typed meanwhile is shown); so are those a helper's
        // client reads.
        let keysRead = request.mode == .terminal || request.clientReadsKeys
        var typing = typable && keysRead && prompter.watchKeys()
        let scanType: ScanType
        switch sensor.open(userName: user.name) {
        case .opened(let type): scanType = type
        case .busy:
            // Said even to a silent caller: the person must know that a
            // touch now would go to another prompt (R15).
            say(UserText.readerBusy, .info, request)
            return .ended(.biometryNotAvailable)
        case .failed:
            return .ended(.biometryNotAvailable)
        }
        defer { sensor.close() }
        // A dialog's prompt opens once the reader is claimed, and says both
        // ways itself: while it is open nothing else can be said.
        if typable && offersTyping && request.mode == .prompt && request.promptStaysOpen {
            typing = prompter.leavePromptOpen(UserText.dialogTouchOrType(scanType: scanType))
        }

        // How many attempts this prompt may make: first from the record read
        // at the start, then from what each charge found under the lock
        // (another prompt's success or miss meanwhile changes it).
        let options = self.options
        /// This prompt's attempts so far plus what the lockout leaves, given
        /// F on record apart from an attempt still in flight; at most max_tries.
        func attemptsAllowed(after failures: Int, onRecord: Int) -> Int {
            min(options.maxTries, failures + max(0, options.lockout - onRecord))
        }
        var allowed = attemptsAllowed(after: 0, onRecord: record.fingerprintFailures)
        var failuresOnRecord = record.fingerprintFailures
        let deadline = ledger.clock.bootNanoseconds() + Int64(options.timeoutSeconds) * 1_000_000_000
        let offersFallback = !options.fallbackTitle.isEmpty
        var failures = 0
        // With instruction_in_prompt the first prompt said it all: a message
        // now would hold the reader back until a key press (xscreensaver).
        if typing && offersTyping {
            if keysRead { say(UserText.touchOrType(request, options: options, scanType: scanType), .info, request) }
        } else if !(request.mode == .prompt && options.wantsInstructionInPrompt(service: request.service)) {
            say(UserText.instruction(request, options: options, scanType: scanType,
                                     fallbackOffered: offersFallback && options.fallbackAfter == 0), .info, request)
        }
        if offersFallback && options.fallbackAfter == 0 && !typing { prompter.offerFallback(printableText(options.fallbackTitle)) }
        // An app's wait asks logind now and then whether the person is still there.
        let watches = BiometryRules.cancelsWhenThePersonLeaves(service: request.service)
        var watched = seat
        while failures < allowed {
            let charge = ledger.chargeFingerprint(user, request)
            let sequence: UInt64
            switch charge {
            case .charged(let value, let counted):
                sequence = value
                failuresOnRecord = counted
                allowed = attemptsAllowed(after: failures, onRecord: counted - 1)
            case .limitReached:
                say(UserText.locked, .error, request)
                return .ended(.biometryLockout)
            case .storeFailed:
                return .unrecorded
            }
            var conversation = prompter
            let end = sensor.verifyAttempt(deadline: deadline, onHint: { hint in conversation.tell(UserText.hint(hint), .info) },
                                           stillWanted: { !watches || !BiometryRules.appLostThePerson(watched.observe(), user: user) })
            prompter = conversation
            switch end {
            case .match:
                // logind is asked again before a match counts: a screen
                // locked (or a session switched, a lid closed) during the
                // wait means the touch was meant for something else. The
                // finger was right, so nothing stays charged. The reader,
                // needed no more either way, is let go meanwhile.
                sensor.letGo()
                if let denial = BiometryRules.touchDenial(seat.observe(), user: user, service: request.service, options: options) {
                    ledger.refund(user, kind: .fingerprint, sequence: sequence)
                    say(UserText.blocked(.touch(denial), request), .error, request)
                    ledger.log.log(.notice, "a match for \(printableText(user.name)) (uid \(user.uid)) from service "
                                   + "\(printableText(request.service)) not used: \(denial.statusText)")
                    return .ended(.biometryNotAvailable)
                }
                ledger.recordSuccess(user, method: .biometry, sequence: sequence, session: request.session)
                return .success
            case .noMatch:
                failures += 1
                // A Ctrl-C that came while this finger was being judged is
                // the answer to this attempt: it ends the phase as it would
                // have before the verdict, and no next attempt is charged.
                if sensor.interruptPending() {
                    say(UserText.notRecognized, .error, request)
                    let end = interruptedPhaseEnd(failuresBefore: failures - 1, offersFallback: offersFallback)
                    // A miss that reached the lockout is said as such, and
                    // ends as that miss would have without the Ctrl-C,
                    // unless the Ctrl-C cancelled.
                    // Another prompt's success may have reset the count.
                    if failuresOnRecord >= options.lockout, let fresh = ledger.snapshot(user) {
                        failuresOnRecord = fresh.fingerprintFailures
                    }
                    guard failuresOnRecord >= options.lockout else { return end }
                    say(UserText.locked, .error, request)
                    return end == .cancelled || end == .typed ? end : .triesUsed
                }
                // Out of attempts by the lockout as last counted: another
                // prompt may have reset the count meanwhile, so look again.
                if failures >= allowed && allowed < options.maxTries, let fresh = ledger.snapshot(user) {
                    failuresOnRecord = fresh.fingerprintFailures
                    allowed = attemptsAllowed(after: failures, onRecord: fresh.fingerprintFailures)
                }
                let fallbackNow = offersFallback && failures >= options.fallbackAfter
                if failures < allowed && typing && offersTyping {
                    say(UserText.noMatchTouchOrType, .error, request)
                } else if failures < allowed {
                    // Keys read (the back-off's wait): Ctrl-C cancels, so no fallback is offered.
                    say(UserText.noMatch(options, fallbackOffered: fallbackNow && request.mode == .terminal && !typing), .error, request)
                    if offersFallback && failures == options.fallbackAfter && !typing {
                        prompter.offerFallback(printableText(options.fallbackTitle))
                    }
                } else {
                    say(UserText.notRecognized, .error, request)
                }
            case .interrupted:
                ledger.refund(user, kind: .fingerprint, sequence: sequence)
                return interruptedPhaseEnd(failuresBefore: failures, offersFallback: offersFallback)
            case .stoppedAfterPossibleScan(let reason, let denial):
                // The reader may have judged a finger whose verdict never
                // reached us: the attempt stays counted (R3).
                ledger.log.log(.notice, "fingerprint attempt for uid \(user.uid) stopped before its verdict could be read; "
                               + "it stays counted (\(denial.explanation))")
                switch reason {
                case .interrupted:
                    return interruptedPhaseEnd(failuresBefore: failures, offersFallback: offersFallback)
                case .timeout:
                    say(UserText.timedOut, .info, request, status: true)
                    return .ended(.systemCancel)
                case .deviceError:
                    say(UserText.stopped, .info, request, status: true)
                    return .ended(.systemCancel)
                case .sessionLeft:
                    return .personLeft
                }
            case .timeout:
                ledger.refund(user, kind: .fingerprint, sequence: sequence)
                say(UserText.timedOut, .info, request, status: true)
                return .ended(.systemCancel)
            case .sessionLeft:
                // The app lost the person (the screen locked, a switch of
                // user): the system cancels the sheet; no finger was judged.
                ledger.refund(user, kind: .fingerprint, sequence: sequence)
                ledger.log.log(.notice, "an app's prompt for uid \(user.uid) cancelled: the session locked or is no longer the active one")
                return .personLeft
            case .disconnected:
                ledger.refund(user, kind: .fingerprint, sequence: sequence)
                say(UserText.disconnected, .info, request, status: true)
                return .ended(.biometryDisconnected)
            case .deviceError, .vanished:
                ledger.refund(user, kind: .fingerprint, sequence: sequence)
                say(UserText.stopped, .info, request, status: true)
                return .ended(.systemCancel)
            }
        }
        if failuresOnRecord >= options.lockout { say(UserText.locked, .error, request) }
        return .triesUsed
    }

    /// Ctrl-C chooses the fallback once it was offered, and cancels before.
    /// A fallback takes the Ctrl-C; a cancel leaves it pending so the
    /// application sees it once the signal mask is restored (R16).
    mutating func interruptedPhaseEnd(failuresBefore failures: Int, offersFallback: Bool) -> BiometricPhaseEnd {
        let fallbackNow = offersFallback && failures >= options.fallbackAfter
        switch prompter.takeChoice() {
        case .cancel?: return .cancelled
        case .fallback?: return fallbackNow ? .fallback : .cancelled
        case .typedPassword?: return .typed
        case .passwordWanted?: return .passwordWanted
        case nil:
            if fallbackNow { sensor.consumeInterrupt() }
            return fallbackNow ? .fallback : .cancelled
        }
    }
}
