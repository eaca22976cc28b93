import XCTest
import LocalAuth

/// The rules and result codes of docs/DESIGN.md as a table: every row is one prompt from a given state,
/// with everything that must (and must not) happen. Multi-prompt stories
/// (back-off schedules, clocks, lockout across prompts) are in EngineTests.

enum InitialState {
    case absent
    /// A stored record; `backoffMilliseconds` is a wait that started now.
    case record(f: Int, p: Int, backoffMilliseconds: Int64 = 0)
    case damaged(RecordDamage)
}

enum StoreFault: Equatable {
    case none
    case reads
    case writes
    /// The state directory's filesystem is read-only (EROFS on the lock),
    /// met by a process of the system's or by one a user set up.
    case readOnly(system: Bool)
    /// The disk fails every write (EIO), met by a process of the system's;
    /// the filesystem went read-only after the error (errors=remount-ro),
    /// or stayed writable.
    case failingDisk(readOnlyAfter: Bool)
    /// The filesystem is full (ENOSPC), met by a process of the system's.
    case fullDisk
    /// The state directory is read-only (a process of the system's), and
    /// /run cannot be written either.
    case readOnlyAndRunUnusable

    /// Whether the counting goes on in /run.
    var countsInRuntime: Bool { self == .readOnly(system: true) || self == .failingDisk(readOnlyAfter: true) }
}

struct Scenario {
    var name: String
    var policy: EvaluationPolicy
    // Inputs.
    var configure: (inout Options) -> Void = { _ in }
    var mode: InteractionMode = .terminal
    var silent = false
    var user = alice
    var scope: ScopeDecision = .inScope
    var initial: InitialState = .record(f: 0, p: 0)
    var storeFault: StoreFault = .none
    var availability: SensorAvailability = .available(domainState: [0xD0, 0x0D])
    var open: SensorSession = .opened(.press)
    var script: [SensorStep] = []
    /// The attempt during which a Ctrl-C arrives (found pending after its verdict).
    var interruptDuring: Int? = nil
    var answers: [Answer] = []
    /// An app's button at each interrupted wait.
    var choices: [WaitChoice?] = []
    /// Touch or type: the line typed while the reader waits (nil: the
    /// conversation reads no keys).
    var typed: String? = nil
    /// polkit's dialog whose agent takes the verdict while prompting
    /// (prompt mode): the password prompt may stay open while the reader waits.
    var dialog = false
    /// The helper's client reads the keys (`localauth evaluate`, the helper's
    /// scan mode for apps): touch or type through it.
    var clientKeys = false
    var verifierBegins = true
    var forcedVerdict: PasscodeVerdict? = nil
    // Expectations. Counts default to "did not happen"; outcome and code must be given.
    var outcome: Outcome? = nil
    var code: PAMCode? = nil
    var failDelay = false
    /// F and P in the store afterwards (0 for an absent record).
    var f = 0
    var p = 0
    /// The stored back-off afterwards, when it matters.
    var backoffAfter: Int64? = nil
    var sensorOpens = 0
    var fingerprintAttempts = 0
    var passcodeBegins = 0
    var passcodeChecks = 0
    /// P seen by each passcode verification; nil: derived (initial P + 1, R3).
    var pAtCheck: [Int]? = nil
    /// Exactly the prompts asked, in order.
    var prompts: [String] = []
    /// Exactly the prompts left open while the reader waited (dialogs).
    var leftOpen: [String] = []
    var says: [String] = []
    var saysError: [String] = []
    var saysNot: [String] = []
    /// The fallback offers (their titles) the conversation got, when checked.
    var fallbackOffers: [String]? = nil
    var logs: [(LogLevel, String)] = []
    /// The store must never be touched (R1, R14).
    var storeUntouched = false

    init(_ name: String, _ policy: EvaluationPolicy, _ build: (inout Scenario) -> Void) {
        self.name = name
        self.policy = policy
        build(&self)
    }
}

var wrongAnswer: Answer { .text("hunter2") }
var rightAnswer: Answer { .text("correct horse") }

extension SensorStep {
    static var match: SensorStep { SensorStep(.match) }
    static var noMatch: SensorStep { SensorStep(.noMatch) }
}

func scenarios() -> [Scenario] {
    var table: [Scenario] = []
    func add(_ name: String, _ policy: EvaluationPolicy, _ build: (inout Scenario) -> Void) {
        table.append(Scenario(name, policy, build))
    }

    // MARK: R1 scope
    for policy in [EvaluationPolicy.owner, .biometrics] {
        for refusal in [ScopeRefusal.service, .remote, .requester] {
            add("R1 out of scope (\(refusal)) → IGNORE, no record touched", policy) {
                $0.scope = .outOfScope(refusal)
                $0.initial = .record(f: 2, p: 1)
                $0.outcome = .outOfScope; $0.code = .authInfoUnavailable
                $0.f = 2; $0.p = 1; $0.storeUntouched = true
            }
        }
    }

    // MARK: R2 / R4 fingerprint match
    add("R4 owner: match on the first try", .owner) {
        $0.script = [.match]
        $0.outcome = .success(.biometry); $0.code = .success
        $0.sensorOpens = 1; $0.fingerprintAttempts = 1
        $0.says = [Text.place]
        $0.saysNot = ["Ctrl-C"]
    }
    add("R4 biometrics: match on the first try", .biometrics) {
        $0.script = [.match]
        $0.outcome = .success(.biometry); $0.code = .success
        $0.sensorOpens = 1; $0.fingerprintAttempts = 1
        $0.says = [Text.place]
    }
    add("R4 owner: a match resets F and P", .owner) {
        $0.initial = .record(f: 4, p: 3)
        $0.script = [.match]
        $0.outcome = .success(.biometry); $0.code = .success
        $0.sensorOpens = 1; $0.fingerprintAttempts = 1
    }
    add("R4 biometrics: a match resets F and P", .biometrics) {
        $0.initial = .record(f: 2, p: 4)
        $0.script = [.noMatch, .match]
        $0.outcome = .success(.biometry); $0.code = .success
        $0.sensorOpens = 1; $0.fingerprintAttempts = 2
        $0.says = [Text.noMatchTryAgain]
    }
    add("R4 owner: a swipe reader asks for a swipe", .owner) {
        $0.open = .opened(.swipe)
        $0.script = [.match]
        $0.outcome = .success(.biometry); $0.code = .success
        $0.sensorOpens = 1; $0.fingerprintAttempts = 1
        $0.says = [Text.swipe]; $0.saysNot = [Text.place]
    }
    add("R3 owner: retry hints are not verdicts; match after them charges nothing", .owner) {
        $0.script = [SensorStep(.match, hints: RetryHint.allCases)]
        $0.outcome = .success(.biometry); $0.code = .success
        $0.sensorOpens = 1; $0.fingerprintAttempts = 1
        $0.says = ["Scan failed. Try again.", "Swipe was too short. Try again.", "Finger was not centered. Try again.",
                   "Remove your finger and try again."]
    }
    add("R3 biometrics: hints then a timeout are refunded", .biometrics) {
        $0.initial = .record(f: 1, p: 0)
        $0.script = [SensorStep(.timeout, hints: [.retryScan, .swipeTooShort])]
        $0.outcome = .failure(.systemCancel); $0.code = .authInfoUnavailable
        $0.f = 1
        $0.sensorOpens = 1; $0.fingerprintAttempts = 1
        $0.says = ["Scan failed. Try again.", Text.timedOut]
    }
    add("R3 owner: hints then a timeout are refunded, then the passcode", .owner) {
        $0.initial = .record(f: 1, p: 0)
        $0.script = [SensorStep(.timeout, hints: [.removeAndRetry])]
        $0.answers = [wrongAnswer]
        $0.outcome = .failure(.authenticationFailed); $0.code = .authError; $0.failDelay = true
        $0.f = 1; $0.p = 1
        $0.sensorOpens = 1; $0.fingerprintAttempts = 1
        $0.passcodeBegins = 1; $0.passcodeChecks = 1
        $0.prompts = [Text.passcodePrompt]
        $0.says = ["Remove your finger and try again.", Text.timedOut]
    }

    // MARK: R2 biometrics not usable
    let unusable: [(String, SensorAvailability, LAErrorCode)] = [
        ("fprintd unreachable", .unreachable, .biometryNotAvailable),
        ("no device", .noDevice, .biometryNotAvailable),
        ("no enrolled finger", .notEnrolled, .biometryNotEnrolled),
        ("fprintd answers with an error", .failing, .biometryNotAvailable),
    ]
    for (label, availability, error) in unusable {
        add("R2 owner: \(label) → straight to the passcode (correct)", .owner) {
            $0.availability = availability
            $0.initial = .record(f: 1, p: 2)
            $0.answers = [rightAnswer]
            $0.outcome = .success(.passcode); $0.code = .success
            $0.passcodeBegins = 1; $0.passcodeChecks = 1
            $0.prompts = [Text.passcodePrompt]
            $0.saysNot = [Text.place, Text.locked]
        }
        add("R2 owner: \(label) → straight to the passcode (wrong)", .owner) {
            $0.availability = availability
            $0.answers = [wrongAnswer]
            $0.outcome = .failure(.authenticationFailed); $0.code = .authError; $0.failDelay = true
            $0.p = 1
            $0.passcodeBegins = 1; $0.passcodeChecks = 1
            $0.prompts = [Text.passcodePrompt]
        }
        add("R2 owner prompt mode: \(label) → no fingerprint prompt, only the passcode", .owner) {
            $0.availability = availability
            $0.mode = .prompt
            $0.answers = [rightAnswer]
            $0.outcome = .success(.passcode); $0.code = .success
            $0.passcodeBegins = 1; $0.passcodeChecks = 1
            $0.prompts = [Text.passcodePrompt]
        }
        add("R2 biometrics: \(label) → \(error.name), AUTHINFO_UNAVAIL", .biometrics) {
            $0.availability = availability
            $0.initial = .record(f: 1, p: 0)
            $0.outcome = .failure(error); $0.code = .authInfoUnavailable
            $0.f = 1
        }
        add("R2 biometrics prompt mode: \(label) → handed over without a prompt", .biometrics) {
            $0.availability = availability
            $0.mode = .prompt
            $0.outcome = .failure(error); $0.code = .authInfoUnavailable
        }
    }
    add("R2 owner: reader busy → said, then the passcode", .owner) {
        $0.open = .busy
        $0.answers = [rightAnswer]
        $0.outcome = .success(.passcode); $0.code = .success
        $0.sensorOpens = 1
        $0.passcodeBegins = 1; $0.passcodeChecks = 1
        $0.prompts = [Text.passcodePrompt]
        $0.says = [Text.busy]
    }
    add("R2 biometrics: reader busy → biometryNotAvailable", .biometrics) {
        $0.open = .busy
        $0.outcome = .failure(.biometryNotAvailable); $0.code = .authInfoUnavailable
        $0.sensorOpens = 1
        $0.says = [Text.busy]
    }
    add("R2 owner: the reader cannot be claimed → the passcode", .owner) {
        $0.open = .failed
        $0.answers = [wrongAnswer]
        $0.outcome = .failure(.authenticationFailed); $0.code = .authError; $0.failDelay = true
        $0.p = 1
        $0.sensorOpens = 1
        $0.passcodeBegins = 1; $0.passcodeChecks = 1
        $0.prompts = [Text.passcodePrompt]
    }
    add("R2 biometrics: the reader cannot be claimed → biometryNotAvailable", .biometrics) {
        $0.open = .failed
        $0.outcome = .failure(.biometryNotAvailable); $0.code = .authInfoUnavailable
        $0.sensorOpens = 1
    }

    // MARK: R5 lockout accounting
    add("R5 owner: 3 no-matches then the correct passcode → success, F = 0", .owner) {
        $0.script = [.noMatch, .noMatch, .noMatch]
        $0.answers = [rightAnswer]
        $0.outcome = .success(.passcode); $0.code = .success
        $0.sensorOpens = 1; $0.fingerprintAttempts = 3
        $0.passcodeBegins = 1; $0.passcodeChecks = 1
        $0.prompts = [Text.passcodePrompt]
        $0.says = [Text.noMatchTryAgain, "Fingerprint not recognized."]
        $0.saysNot = [Text.locked]
    }
    add("R5 owner: 3 no-matches and a wrong passcode → AUTH_ERR, F = 3, P = 1", .owner) {
        $0.script = [.noMatch, .noMatch, .noMatch]
        $0.answers = [wrongAnswer]
        $0.outcome = .failure(.authenticationFailed); $0.code = .authError; $0.failDelay = true
        $0.f = 3; $0.p = 1
        $0.sensorOpens = 1; $0.fingerprintAttempts = 3
        $0.passcodeBegins = 1; $0.passcodeChecks = 1
        $0.prompts = [Text.passcodePrompt]
    }
    add("R5 owner: the next prompt allows exactly 2 attempts, then locks", .owner) {
        $0.initial = .record(f: 3, p: 1)
        $0.script = [.noMatch, .noMatch]
        $0.answers = [wrongAnswer]
        $0.outcome = .failure(.authenticationFailed); $0.code = .authError; $0.failDelay = true
        $0.f = 5; $0.p = 2
        $0.sensorOpens = 1; $0.fingerprintAttempts = 2
        $0.passcodeBegins = 1; $0.passcodeChecks = 1
        $0.prompts = [Text.passcodePrompt]
        $0.saysError = [Text.locked]
    }
    add("R5 owner: F = L → sensor never opened, said, the correct passcode unlocks", .owner) {
        $0.initial = .record(f: 5, p: 2)
        $0.answers = [rightAnswer]
        $0.outcome = .success(.passcode); $0.code = .success
        $0.passcodeBegins = 1; $0.passcodeChecks = 1
        $0.prompts = [Text.passcodePrompt]
        $0.saysError = [Text.locked]
        $0.saysNot = [Text.place]
    }
    add("R5 owner: F > L stays locked after a wrong passcode", .owner) {
        $0.initial = .record(f: 7, p: 1)
        $0.answers = [wrongAnswer]
        $0.outcome = .failure(.authenticationFailed); $0.code = .authError; $0.failDelay = true
        $0.f = 7; $0.p = 2
        $0.passcodeBegins = 1; $0.passcodeChecks = 1
        $0.prompts = [Text.passcodePrompt]
        $0.saysError = [Text.locked]
    }
    add("R5 owner prompt mode: locked → no fingerprint prompt", .owner) {
        $0.mode = .prompt
        $0.initial = .record(f: 5, p: 0)
        $0.answers = [wrongAnswer]
        $0.outcome = .failure(.authenticationFailed); $0.code = .authError; $0.failDelay = true
        $0.f = 5; $0.p = 1
        $0.passcodeBegins = 1; $0.passcodeChecks = 1
        $0.prompts = [Text.passcodePrompt]
        $0.saysError = [Text.locked]
    }
    add("R5 biometrics: 3 no-matches → attempts used up, AUTH_ERR", .biometrics) {
        $0.script = [.noMatch, .noMatch, .noMatch]
        $0.outcome = .failure(.authenticationFailed); $0.code = .authError
        $0.f = 3
        $0.sensorOpens = 1; $0.fingerprintAttempts = 3
        $0.saysNot = [Text.locked]
    }
    add("R5 biometrics: 2 more no-matches reach L → locked, AUTH_ERR", .biometrics) {
        $0.initial = .record(f: 3, p: 0)
        $0.script = [.noMatch, .noMatch]
        $0.outcome = .failure(.authenticationFailed); $0.code = .authError
        $0.f = 5
        $0.sensorOpens = 1; $0.fingerprintAttempts = 2
        $0.saysError = [Text.locked]
    }
    add("R5 biometrics: F = L → biometryLockout, sensor never opened", .biometrics) {
        $0.initial = .record(f: 5, p: 0)
        $0.outcome = .failure(.biometryLockout); $0.code = .authInfoUnavailable
        $0.f = 5
        $0.saysError = [Text.locked]
    }
    add("R5 owner: lockout=2 allows only 2 attempts even with max_tries 3", .owner) {
        $0.configure = { $0.lockout = 2; $0.maxTries = 2 }
        $0.script = [.noMatch, .noMatch]
        $0.answers = [wrongAnswer]
        $0.outcome = .failure(.authenticationFailed); $0.code = .authError; $0.failDelay = true
        $0.f = 2; $0.p = 1
        $0.sensorOpens = 1; $0.fingerprintAttempts = 2
        $0.passcodeBegins = 1; $0.passcodeChecks = 1
        $0.prompts = [Text.passcodePrompt]
        $0.saysError = [Text.locked]
    }

    // MARK: R16 touch or type (terminal mode, policy owner)
    add("R16 touch or type: a touch wins", .owner) {
        $0.typed = ""
        $0.script = [.match]
        $0.outcome = .success(.biometry); $0.code = .success
        $0.sensorOpens = 1; $0.fingerprintAttempts = 1
        $0.says = [Text.touchOrType]
    }
    add("R16 touch or type: the password typed while the reader waits is the attempt; the wait's is given back", .owner) {
        $0.typed = "correct horse"
        $0.script = [SensorStep(.interrupted)]
        $0.choices = [.typedPassword]
        $0.outcome = .success(.passcode); $0.code = .success
        $0.sensorOpens = 1; $0.fingerprintAttempts = 1
        $0.passcodeBegins = 1; $0.passcodeChecks = 1
        $0.says = [Text.touchOrType]
    }
    add("R16 touch or type: a wrong typed password is charged, the wait's attempt given back", .owner) {
        $0.typed = "hunter2"
        $0.script = [SensorStep(.interrupted)]
        $0.choices = [.typedPassword]
        $0.outcome = .failure(.authenticationFailed); $0.code = .authError; $0.failDelay = true
        $0.f = 0; $0.p = 1
        $0.sensorOpens = 1; $0.fingerprintAttempts = 1
        $0.passcodeBegins = 1; $0.passcodeChecks = 1
    }
    add("R16 touch or type: a miss before Enter counts, then the typed password", .owner) {
        $0.typed = "hunter2"
        $0.script = [.noMatch, SensorStep(.interrupted)]
        $0.choices = [.typedPassword]
        $0.outcome = .failure(.authenticationFailed); $0.code = .authError; $0.failDelay = true
        $0.f = 1; $0.p = 1
        $0.sensorOpens = 1; $0.fingerprintAttempts = 2
        $0.passcodeBegins = 1; $0.passcodeChecks = 1
        $0.saysError = [Text.noMatchTouchOrType]
    }
    add("R16 touch or type: Enter while a finger is judged: the miss counts, no next attempt", .owner) {
        $0.typed = "hunter2"
        $0.script = [.noMatch]
        $0.interruptDuring = 1
        $0.choices = [.typedPassword]
        $0.outcome = .failure(.authenticationFailed); $0.code = .authError; $0.failDelay = true
        $0.f = 1; $0.p = 1
        $0.sensorOpens = 1; $0.fingerprintAttempts = 1
        $0.passcodeBegins = 1; $0.passcodeChecks = 1
    }
    add("R16 touch or type: a stop that cannot prove no finger was judged keeps the attempt; the password is still checked", .owner) {
        $0.typed = "hunter2"
        $0.script = [SensorStep(.stoppedAfterPossibleScan(.interrupted))]
        $0.choices = [.typedPassword]
        $0.outcome = .failure(.authenticationFailed); $0.code = .authError; $0.failDelay = true
        $0.f = 1; $0.p = 1
        $0.sensorOpens = 1; $0.fingerprintAttempts = 1
        $0.passcodeBegins = 1; $0.passcodeChecks = 1
    }
    add("R16 touch or type: Enter alone asks the password through the conversation", .owner) {
        $0.typed = ""
        $0.script = [SensorStep(.interrupted)]
        $0.choices = [.passwordWanted]
        $0.answers = [rightAnswer]
        $0.outcome = .success(.passcode); $0.code = .success
        $0.sensorOpens = 1; $0.fingerprintAttempts = 1
        $0.passcodeBegins = 1; $0.passcodeChecks = 1
        $0.prompts = [Text.passcodePrompt]
    }
    add("R16 touch or type: Ctrl-C after a miss cancels; the miss stays", .owner) {
        $0.typed = ""
        $0.script = [.noMatch, SensorStep(.interrupted)]
        $0.choices = [.cancel]
        $0.outcome = .failure(.userCancel); $0.code = .conversationError
        $0.f = 1
        $0.sensorOpens = 1; $0.fingerprintAttempts = 2
    }
    add("R16 touch or type: at 4 failures a wrong typed password never locks the finger by itself", .owner) {
        $0.typed = "hunter2"
        $0.initial = .record(f: 4, p: 0)
        $0.script = [SensorStep(.interrupted)]
        $0.choices = [.typedPassword]
        $0.outcome = .failure(.authenticationFailed); $0.code = .authError; $0.failDelay = true
        $0.f = 4; $0.p = 1
        $0.sensorOpens = 1; $0.fingerprintAttempts = 1
        $0.passcodeBegins = 1; $0.passcodeChecks = 1
    }
    add("R16 touch or type: at 4 failures the right typed password resets everything", .owner) {
        $0.typed = "correct horse"
        $0.initial = .record(f: 4, p: 2)
        $0.script = [SensorStep(.interrupted)]
        $0.choices = [.typedPassword]
        $0.outcome = .success(.passcode); $0.code = .success
        $0.sensorOpens = 1; $0.fingerprintAttempts = 1
        $0.passcodeBegins = 1; $0.passcodeChecks = 1
        $0.pAtCheck = [3]
    }
    add("R16 touch or type: the reader's tries used up, nothing typed: the conversation asks", .owner) {
        $0.typed = ""
        $0.script = [.noMatch, .noMatch, .noMatch]
        $0.answers = [rightAnswer]
        $0.outcome = .success(.passcode); $0.code = .success
        $0.sensorOpens = 1; $0.fingerprintAttempts = 3
        $0.passcodeBegins = 1; $0.passcodeChecks = 1
        $0.prompts = [Text.passcodePrompt]
    }
    add("R16 biometrics: keys are never read, whatever the conversation could", .biometrics) {
        $0.typed = "hunter2"
        $0.script = [.match]
        $0.outcome = .success(.biometry); $0.code = .success
        $0.sensorOpens = 1; $0.fingerprintAttempts = 1
        $0.says = [Text.place]
    }
    add("R16 prompt mode: keys are never read", .owner) {
        $0.mode = .prompt
        $0.typed = "hunter2"
        $0.answers = [.empty]
        $0.script = [.match]
        $0.outcome = .success(.biometry); $0.code = .success
        $0.sensorOpens = 1; $0.fingerprintAttempts = 1
        $0.prompts = [Text.firstPrompt]
    }

    // MARK: R16 touch or type in a dialog (polkit's agent helper, an agent that takes the verdict while prompting)
    add("R16 dialog: a touch wins with the prompt open; nothing is said", .owner) {
        $0.dialog = true; $0.typed = ""
        $0.script = [.match]
        $0.outcome = .success(.biometry); $0.code = .success
        $0.sensorOpens = 1; $0.fingerprintAttempts = 1
        $0.leftOpen = [Text.dialogTouchOrType]
        $0.saysNot = [Text.place, Text.touchOrType, Text.firstPrompt]
    }
    add("R16 dialog: the password typed while the reader waits is the attempt; the wait's is given back", .owner) {
        $0.dialog = true; $0.typed = "correct horse"
        $0.script = [SensorStep(.interrupted)]
        $0.choices = [.typedPassword]
        $0.outcome = .success(.passcode); $0.code = .success
        $0.sensorOpens = 1; $0.fingerprintAttempts = 1
        $0.passcodeBegins = 1; $0.passcodeChecks = 1
        $0.leftOpen = [Text.dialogTouchOrType]
    }
    add("R16 dialog: a wrong typed password is charged; misses before it count", .owner) {
        $0.dialog = true; $0.typed = "hunter2"
        $0.script = [.noMatch, SensorStep(.interrupted)]
        $0.choices = [.typedPassword]
        $0.outcome = .failure(.authenticationFailed); $0.code = .authError; $0.failDelay = true
        $0.f = 1; $0.p = 1
        $0.sensorOpens = 1; $0.fingerprintAttempts = 2
        $0.passcodeBegins = 1; $0.passcodeChecks = 1
        $0.leftOpen = [Text.dialogTouchOrType]
        $0.saysNot = [Text.noMatchTouchOrType, Text.noMatchTryAgain]
    }
    add("R16 dialog: the reader's tries used up, the open prompt's answer is the password (no second prompt)", .owner) {
        $0.dialog = true; $0.typed = ""
        $0.script = [.noMatch, .noMatch, .noMatch]
        $0.answers = [rightAnswer]
        $0.outcome = .success(.passcode); $0.code = .success
        $0.sensorOpens = 1; $0.fingerprintAttempts = 3
        $0.passcodeBegins = 1; $0.passcodeChecks = 1
        $0.leftOpen = [Text.dialogTouchOrType]
        $0.saysNot = [Text.notRecognized]
    }
    add("R16 dialog: an empty answer while the reader waits asks the password", .owner) {
        $0.dialog = true; $0.typed = ""
        $0.script = [SensorStep(.interrupted)]
        $0.choices = [.passwordWanted]
        $0.answers = [rightAnswer]
        $0.outcome = .success(.passcode); $0.code = .success
        $0.sensorOpens = 1; $0.fingerprintAttempts = 1
        $0.passcodeBegins = 1; $0.passcodeChecks = 1
        $0.leftOpen = [Text.dialogTouchOrType]
        $0.prompts = [Text.passcodePrompt]
    }
    add("R16 dialog: cancelled while the reader waits: nothing charged", .owner) {
        $0.dialog = true; $0.typed = ""
        $0.script = [SensorStep(.interrupted)]
        $0.choices = [.cancel]
        $0.outcome = .failure(.userCancel); $0.code = .conversationError
        $0.sensorOpens = 1; $0.fingerprintAttempts = 1
        $0.leftOpen = [Text.dialogTouchOrType]
    }
    add("R16 dialog: at 4 failures a wrong typed password never locks the finger by itself", .owner) {
        $0.dialog = true; $0.typed = "hunter2"
        $0.initial = .record(f: 4, p: 0)
        $0.script = [SensorStep(.interrupted)]
        $0.choices = [.typedPassword]
        $0.outcome = .failure(.authenticationFailed); $0.code = .authError; $0.failDelay = true
        $0.f = 4; $0.p = 1
        $0.sensorOpens = 1; $0.fingerprintAttempts = 1
        $0.passcodeBegins = 1; $0.passcodeChecks = 1
        $0.leftOpen = [Text.dialogTouchOrType]
    }
    add("R16 dialog: a prompt that cannot stay open: the first prompt asks, Enter starts the reader", .owner) {
        $0.dialog = true
        $0.script = [.noMatch, .noMatch, .noMatch]
        $0.answers = [.empty, rightAnswer]
        $0.outcome = .success(.passcode); $0.code = .success
        $0.sensorOpens = 1; $0.fingerprintAttempts = 3
        $0.passcodeBegins = 1; $0.passcodeChecks = 1
        $0.prompts = [Text.firstPrompt, Text.passcodePrompt]
        $0.says = [Text.place]
    }
    add("R16 dialog: during the password back-off the prompt stays open; the finger works", .owner) {
        $0.dialog = true; $0.typed = ""
        $0.initial = .record(f: 0, p: 5, backoffMilliseconds: 30_000)
        $0.script = [.match]
        $0.outcome = .success(.biometry); $0.code = .success
        $0.sensorOpens = 1; $0.fingerprintAttempts = 1
        $0.leftOpen = [Text.dialogTouchOrType]
    }
    add("R16 dialog: during the password back-off a typed password is refused unchecked; the wait's attempt given back", .owner) {
        $0.dialog = true; $0.typed = "correct horse"
        $0.initial = .record(f: 0, p: 5, backoffMilliseconds: 30_000)
        $0.script = [SensorStep(.interrupted)]
        $0.choices = [.typedPassword]
        $0.outcome = .failure(.authenticationFailed); $0.code = .credentialsInsufficient
        $0.f = 0; $0.p = 5; $0.backoffAfter = 30_000
        $0.sensorOpens = 1; $0.fingerprintAttempts = 1
        $0.passcodeBegins = 1
        $0.leftOpen = [Text.dialogTouchOrType]
        $0.saysError = [Text.waitPrefix]
    }
    add("R16 dialog: locked finger: the password prompt alone", .owner) {
        $0.dialog = true; $0.typed = ""
        $0.initial = .record(f: 5, p: 0)
        $0.answers = [rightAnswer]
        $0.outcome = .success(.passcode); $0.code = .success
        $0.passcodeBegins = 1; $0.passcodeChecks = 1
        $0.prompts = [Text.passcodePrompt]
        $0.saysError = [Text.locked]
    }
    add("R16 dialog under biometrics: never left open", .biometrics) {
        $0.dialog = true; $0.typed = ""
        $0.answers = [.empty]
        $0.script = [.match]
        $0.outcome = .success(.biometry); $0.code = .success
        $0.sensorOpens = 1; $0.fingerprintAttempts = 1
        $0.prompts = [Text.firstPrompt]
    }

    // MARK: R16 touch or type through the helper's client (`localauth evaluate` at a terminal)
    add("R16 client keys: a touch wins; no fallback offered while keys are read", .owner) {
        $0.clientKeys = true; $0.typed = ""
        $0.script = [.noMatch, .match]
        $0.outcome = .success(.biometry); $0.code = .success
        $0.sensorOpens = 1; $0.fingerprintAttempts = 2
        $0.says = [Text.touchOrType]
        $0.saysError = [Text.noMatchTouchOrType]
        $0.fallbackOffers = []
    }
    add("R16 client keys: Enter on the typed password asks it, and it is the attempt; the wait's is given back", .owner) {
        $0.clientKeys = true; $0.typed = ""
        $0.script = [SensorStep(.interrupted)]
        $0.choices = [.passwordWanted]
        $0.answers = [rightAnswer]
        $0.outcome = .success(.passcode); $0.code = .success
        $0.sensorOpens = 1; $0.fingerprintAttempts = 1
        $0.passcodeBegins = 1; $0.passcodeChecks = 1
        $0.prompts = [Text.passcodePrompt]
    }
    add("R16 client keys under biometrics: never read; a typed Enter is the fallback", .biometrics) {
        $0.clientKeys = true; $0.typed = ""
        $0.script = [SensorStep(.interrupted)]
        $0.choices = [.passwordWanted]
        $0.outcome = .failure(.userFallback); $0.code = .authInfoUnavailable
        $0.sensorOpens = 1; $0.fingerprintAttempts = 1
    }

    // MARK: R6 fallback
    add("R6 owner: fallback after the first failure → passcode prompt", .owner) {
        $0.script = [.noMatch, SensorStep(.interrupted)]
        $0.answers = [rightAnswer]
        $0.outcome = .success(.passcode); $0.code = .success
        $0.sensorOpens = 1; $0.fingerprintAttempts = 2
        $0.passcodeBegins = 1; $0.passcodeChecks = 1
        $0.prompts = [Text.passcodePrompt]
        $0.says = [Text.noMatchTryAgain + " " + Text.ctrlC]
    }
    add("R6 owner: fallback keeps the no-match charged and refunds the interrupted attempt", .owner) {
        $0.script = [.noMatch, SensorStep(.interrupted)]
        $0.answers = [wrongAnswer]
        $0.outcome = .failure(.authenticationFailed); $0.code = .authError; $0.failDelay = true
        $0.f = 1; $0.p = 1
        $0.sensorOpens = 1; $0.fingerprintAttempts = 2
        $0.passcodeBegins = 1; $0.passcodeChecks = 1
        $0.prompts = [Text.passcodePrompt]
    }
    add("R6 biometrics: fallback after the first failure → userFallback, IGNORE", .biometrics) {
        $0.script = [.noMatch, SensorStep(.interrupted)]
        $0.outcome = .failure(.userFallback); $0.code = .authInfoUnavailable
        $0.f = 1
        $0.sensorOpens = 1; $0.fingerprintAttempts = 2
        $0.says = [Text.ctrlC]
    }
    add("R6 owner: Ctrl-C while the first finger is judged a miss → the miss stays, userCancel, no next attempt", .owner) {
        $0.script = [.noMatch]
        $0.interruptDuring = 1
        $0.outcome = .failure(.userCancel); $0.code = .conversationError
        $0.f = 1
        $0.sensorOpens = 1; $0.fingerprintAttempts = 1
        $0.saysError = [Text.notRecognized]
        $0.saysNot = ["Ctrl-C", Text.noMatchTryAgain]
    }
    add("R6 owner: Ctrl-C while the second finger is judged a miss → both stay, the passcode, no third attempt", .owner) {
        $0.script = [.noMatch, .noMatch]
        $0.interruptDuring = 2
        $0.answers = [wrongAnswer]
        $0.outcome = .failure(.authenticationFailed); $0.code = .authError; $0.failDelay = true
        $0.f = 2; $0.p = 1
        $0.sensorOpens = 1; $0.fingerprintAttempts = 2
        $0.passcodeBegins = 1; $0.passcodeChecks = 1
        $0.prompts = [Text.passcodePrompt]
    }
    add("R6 biometrics: Ctrl-C while the miss that reaches L is judged → locked, as without the Ctrl-C", .biometrics) {
        $0.initial = .record(f: 3, p: 0)
        $0.script = [.noMatch, .noMatch]
        $0.interruptDuring = 2
        $0.outcome = .failure(.authenticationFailed); $0.code = .authError
        $0.f = 5
        $0.sensorOpens = 1; $0.fingerprintAttempts = 2
        $0.saysError = [Text.locked]
    }
    add("R6 owner: Ctrl-C while the first miss, which reaches L, is judged → locked, userCancel", .owner) {
        $0.initial = .record(f: 4, p: 0)
        $0.script = [.noMatch]
        $0.interruptDuring = 1
        $0.outcome = .failure(.userCancel); $0.code = .conversationError
        $0.f = 5
        $0.sensorOpens = 1; $0.fingerprintAttempts = 1
        $0.saysError = [Text.notRecognized, Text.locked]
    }
    add("R6 owner: Ctrl-C while the miss that reaches L is judged → locked, then the passcode", .owner) {
        $0.initial = .record(f: 3, p: 0)
        $0.script = [.noMatch, .noMatch]
        $0.interruptDuring = 2
        $0.answers = [wrongAnswer]
        $0.outcome = .failure(.authenticationFailed); $0.code = .authError; $0.failDelay = true
        $0.f = 5; $0.p = 1
        $0.sensorOpens = 1; $0.fingerprintAttempts = 2
        $0.passcodeBegins = 1; $0.passcodeChecks = 1
        $0.saysError = [Text.locked]
        $0.prompts = [Text.passcodePrompt]
    }
    add("R6 owner: Ctrl-C before any failure → userCancel, refunded", .owner) {
        $0.initial = .record(f: 1, p: 0)
        $0.script = [SensorStep(.interrupted)]
        $0.outcome = .failure(.userCancel); $0.code = .conversationError
        $0.f = 1
        $0.sensorOpens = 1; $0.fingerprintAttempts = 1
        $0.saysNot = ["Ctrl-C"]
    }
    add("R6 biometrics: Ctrl-C before any failure → userCancel, CONV_ERR", .biometrics) {
        $0.script = [SensorStep(.interrupted)]
        $0.outcome = .failure(.userCancel); $0.code = .conversationError
        $0.sensorOpens = 1; $0.fingerprintAttempts = 1
    }
    for policy in [EvaluationPolicy.owner, .biometrics] {
        add("R6 empty fallback_title: never offered, Ctrl-C cancels", policy) {
            $0.configure = { $0.fallbackTitle = [] }
            $0.script = [.noMatch, SensorStep(.interrupted)]
            $0.outcome = .failure(.userCancel); $0.code = .conversationError
            $0.f = 1
            $0.sensorOpens = 1; $0.fingerprintAttempts = 2
            $0.says = [Text.noMatchTryAgain]
            $0.saysNot = ["Ctrl-C"]
        }
    }
    add("R6 owner: fallback_after=0 offers it from the start", .owner) {
        $0.configure = { $0.fallbackAfter = 0 }
        $0.script = [SensorStep(.interrupted)]
        $0.answers = [rightAnswer]
        $0.outcome = .success(.passcode); $0.code = .success
        $0.sensorOpens = 1; $0.fingerprintAttempts = 1
        $0.passcodeBegins = 1; $0.passcodeChecks = 1
        $0.prompts = [Text.passcodePrompt]
        $0.says = [Text.place + " " + Text.ctrlC]
    }
    add("R6 biometrics: fallback_after=0 → Ctrl-C first is the fallback", .biometrics) {
        $0.configure = { $0.fallbackAfter = 0 }
        $0.script = [SensorStep(.interrupted)]
        $0.outcome = .failure(.userFallback); $0.code = .authInfoUnavailable
        $0.sensorOpens = 1; $0.fingerprintAttempts = 1
        $0.says = [Text.ctrlC]
    }
    add("R6 owner: fallback_after=2 → Ctrl-C after one failure still cancels", .owner) {
        $0.configure = { $0.fallbackAfter = 2 }
        $0.script = [.noMatch, SensorStep(.interrupted)]
        $0.outcome = .failure(.userCancel); $0.code = .conversationError
        $0.f = 1
        $0.sensorOpens = 1; $0.fingerprintAttempts = 2
        $0.saysNot = ["Ctrl-C"]
    }
    add("R6 owner: fallback_after=2 → offered after the second failure", .owner) {
        $0.configure = { $0.fallbackAfter = 2 }
        $0.script = [.noMatch, .noMatch, SensorStep(.interrupted)]
        $0.answers = [wrongAnswer]
        $0.outcome = .failure(.authenticationFailed); $0.code = .authError; $0.failDelay = true
        $0.f = 2; $0.p = 1
        $0.sensorOpens = 1; $0.fingerprintAttempts = 3
        $0.passcodeBegins = 1; $0.passcodeChecks = 1
        $0.prompts = [Text.passcodePrompt]
        $0.says = [Text.ctrlC]
    }
    add("R6 owner: a custom fallback_title is the hint and the prompt", .owner) {
        $0.configure = { $0.fallbackTitle = bytes("Use Passcode") }
        $0.script = [.noMatch, SensorStep(.interrupted)]
        $0.answers = [rightAnswer]
        $0.outcome = .success(.passcode); $0.code = .success
        $0.sensorOpens = 1; $0.fingerprintAttempts = 2
        $0.passcodeBegins = 1; $0.passcodeChecks = 1
        $0.prompts = ["Use Passcode: "]
        $0.says = ["Press Ctrl-C to Use Passcode."]
        $0.saysNot = ["Enter Password"]
    }
    add("R6 owner: empty fallback_title → the passcode prompt says Password", .owner) {
        $0.configure = { $0.fallbackTitle = [] }
        $0.availability = .notEnrolled
        $0.answers = [rightAnswer]
        $0.outcome = .success(.passcode); $0.code = .success
        $0.passcodeBegins = 1; $0.passcodeChecks = 1
        $0.prompts = ["Password: "]
    }

    // MARK: An app's buttons (the helper's client tells cancel from fallback)
    add("app owner: the cancel button after a miss cancels, though the fallback is offered", .owner) {
        $0.script = [.noMatch, SensorStep(.interrupted)]
        $0.choices = [.cancel]
        $0.outcome = .failure(.userCancel); $0.code = .conversationError
        $0.f = 1
        $0.sensorOpens = 1; $0.fingerprintAttempts = 2
    }
    add("app owner: the fallback button after a miss asks for the passcode", .owner) {
        $0.script = [.noMatch, SensorStep(.interrupted)]
        $0.choices = [.fallback]
        $0.answers = [rightAnswer]
        $0.outcome = .success(.passcode); $0.code = .success
        $0.passcodeBegins = 1; $0.passcodeChecks = 1
        $0.sensorOpens = 1; $0.fingerprintAttempts = 2
        $0.prompts = [Text.passcodePrompt]
    }
    add("app owner: the fallback button before any miss is not offered yet: a cancel", .owner) {
        $0.script = [SensorStep(.interrupted)]
        $0.choices = [.fallback]
        $0.outcome = .failure(.userCancel); $0.code = .conversationError
        $0.sensorOpens = 1; $0.fingerprintAttempts = 1
    }
    add("app biometrics: the fallback button after a miss is userFallback", .biometrics) {
        $0.script = [.noMatch, SensorStep(.interrupted)]
        $0.choices = [.fallback]
        $0.outcome = .failure(.userFallback); $0.code = .authInfoUnavailable
        $0.f = 1
        $0.sensorOpens = 1; $0.fingerprintAttempts = 2
    }
    add("app biometrics prompt mode: the fallback button at the first prompt is userFallback", .biometrics) {
        $0.mode = .prompt
        $0.answers = [.fallback]
        $0.outcome = .failure(.userFallback); $0.code = .authInfoUnavailable
        $0.prompts = [Text.firstPrompt]
    }
    add("app owner prompt mode: the fallback button at the first prompt asks for the passcode", .owner) {
        $0.mode = .prompt
        $0.answers = [.fallback, rightAnswer]
        $0.outcome = .success(.passcode); $0.code = .success
        $0.passcodeBegins = 1; $0.passcodeChecks = 1
        $0.prompts = [Text.firstPrompt, Text.passcodePrompt]
    }
    add("app owner: the fallback button at the passcode prompt cancels", .owner) {
        $0.availability = .notEnrolled
        $0.answers = [.fallback]
        $0.outcome = .failure(.userCancel); $0.code = .conversationError
        $0.prompts = [Text.passcodePrompt]
    }

    // MARK: R3 a stop that cannot prove that no finger was judged
    add("R3 owner: Ctrl-C after a possible scan stays charged and cancels", .owner) {
        $0.initial = .record(f: 1, p: 0)
        $0.script = [SensorStep(.stoppedAfterPossibleScan(.interrupted))]
        $0.outcome = .failure(.userCancel); $0.code = .conversationError
        $0.f = 2
        $0.sensorOpens = 1; $0.fingerprintAttempts = 1
        $0.saysNot = ["Ctrl-C"]
    }
    add("R3 owner: Ctrl-C after a possible scan, fallback offered: charged, then the passcode", .owner) {
        $0.script = [.noMatch, SensorStep(.stoppedAfterPossibleScan(.interrupted))]
        $0.answers = [wrongAnswer]
        $0.outcome = .failure(.authenticationFailed); $0.code = .authError; $0.failDelay = true
        $0.f = 2; $0.p = 1
        $0.sensorOpens = 1; $0.fingerprintAttempts = 2
        $0.passcodeBegins = 1; $0.passcodeChecks = 1
        $0.prompts = [Text.passcodePrompt]
    }
    add("R3 biometrics: Ctrl-C after a possible scan, fallback offered: charged, userFallback", .biometrics) {
        $0.script = [.noMatch, SensorStep(.stoppedAfterPossibleScan(.interrupted))]
        $0.outcome = .failure(.userFallback); $0.code = .authInfoUnavailable
        $0.f = 2
        $0.sensorOpens = 1; $0.fingerprintAttempts = 2
    }
    for (reason, message) in [(StopReason.timeout, Text.timedOut), (.deviceError, Text.stopped)] {
        add("R3 biometrics: \(reason) after a possible scan stays charged", .biometrics) {
            $0.initial = .record(f: 2, p: 0)
            $0.script = [SensorStep(.stoppedAfterPossibleScan(reason))]
            $0.outcome = .failure(.systemCancel); $0.code = .authInfoUnavailable
            $0.f = 3
            $0.sensorOpens = 1; $0.fingerprintAttempts = 1
            $0.says = [message]
            $0.logs = [(.notice, "stopped before its verdict could be read; it stays counted")]
        }
    }

    // MARK: R7 the biometric phase ends without a verdict
    let endings: [(AttemptEnd, LAErrorCode, String)] = [
        (.timeout, .systemCancel, Text.timedOut),
        (.disconnected, .biometryDisconnected, Text.disconnected),
        (.deviceError, .systemCancel, Text.stopped),
        (.vanished, .systemCancel, Text.stopped),
    ]
    for (end, error, message) in endings {
        add("R7 owner: \(end) → refunded, then the passcode", .owner) {
            $0.initial = .record(f: 2, p: 0)
            $0.script = [SensorStep(end)]
            $0.answers = [wrongAnswer]
            $0.outcome = .failure(.authenticationFailed); $0.code = .authError; $0.failDelay = true
            $0.f = 2; $0.p = 1
            $0.sensorOpens = 1; $0.fingerprintAttempts = 1
            $0.passcodeBegins = 1; $0.passcodeChecks = 1
            $0.prompts = [Text.passcodePrompt]
            $0.says = [message]
        }
        add("R7 biometrics: \(end) → refunded, \(error.name), AUTHINFO_UNAVAIL", .biometrics) {
            $0.initial = .record(f: 2, p: 0)
            $0.script = [SensorStep(end)]
            $0.outcome = .failure(error); $0.code = .authInfoUnavailable
            $0.f = 2
            $0.sensorOpens = 1; $0.fingerprintAttempts = 1
            $0.says = [message]
        }
        add("R7 biometrics: no-match then \(end) → only the no-match stays charged", .biometrics) {
            $0.script = [.noMatch, SensorStep(end)]
            $0.outcome = .failure(error); $0.code = .authInfoUnavailable
            $0.f = 1
            $0.sensorOpens = 1; $0.fingerprintAttempts = 2
        }
    }

    // MARK: R8 passcode phase
    add("R8 owner: wrong passcode → AUTH_ERR, charged, fail delay", .owner) {
        $0.availability = .notEnrolled
        $0.initial = .record(f: 0, p: 2)
        $0.answers = [wrongAnswer]
        $0.outcome = .failure(.authenticationFailed); $0.code = .authError; $0.failDelay = true
        $0.p = 3
        $0.passcodeBegins = 1; $0.passcodeChecks = 1
        $0.prompts = [Text.passcodePrompt]
    }
    add("R8 owner: correct passcode resets F and P", .owner) {
        $0.availability = .notEnrolled
        $0.initial = .record(f: 4, p: 4)
        $0.answers = [rightAnswer]
        $0.outcome = .success(.passcode); $0.code = .success
        $0.passcodeBegins = 1; $0.passcodeChecks = 1
        $0.prompts = [Text.passcodePrompt]
    }
    add("R8 owner: an empty entry is not a passcode → userCancel, not charged", .owner) {
        $0.availability = .notEnrolled
        $0.initial = .record(f: 1, p: 2)
        $0.answers = [.empty]
        $0.outcome = .failure(.userCancel); $0.code = .conversationError
        $0.f = 1; $0.p = 2
        $0.prompts = [Text.passcodePrompt]
    }
    add("R8 owner: empty entry after the fingerprint phase → userCancel, not charged", .owner) {
        $0.script = [.noMatch, .noMatch, .noMatch]
        $0.answers = [.empty]
        $0.outcome = .failure(.userCancel); $0.code = .conversationError
        $0.f = 3; $0.p = 0
        $0.sensorOpens = 1; $0.fingerprintAttempts = 3
        $0.prompts = [Text.passcodePrompt]
    }
    add("R8 owner: conversation failure → userCancel, CONV_ERR", .owner) {
        $0.availability = .unreachable
        $0.answers = [.failed]
        $0.outcome = .failure(.userCancel); $0.code = .conversationError
        $0.prompts = [Text.passcodePrompt]
    }
    add("§4 owner: no usable passcode and no usable biometrics → passcodeNotSet", .owner) {
        $0.availability = .unreachable
        $0.verifierBegins = false
        $0.initial = .record(f: 0, p: 1)
        $0.answers = [rightAnswer]
        $0.outcome = .failure(.passcodeNotSet); $0.code = .authInfoUnavailable
        $0.p = 1
        $0.passcodeBegins = 1
        $0.prompts = [Text.passcodePrompt]
        $0.logs = [(.error, "cannot run")]
    }
    add("R8 owner: a passcode stack that never asked gives no verdict → refunded, passcodeNotSet", .owner) {
        $0.availability = .unreachable
        $0.forcedVerdict = .noVerdict
        $0.initial = .record(f: 0, p: 1)
        $0.answers = [rightAnswer]
        $0.outcome = .failure(.passcodeNotSet); $0.code = .authInfoUnavailable
        $0.p = 1
        $0.passcodeBegins = 1; $0.passcodeChecks = 1
        $0.prompts = [Text.passcodePrompt]
        $0.logs = [(.error, "did not ask for the passcode")]
    }

    // MARK: R16 prompt mode
    add("R16 owner prompt mode: a typed passcode skips the sensor (correct)", .owner) {
        $0.mode = .prompt
        $0.initial = .record(f: 2, p: 1)
        $0.answers = [rightAnswer]
        $0.outcome = .success(.passcode); $0.code = .success
        $0.passcodeBegins = 1; $0.passcodeChecks = 1
        $0.prompts = [Text.firstPrompt]
    }
    add("R16 owner prompt mode: a typed passcode skips the sensor (wrong)", .owner) {
        $0.mode = .prompt
        $0.answers = [wrongAnswer]
        $0.outcome = .failure(.authenticationFailed); $0.code = .authError; $0.failDelay = true
        $0.p = 1
        $0.passcodeBegins = 1; $0.passcodeChecks = 1
        $0.prompts = [Text.firstPrompt]
    }
    add("R16 owner prompt mode: Enter starts the sensor", .owner) {
        $0.mode = .prompt
        $0.answers = [.empty]
        $0.script = [.match]
        $0.outcome = .success(.biometry); $0.code = .success
        $0.sensorOpens = 1; $0.fingerprintAttempts = 1
        $0.prompts = [Text.firstPrompt]
        $0.says = [Text.place]
        $0.saysNot = ["Ctrl-C"]
    }
    add("R16 owner prompt mode: Enter, 3 no-matches, then the passcode prompt", .owner) {
        $0.mode = .prompt
        $0.answers = [.empty, rightAnswer]
        $0.script = [.noMatch, .noMatch, .noMatch]
        $0.outcome = .success(.passcode); $0.code = .success
        $0.sensorOpens = 1; $0.fingerprintAttempts = 3
        $0.passcodeBegins = 1; $0.passcodeChecks = 1
        $0.prompts = [Text.firstPrompt, Text.passcodePrompt]
        $0.saysNot = ["Ctrl-C"]
    }
    add("R16 owner prompt mode: no answer → userCancel", .owner) {
        $0.mode = .prompt
        $0.answers = [.failed]
        $0.outcome = .failure(.userCancel); $0.code = .conversationError
        $0.prompts = [Text.firstPrompt]
    }
    add("R16 biometrics prompt mode: a typed answer is the fallback (IGNORE), never checked here", .biometrics) {
        $0.mode = .prompt
        $0.answers = [rightAnswer]
        $0.outcome = .failure(.userFallback); $0.code = .authInfoUnavailable
        $0.prompts = [Text.firstPrompt]
    }
    add("R16 biometrics prompt mode: Enter starts the sensor", .biometrics) {
        $0.mode = .prompt
        $0.answers = [.empty]
        $0.script = [.match]
        $0.outcome = .success(.biometry); $0.code = .success
        $0.sensorOpens = 1; $0.fingerprintAttempts = 1
        $0.prompts = [Text.firstPrompt]
    }
    add("R16 biometrics prompt mode: no answer → userCancel", .biometrics) {
        $0.mode = .prompt
        $0.answers = [.failed]
        $0.outcome = .failure(.userCancel); $0.code = .conversationError
        $0.prompts = [Text.firstPrompt]
    }

    // MARK: R9 passcode back-off
    add("R9 owner: a running back-off refuses without asking, saying how long", .owner) {
        $0.availability = .unreachable
        $0.initial = .record(f: 0, p: 5, backoffMilliseconds: 60_000)
        $0.outcome = .failure(.authenticationFailed); $0.code = .credentialsInsufficient
        $0.p = 5
        $0.saysError = [Text.waitPrefix + "1 minute."]
    }
    add("R9 owner: the 5th wrong passcode starts a 1 minute wait", .owner) {
        $0.availability = .unreachable
        $0.initial = .record(f: 0, p: 4)
        $0.answers = [wrongAnswer]
        $0.outcome = .failure(.authenticationFailed); $0.code = .authError; $0.failDelay = true
        $0.p = 5; $0.backoffAfter = 60_000
        $0.passcodeBegins = 1; $0.passcodeChecks = 1
        $0.prompts = [Text.passcodePrompt]
    }
    add("R9 owner: the fingerprint still works during a back-off and clears it", .owner) {
        $0.initial = .record(f: 0, p: 6, backoffMilliseconds: 300_000)
        $0.script = [.match]
        $0.outcome = .success(.biometry); $0.code = .success
        $0.backoffAfter = 0
        $0.sensorOpens = 1; $0.fingerprintAttempts = 1
    }
    add("R9 owner: back-off after the fingerprint phase refuses the passcode without asking", .owner) {
        $0.initial = .record(f: 0, p: 5, backoffMilliseconds: 60_000)
        $0.script = [.noMatch, .noMatch, .noMatch]
        $0.outcome = .failure(.authenticationFailed); $0.code = .credentialsInsufficient
        $0.f = 3; $0.p = 5
        $0.sensorOpens = 1; $0.fingerprintAttempts = 3
        $0.saysError = [Text.waitPrefix + "1 minute."]
    }
    add("R9 owner at a terminal: during a back-off typing is not offered, yet Enter ends the wait and the wait is said", .owner) {
        $0.typed = ""
        $0.initial = .record(f: 0, p: 5, backoffMilliseconds: 60_000)
        $0.script = [SensorStep(.interrupted)]
        $0.choices = [.passwordWanted]
        $0.outcome = .failure(.authenticationFailed); $0.code = .credentialsInsufficient
        $0.f = 0; $0.p = 5
        $0.sensorOpens = 1; $0.fingerprintAttempts = 1
        $0.says = [Text.place]   // the instruction, without "or type your password"
        $0.saysError = [Text.waitPrefix + "1 minute."]
    }
    add("R9 owner at a terminal: a password typed during a back-off is refused unchecked and uncharged", .owner) {
        $0.typed = "hunter2"
        $0.initial = .record(f: 0, p: 5, backoffMilliseconds: 60_000)
        $0.script = [SensorStep(.interrupted)]
        $0.choices = [.typedPassword]
        $0.outcome = .failure(.authenticationFailed); $0.code = .credentialsInsufficient
        $0.f = 0; $0.p = 5
        $0.sensorOpens = 1; $0.fingerprintAttempts = 1
        $0.passcodeBegins = 1
        $0.says = [Text.place]   // the instruction, without "or type your password"
        $0.saysError = [Text.waitPrefix + "1 minute."]
    }
    add("R9 owner prompt mode: a typed passcode during a back-off is refused unchecked", .owner) {
        $0.mode = .prompt
        $0.initial = .record(f: 0, p: 5, backoffMilliseconds: 60_000)
        $0.answers = [rightAnswer]
        $0.outcome = .failure(.authenticationFailed); $0.code = .credentialsInsufficient
        $0.p = 5
        $0.passcodeBegins = 1
        $0.prompts = [Text.firstPrompt]
        $0.saysError = [Text.waitPrefix + "1 minute."]
    }
    add("R9 root is exempt from back-off; counts are still kept", .owner) {
        $0.user = rootUser
        $0.availability = .unreachable
        $0.initial = .record(f: 0, p: 9)
        $0.answers = [wrongAnswer]
        $0.outcome = .failure(.authenticationFailed); $0.code = .authError; $0.failDelay = true
        $0.p = 10; $0.backoffAfter = 0
        $0.passcodeBegins = 1; $0.passcodeChecks = 1
        $0.prompts = [Text.passcodePrompt]
    }
    add("R9 even_deny_root: root waits like everyone", .owner) {
        $0.user = rootUser
        $0.configure = { $0.evenDenyRoot = true }
        $0.availability = .unreachable
        $0.initial = .record(f: 0, p: 9, backoffMilliseconds: 3_600_000)
        $0.outcome = .failure(.authenticationFailed); $0.code = .credentialsInsufficient
        $0.p = 9
        $0.saysError = [Text.waitPrefix + "1 hour."]
    }

    // MARK: R12 fail closed
    for damage in [RecordDamage.badChecksum, .foreign, .unsafeFile, .unreadable, .wrongSize] {
        add("R12 owner: damaged record (\(damage)) → F = L, P = 5, wait, never success", .owner) {
            $0.initial = .damaged(damage)
            $0.outcome = .failure(.authenticationFailed); $0.code = .credentialsInsufficient
            $0.f = 5; $0.p = 5; $0.backoffAfter = 60_000
            $0.saysError = [Text.locked, Text.waitPrefix + "1 minute."]
            $0.logs = [(.warning, "was replaced")]
        }
    }
    add("R12 biometrics: damaged record → locked, biometryLockout", .biometrics) {
        $0.initial = .damaged(.badMagic)
        $0.outcome = .failure(.biometryLockout); $0.code = .authInfoUnavailable
        $0.f = 5; $0.p = 5
        $0.saysError = [Text.locked]
        $0.logs = [(.warning, "was replaced")]
    }
    add("R12 owner prompt mode: damaged record → no fingerprint offer, wait", .owner) {
        $0.mode = .prompt
        $0.initial = .damaged(.malformed)
        $0.outcome = .failure(.authenticationFailed); $0.code = .credentialsInsufficient
        $0.f = 5; $0.p = 5
        $0.saysError = [Text.waitPrefix + "1 minute."]
    }
    add("R12 root (exempt from back-off): damaged record → passcode allowed at once", .owner) {
        $0.user = rootUser
        $0.initial = .damaged(.foreign)
        $0.answers = [rightAnswer]
        $0.outcome = .success(.passcode); $0.code = .success
        $0.passcodeBegins = 1; $0.passcodeChecks = 1
        $0.prompts = [Text.passcodePrompt]
        $0.saysError = [Text.locked]
    }
    add("R12 a damaged record that cannot be replaced → SYSTEM_ERR", .owner) {
        $0.initial = .damaged(.badChecksum)
        $0.storeFault = .writes
        $0.outcome = .internalError; $0.code = .systemError
    }

    // MARK: R3 store failures
    add("R3 owner: charge cannot be written → attempt refused, SYSTEM_ERR", .owner) {
        $0.storeFault = .writes
        $0.outcome = .internalError; $0.code = .systemError
        $0.sensorOpens = 1
        $0.logs = [(.error, "attempt refused")]
    }
    add("R3 biometrics: charge cannot be written → attempt refused, SYSTEM_ERR", .biometrics) {
        $0.storeFault = .writes
        $0.outcome = .internalError; $0.code = .systemError
        $0.sensorOpens = 1
    }
    add("R3 owner: passcode charge cannot be written → never verified, SYSTEM_ERR", .owner) {
        $0.availability = .unreachable
        $0.storeFault = .writes
        $0.answers = [rightAnswer]
        $0.outcome = .internalError; $0.code = .systemError
        $0.passcodeBegins = 1
        $0.prompts = [Text.passcodePrompt]
        $0.logs = [(.error, "attempt refused")]
    }
    add("R3 owner prompt mode: typed passcode, charge cannot be written → SYSTEM_ERR", .owner) {
        $0.mode = .prompt
        $0.storeFault = .writes
        $0.answers = [rightAnswer]
        $0.outcome = .internalError; $0.code = .systemError
        $0.passcodeBegins = 1
        $0.prompts = [Text.firstPrompt]
    }
    for policy in [EvaluationPolicy.owner, .biometrics] {
        add("R3 unreadable store → SYSTEM_ERR before anything is asked", policy) {
            $0.storeFault = .reads
            $0.outcome = .internalError; $0.code = .systemError
            $0.logs = [(.error, "cannot read")]
        }
    }

    // MARK: R14 unknown user
    for policy in [EvaluationPolicy.owner, .biometrics] {
        add("R14 unreadable store: an unknown name is told what a known one is told", policy) {
            $0.scope = .unknownUser
            $0.initial = .absent
            $0.storeFault = .reads
            $0.outcome = .internalError; $0.code = .systemError
            $0.saysError = [UserText.notRecorded]
        }
        add("R14 unreadable store: a known name, the same words", policy) {
            $0.storeFault = .reads
            $0.outcome = .internalError; $0.code = .systemError
            $0.saysError = [UserText.notRecorded]
        }
    }

    // MARK: R12 a read-only or failing disk (counting in /run)
    for policy in [EvaluationPolicy.owner, .biometrics] {
        add("R12 read-only state directory in namespaces a user set up: refused as before", policy) {
            $0.storeFault = .readOnly(system: false)
            $0.outcome = .internalError; $0.code = .systemError
            $0.saysError = [UserText.notRecorded]
        }
        add("R12 a full disk, even for a process of the system's: refused as before (a user can fill it)", policy) {
            $0.storeFault = .fullDisk
            $0.outcome = .internalError; $0.code = .systemError
            $0.sensorOpens = 1
        }
        add("R12 the disk fails the fingerprint's charge, the filesystem still writable: refused as before", policy) {
            $0.storeFault = .failingDisk(readOnlyAfter: false)
            $0.outcome = .internalError; $0.code = .systemError
            $0.sensorOpens = 1
        }
        for scope in [ScopeDecision.inScope, .unknownUser] {
            add("R12 read-only state directory and /run unusable too: refused, nothing checked (\(scope))", policy) {
                $0.scope = scope
                if scope == .unknownUser { $0.initial = .absent }
                $0.storeFault = .readOnlyAndRunUnusable
                $0.outcome = .internalError; $0.code = .systemError
                $0.saysError = [UserText.notRecorded]
            }
        }
    }

    add("R14 owner: unknown user → passcode prompt, dummy check charged to a look-alike record, delay, AUTH_ERR", .owner) {
        $0.scope = .unknownUser
        $0.initial = .absent
        $0.answers = [rightAnswer]
        $0.outcome = .failure(.authenticationFailed); $0.code = .authError; $0.failDelay = true
        $0.passcodeBegins = 1; $0.passcodeChecks = 1; $0.pAtCheck = [1]
        $0.prompts = [Text.passcodePrompt]
        $0.p = 1
    }
    add("R14 owner: unknown user, empty entry → userCancel like a known user", .owner) {
        $0.scope = .unknownUser
        $0.initial = .absent
        $0.answers = [.empty]
        $0.outcome = .failure(.userCancel); $0.code = .conversationError
        $0.prompts = [Text.passcodePrompt]
    }
    add("R14 biometrics: unknown user → biometryNotAvailable like a user without prints", .biometrics) {
        $0.scope = .unknownUser
        $0.initial = .absent
        $0.outcome = .failure(.biometryNotAvailable); $0.code = .authInfoUnavailable
        // Read like a known user's record (R14 timing), never a real uid's.
    }

    // MARK: R15 silent
    add("R15 silent: the instruction stays, the timeout chatter goes", .owner) {
        $0.silent = true
        $0.script = [SensorStep(.timeout, hints: [.fingerNotCentered])]
        $0.answers = [rightAnswer]
        $0.outcome = .success(.passcode); $0.code = .success
        $0.sensorOpens = 1; $0.fingerprintAttempts = 1
        $0.passcodeBegins = 1; $0.passcodeChecks = 1
        $0.prompts = [Text.passcodePrompt]
        $0.says = [Text.place, "Finger was not centered. Try again."]
        $0.saysNot = [Text.timedOut]
    }
    add("R15 silent: no-match and fallback hints are interaction text", .owner) {
        $0.silent = true
        $0.script = [.noMatch, SensorStep(.interrupted)]
        $0.answers = [wrongAnswer]
        $0.outcome = .failure(.authenticationFailed); $0.code = .authError; $0.failDelay = true
        $0.f = 1; $0.p = 1
        $0.sensorOpens = 1; $0.fingerprintAttempts = 2
        $0.passcodeBegins = 1; $0.passcodeChecks = 1
        $0.prompts = [Text.passcodePrompt]
        $0.says = [Text.noMatchTryAgain + " " + Text.ctrlC]
    }
    add("R15 silent option: a busy reader is said anyway (a touch now would go to another prompt)", .owner) {
        $0.configure = { $0.silent = true }
        $0.open = .busy
        $0.answers = [rightAnswer]
        $0.outcome = .success(.passcode); $0.code = .success
        $0.sensorOpens = 1
        $0.passcodeBegins = 1; $0.passcodeChecks = 1
        $0.prompts = [Text.passcodePrompt]
        $0.says = [Text.busy]
    }
    add("R15 silent: disconnect chatter suppressed", .biometrics) {
        $0.silent = true
        $0.script = [SensorStep(.disconnected)]
        $0.outcome = .failure(.biometryDisconnected); $0.code = .authInfoUnavailable
        $0.sensorOpens = 1; $0.fingerprintAttempts = 1
        $0.says = [Text.place]
        $0.saysNot = [Text.disconnected]
    }
    add("R15 silent: lockout is still said", .biometrics) {
        $0.silent = true
        $0.initial = .record(f: 5, p: 0)
        $0.outcome = .failure(.biometryLockout); $0.code = .authInfoUnavailable
        $0.f = 5
        $0.saysError = [Text.locked]
    }
    add("R15 silent: the wait is still said", .owner) {
        $0.silent = true
        $0.configure = { $0.silent = true }
        $0.initial = .record(f: 5, p: 7, backoffMilliseconds: 900_000)
        $0.outcome = .failure(.authenticationFailed); $0.code = .credentialsInsufficient
        $0.f = 5; $0.p = 7
        $0.saysError = [Text.locked, Text.waitPrefix + "15 minutes."]
    }
    // MARK: R16 scan mode (a conversation nobody answers while the reader waits)
    add("R16 biometrics scan mode: the finger at once, no prompt, match", .biometrics) {
        $0.mode = .scan
        $0.configure = { $0.fallbackTitle = [] }
        $0.script = [.noMatch, .match]
        $0.outcome = .success(.biometry); $0.code = .success
        $0.sensorOpens = 1; $0.fingerprintAttempts = 2
        $0.prompts = []
        $0.says = [Text.place, Text.noMatchTryAgain]
        $0.saysNot = ["Ctrl-C", "Enter Password"]
    }
    add("R16 biometrics scan mode: three misses end it with no prompt, all counted; an empty title offers no fallback", .biometrics) {
        $0.mode = .scan
        $0.configure = { $0.fallbackTitle = [] }
        $0.script = [.noMatch, .noMatch, .noMatch]
        $0.outcome = .failure(.authenticationFailed); $0.code = .authError
        $0.f = 3
        $0.sensorOpens = 1; $0.fingerprintAttempts = 3
        $0.prompts = []
        $0.says = [Text.place, Text.noMatchTryAgain, Text.noMatchTryAgain, Text.notRecognized]
        $0.saysNot = ["Ctrl-C"]
        $0.fallbackOffers = []
    }
    add("R16 biometrics scan mode: locked → handed over at once, the reader untouched", .biometrics) {
        $0.mode = .scan
        $0.initial = .record(f: 5, p: 0)
        $0.outcome = .failure(.biometryLockout); $0.code = .authInfoUnavailable
        $0.f = 5
        $0.prompts = []
        $0.says = [Text.locked]
    }
    add("R16 apps' sheet: the fallback offered after the first miss, once; then chosen", .owner) {
        $0.mode = .scan
        $0.script = [.noMatch, SensorStep(.interrupted)]
        $0.choices = [.fallback]
        $0.answers = [rightAnswer]
        $0.outcome = .success(.passcode); $0.code = .success
        $0.f = 0; $0.p = 0
        $0.sensorOpens = 1; $0.fingerprintAttempts = 2
        $0.passcodeBegins = 1; $0.passcodeChecks = 1
        $0.prompts = [Text.passcodePrompt]
        $0.says = [Text.place, Text.noMatchTryAgain]
        $0.fallbackOffers = ["Enter Password"]
    }
    add("R16 owner scan mode: the misses used up, then the password prompt", .owner) {
        $0.mode = .scan
        $0.script = [.noMatch, .noMatch, .noMatch]
        $0.answers = [rightAnswer]
        $0.outcome = .success(.passcode); $0.code = .success
        $0.sensorOpens = 1; $0.fingerprintAttempts = 3
        $0.passcodeBegins = 1; $0.passcodeChecks = 1
        $0.prompts = [Text.passcodePrompt]
        $0.saysNot = ["Ctrl-C"]
    }

    // MARK: R16 password mode (another conversation has the reader)
    add("R16 owner password mode: the password only; success resets F and P", .owner) {
        $0.mode = .password
        $0.initial = .record(f: 4, p: 2)
        $0.answers = [rightAnswer]
        $0.outcome = .success(.passcode); $0.code = .success
        $0.passcodeBegins = 1; $0.passcodeChecks = 1
        $0.prompts = [Text.passcodePrompt]
        $0.saysNot = [Text.place, Text.locked, "finger"]
    }
    add("R16 owner password mode: locked fingerprint → still only the password, said nothing of the finger", .owner) {
        $0.mode = .password
        $0.initial = .record(f: 5, p: 0)
        $0.answers = [wrongAnswer]
        $0.outcome = .failure(.authenticationFailed); $0.code = .authError; $0.failDelay = true
        $0.f = 5; $0.p = 1
        $0.passcodeBegins = 1; $0.passcodeChecks = 1
        $0.prompts = [Text.passcodePrompt]
        $0.saysNot = [Text.locked, "finger"]
    }
    add("R16 owner password mode: the back-off holds", .owner) {
        $0.mode = .password
        $0.initial = .record(f: 0, p: 5, backoffMilliseconds: 60_000)
        $0.outcome = .failure(.authenticationFailed); $0.code = .credentialsInsufficient
        $0.p = 5
        $0.prompts = []
        $0.saysError = [Text.waitPrefix + "1 minute."]
    }
    add("R16 biometrics password mode: no reader here → handed over, nothing asked", .biometrics) {
        $0.mode = .password
        $0.outcome = .failure(.biometryNotAvailable); $0.code = .authInfoUnavailable
        $0.prompts = []
    }

    // MARK: R12 the same rules on a read-only disk
    // Every row that counts, again with the state directory read-only (a
    // process of the system's), and again with the disk failing the writes
    // of a filesystem that went read-only: the same outcome, prompts and
    // counts, with the counts kept in /run (where counting has begun from
    // the row's record).
    for row in table where row.storeFault == .none && !row.storeUntouched {
        for (fault, words) in [(StoreFault.readOnly(system: true), "read-only state directory"),
                               (.failingDisk(readOnlyAfter: true), "a disk failing its writes, read-only after")] {
            var copy = row
            copy.name = "R12 \(words), counted in /run: " + row.name
            copy.storeFault = fault
            table.append(copy)
        }
    }
    return table
}

/// Every row runs here, each failure prefixed with "[policy] row name".
/// One row (or every row whose name contains the text) runs alone with
/// `SCENARIO="text" swift test --filter ScenarioTests`.
final class ScenarioTests: XCTestCase {
    func testScenarioTable() {
        let table = scenarios()
        XCTAssertGreaterThan(table.count, 100)
        var names = Set<String>()
        for scenario in table {
            XCTAssertTrue(names.insert(scenario.name + "/\(scenario.policy)").inserted, "duplicate scenario \(scenario.name)")
        }
        let only = ProcessInfo.processInfo.environment["SCENARIO"].flatMap { $0.isEmpty ? nil : $0 }
        let chosen = table.filter { only == nil || "[\($0.policy)] \($0.name)".contains(only!) }
        XCTAssertFalse(chosen.isEmpty, "no scenario row matches SCENARIO=\(only ?? "")")
        for scenario in chosen { run(scenario) }
    }

    func run(_ s: Scenario) {
        let label = "[\(s.policy)] \(s.name)"
        guard let expectedOutcome = s.outcome, let expectedCode = s.code else {
            return XCTFail("\(label): no expected outcome")
        }
        var options = unitOptions
        s.configure(&options)
        let clock = ManualClock()
        var initialF = 0
        var initialP = 0
        /// A store holding the row's initial record (`absent`: for /run,
        /// a fresh one, as the first prompt there leaves it).
        func initialStore(absent: FakeStore) -> FakeStore {
            switch s.initial {
            case .absent:
                return absent
            case .record(let f, let p, let backoff):
                var record = storedRecord(s.user, f: f, p: p)
                if backoff > 0 {
                    record.backoffRemainingMilliseconds = backoff
                    record.backoffAnchorBootNanoseconds = clock.boot
                    record.backoffBootID = clock.bootIdentifier
                }
                initialF = f
                initialP = p
                return FakeStore(record)
            case .damaged(let why):
                initialF = options.lockout
                initialP = options.firstBackoffThreshold
                return FakeStore.damaged(why)
            }
        }
        let store = initialStore(absent: FakeStore())
        // A read-only disk's copies run with /run already counting from
        // the disk's record: the first prompt's start there, one short of
        // each limit, has stories of its own (RuntimeCountingTests).
        let runtime = s.storeFault.countsInRuntime ? initialStore(absent: FakeStore(storedRecord(s.user))) : FakeStore()
        // A failing disk still reads, and here reads the same as /run's
        // copy: a look would fold it (nothing to write) and remove it, and
        // the next charge would start /run afresh, one short of each limit.
        // The copy stays, as after a crash between the two.
        if s.storeFault == .failingDisk(readOnlyAfter: true) { runtime.removeFailure = .writeFailed(RuntimeCounting.deviceError) }
        switch s.storeFault {
        case .none: break
        case .reads: store.failReads = true
        case .writes: store.failWrites = true
        case .readOnly(let system):
            store.failReads = true
            store.readFailure = .lockFailed(RuntimeCounting.readOnlyFilesystem)
            store.facts = StorageFacts(readOnlyFilesystem: true, systemPrivileged: system)
        case .failingDisk(let readOnlyAfter):
            store.failWrites = true
            store.writeFailure = .writeFailed(RuntimeCounting.deviceError)
            store.facts = StorageFacts(readOnlyFilesystem: readOnlyAfter, systemPrivileged: true)
        case .fullDisk:
            store.failWrites = true
            store.facts = StorageFacts(readOnlyFilesystem: false, systemPrivileged: true)
        case .readOnlyAndRunUnusable:
            store.failReads = true
            store.readFailure = .lockFailed(RuntimeCounting.readOnlyFilesystem)
            store.facts = StorageFacts(readOnlyFilesystem: true, systemPrivileged: true)
            runtime.failReads = true
            runtime.readFailure = .writeFailed(Errno(28))
        }

        let sensor = FakeSensor(s.availability, open: s.open, script: s.script)
        sensor.interruptDuringAttempt = s.interruptDuring
        let verifier = FakeVerifier(begin: s.verifierBegins)
        verifier.forcedVerdict = s.forcedVerdict
        let prompter = FakePrompter(s.answers, choices: s.choices, keys: s.typed)
        let world = World(options: options, sensor: sensor, verifier: verifier, prompter: prompter, store: store, runtime: runtime,
                          clock: clock)

        let result = world.prompt(s.user, policy: s.policy, mode: s.dialog ? .prompt : s.clientKeys ? .scan : s.mode, silent: s.silent,
                                  scope: s.scope, service: s.dialog ? "polkit-1" : s.clientKeys ? "localauth-app" : "sudo",
                                  promptStaysOpen: s.dialog, clientReadsKeys: s.clientKeys)

        XCTAssertEqual(result.outcome, expectedOutcome, "\(label): outcome")
        XCTAssertEqual(result.pamCode, expectedCode, "\(label): PAM code")
        if result.refusedDuringBackoff {
            // A password refused unchecked by its back-off: a refusal without a delay, its own code.
            XCTAssertEqual(result.outcome, .failure(.authenticationFailed), "\(label): refused by the back-off")
            XCTAssertFalse(result.failDelay, "\(label): delay on a refusal")
            XCTAssertEqual(ResultTable.refusedDuringBackoff, expectedCode, "\(label): table")
        } else {
            XCTAssertEqual(ResultTable.pamCode(for: result.outcome), expectedCode, "\(label): table")
        }
        XCTAssertEqual(result.failDelay, s.failDelay, "\(label): fail delay")
        if case .success = result.outcome { XCTAssertFalse(result.failDelay, "\(label): delay on success") }

        // Store. The counts are where the prompt left them: in /run once a
        // read-only disk sent them there.
        let counted = s.storeFault.countsInRuntime && runtime.record != nil ? runtime : store
        if s.storeUntouched {
            XCTAssertEqual(store.transactions, 0, "\(label): store touched")
            XCTAssertEqual(store.writes, 0, "\(label): store written")
        } else {
            XCTAssertGreaterThan(store.transactions, 0, "\(label): store never read")
        }
        XCTAssertEqual(counted.fingerprintFailures, s.f, "\(label): F after")
        XCTAssertEqual(counted.passcodeFailures, s.p, "\(label): P after")
        if let backoff = s.backoffAfter {
            XCTAssertEqual(counted.record?.backoffRemainingMilliseconds ?? 0, backoff, "\(label): back-off after")
        }
        for (uid, name) in store.keys {
            // R14: unknown names are counted in look-alike records, never under a real uid.
            let expectedUID = s.scope == .unknownUser ? StateRecord.lookAlikeUID : s.user.uid
            XCTAssertEqual(uid, expectedUID, "\(label): store keyed by another uid")
            XCTAssertEqual(name, s.user.name, "\(label): store keyed by another name")
        }
        if case .success = result.outcome {
            XCTAssertEqual(counted.fingerprintFailures, 0, "\(label): success leaves F")
            XCTAssertEqual(counted.passcodeFailures, 0, "\(label): success leaves P")
            XCTAssertEqual(counted.record?.backoffRemainingMilliseconds ?? 0, 0, "\(label): success leaves a wait")
        }

        // A store that failed: the person is told nothing was checked.
        if s.storeFault != .none && result.outcome == .internalError {
            XCTAssertTrue(prompter.saw(UserText.notRecorded, kind: .error), "\(label): store failure not told")
        }
        // A read-only disk is never written; what is counted goes to /run,
        // and nowhere else on a disk a user could have made read-only.
        if case .readOnly = s.storeFault { XCTAssertEqual(store.writes, 0, "\(label): a read-only disk written") }
        if !s.storeFault.countsInRuntime && s.storeFault != .readOnlyAndRunUnusable {
            XCTAssertEqual(runtime.writes, 0, "\(label): counted in /run on a writable disk or in a user's namespaces")
        }

        // Sensor.
        XCTAssertEqual(sensor.openCalls, s.sensorOpens, "\(label): sensor opens")
        XCTAssertEqual(sensor.verifyCalls, s.fingerprintAttempts, "\(label): fingerprint attempts")
        let opened: Int
        if case .opened = s.open { opened = s.sensorOpens } else { opened = 0 }
        XCTAssertEqual(sensor.closeCalls, opened, "\(label): every claimed reader released once")
        XCTAssertFalse(sensor.isOpen, "\(label): the evaluation closed the sensor itself")
        XCTAssertGreaterThan(sensor.closeRequests, 0, "\(label): the sensor closed on every path")
        XCTAssertFalse(sensor.verifiedWhileClosed, "\(label): verified without a claim")
        XCTAssertFalse(sensor.scriptExhausted, "\(label): more attempts than scripted")
        XCTAssertTrue(sensor.script.isEmpty, "\(label): scripted attempts left unused: \(sensor.script)")
        if s.fingerprintAttempts > 0 {
            // R3: each attempt is on disk as failed before the sensor runs.
            XCTAssertEqual(sensor.probedAtVerify, (1...s.fingerprintAttempts).map { initialF + $0 }, "\(label): F at verify")
        }
        if case .outOfScope = s.scope { XCTAssertEqual(sensor.availabilityCalls, 0, "\(label): sensor asked out of scope") }

        // Passcode verifier.
        XCTAssertEqual(verifier.beginCalls, s.passcodeBegins, "\(label): passcode stack opened")
        XCTAssertEqual(verifier.verifyCalls, s.passcodeChecks, "\(label): passcode checks")
        XCTAssertEqual(verifier.endCalls, s.verifierBegins ? s.passcodeBegins : 0, "\(label): passcode stack closed")
        XCTAssertFalse(verifier.verifiedWithoutBegin, "\(label): verified without begin")
        XCTAssertEqual(verifier.probedAtVerify, s.pAtCheck ?? Array(repeating: initialP + 1, count: s.passcodeChecks),
                       "\(label): P at verify (charge before verify)")
        if result.outcome == .success(.passcode) { XCTAssertEqual(verifier.sawCorrect.last, true, "\(label): success without the passcode") }

        // Conversation.
        XCTAssertEqual(prompter.asked, s.prompts, "\(label): prompts")
        XCTAssertFalse(prompter.answersExhausted, "\(label): asked more than scripted")
        XCTAssertTrue(prompter.answers.isEmpty, "\(label): answers left unused: \(prompter.answers)")
        for fragment in s.says {
            XCTAssertTrue(prompter.saw(fragment), "\(label): missing message \"\(fragment)\" in \(prompter.told)")
        }
        for fragment in s.saysError {
            XCTAssertTrue(prompter.saw(fragment, kind: .error), "\(label): missing error \"\(fragment)\" in \(prompter.told)")
        }
        for fragment in s.saysNot {
            XCTAssertFalse(prompter.saw(fragment), "\(label): unexpected message \"\(fragment)\" in \(prompter.told)")
        }
        if let offers = s.fallbackOffers { XCTAssertEqual(prompter.offered.map(\.title), offers, "\(label): fallback offers") }
        // Touch or type: keys are read only at a person's terminal, under
        // policy owner, in a prompt that waits for the reader; a typed
        // password is always the password attempt (checked and charged).
        if s.policy != .owner || (s.mode != .terminal && !s.clientKeys) || s.dialog || s.scope != .inScope {
            XCTAssertEqual(prompter.keysWatched, 0, "\(label): keys read outside terminal mode's policy owner")
        }
        XCTAssertLessThanOrEqual(prompter.keysWatched, s.sensorOpens, "\(label): keys read without the reader waiting")
        // (During the password back-off it is refused unchecked, and said so.)
        if prompter.typedTaken > 0 && !prompter.saw(Text.waitPrefix) {
            XCTAssertEqual(verifier.verifyCalls, prompter.typedTaken, "\(label): a typed password not checked as the password")
            XCTAssertTrue(s.prompts.isEmpty, "\(label): asked again after the password was typed")
        }
        if prompter.keysWatched > 0 && s.typed != nil { XCTAssertFalse(prompter.saw("Ctrl-C"), "\(label): Ctrl-C offered while keys are read") }
        // A dialog's prompt stays open only in a dialog, under policy owner,
        // once per claimed reader, and replaces the first prompt.
        XCTAssertEqual(prompter.leftOpen, s.leftOpen, "\(label): prompts left open")
        if !s.dialog || s.policy != .owner || s.scope != .inScope {
            XCTAssertEqual(prompter.leftOpen, [], "\(label): a prompt left open outside a dialog's policy owner")
        }
        XCTAssertLessThanOrEqual(prompter.leftOpen.count, s.sensorOpens, "\(label): a prompt left open without the reader waiting")
        if !prompter.leftOpen.isEmpty {
            XCTAssertFalse(prompter.asked.contains(Text.firstPrompt), "\(label): a first prompt beside the open one")
            XCTAssertEqual(prompter.keysWatched, 0, "\(label): a terminal's keys read in a dialog")
        }
        if s.storeUntouched && s.scope != .unknownUser { XCTAssertEqual(prompter.told, [], "\(label): said something") }
        for (level, fragment) in s.logs {
            XCTAssertTrue(world.log.has(level, fragment), "\(label): missing log \(level) \"\(fragment)\" in \(world.log.entries)")
        }
        for entry in world.log.entries {
            XCTAssertFalse(entry.message.contains("correct horse") || entry.message.contains("hunter2"), "\(label): secret logged")
        }
    }
}
