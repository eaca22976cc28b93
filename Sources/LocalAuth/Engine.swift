/// The policy engine (SPEC §3): fingerprint first, passcode fallback,
/// lockout accounting. Pure: everything outside is reached through the
/// protocols of Dependencies.swift, so every rule is table-tested with fakes.

/// The user an in-scope request is for.
public struct UserIdentity: Equatable {
    public var uid: UInt32
    public var name: [UInt8]
    public init(uid: UInt32, name: [UInt8]) {
        self.uid = uid
        self.name = name
    }
}

/// One prompt's inputs, decided by the adapter.
public struct Request: Equatable {
    public var scope: ScopeDecision
    /// The target as PAM named it (for the unknown-user path and messages).
    public var userName: [UInt8]
    /// Set when `scope` is `.inScope`.
    public var user: UserIdentity?
    public var service: [UInt8]
    public var tty: [UInt8]
    public var remoteHost: [UInt8]
    public var mode: InteractionMode
    /// `PAM_SILENT` or the `silent` option: suppresses status chatter only (R15).
    public var silent: Bool

    public init(scope: ScopeDecision, userName: [UInt8], user: UserIdentity?, service: [UInt8], tty: [UInt8] = [],
                remoteHost: [UInt8] = [], mode: InteractionMode, silent: Bool = false) {
        self.scope = scope
        self.userName = userName
        self.user = user
        self.service = service
        self.tty = tty
        self.remoteHost = remoteHost
        self.mode = mode
        self.silent = silent
    }
}

/// What the adapter must do after an evaluation.
public struct EvaluationResult: Equatable {
    public var outcome: Outcome
    /// Ask for the application's failure delay (a charged wrong passcode).
    public var failDelay: Bool
    public var pamCode: PAMCode { ResultTable.pamCode(for: outcome) }

    public init(_ outcome: Outcome, failDelay: Bool = false) {
        self.outcome = outcome
        self.failDelay = failDelay
    }
}

/// The instant an operation happens, read once per store transaction.
public struct Moment: Equatable {
    public var boot: Int64
    public var wall: Int64
    public var bootID: [UInt8]
}

public struct Engine<Sensor: FingerprintSensor, Verifier: PasscodeVerifier, Conversation: Prompter,
                     Store: StateStore, Time: Clock, Log: EventLog> {
    public var options: Options
    public var sensor: Sensor
    public var verifier: Verifier
    public var prompter: Conversation
    public var store: Store
    public var clock: Time
    public var log: Log

    public init(options: Options, sensor: Sensor, verifier: Verifier, prompter: Conversation, store: Store, clock: Time, log: Log) {
        self.options = options
        self.sensor = sensor
        self.verifier = verifier
        self.prompter = prompter
        self.store = store
        self.clock = clock
        self.log = log
    }

    // MARK: - Evaluation

    /// Runs one prompt. `passcode` receives whatever the person types; the
    /// caller wipes it, after using it as `PAM_AUTHTOK` on passcode success.
    public mutating func evaluate(_ request: Request, policy: LAPolicy, passcode: SecretBuffer) -> EvaluationResult {
        switch request.scope {
        case .outOfScope:
            return EvaluationResult(.outOfScope)
        case .unknownUser:
            return lookAlikeForUnknownUser(request, policy: policy, passcode: passcode)
        case .inScope:
            break
        }
        guard let user = request.user else { return EvaluationResult(.internalError) }
        guard let record = snapshot(user) else { return EvaluationResult(.internalError) }

        let availability = sensor.availability(userName: user.name)
        var domainState: [UInt8] = []
        var biometryError: LAError? = nil
        switch availability {
        case .available(let state): domainState = state
        case .notEnrolled: biometryError = .biometryNotEnrolled
        case .noDevice, .unreachable: biometryError = .biometryNotAvailable
        }
        if biometryError == nil && record.fingerprintFailures >= options.lockout {
            biometryError = .biometryLockout
            say(lockedText, .error, request)
        }

        if policy == .biometrics {
            if let biometryError { return EvaluationResult(.failure(biometryError)) }
            if request.mode == .prompt {
                switch prompter.ask(firstPromptText, into: passcode) {
                case .entered:
                    passcode.wipe()
                    return EvaluationResult(.failure(.userFallback))
                case .failed: return EvaluationResult(.failure(.userCancel))
                case .empty: break
                }
            }
            switch biometricPhase(request, user: user, record: record) {
            case .success: return EvaluationResult(.success(.biometry))
            case .fallback: return EvaluationResult(.failure(.userFallback))
            case .cancelled: return EvaluationResult(.failure(.userCancel))
            case .triesUsed: return EvaluationResult(.failure(.authenticationFailed))
            case .ended(let error): return EvaluationResult(.failure(error))
            case .internalError: return EvaluationResult(.internalError)
            }
        }

        // Policy owner: fingerprint if usable, then the passcode.
        var passcodeEntered = false
        if biometryError == nil {
            if request.mode == .prompt {
                switch prompter.ask(firstPromptText, into: passcode) {
                case .entered: passcodeEntered = true
                case .failed: return EvaluationResult(.failure(.userCancel))
                case .empty: break
                }
            }
            if !passcodeEntered {
                switch biometricPhase(request, user: user, record: record) {
                case .success: return EvaluationResult(.success(.biometry))
                case .cancelled: return EvaluationResult(.failure(.userCancel))
                case .internalError: return EvaluationResult(.internalError)
                case .fallback, .triesUsed, .ended: break
                }
            }
        }
        return passcodePhase(request, user: user, passcode: passcode, alreadyEntered: passcodeEntered, domainState: domainState)
    }

    /// R14: an unknown user sees what a known user without usable biometrics
    /// sees: the passcode prompt, a real (dummy) verification, the delay, a
    /// failure, and the same back-off, counted in a look-alike record filed
    /// under a hash of the name (so five tries cannot tell names apart).
    /// The verdict is ignored: an unknown user never succeeds.
    /// It also does a known user's work before the first prompt, in the
    /// same order (a record read under its lock, the same fprintd queries
    /// for the name), so the time to the prompt does not tell them apart.
    mutating func lookAlikeForUnknownUser(_ request: Request, policy: LAPolicy, passcode: SecretBuffer) -> EvaluationResult {
        let pseudo = UserIdentity(uid: FileStateStore.lookAlikeUID, name: request.userName)
        let nameFits = !request.userName.isEmpty && request.userName.count <= RecordFormat.maxNameLength
        if nameFits { _ = snapshot(pseudo) }
        _ = sensor.availability(userName: request.userName)
        if policy == .biometrics { return EvaluationResult(.failure(.biometryNotAvailable)) }
        guard nameFits else {
            switch prompter.ask(passcodePromptText, into: passcode) {
            case .failed, .empty: return EvaluationResult(.failure(.userCancel))
            case .entered: break
            }
            if verifier.begin(userName: request.userName) {
                _ = verifier.verify(passcode)
                verifier.end()
            }
            passcode.wipe()
            return EvaluationResult(.failure(.authenticationFailed), failDelay: true)
        }
        return passcodePhase(request, user: pseudo, passcode: passcode, alreadyEntered: false, domainState: [], lookAlike: true)
    }

    // MARK: - Fingerprint phase

    enum BiometricPhaseEnd: Equatable {
        case success
        case fallback
        case cancelled
        /// Every attempt this prompt allows failed.
        case triesUsed
        /// Ended without a verdict (timeout, device gone): the error to report.
        case ended(LAError)
        case internalError
    }

    mutating func biometricPhase(_ request: Request, user: UserIdentity, record: StateRecord) -> BiometricPhaseEnd {
        let scanType: ScanType
        switch sensor.open(userName: user.name) {
        case .opened(let type): scanType = type
        case .busy:
            say("The fingerprint reader is in use by another prompt.", .info, request, status: true)
            return .ended(.biometryNotAvailable)
        case .failed:
            return .ended(.biometryNotAvailable)
        }
        defer { sensor.close() }

        let allowed = min(options.maxTries, options.lockout - record.fingerprintFailures)
        let deadline = clock.bootNanoseconds() + Int64(options.timeoutSeconds) * 1_000_000_000
        let offersFallback = !options.fallbackTitle.isEmpty
        var failures = 0
        say(instructionText(request, scanType: scanType, fallbackOffered: offersFallback && options.fallbackAfter == 0), .info, request)
        while failures < allowed {
            let charge = chargeFingerprint(user, request)
            let sequence: UInt64
            switch charge {
            case .charged(let value): sequence = value
            case .limitReached:
                say(lockedText, .error, request)
                return .ended(.biometryLockout)
            case .storeFailed: return .internalError
            }
            var conversation = prompter
            let end = sensor.verifyAttempt(deadline: deadline) { hint in conversation.tell(Self.hintText(hint), .info) }
            prompter = conversation
            switch end {
            case .match:
                recordSuccess(user, method: .biometry, sequence: sequence, domainState: [])
                return .success
            case .noMatch:
                failures += 1
                let fallbackNow = offersFallback && failures >= options.fallbackAfter
                if failures < allowed {
                    say(noMatchText(fallbackOffered: fallbackNow && request.mode == .terminal), .error, request)
                } else {
                    say("Fingerprint not recognized.", .error, request)
                }
            case .interrupted:
                refund(user, kind: .fingerprint, sequence: sequence)
                return interruptedPhaseEnd(failuresBefore: failures, offersFallback: offersFallback)
            case .stoppedAfterPossibleScan(let reason):
                // The reader may have judged a finger whose verdict never
                // reached us: the attempt stays counted (R3).
                log.log(.notice, "fingerprint attempt for uid \(user.uid) stopped before its verdict could be read; it stays counted")
                switch reason {
                case .interrupted:
                    return interruptedPhaseEnd(failuresBefore: failures, offersFallback: offersFallback)
                case .timeout:
                    say("Timed out waiting for a fingerprint.", .info, request, status: true)
                    return .ended(.systemCancel)
                case .deviceError:
                    say("The fingerprint reader stopped working.", .info, request, status: true)
                    return .ended(.systemCancel)
                }
            case .timeout:
                refund(user, kind: .fingerprint, sequence: sequence)
                say("Timed out waiting for a fingerprint.", .info, request, status: true)
                return .ended(.systemCancel)
            case .disconnected:
                refund(user, kind: .fingerprint, sequence: sequence)
                say("The fingerprint reader was disconnected.", .info, request, status: true)
                return .ended(.biometryDisconnected)
            case .deviceError, .vanished:
                refund(user, kind: .fingerprint, sequence: sequence)
                say("The fingerprint reader stopped working.", .info, request, status: true)
                return .ended(.systemCancel)
            }
        }
        if record.fingerprintFailures + failures >= options.lockout { say(lockedText, .error, request) }
        return .triesUsed
    }

    /// Ctrl-C chooses the fallback once it was offered, and cancels before.
    /// A fallback takes the Ctrl-C; a cancel leaves it pending so the
    /// application sees it once the signal mask is restored (R16).
    mutating func interruptedPhaseEnd(failuresBefore failures: Int, offersFallback: Bool) -> BiometricPhaseEnd {
        let fallbackNow = offersFallback && failures >= options.fallbackAfter
        if fallbackNow { sensor.consumeInterrupt() }
        return fallbackNow ? .fallback : .cancelled
    }

    // MARK: - Passcode phase

    mutating func passcodePhase(_ request: Request, user: UserIdentity, passcode: SecretBuffer, alreadyEntered: Bool,
                                domainState: [UInt8], lookAlike: Bool = false) -> EvaluationResult {
        if !alreadyEntered {
            switch backoffRemaining(user) {
            case nil: return EvaluationResult(.internalError)
            case .some(let milliseconds) where milliseconds > 0:
                say(waitText(milliseconds), .error, request)
                return EvaluationResult(.failure(.authenticationFailed))
            default: break
            }
            switch prompter.ask(passcodePromptText, into: passcode) {
            case .failed, .empty: return EvaluationResult(.failure(.userCancel))
            case .entered: break
            }
        }
        guard verifier.begin(userName: user.name) else {
            passcode.wipe()
            log.log(.error, "passcode service \(printableText(options.passcodeService)) cannot run")
            return EvaluationResult(.failure(.passcodeNotSet))
        }
        defer { verifier.end() }
        let sequence: UInt64
        switch chargePasscode(user, request) {
        case .charged(let value): sequence = value
        case .waiting(let milliseconds):
            passcode.wipe()
            say(waitText(milliseconds), .error, request)
            return EvaluationResult(.failure(.authenticationFailed))
        case .storeFailed:
            passcode.wipe()
            return EvaluationResult(.internalError)
        }
        var verdict = verifier.verify(passcode)
        if lookAlike && verdict == .correct { verdict = .wrong }
        switch verdict {
        case .correct:
            recordSuccess(user, method: .passcode, sequence: sequence, domainState: domainState)
            return EvaluationResult(.success(.passcode))
        case .noVerdict:
            passcode.wipe()
            refund(user, kind: .passcode, sequence: sequence)
            log.log(.error, "passcode service \(printableText(options.passcodeService)) did not ask for the passcode; check its stack")
            return EvaluationResult(.failure(.passcodeNotSet))
        case .wrong:
            passcode.wipe()
            log.log(.notice, "wrong passcode for \(printableText(user.name)) (uid \(user.uid)) from service \(printableText(request.service))")
            return EvaluationResult(.failure(.authenticationFailed), failDelay: true)
        }
    }

    // MARK: - Preflight and R11

    /// `canEvaluatePolicy`: never prompts, never charges. The success value is
    /// the domain state (empty when biometrics are not in use).
    public mutating func canEvaluate(_ policy: LAPolicy, user: UserIdentity) -> Result<[UInt8], LAError> {
        guard let record = snapshot(user) else { return .failure(.invalidContext) }
        var biometry: Result<[UInt8], LAError>
        switch sensor.availability(userName: user.name) {
        case .available(let state): biometry = .success(state)
        case .notEnrolled: biometry = .failure(.biometryNotEnrolled)
        case .noDevice, .unreachable: biometry = .failure(.biometryNotAvailable)
        }
        if case .success = biometry, record.fingerprintFailures >= options.lockout { biometry = .failure(.biometryLockout) }
        if policy == .biometrics { return biometry }
        if case .success = biometry { return biometry }
        guard verifier.begin(userName: user.name) else { return .failure(.passcodeNotSet) }
        verifier.end()
        return .success([])
    }

    /// R11: the password module of a biometrics-policy stack succeeded for
    /// this user after this module's own prompt: reset `F` and `P`.
    public mutating func resetAfterPasswordSuccess(_ user: UserIdentity) -> Bool {
        let moment = now()
        do {
            return try store.withRecord(uid: user.uid, userName: user.name) { record, status -> Bool in
                guard record != nil || status != .absent else { return true }
                var current = record ?? StateRecord(uid: user.uid, userName: user.name, createdWallSeconds: moment.wall)
                current.fingerprintFailures = 0
                current.passcodeFailures = 0
                current.backoffRemainingMilliseconds = 0
                current.settleFailures()
                record = current
                return true
            }
        } catch {
            log.log(.error, "cannot reset the record of uid \(user.uid): \(storeFailureText(error, directory: options.stateDir))")
            return false
        }
    }

    /// What the store holds for a user, read without changing anything (for
    /// `localauth status`): a damaged record is reported, not replaced.
    public struct Inspection: Equatable {
        public var status: LoadStatus
        public var record: StateRecord?
        public var remainingBackoffMilliseconds: Int64
        public var fingerprintLocked: Bool
    }

    public mutating func inspect(_ user: UserIdentity) -> Inspection? {
        let moment = now()
        let rules = RecordRules(options: options, backoffApplies: backoffApplies(user))
        let lockout = options.lockout
        do {
            return try store.withRecord(uid: user.uid, userName: user.name) { record, status -> Inspection in
                let remaining = record.map { rules.remainingBackoff($0, moment: moment) } ?? 0
                let locked = (record?.fingerprintFailures ?? 0) >= lockout
                return Inspection(status: status, record: record, remainingBackoffMilliseconds: remaining, fingerprintLocked: locked)
            }
        } catch {
            log.log(.error, "cannot read the record of uid \(user.uid): \(storeFailureText(error, directory: options.stateDir))")
            return nil
        }
    }

    // MARK: - Store transactions

    mutating func now() -> Moment {
        Moment(boot: clock.bootNanoseconds(), wall: clock.wallSeconds(), bootID: clock.bootID())
    }

    /// Whether back-off applies to this user (root is exempt unless
    /// `even_deny_root`, R9).
    func backoffApplies(_ user: UserIdentity) -> Bool { user.uid != 0 || options.evenDenyRoot }

    /// Reads the record, replacing a damaged one per R12 (and saying so).
    public mutating func snapshot(_ user: UserIdentity) -> StateRecord? {
        let moment = now()
        let rules = RecordRules(options: options, backoffApplies: backoffApplies(user))
        var damage: RecordDamage? = nil
        let result: StateRecord
        do {
            result = try store.withRecord(uid: user.uid, userName: user.name) { record, status -> StateRecord in
                if case .damaged(let why) = status { damage = why }
                var current = rules.current(&record, status, user: user, moment: moment)
                if rules.reanchorBackoff(&current, moment: moment) { record = current }
                return current
            }
        } catch {
            log.log(.error, "cannot read the record of uid \(user.uid): \(storeFailureText(error, directory: options.stateDir))")
            return nil
        }
        if let damage {
            log.log(.warning, "record of uid \(user.uid) was replaced (\(damage.text)): fingerprint locked, passcode after the first back-off")
        }
        return result
    }

    public enum FingerprintCharge: Equatable {
        case charged(UInt64)
        case limitReached
        case storeFailed
    }

    /// R3: under the lock, check the limit and durably count the attempt as failed.
    public mutating func chargeFingerprint(_ user: UserIdentity, _ request: Request) -> FingerprintCharge {
        let moment = now()
        let rules = RecordRules(options: options, backoffApplies: backoffApplies(user))
        do {
            return try store.withRecord(uid: user.uid, userName: user.name) { record, status -> FingerprintCharge in
                var current = rules.current(&record, status, user: user, moment: moment)
                guard current.fingerprintFailures < rules.options.lockout else {
                    record = current
                    return .limitReached
                }
                current.fingerprintFailures += 1
                let sequence = current.appendFailure(kind: .fingerprint, wallSeconds: moment.wall, service: request.service,
                                                     tty: request.tty, remoteHost: request.remoteHost)
                record = current
                return .charged(sequence)
            }
        } catch {
            log.log(.error, "cannot charge a fingerprint attempt for uid \(user.uid): \(storeFailureText(error, directory: options.stateDir)); attempt refused")
            return .storeFailed
        }
    }

    public enum PasscodeCharge: Equatable {
        case charged(UInt64)
        case waiting(Int64)
        case storeFailed
    }

    /// R3 + R9: under the lock, refuse during a back-off, else count the
    /// entry as wrong and start the back-off it would earn.
    public mutating func chargePasscode(_ user: UserIdentity, _ request: Request) -> PasscodeCharge {
        let moment = now()
        let rules = RecordRules(options: options, backoffApplies: backoffApplies(user))
        do {
            return try store.withRecord(uid: user.uid, userName: user.name) { record, status -> PasscodeCharge in
                var current = rules.current(&record, status, user: user, moment: moment)
                let remaining = rules.remainingBackoff(current, moment: moment)
                if remaining > 0 {
                    if rules.reanchorBackoff(&current, moment: moment) { record = current }
                    return .waiting(remaining)
                }
                current.passcodeFailures += 1
                rules.startBackoff(&current, moment: moment)
                let sequence = current.appendFailure(kind: .passcode, wallSeconds: moment.wall, service: request.service,
                                                     tty: request.tty, remoteHost: request.remoteHost)
                record = current
                return .charged(sequence)
            }
        } catch {
            log.log(.error, "cannot charge a passcode attempt for uid \(user.uid): \(storeFailureText(error, directory: options.stateDir)); attempt refused")
            return .storeFailed
        }
    }

    /// The remaining passcode wait in milliseconds; nil when the store failed.
    public mutating func backoffRemaining(_ user: UserIdentity) -> Int64? {
        let moment = now()
        let rules = RecordRules(options: options, backoffApplies: backoffApplies(user))
        do {
            return try store.withRecord(uid: user.uid, userName: user.name) { record, status -> Int64 in
                var current = rules.current(&record, status, user: user, moment: moment)
                let remaining = rules.remainingBackoff(current, moment: moment)
                if remaining > 0, rules.reanchorBackoff(&current, moment: moment) { record = current }
                return remaining
            }
        } catch {
            log.log(.error, "cannot read the back-off of uid \(user.uid): \(storeFailureText(error, directory: options.stateDir))")
            return nil
        }
    }

    /// An attempt that provably ended without a verdict is given back (R3).
    public mutating func refund(_ user: UserIdentity, kind: FailureEntry.Kind, sequence: UInt64) {
        let rules = RecordRules(options: options, backoffApplies: backoffApplies(user))
        do {
            try store.withRecord(uid: user.uid, userName: user.name) { record, status in
                guard status == .loaded, var current = record else { return }
                // Only an attempt whose count is still there: a success since
                // then reset it, and a later charge must not pay for it.
                guard current.recentFailures.contains(where: { $0.sequence == sequence && !$0.settled }) else { return }
                switch kind {
                case .fingerprint: current.fingerprintFailures = max(0, current.fingerprintFailures - 1)
                case .passcode:
                    current.passcodeFailures = max(0, current.passcodeFailures - 1)
                    // The charge started the wait its count earned (R9). Drop
                    // it only when the count left earns none: a parallel
                    // prompt's charge may have earned the running wait.
                    if rules.options.backoffSeconds(afterFailures: current.passcodeFailures) == 0 || !rules.backoffApplies {
                        current.backoffRemainingMilliseconds = 0
                    }
                }
                current.removeFailure(sequence: sequence)
                record = current
            }
        } catch {
            log.log(.warning, "cannot refund an attempt for uid \(user.uid): \(storeFailureText(error, directory: options.stateDir)); it stays counted")
        }
    }

    /// R4/R8: a match or a correct passcode resets both counts.
    mutating func recordSuccess(_ user: UserIdentity, method: AuthenticationMethod, sequence: UInt64, domainState: [UInt8]) {
        let moment = now()
        do {
            try store.withRecord(uid: user.uid, userName: user.name) { record, status in
                var current = record ?? StateRecord(uid: user.uid, userName: user.name, createdWallSeconds: moment.wall)
                current.fingerprintFailures = 0
                current.passcodeFailures = 0
                current.backoffRemainingMilliseconds = 0
                current.removeFailure(sequence: sequence)
                current.settleFailures()
                switch method {
                case .biometry:
                    current.lastFingerprintSuccessWallSeconds = moment.wall
                case .passcode:
                    current.lastPasscodeSuccessWallSeconds = moment.wall
                    current.lastPasscodeSuccessBootID = moment.bootID
                    var digest = RecordFormat.zeroDigest
                    for index in 0..<min(digest.count, domainState.count) { digest[index] = domainState[index] }
                    current.lastPasscodeSuccessDigest = digest
                }
                record = current
            }
        } catch {
            log.log(.error, "cannot record a success for uid \(user.uid): \(storeFailureText(error, directory: options.stateDir))")
        }
    }

    // MARK: - Text

    /// Sends a message. Interaction text always goes out (R15); status
    /// chatter is dropped when silent.
    mutating func say(_ text: String, _ kind: MessageKind, _ request: Request, status: Bool = false) {
        if status && (request.silent || options.silent) { return }
        prompter.tell(text, kind)
    }

    var passcodePromptText: String {
        options.fallbackTitle.isEmpty ? "Password: " : printableText(options.fallbackTitle) + ": "
    }

    var firstPromptText: String { "Password, or press Enter to use your fingerprint: " }

    var lockedText: String {
        "Too many failed fingerprint attempts. Fingerprint is locked until you enter your password."
    }

    func reasonText(_ request: Request) -> String {
        guard let reason = options.reason else {
            return "\(printableText(request.service, limit: 32)) needs to confirm your identity (\(printableText(request.userName, limit: 64)))."
        }
        var expanded: [UInt8] = []
        var index = 0
        while index < reason.count {
            if reason[index] == 0x25, index + 1 < reason.count {
                let code = reason[index + 1]
                if code == 0x75 { expanded.append(contentsOf: request.userName.prefix(64)); index += 2; continue }
                if code == 0x73 { expanded.append(contentsOf: request.service.prefix(32)); index += 2; continue }
            }
            expanded.append(reason[index])
            index += 1
        }
        return printableText(expanded, limit: 400)
    }

    func instructionText(_ request: Request, scanType: ScanType, fallbackOffered: Bool) -> String {
        let action = scanType == .swipe ? "Swipe your finger across" : "Place your finger on"
        var reason = reasonText(request)
        if let last = reason.utf8.last, last != 0x2E, last != 0x21, last != 0x3F, last != 0x3A { reason += "." }
        var text = reason + " " + action + " the fingerprint reader."
        if fallbackOffered && request.mode == .terminal {
            text += " Press Ctrl-C to " + printableText(options.fallbackTitle) + "."
        }
        return text
    }

    func noMatchText(fallbackOffered: Bool) -> String {
        var text = "Fingerprint not recognized. Try again."
        if fallbackOffered { text += " Press Ctrl-C to " + printableText(options.fallbackTitle) + "." }
        return text
    }

    static func hintText(_ hint: RetryHint) -> String {
        switch hint {
        case .retryScan: return "Scan failed. Try again."
        case .swipeTooShort: return "Swipe was too short. Try again."
        case .fingerNotCentered: return "Finger was not centered. Try again."
        case .removeAndRetry: return "Remove your finger and try again."
        }
    }

    func waitText(_ milliseconds: Int64) -> String {
        "Too many wrong passwords. Try again in " + durationText(milliseconds) + "."
    }
}

/// A wait in words, rounded up: "45 seconds", "1 minute", "2 hours".
public func durationText(_ milliseconds: Int64) -> String {
    let seconds = (milliseconds + 999) / 1000
    func unit(_ count: Int64, _ name: String) -> String { count == 1 ? "1 \(name)" : "\(count) \(name)s" }
    if seconds < 60 { return unit(max(seconds, 1), "second") }
    if seconds < 3600 { return unit((seconds + 59) / 60, "minute") }
    return unit((seconds + 3599) / 3600, "hour")
}

/// The administrator's words for a store failure; directory problems name the path.
public func storeFailureText(_ failure: StoreFailure, directory: [UInt8]) -> String {
    switch failure {
    case .directoryUnusable(let problem):
        let path = "state directory " + printableText(directory)
        switch problem {
        case .notAbsolute: return path + " is not an absolute path"
        case .unsafeAncestor:
            return path + ": a directory on its path is a symlink, not root's, or writable by group or others; refused"
        case .missingAncestor: return path + ": a directory on its path is missing"
        case .missingInWritableParent: return path + " is missing and its parent is writable by others; create it as root with mode 0700"
        case .unsafeDirectory: return path + " is not a directory owned by root with mode 0700"
        }
    case .lockFailed(let errno): return "lock failed (errno \(errno.code))"
    case .writeFailed(let errno): return "write failed (errno \(errno.code))"
    case .fileSizeLimited: return "file size limit"
    }
}

/// The record arithmetic of R3, R9, R12 and R13, free of any I/O so it can
/// run inside a store transaction.
struct RecordRules {
    let options: Options
    let backoffApplies: Bool

    /// The record to work on: the stored one, a fresh one for an absent file
    /// (not stored unless changed), or the R12 replacement for a damaged one
    /// (stored at once).
    func current(_ record: inout StateRecord?, _ status: LoadStatus, user: UserIdentity, moment: Moment) -> StateRecord {
        switch status {
        case .loaded:
            if let record { return record }
            return fresh(user, moment)
        case .absent:
            return fresh(user, moment)
        case .damaged:
            var replacement = fresh(user, moment)
            replacement.fingerprintFailures = options.lockout
            replacement.passcodeFailures = options.firstBackoffThreshold
            startBackoff(&replacement, moment: moment)
            record = replacement
            return replacement
        }
    }

    /// A new record. Its attempt numbers start from the clocks, not from 1,
    /// so an attempt charged to a record that was since replaced can never
    /// match (and be refunded against) a new attempt.
    func fresh(_ user: UserIdentity, _ moment: Moment) -> StateRecord {
        var record = StateRecord(uid: user.uid, userName: user.name, createdWallSeconds: moment.wall)
        record.nextSequence = UInt64(truncatingIfNeeded: moment.wall) << 24 ^ UInt64(truncatingIfNeeded: moment.boot) | 1
        return record
    }

    /// R9: the wait earned by the current passcode failure count.
    func startBackoff(_ record: inout StateRecord, moment: Moment) {
        let seconds = backoffApplies ? options.backoffSeconds(afterFailures: record.passcodeFailures) : 0
        record.backoffRemainingMilliseconds = Int64(seconds) * 1000
        record.backoffAnchorBootNanoseconds = moment.boot
        record.backoffBootID = moment.bootID
    }

    /// R13: the wait left, counted on the boot clock within a boot; a new
    /// boot resumes the stored remainder. Never more than the stored wait.
    func remainingBackoff(_ record: StateRecord, moment: Moment) -> Int64 {
        let stored = storedWait(record)
        guard backoffApplies, stored > 0 else { return 0 }
        guard record.backoffBootID == moment.bootID, moment.boot >= record.backoffAnchorBootNanoseconds else {
            return stored
        }
        let elapsed = (moment.boot - record.backoffAnchorBootNanoseconds) / 1_000_000
        return max(0, stored - elapsed)
    }

    /// The stored wait, never more than `max_backoff`: a record may hold any
    /// number (a valid checksum says nothing about sense), and the
    /// administrator may have lowered the bound since; a wait that never
    /// ends would lock the owner out (R12).
    func storedWait(_ record: StateRecord) -> Int64 {
        min(record.backoffRemainingMilliseconds, Int64(options.maxBackoffSeconds) * 1000)
    }

    /// Saves the wait's progress: the remainder as of now, anchored to now in
    /// this boot. A later boot then resumes from the last remainder any
    /// prompt saw, rather than from the full wait (R13). A boot clock below
    /// the anchor, or another boot id, counts no elapsed time: the boot id may
    /// be unreadable, and time is never assumed to have passed.
    /// True when the record changed.
    func reanchorBackoff(_ record: inout StateRecord, moment: Moment) -> Bool {
        guard record.backoffRemainingMilliseconds > 0 else { return false }
        var remaining = storedWait(record)
        if record.backoffBootID == moment.bootID, moment.boot >= record.backoffAnchorBootNanoseconds {
            remaining = max(0, remaining - (moment.boot - record.backoffAnchorBootNanoseconds) / 1_000_000)
        }
        if remaining == record.backoffRemainingMilliseconds, record.backoffBootID == moment.bootID,
           record.backoffAnchorBootNanoseconds == moment.boot {
            return false
        }
        record.backoffRemainingMilliseconds = remaining
        record.backoffAnchorBootNanoseconds = moment.boot
        record.backoffBootID = moment.bootID
        return true
    }
}
