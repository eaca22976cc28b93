// The one place the real engine is put together: fprintd, the password
// service, the state store of the options and the machine's clocks, for the
// module, `localauth test`, `check` and `status` alike.
import LocalAuth
import LibcSystem

/// The engine over the real dependencies, with the caller's conversation,
/// store and log.
public typealias SystemEngine<Conversation: Prompter, Store: StateStore, Log: EventLog> =
    Engine<FprintdSensor<SystemClock>, PAMPasscodeVerifier, Conversation, Store, SystemClock, Log, LogindSeat>

/// The ledger over the real state store and clocks.
public typealias SystemLedger<Log: EventLog> = Ledger<FileStateStore, SystemClock, Log>

/// What a request tells the real dependencies: how Ctrl-C works (terminal
/// mode) and the items the password service copies.
public struct RequestFacts {
    public var mode: InteractionMode
    public var tty: [UInt8]
    public var remoteHost: [UInt8]
    public var requestingUser: [UInt8]
    /// The helper's channel: a CANCEL or a vanished client ends a wait.
    public var channel: Int32?
    /// Terminal mode's keyboard (touch or type): Ctrl-C, and the keys the
    /// conversation reads while the reader waits.
    public var keyboard: TerminalKeyboard?
    /// polkit's agent helper: the dialog's prompt left open while the reader
    /// waits (touch or type); its answer ends the wait.
    public var openPrompt: OpenPrompt?
    /// The logind session the seat rules look at, where it is not the
    /// caller's own (polkit's socket-activated helper: the agent's).
    public var sessionID: [UInt8]?
    /// With an empty `sessionID`: the uid whose user manager that process
    /// runs in, if it does (its account's session may stand in).
    public var userManagerOwner: UInt32?

    public init(mode: InteractionMode, tty: [UInt8] = [], remoteHost: [UInt8] = [], requestingUser: [UInt8] = [],
                channel: Int32? = nil, keyboard: TerminalKeyboard? = nil) {
        self.mode = mode
        self.channel = channel
        self.keyboard = keyboard
        self.tty = tty
        self.remoteHost = remoteHost
        self.requestingUser = requestingUser
    }
}

/// Builds the real engine for one request. `store` defaults to the state
/// directory of the options, with /run's for a read-only disk (`runtime`);
/// a caller that may not read it passes another.
public func makeSystemEngine<Conversation: Prompter, Store: StateStore, Log: EventLog>(
    _ options: Options, _ facts: RequestFacts, prompter: Conversation, store: Store, runtime: Store? = nil, log: Log
) -> SystemEngine<Conversation, Store, Log> {
    // The reader and logind share the prompt's one system bus connection.
    let bus = SharedSystemBus()
    var interruption = WaitInterruption.none
    if let channel = facts.channel {
        interruption = .channel(channel)
    } else if let openPrompt = facts.openPrompt {
        interruption = .openPrompt(openPrompt)
    } else if facts.mode == .terminal {
        // Ctrl-C always; the keys too when the conversation reads them.
        interruption = .terminal(facts.keyboard ?? TerminalKeyboard())
    }
    return Engine(options: options, sensor: FprintdSensor(interruption: interruption, clock: SystemClock(), bus: bus),
                  verifier: PAMPasscodeVerifier(service: options.passcodeService, tty: facts.tty, remoteHost: facts.remoteHost,
                                                requestingUser: facts.requestingUser),
                  prompter: prompter, store: store, runtime: runtime, clock: SystemClock(), log: log,
                  seat: LogindSeat(sessionID: facts.sessionID, userManagerOwner: facts.userManagerOwner,
                                   standInAllowed: options.userManagerStandIn, bus: bus))
}

public func makeSystemEngine<Conversation: Prompter, Log: EventLog>(
    _ options: Options, _ facts: RequestFacts, prompter: Conversation, log: Log
) -> SystemEngine<Conversation, FileStateStore, Log> {
    makeSystemEngine(options, facts, prompter: prompter, store: FileStateStore(directoryPath: options.stateDir),
                     runtime: FileStateStore.runtime, log: log)
}

/// The engine of a program that may talk to a person at its own terminal
/// or through polkit's dialogs (the module, `localauth test`): in terminal
/// mode `keyboard` takes Ctrl-C and, while the reader waits, the keys; in
/// a dialog whose prompt stays open, `openPrompt` asks the password while
/// the reader waits (touch or type). The caller ends both when the
/// evaluation is over.
public func makeTerminalEngine<Conversation: Prompter, Log: EventLog>(
    _ options: Options, _ facts: RequestFacts, conversation: Conversation, keyboard: TerminalKeyboard,
    openPrompt: OpenPrompt = OpenPrompt(), promptStaysOpen: Bool = false, log: Log
) -> SystemEngine<TouchOrTypePrompter<Conversation>, FileStateStore, Log> {
    var facts = facts
    if facts.mode == .terminal { facts.keyboard = keyboard }
    if promptStaysOpen { facts.openPrompt = openPrompt }
    return makeSystemEngine(options, facts, prompter: TouchOrTypePrompter(conversation, keyboard: keyboard, openPrompt: openPrompt,
                                                                          answerTimeoutSeconds: options.answerTimeoutSeconds),
                            log: log)
}

/// The ledger alone, for what only reads or resets counts (authsucc, reset, status).
public func makeSystemLedger<Log: EventLog>(_ options: Options, log: Log) -> SystemLedger<Log> {
    Ledger(options: options, store: FileStateStore(directoryPath: options.stateDir), runtime: FileStateStore.runtime, clock: SystemClock(),
           log: log)
}

/// The user's enrollment as fprintd reports it now (the domain state), or
/// nothing when fprintd cannot say: what a correct password checked by
/// another module is recorded with.
public func currentEnrollment(userName: [UInt8]) -> [UInt8]? {
    var sensor = FprintdSensor(interruption: .none, clock: SystemClock())
    defer { sensor.close() }
    return sensor.availability(userName: userName).enrollment
}

/// The enrolled set a stored secret is bound to (`biometry-current-set`):
/// the finger names and fprintd's print files, not the device's object
/// path, which fprintd numbers anew when a reader comes back without any
/// change of prints. nil unless fprintd answered for every device and
/// exactly one lists enrolled fingers (no answer, a device that failed, no
/// reader, none enrolled, two readers enrolled): then nothing is judged by
/// it, since a wrong one would delete the item.
public func secretBinding(userName: [UInt8]) -> [UInt8]? {
    var sensor = FprintdSensor(interruption: .none, clock: SystemClock())
    defer { sensor.close() }
    guard let lists = sensor.fingersOnEveryDevice(userName: userName), lists.allSatisfy({ $0 != nil }) else { return nil }
    let enrolled = lists.compactMap { $0 }.filter { !$0.isEmpty }
    guard enrolled.count == 1 else { return nil }
    return EnrollmentDigest.compute(device: literalBytes("localauth-secret-binding"), fingers: enrolled[0], userName: userName,
                                    printRoot: literalBytes(EnrollmentDigest.defaultPrintRoot), files: DiskPrintFiles())
}
