import LocalAuth

/// Test doubles for the engine's six dependencies. All are final classes:
/// the engine holds copies of its dependencies, so reference semantics let a
/// test look at what happened after (and during) an evaluation, and let one
/// set of fakes serve several prompts in a row (one engine per prompt, as the
/// PAM module builds one per `pam_sm_authenticate`).

func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }

// MARK: - Fingerprint sensor

/// One scripted fingerprint attempt: retry hints reported first, then how the
/// attempt ended.
struct SensorStep: Equatable {
    var hints: [RetryHint]
    var end: AttemptEnd
    init(_ end: AttemptEnd, hints: [RetryHint] = []) {
        self.end = end
        self.hints = hints
    }
}

final class FakeSensor: FingerprintSensor {
    var availabilityValue: SensorAvailability
    var openResult: SensorSession
    /// Attempts still to play, in order.
    var script: [SensorStep]
    /// Called at the start of every `verifyAttempt`; its value is recorded in
    /// `probedAtVerify` (the test makes it read the store: R3).
    var probe: (() -> Int)?
    /// Called at the start of every `verifyAttempt`, after `probe` (e.g. to
    /// move a clock).
    var onVerify: (() -> Void)?
    /// The attempt (1-based) during which a Ctrl-C arrives: it is found
    /// pending once that attempt has returned its verdict.
    var interruptDuringAttempt: Int?

    private(set) var availabilityCalls = 0
    private(set) var openCalls = 0
    /// Releases of a claimed reader (closing an unclaimed one is allowed and not counted).
    private(set) var closeCalls = 0
    /// Every close, claimed or not.
    private(set) var closeRequests = 0
    private(set) var consumeInterruptCalls = 0
    private(set) var verifyCalls = 0
    private(set) var deadlines: [Int64] = []
    private(set) var probedAtVerify: [Int] = []
    private(set) var userNames: [[UInt8]] = []
    /// Set when the engine asked for an attempt the script did not have.
    private(set) var scriptExhausted = false
    /// Set when `verifyAttempt` ran while the device was not open.
    private(set) var verifiedWhileClosed = false
    private(set) var isOpen = false

    init(_ availability: SensorAvailability = .available(domainState: [0xD0, 0x0D]), open: SensorSession = .opened(.press),
         script: [SensorStep] = []) {
        availabilityValue = availability
        openResult = open
        self.script = script
    }

    func availability(userName: [UInt8]) -> SensorAvailability {
        availabilityCalls += 1
        userNames.append(userName)
        return availabilityValue
    }

    func open(userName: [UInt8]) -> SensorSession {
        openCalls += 1
        userNames.append(userName)
        if case .opened = openResult { isOpen = true }
        return openResult
    }

    func verifyAttempt(deadline: Int64, onHint: (RetryHint) -> Void) -> AttemptEnd {
        verifyCalls += 1
        if !isOpen { verifiedWhileClosed = true }
        deadlines.append(deadline)
        if let probe { probedAtVerify.append(probe()) }
        onVerify?()
        guard !script.isEmpty else {
            scriptExhausted = true
            return .deviceError
        }
        let step = script.removeFirst()
        for hint in step.hints { onHint(hint) }
        return step.end
    }

    /// A step that waits without a verdict (`timeout`) ends as the real
    /// sensor's would when `stillWanted` says no during the wait.
    func verifyAttempt(deadline: Int64, onHint: (RetryHint) -> Void, stillWanted: () -> Bool) -> AttemptEnd {
        let end = verifyAttempt(deadline: deadline, onHint: onHint)
        return end == .timeout && !stillWanted() ? .sessionLeft : end
    }

    /// `letGo` calls: the reader let go before `close`.
    private(set) var letGoCalls = 0

    func letGo() {
        letGoCalls += 1
    }

    func close() {
        closeRequests += 1
        if isOpen { closeCalls += 1 }
        isOpen = false
    }

    func consumeInterrupt() {
        consumeInterruptCalls += 1
        interruptDuringAttempt = nil
    }

    func interruptPending() -> Bool {
        interruptDuringAttempt.map { $0 <= verifyCalls } ?? false
    }
}

// MARK: - Passcode verifier

final class FakeVerifier: PasscodeVerifier {
    var beginResult: Bool
    var correctPasscode: [UInt8]
    /// When set, returned instead of comparing (e.g. `.noVerdict`).
    var forcedVerdict: PasscodeVerdict?
    /// Called at the start of every `verify`; recorded in `probedAtVerify`.
    var probe: (() -> Int)?

    private(set) var beginCalls = 0
    private(set) var verifyCalls = 0
    private(set) var endCalls = 0
    private(set) var probedAtVerify: [Int] = []
    private(set) var begunFor: [[UInt8]] = []
    /// Whether each verified buffer held exactly the correct passcode.
    private(set) var sawCorrect: [Bool] = []
    private(set) var verifiedWithoutBegin = false
    private var begun = false

    init(begin: Bool = true, correct: String = "correct horse") {
        beginResult = begin
        correctPasscode = bytes(correct)
    }

    func begin(userName: [UInt8]) -> Bool {
        beginCalls += 1
        begunFor.append(userName)
        begun = beginResult
        return beginResult
    }

    func verify(_ passcode: SecretBuffer) -> PasscodeVerdict {
        verifyCalls += 1
        if !begun { verifiedWithoutBegin = true }
        if let probe { probedAtVerify.append(probe()) }
        let isCorrect = passcode.equals(correctPasscode)
        sawCorrect.append(isCorrect)
        if let forcedVerdict { return forcedVerdict }
        return isCorrect ? .correct : .wrong
    }

    func end() {
        endCalls += 1
        begun = false
    }
}

// MARK: - Prompter

enum Answer: Equatable {
    case text(String)
    /// Whatever bytes the conversation returned (not necessarily UTF-8).
    case bytes([UInt8])
    case empty
    case failed
    /// An app's fallback button instead of an answer.
    case fallback
}

struct Told: Equatable, CustomStringConvertible {
    var text: String
    var kind: MessageKind
    var description: String { "\(kind == .error ? "error" : "info"): \(text)" }
}

final class FakePrompter: Prompter {
    var answers: [Answer]
    private(set) var asked: [String] = []
    private(set) var told: [Told] = []
    /// Set when the engine asked a question the test did not script.
    private(set) var answersExhausted = false

    /// What the person chose at each interrupted wait (an app's buttons);
    /// empty: the conversation cannot tell (a terminal's Ctrl-C).
    var choices: [WaitChoice?]

    /// Touch or type: the line the person types while the reader waits
    /// (nil: this conversation reads no keys; empty: nothing typed).
    var keys: String?
    private(set) var keysWatched = 0
    private(set) var typedTaken = 0

    init(_ answers: [Answer] = [], choices: [WaitChoice?] = [], keys: String? = nil) {
        self.answers = answers
        self.choices = choices
        self.keys = keys
    }

    func watchKeys() -> Bool {
        keysWatched += 1
        return keys != nil
    }

    /// A dialog's prompts left open while the reader waited, and what was
    /// said while one was (dropped, as the real prompter drops it).
    private(set) var leftOpen: [String] = []
    private(set) var droppedWhileOpen: [String] = []
    private(set) var promptOpen = false

    /// Ready, and opens, when the person can type (`keys` set), as watchKeys does.
    func readyToLeavePromptOpen() -> Bool { keys != nil }

    func leavePromptOpen(_ text: String) -> Bool {
        guard keys != nil else { return false }
        leftOpen.append(text)
        promptOpen = true
        return true
    }

    func takeTypedPassword(into secret: SecretBuffer) -> Bool {
        guard let typed = keys, !typed.isEmpty else { return false }
        typedTaken += 1
        secret.assign(bytes(typed))
        keys = ""
        return true
    }

    func takeChoice() -> WaitChoice? {
        promptOpen = false
        return choices.isEmpty ? nil : choices.removeFirst()
    }

    func ask(_ text: String, into secret: SecretBuffer) -> PromptAnswer {
        // A dialog's prompt still open is this question (not asked again);
        // left empty, the password is asked as usual.
        if promptOpen {
            promptOpen = false
            guard !answers.isEmpty else {
                answersExhausted = true
                return .failed
            }
            if answers.first == .empty {
                answers.removeFirst()
            } else {
                return answer(into: secret)
            }
        }
        asked.append(text)
        return answer(into: secret)
    }

    private func answer(into secret: SecretBuffer) -> PromptAnswer {
        guard !answers.isEmpty else {
            answersExhausted = true
            return .failed
        }
        switch answers.removeFirst() {
        case .text(let value):
            secret.assign(bytes(value))
            return .entered
        case .bytes(let value):
            secret.assign(value)
            return value.isEmpty ? .empty : .entered
        case .empty:
            secret.assign([])
            return .empty
        case .failed:
            return .failed
        case .fallback:
            return .fallback
        }
    }

    func tell(_ text: String, _ kind: MessageKind) {
        if promptOpen { return droppedWhileOpen.append(text) }
        told.append(Told(text: text, kind: kind))
    }

    /// The fallback titles offered, and after how many messages each.
    private(set) var offered: [(title: String, afterMessages: Int)] = []
    func offerFallback(_ title: String) { offered.append((title, told.count)) }

    func saw(_ fragment: String) -> Bool { told.contains { $0.text.contains(fragment) } }
    func saw(_ fragment: String, kind: MessageKind) -> Bool { told.contains { $0.kind == kind && $0.text.contains(fragment) } }
    func count(_ fragment: String) -> Int { told.filter { $0.text.contains(fragment) }.count }
}

// MARK: - State store

/// An in-memory store with the semantics of `FileStateStore.withRecord`:
/// the body gets nil for an absent or damaged record, and the record is
/// written back when the body changed it (or replaced a damaged/absent one).
final class FakeStore: StateStore {
    private(set) var stored: StateRecord?
    private(set) var status: LoadStatus
    /// Every transaction fails before the body runs (lock or read failure).
    var failReads = false
    /// Every write fails (after the body ran).
    var failWrites = false
    /// Writes succeed this many more times, then fail.
    var writesBeforeFailure: Int?
    /// What a failed read or write throws.
    var readFailure = StoreFailure.lockFailed(Errno(5))
    var writeFailure = StoreFailure.writeFailed(Errno(28))
    /// What the system layer would say about the medium and the process.
    var facts = StorageFacts.unknown
    func storageFacts() -> StorageFacts { facts }

    private(set) var transactions = 0
    private(set) var writes = 0
    private(set) var failedWrites = 0
    /// Runs as a transaction begins, once, before its lock is taken:
    /// another prompt's work in between.
    var beforeNextTransaction: (() -> Void)?
    /// uid and name of every transaction.
    private(set) var keys: [(UInt32, [UInt8])] = []

    init(_ record: StateRecord? = nil) {
        stored = record
        status = record == nil ? .absent : .loaded
    }

    /// The record gone, as another prompt's removal leaves it.
    func clear() {
        stored = nil
        status = .absent
    }

    /// A store whose record is damaged (R12).
    static func damaged(_ why: RecordDamage) -> FakeStore {
        let store = FakeStore()
        store.status = .damaged(why)
        return store
    }

    var record: StateRecord? { status == .loaded ? stored : nil }
    var fingerprintFailures: Int { record?.fingerprintFailures ?? 0 }
    var passcodeFailures: Int { record?.passcodeFailures ?? 0 }

    func withRecord<Result>(uid: UInt32, userName: [UInt8],
                            _ body: (inout StateRecord?, LoadStatus) -> Result) throws(StoreFailure) -> Result {
        transactions += 1
        keys.append((uid, userName))
        if let before = beforeNextTransaction {
            beforeNextTransaction = nil
            before()
        }
        if failReads { throw readFailure }
        let loaded: StateRecord? = status == .loaded ? stored : nil
        var working = loaded
        let result = body(&working, status)
        if let changed = working, changed != loaded || status != .loaded {
            if failWrites { failedWrites += 1; throw writeFailure }
            if let remaining = writesBeforeFailure {
                if remaining <= 0 { failedWrites += 1; throw writeFailure }
                writesBeforeFailure = remaining - 1
            }
            stored = changed
            status = .loaded
            writes += 1
        }
        return result
    }

    /// What a peek throws (a shortage), when set.
    var peekFailure: StoreFailure? = nil
    private(set) var peeks = 0
    private(set) var removals = 0

    /// The record as stored: a read-only disk still reads.
    func peek(uid: UInt32, userName: [UInt8]) throws(StoreFailure) -> (record: StateRecord?, status: LoadStatus) {
        peeks += 1
        if let peekFailure { throw peekFailure }
        return (status == .loaded ? stored : nil, status)
    }

    /// What a removal throws, when set.
    var removeFailure: StoreFailure? = nil

    func remove(uid: UInt32, userName: [UInt8], ifStill record: StateRecord) throws(StoreFailure) -> Bool {
        if let removeFailure { throw removeFailure }
        guard status == .loaded else { return true }
        guard stored == record else { return false }
        stored = nil
        status = .absent
        removals += 1
        return true
    }
}

// MARK: - Clock and log

final class ManualClock: Clock {
    var boot: Int64
    var wall: Int64
    var bootIdentifier: [UInt8]

    init(boot: Int64 = 5_000_000_000_000, wall: Int64 = 1_750_000_000, bootID: UInt8 = 1) {
        self.boot = boot
        self.wall = wall
        bootIdentifier = [UInt8](repeating: bootID, count: 16)
    }

    func bootNanoseconds() -> Int64 { boot }
    func wallSeconds() -> Int64 { wall }
    func bootID() -> [UInt8] { bootIdentifier }

    /// Time passes on both clocks.
    func advance(seconds: Int64) {
        boot += seconds * 1_000_000_000
        wall += seconds
    }

    /// A reboot: a new boot id and a boot clock that starts again near zero.
    func reboot(id: UInt8, uptimeSeconds: Int64 = 20) {
        bootIdentifier = [UInt8](repeating: id, count: 16)
        boot = uptimeSeconds * 1_000_000_000
    }
}

final class RecordingLog: EventLog {
    private(set) var entries: [(level: LogLevel, message: String)] = []
    func log(_ level: LogLevel, _ message: String) { entries.append((level, message)) }
    func has(_ level: LogLevel, _ fragment: String) -> Bool {
        entries.contains { $0.level == level && $0.message.contains(fragment) }
    }
}

// MARK: - Harness

typealias TestEngine = Engine<FakeSensor, FakeVerifier, FakePrompter, FakeStore, ManualClock, RecordingLog, FakeSeat>

/// logind as a test sets it; no logind unless told.
final class FakeSeat: SeatObserver {
    var observation: SeatObservation = .noLogind
    private(set) var observeCalls = 0
    /// Called at every `observe`, before it answers.
    var onObserve: (() -> Void)?
    init(_ observation: SeatObservation = .noLogind) { self.observation = observation }
    func observe() -> SeatObservation {
        observeCalls += 1
        onObserve?()
        return observation
    }
}

var alice: UserIdentity { UserIdentity(uid: 1000, name: bytes("alice")) }
var rootUser: UserIdentity { UserIdentity(uid: 0, name: bytes("root")) }

/// Texts the engine shows; the tests pin them so a prompt that changes is noticed.
enum Text {
    static let firstPrompt = "Password, or press Enter to use your fingerprint: "
    static let passcodePrompt = "Enter Password: "
    static let locked = "Too many failed fingerprint attempts. Fingerprint is locked until you enter your password."
    static let place = "Place your finger on the fingerprint reader."
    static let swipe = "Swipe your finger across the fingerprint reader."
    static let noMatchTryAgain = "Fingerprint not recognized. Try again."
    static let notRecognized = "Fingerprint not recognized."
    static let ctrlC = "Press Ctrl-C to Enter Password."
    static let touchOrType = "Touch the fingerprint reader or type your password:"
    static let dialogTouchOrType = "Password or touch the fingerprint reader:"
    static let noMatchTouchOrType = "Fingerprint not recognized. Try again, or type your password."
    static let timedOut = "Timed out waiting for a fingerprint."
    static let disconnected = "The fingerprint reader was disconnected."
    static let stopped = "The fingerprint reader stopped working."
    static let busy = "The fingerprint reader is in use by another prompt."
    static let failing = "The fingerprint reader is not available now."
    static let waitPrefix = "Too many wrong passwords. Try again in "
}

/// The options the engine's tests start from: the defaults, except that the
/// first prompt of a boot is not sent to the password, so that the other
/// rules can be tested from a fresh record. The boot rule and the other
/// password-required rules have their own table (BiometryRulesTests) with
/// the defaults as shipped.
var unitOptions: Options {
    var options = Options()
    options.passcodeAfterBoot = false
    return options
}

/// One set of fakes shared by the prompts of a test.
final class World {
    var options: Options
    let sensor: FakeSensor
    let verifier: FakeVerifier
    let prompter: FakePrompter
    let store: FakeStore
    /// /run's store, where counting goes on while `store` is read-only.
    let runtime: FakeStore
    let clock: ManualClock
    let log: RecordingLog
    let seat: FakeSeat

    init(options: Options = unitOptions, sensor: FakeSensor = FakeSensor(), verifier: FakeVerifier = FakeVerifier(),
         prompter: FakePrompter = FakePrompter(), store: FakeStore = FakeStore(), runtime: FakeStore = FakeStore(),
         clock: ManualClock = ManualClock(), log: RecordingLog = RecordingLog(), seat: FakeSeat = FakeSeat()) {
        self.seat = seat
        self.options = options
        self.sensor = sensor
        self.verifier = verifier
        self.prompter = prompter
        self.store = store
        self.runtime = runtime
        self.clock = clock
        self.log = log
        // R3 probes: what the store that counts holds when a verification
        // starts (/run's while it holds the record).
        sensor.probe = { (runtime.record != nil ? runtime : store).fingerprintFailures }
        verifier.probe = { (runtime.record != nil ? runtime : store).passcodeFailures }
    }

    func engine() -> TestEngine {
        Engine(options: options, sensor: sensor, verifier: verifier, prompter: prompter, store: store, runtime: runtime, clock: clock,
               log: log, seat: seat)
    }

    func request(_ user: UserIdentity = alice, mode: InteractionMode = .terminal, silent: Bool = false,
                 scope: ScopeDecision = .inScope, service: String = "sudo", session: String = "",
                 actsForAName: Bool = false, promptStaysOpen: Bool = false, clientReadsKeys: Bool = false) -> Request {
        var request = Request(scope: scope, userName: user.name, user: scope == .inScope ? user : nil, service: bytes(service),
                              tty: bytes("/dev/pts/3"), remoteHost: [], mode: mode, silent: silent)
        request.session = bytes(session)
        request.callerActsForAName = actsForAName
        request.promptStaysOpen = promptStaysOpen
        request.clientReadsKeys = clientReadsKeys
        return request
    }

    /// One prompt (one `pam_sm_authenticate`): a fresh engine over the same fakes.
    @discardableResult
    func prompt(_ user: UserIdentity = alice, policy: EvaluationPolicy = .owner, mode: InteractionMode = .terminal, silent: Bool = false,
                scope: ScopeDecision = .inScope, service: String = "sudo", answers: [Answer] = [], script: [SensorStep] = [],
                passcode: SecretBuffer = SecretBuffer(), session: String = "", actsForAName: Bool = false,
                promptStaysOpen: Bool = false, clientReadsKeys: Bool = false) -> EvaluationResult {
        prompter.answers.append(contentsOf: answers)
        sensor.script.append(contentsOf: script)
        var engine = engine()
        return engine.evaluate(request(user, mode: mode, silent: silent, scope: scope, service: service, session: session,
                                       actsForAName: actsForAName, promptStaysOpen: promptStaysOpen,
                                       clientReadsKeys: clientReadsKeys),
                               policy: policy, passcode: passcode)
    }
}

/// A stored record with the given counts.
func storedRecord(_ user: UserIdentity = alice, f: Int = 0, p: Int = 0, wall: Int64 = 1_700_000_000) -> StateRecord {
    var record = StateRecord(uid: user.uid, userName: user.name, createdWallSeconds: wall)
    record.fingerprintFailures = f
    record.passcodeFailures = p
    return record
}
