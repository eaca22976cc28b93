// The policy engine: fingerprint first, passcode fallback, lockout
// accounting. Pure: everything outside is reached through the protocols of
// Dependencies.swift, and every count goes through the Ledger, so each rule
// is table-tested with fakes.

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
    /// The caller's logind session (empty: none), kept with a success for
    /// an app's reuse window.
    public var session: [UInt8] = []
    /// The caller is root, acting for a name it was given (a login screen, a
    /// greeter, a console login): outside that account's own session it is
    /// told nothing about the account's reader, whose state would tell an
    /// enrolled name from an unknown one (R14).
    public var callerActsForAName = false
    /// Prompt mode in polkit's agent helper for an agent that takes the
    /// verdict while its prompt is up (AdministratorDialog): the password
    /// prompt stays open while the reader waits (touch or type).
    public var promptStaysOpen = false
    /// The helper's client reads the person's keys while the reader waits
    /// (`localauth evaluate` at a terminal): touch or type through it.
    public var clientReadsKeys = false

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

extension Engine where Seat == NoLogind {
    /// An engine for a machine without logind (and for the unit tests).
    public init(options: Options, sensor: Sensor, verifier: Verifier, prompter: Conversation, store: Store, clock: Time, log: Log) {
        self.init(options: options, sensor: sensor, verifier: verifier, prompter: prompter, store: store, clock: clock, log: log,
                  seat: NoLogind())
    }
}

/// What the adapter must do after an evaluation.
public struct EvaluationResult: Equatable {
    public var outcome: Outcome
    /// Ask for the application's failure delay (a charged wrong passcode).
    public var failDelay: Bool
    /// The password was refused unchecked: its back-off is running.
    public var refusedDuringBackoff: Bool
    public var pamCode: PAMCode { refusedDuringBackoff ? ResultTable.refusedDuringBackoff : ResultTable.pamCode(for: outcome) }

    public init(_ outcome: Outcome, failDelay: Bool = false, refusedDuringBackoff: Bool = false) {
        self.outcome = outcome
        self.failDelay = failDelay
        self.refusedDuringBackoff = refusedDuringBackoff
    }
}

public struct Engine<Sensor: FingerprintSensor, Verifier: PasscodeVerifier, Conversation: Prompter,
                     Store: StateStore, Time: Clock, Log: EventLog, Seat: SeatObserver> {
    public var sensor: Sensor
    public var verifier: Verifier
    public var prompter: Conversation
    /// logind: whose touch the reader would take.
    public var seat: Seat
    /// Every read and write of the attempt state.
    public var ledger: Ledger<Store, Time, Log>

    public var options: Options {
        get { ledger.options }
        set { ledger.options = newValue }
    }

    public init(options: Options, sensor: Sensor, verifier: Verifier, prompter: Conversation, store: Store, runtime: Store? = nil,
                clock: Time, log: Log, seat: Seat) {
        self.sensor = sensor
        self.verifier = verifier
        self.prompter = prompter
        self.seat = seat
        self.ledger = Ledger(options: options, store: store, runtime: runtime, clock: clock, log: log)
    }

    // MARK: - Evaluation

    /// What keeps a working, enrolled reader out of a prompt of `service`
    /// for `user` now: a password requirement first (it outlasts the
    /// prompt), then logind's answer; nil when the finger may be used.
    public mutating func biometryBlock(_ user: UserIdentity, record: StateRecord, domainState: [UInt8],
                                       service: [UInt8], observation: SeatObservation? = nil) -> BiometryBlock? {
        if let requirement = BiometryRules.passcodeRequirement(record, moment: ledger.now(), domainState: domainState, options: options) {
            return .passcodeRequired(requirement)
        }
        if let denial = BiometryRules.touchDenial(observation ?? seat.observe(), user: user, service: service, options: options) {
            return .touch(denial)
        }
        return nil
    }

    /// Runs one prompt. `passcode` receives whatever the person types; the
    /// caller wipes it, after using it as `PAM_AUTHTOK` on passcode success.
    /// The sensor is closed on every path before this returns.
    public mutating func evaluate(_ request: Request, policy: EvaluationPolicy, passcode: SecretBuffer) -> EvaluationResult {
        defer { sensor.close() }
        // Known and unknown names alike (R14): the reader's connection is
        // set up while the record is read.
        switch request.scope {
        case .outOfScope:
            return EvaluationResult(.outOfScope)
        case .unknownUser, .inScope:
            sensor.prepare()
        }
        switch request.scope {
        case .outOfScope:
            return EvaluationResult(.outOfScope)
        case .unknownUser:
            return lookAlikeForUnknownUser(request, policy: policy, passcode: passcode)
        case .inScope:
            break
        }
        guard let user = request.user else { return EvaluationResult(.internalError) }
        let snapshot = ledger.snapshot(user)
        // Asked even when the record could not be read, as for an unknown
        // name: the time to the answer does not tell them apart (R14).
        let availability = sensor.availability(userName: user.name)
        guard let record = snapshot else { return unrecorded(request) }

        var domainState: [UInt8] = []
        var biometryError: LAErrorCode? = nil
        switch availability {
        case .available(let state): domainState = state
        case .notEnrolled: biometryError = .biometryNotEnrolled
        case .noDevice, .unreachable, .failing: biometryError = .biometryNotAvailable
        }
        let enrollment = availability.enrollment
        if request.mode == .password {
            // Another conversation of the same program has the reader: this
            // one asks the password, with the back-off, and its success
            // resets the counts and satisfies the password rules (R10).
            guard policy == .owner else { return EvaluationResult(.failure(.biometryNotAvailable)) }
            return passcodePhase(request, user: user, passcode: passcode, alreadyEntered: false, enrollment: enrollment)
        }
        // A login screen, a greeter or a console login is outside the
        // account's own session, so the reader is not used there (R17);
        // and nothing is said about why: a lockout, a password rule or the
        // session rule exists only for an enrolled name, and an unknown
        // name hears none of them (R14). Such a caller asks logind once for
        // every name, with a reader or not, known or not (the look-alike
        // asks too), so that the time to the prompt tells nothing either.
        var observation: SeatObservation? = nil
        if request.callerActsForAName { observation = seat.observe() }
        // Said after logind is asked, as for an unknown name (R14).
        sayWhenTheReaderFails(availability, request)
        if biometryError == nil, let observation, BiometryRules.keepsQuietForANamedAccount(observation, user: user) {
            biometryError = .biometryNotAvailable
            ledger.log.log(.notice, "no fingerprint for \(printableText(user.name)) (uid \(user.uid)) from service "
                           + "\(printableText(request.service)): \(TouchDenial.notActiveSession.statusText) (not said)")
        }
        if biometryError == nil && record.fingerprintFailures >= options.lockout {
            biometryError = .biometryLockout
            say(UserText.locked, .error, request)
        }
        if biometryError == nil, let block = biometryBlock(user, record: record, domainState: domainState, service: request.service,
                                                          observation: observation) {
            biometryError = block.error
            say(UserText.blocked(block, request), .error, request)
            ledger.log.log(.notice, "no fingerprint for \(printableText(user.name)) (uid \(user.uid)) from service "
                           + "\(printableText(request.service)): \(block.statusText)")
        }

        if policy == .biometrics {
            if let biometryError { return EvaluationResult(.failure(biometryError)) }
            if request.mode == .prompt {
                switch prompter.ask(UserText.firstPrompt(request, options: options), into: passcode) {
                case .entered, .fallback:
                    passcode.wipe()
                    return EvaluationResult(.failure(.userFallback))
                case .failed: return EvaluationResult(.failure(.userCancel))
                case .empty: break
                }
            }
            switch biometricPhase(request, user: user, record: record, touchOrType: false) {
            case .success: return EvaluationResult(.success(.biometry))
            case .fallback, .typed, .passwordWanted: return EvaluationResult(.failure(.userFallback))
            case .cancelled: return EvaluationResult(.failure(.userCancel))
            case .triesUsed: return EvaluationResult(.failure(.authenticationFailed))
            case .ended(let error): return EvaluationResult(.failure(error))
            case .personLeft: return EvaluationResult(.failure(.systemCancel))
            case .unrecorded: return unrecorded(request)
            }
        }

        // Policy owner: fingerprint if usable, then the passcode.
        var passcodeEntered = false
        var passcodeChosen = false
        if biometryError == nil {
            // A prompt left open while the reader waits asks for the password
            // and the finger at once; no first prompt comes before it. (In
            // the password back-off too: a password typed then is refused
            // unchecked, as at any prompt, and the finger works.)
            let openPrompt = request.mode == .prompt && request.promptStaysOpen && prompter.readyToLeavePromptOpen()
            if request.mode == .prompt && !openPrompt {
                switch prompter.ask(UserText.firstPrompt(request, options: options), into: passcode) {
                case .entered: passcodeEntered = true
                case .fallback: passcodeChosen = true
                case .failed: return EvaluationResult(.failure(.userCancel))
                case .empty: break
                }
            }
            if !passcodeEntered && !passcodeChosen {
                switch biometricPhase(request, user: user, record: record,
                                      touchOrType: request.mode == .terminal || openPrompt || request.clientReadsKeys) {
                case .success: return EvaluationResult(.success(.biometry))
                case .cancelled: return EvaluationResult(.failure(.userCancel))
                case .personLeft: return EvaluationResult(.failure(.systemCancel))
                case .unrecorded: return unrecorded(request)
                // Typed while the reader waited: the password attempt,
                // charged before it is checked like any other.
                case .typed: passcodeEntered = prompter.takeTypedPassword(into: passcode)
                case .passwordWanted, .fallback, .triesUsed, .ended: break
                }
            }
        }
        return passcodePhase(request, user: user, passcode: passcode, alreadyEntered: passcodeEntered, enrollment: enrollment)
    }

    /// R14: an unknown user sees what a known user without usable biometrics
    /// sees: the passcode prompt, a real (dummy) verification, the delay, a
    /// failure, and the same back-off, counted in a look-alike record filed
    /// under a hash of the name (so five tries cannot tell names apart).
    /// The verdict is ignored: an unknown user never succeeds.
    /// It also does a known user's work before the first prompt, in the
    /// same order (a record read under its lock, the same fprintd queries
    /// for the name), so the time to the prompt does not tell them apart.
    mutating func lookAlikeForUnknownUser(_ request: Request, policy: EvaluationPolicy, passcode: SecretBuffer) -> EvaluationResult {
        let pseudo = UserIdentity(uid: StateRecord.lookAlikeUID, name: request.userName)
        let nameFits = !request.userName.isEmpty && request.userName.count <= RecordFormat.maxNameLength
        let readable = nameFits ? ledger.snapshot(pseudo) != nil : true
        let availability = sensor.availability(userName: request.userName)
        if request.callerActsForAName { _ = seat.observe() }     // as a known name's prompt does
        // A store that fails is said as for a known user, in both policies.
        guard readable else { return unrecorded(request) }
        if request.mode != .password { sayWhenTheReaderFails(availability, request) }
        if policy == .biometrics { return EvaluationResult(.failure(.biometryNotAvailable)) }
        guard nameFits else {
            switch prompter.ask(UserText.passcodePrompt(options), into: passcode) {
            case .failed, .empty, .fallback: return EvaluationResult(.failure(.userCancel))
            case .entered: break
            }
            if verifier.begin(userName: request.userName) {
                _ = verifier.verify(passcode)
                verifier.end()
            }
            passcode.wipe()
            return EvaluationResult(.failure(.authenticationFailed), failDelay: true)
        }
        return passcodePhase(request, user: pseudo, passcode: passcode, alreadyEntered: false, enrollment: nil, lookAlike: true)
    }

    /// fprintd answered with an error (it refuses every caller while polkit
    /// is down): the person hears why the finger is not asked for, known
    /// name or not (the error does not depend on the name, R14).
    mutating func sayWhenTheReaderFails(_ availability: SensorAvailability, _ request: Request) {
        guard availability == .failing else { return }
        say(UserText.readerFailing, .error, request)
    }

    // MARK: - Passcode phase

    mutating func passcodePhase(_ request: Request, user: UserIdentity, passcode: SecretBuffer, alreadyEntered: Bool,
                                enrollment: [UInt8]?, lookAlike: Bool = false) -> EvaluationResult {
        if !alreadyEntered {
            switch ledger.backoffRemaining(user) {
            case nil: return unrecorded(request)
            case .some(let milliseconds) where milliseconds > 0:
                say(UserText.wait(milliseconds), .error, request)
                return EvaluationResult(.failure(.authenticationFailed), refusedDuringBackoff: true)
            default: break
            }
            switch prompter.ask(UserText.passcodePrompt(options), into: passcode) {
            case .failed, .empty, .fallback: return EvaluationResult(.failure(.userCancel))
            case .entered: break
            }
        }
        guard verifier.begin(userName: user.name) else {
            passcode.wipe()
            ledger.log.log(.error, "passcode service \(printableText(options.passcodeService)) cannot run")
            return EvaluationResult(.failure(.passcodeNotSet))
        }
        defer { verifier.end() }
        let sequence: UInt64
        switch ledger.chargePasscode(user, request) {
        case .charged(let value): sequence = value
        case .waiting(let milliseconds):
            passcode.wipe()
            say(UserText.wait(milliseconds), .error, request)
            return EvaluationResult(.failure(.authenticationFailed), refusedDuringBackoff: true)
        case .storeFailed:
            passcode.wipe()
            return unrecorded(request)
        }
        var verdict = verifier.verify(passcode)
        if lookAlike && verdict == .correct { verdict = .wrong }
        switch verdict {
        case .correct:
            ledger.recordSuccess(user, method: .passcode, sequence: sequence, enrollment: enrollment, session: request.session)
            return EvaluationResult(.success(.passcode))
        case .noVerdict:
            passcode.wipe()
            ledger.refund(user, kind: .passcode, sequence: sequence)
            ledger.log.log(.error, "passcode service \(printableText(options.passcodeService)) did not ask for the passcode; check its stack")
            return EvaluationResult(.failure(.passcodeNotSet))
        case .wrong:
            passcode.wipe()
            ledger.log.log(.notice, "wrong passcode for \(printableText(user.name)) (uid \(user.uid)) from service \(printableText(request.service))")
            return EvaluationResult(.failure(.authenticationFailed), failDelay: true)
        }
    }

    // MARK: - Preflight and R11

    /// `canEvaluatePolicy`: never prompts, never charges. The success value is
    /// the domain state (empty when biometrics are not in use).
    public mutating func canEvaluate(_ policy: EvaluationPolicy, user: UserIdentity, service: [UInt8] = []) -> Result<[UInt8], LAErrorCode> {
        canEvaluateExplained(policy, user: user, service: service).result
    }

    /// `canEvaluate`, with what keeps a working reader out (for `check`).
    public mutating func canEvaluateExplained(_ policy: EvaluationPolicy, user: UserIdentity,
                                              service: [UInt8]) -> (result: Result<[UInt8], LAErrorCode>, block: BiometryBlock?) {
        defer { sensor.close() }
        guard let record = ledger.snapshot(user) else { return (.failure(.invalidContext), nil) }
        var biometry: Result<[UInt8], LAErrorCode>
        var block: BiometryBlock? = nil
        switch sensor.availability(userName: user.name) {
        case .available(let state): biometry = .success(state)
        case .notEnrolled: biometry = .failure(.biometryNotEnrolled)
        case .noDevice, .unreachable, .failing: biometry = .failure(.biometryNotAvailable)
        }
        if case .success = biometry, record.fingerprintFailures >= options.lockout { biometry = .failure(.biometryLockout) }
        if case .success(let state) = biometry, let found = biometryBlock(user, record: record, domainState: state, service: service) {
            block = found
            biometry = .failure(found.error)
        }
        return (canEvaluateResult(policy, user: user, biometry: biometry), block)
    }

    mutating func canEvaluateResult(_ policy: EvaluationPolicy, user: UserIdentity,
                                    biometry: Result<[UInt8], LAErrorCode>) -> Result<[UInt8], LAErrorCode> {
        if policy == .biometrics { return biometry }
        if case .success = biometry { return biometry }
        guard verifier.begin(userName: user.name) else { return .failure(.passcodeNotSet) }
        verifier.end()
        return .success([])
    }

    // MARK: - Messages

    /// The store could not count this prompt's attempt, on disk or, with
    /// the disk read-only, in /run (logged by the ledger): the person is
    /// told, and nothing is decided (R12). Known and unknown names alike (R14).
    mutating func unrecorded(_ request: Request) -> EvaluationResult {
        say(UserText.notRecorded, .error, request)
        return EvaluationResult(.internalError)
    }

    /// Sends a message. Interaction text always goes out (R15); status
    /// chatter is dropped when silent.
    mutating func say(_ text: String, _ kind: MessageKind, _ request: Request, status: Bool = false) {
        if status && (request.silent || options.silent) { return }
        prompter.tell(text, kind)
    }
}
