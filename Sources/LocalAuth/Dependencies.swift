// The outside world as the engine sees it: one protocol per dependency, so
// the engine is a pure state machine that tests drive with fakes.

/// Time sources (R13). Waits are measured on the boot clock; the wall clock is
/// only shown to people and used by R10.
public protocol Clock {
    /// CLOCK_BOOTTIME in nanoseconds: monotonic, includes suspend.
    mutating func bootNanoseconds() -> Int64
    /// Seconds since the epoch; untrusted.
    mutating func wallSeconds() -> Int64
    /// Identifies the current boot (16 bytes).
    mutating func bootID() -> [UInt8]
}

/// What the fingerprint stack can offer a user, without prompting.
public enum SensorAvailability: Equatable {
    /// Usable; `domainState` changes whenever the enrolled prints change.
    case available(domainState: [UInt8])
    /// The daemon answered but has no device.
    case noDevice
    /// A device exists but the user has no enrolled finger.
    case notEnrolled
    /// The daemon is not running or did not answer.
    case unreachable
    /// The daemon answered about the prints with an error, not with a list
    /// or "no prints" (it refused this caller, as it does while polkit is
    /// down; its storage failed): the reader cannot be used now, and what
    /// is enrolled is not known, so no enrollment is read into it.
    case failing

    /// What fprintd said the user has enrolled, as a password success
    /// records it: the digest, the empty "no prints", or nil when the
    /// enrollment was not read (no answer, no device, an error), which
    /// keeps the digest of the last password success that did read it.
    public var enrollment: [UInt8]? {
        switch self {
        case .available(let state): return state
        case .notEnrolled: return []
        case .noDevice, .unreachable, .failing: return nil
        }
    }
}

/// How the reader wants the finger.
public enum ScanType: Equatable {
    case press
    case swipe
}

/// Claiming the reader for one prompt.
public enum SensorSession: Equatable {
    case opened(ScanType)
    /// Another prompt holds the device: biometrics unavailable for this one.
    case busy
    case failed
}

/// Hints that ask for another try; never a verdict.
public enum RetryHint: Equatable, CaseIterable {
    case retryScan
    case swipeTooShort
    case fingerNotCentered
    case removeAndRetry
}

/// Why a running fingerprint attempt was stopped before its verdict.
public enum StopReason: Equatable {
    /// The person pressed Ctrl-C (terminal mode).
    case interrupted
    /// The phase deadline passed.
    case timeout
    /// Waiting failed (the bus or the poll).
    case deviceError
    /// An app lost the person: the session locked, or stopped being the
    /// active local one (systemCancel).
    case sessionLeft
}

/// How one fingerprint attempt ended. The cases without a verdict
/// (`timeout`, `interrupted`, `disconnected`, `deviceError`, `vanished`)
/// promise that no finger was judged, so the attempt is given back.
public enum AttemptEnd: Equatable {
    case match
    case noMatch
    /// The phase deadline passed without a verdict.
    case timeout
    /// The person pressed Ctrl-C (terminal mode).
    case interrupted
    case disconnected
    case deviceError
    /// The fingerprint daemon left the bus.
    case vanished
    /// Stopped because the app lost the person (the session locked or
    /// stopped being the active local one), with proof that no finger was
    /// judged: the attempt is given back.
    case sessionLeft
    /// Stopped for the reason given when a finger may have been judged
    /// without the verdict reaching us: the attempt stays charged (R3).
    /// `unproven` says which part of the proof was missing, for the log.
    case stoppedAfterPossibleScan(StopReason, unproven: RefundDenial = .notAttempted)
}

/// Why an attempt stopped before its verdict could not be given back: the
/// missing piece of the proof that no finger was judged.
public enum RefundDenial: Equatable {
    /// No proof was tried (no bus to ask).
    case notAttempted
    /// The probe or the stop failed or was not answered in time.
    case unanswered
    /// The reader was not waiting for a finger when the probe was answered.
    case readerNotWaiting
    /// A finger was on the reader, at the probe or earlier in the attempt.
    case fingerPresent
    /// fprintd reported a verdict before the probe.
    case verdictBeforeProbe
    /// fprintd's messages after the probe were not exactly a stop's own.
    case unexpectedMessages
    /// The stop was sent this many nanoseconds after the probe: longer than
    /// the bound, or a clock that went backwards.
    case sendGap(Int64)

    /// A phrase for the administrator's log.
    public var explanation: String {
        switch self {
        case .notAttempted: return "no proof could be asked for"
        case .unanswered: return "the reader's state or the stop was not answered in time"
        case .readerNotWaiting: return "the reader was not waiting for a finger"
        case .fingerPresent: return "a finger was on the reader"
        case .verdictBeforeProbe: return "a verdict came before the stop"
        case .unexpectedMessages: return "the reader's messages around the stop were not a plain stop's"
        case .sendGap(let nanoseconds): return "the stop followed the probe after \(nanoseconds / 1000) us"
        }
    }
}

/// The fingerprint reader.
public protocol FingerprintSensor {
    /// Starts what the first question will need (a connection) without
    /// waiting for it, so that its setup overlaps the store's work.
    mutating func prepare()
    /// Preflight; never prompts and never claims the device.
    mutating func availability(userName: [UInt8]) -> SensorAvailability
    /// Claims the device for the user for one prompt.
    mutating func open(userName: [UInt8]) -> SensorSession
    /// Waits for one verdict until `deadline` (boot-clock nanoseconds).
    /// Retry hints are reported through `onHint` and do not end the attempt.
    mutating func verifyAttempt(deadline: Int64, onHint: (RetryHint) -> Void) -> AttemptEnd
    /// The same, asking `stillWanted` now and then while the reader waits
    /// (at most twice a second): false stops the attempt (`sessionLeft`, or
    /// `stoppedAfterPossibleScan(.sessionLeft, ...)` without the proof).
    mutating func verifyAttempt(deadline: Int64, onHint: (RetryHint) -> Void, stillWanted: () -> Bool) -> AttemptEnd
    /// Sends what ends this prompt's hold on the reader (the stop of a
    /// verification that gave its verdict, the release) without waiting
    /// for the answers, which `close` reads: after a match the reader is not
    /// needed again, and fprintd lets it go while logind is asked.
    mutating func letGo()
    /// Stops verification and releases the device. Safe to call when not open.
    mutating func close()
    /// Takes the Ctrl-C that ended an attempt as the fallback choice. Not
    /// called for a cancel, which stays pending for the application (R16).
    mutating func consumeInterrupt()
    /// Whether a Ctrl-C (or the helper client's cancel) is waiting to be
    /// read between attempts, without taking it.
    mutating func interruptPending() -> Bool
}

extension FingerprintSensor {
    public mutating func verifyAttempt(deadline: Int64, onHint: (RetryHint) -> Void, stillWanted: () -> Bool) -> AttemptEnd {
        verifyAttempt(deadline: deadline, onHint: onHint)
    }
    public mutating func prepare() {}
    public mutating func letGo() {}
    public mutating func consumeInterrupt() {}
    public mutating func interruptPending() -> Bool { false }
}

/// The sensor of a build or machine without fingerprint support: never
/// available, so the engine goes straight to the passcode (R2).
public struct NoSensor: FingerprintSensor {
    public init() {}
    public mutating func availability(userName: [UInt8]) -> SensorAvailability { .unreachable }
    public mutating func open(userName: [UInt8]) -> SensorSession { .failed }
    public mutating func verifyAttempt(deadline: Int64, onHint: (RetryHint) -> Void) -> AttemptEnd { .deviceError }
    public mutating func close() {}
}

/// logind's view of a prompt: the caller's session and the lid. Asked
/// before the reader is claimed, and again when a match arrives (while the
/// reader's stop and release are answered); never while the store's lock
/// is held.
public protocol SeatObserver {
    /// What logind says now about the caller's session and the machine.
    mutating func observe() -> SeatObservation
}

/// What logind said.
public enum SeatObservation: Equatable {
    /// logind is not on the bus: the rules about whose touch it is do not apply.
    case noLogind
    /// logind is there but gave no usable answer.
    case unanswered
    /// logind answered. `session` is nil when the caller is in no session.
    case seen(session: SessionFacts?, lidClosed: Bool)
}

/// One logind session, as the rules about whose touch it is need it.
public struct SessionFacts: Equatable {
    public var id: [UInt8]
    public var uid: UInt32
    public var active: Bool
    public var remote: Bool
    /// The seat's name; empty for a session on no seat (ssh, cron).
    public var seat: [UInt8]
    /// `LockedHint`: the session's screen is locked.
    public var locked: Bool

    public init(id: [UInt8], uid: UInt32, active: Bool, remote: Bool, seat: [UInt8], locked: Bool) {
        self.id = id
        self.uid = uid
        self.active = active
        self.remote = remote
        self.seat = seat
        self.locked = locked
    }
}

/// A machine without logind: the rules about whose touch it is do not apply.
public struct NoLogind: SeatObserver {
    public init() {}
    public mutating func observe() -> SeatObservation { .noLogind }
}

/// The verdict of one passcode check.
public enum PasscodeVerdict: Equatable {
    case correct
    case wrong
    /// The stack never asked for the passcode (a missing service falls back
    /// to `other`): it cannot have judged it, so there is no verdict.
    case noVerdict
}

/// Checks the passcode through the system's own password stack (docs/DESIGN.md, "The password check").
/// Split in three steps so the engine can charge the attempt after the
/// stack is known to be usable and before the passcode is checked.
public protocol PasscodeVerifier {
    /// Opens the passcode stack for the user; false when it cannot run.
    mutating func begin(userName: [UInt8]) -> Bool
    /// Checks the passcode; only after `begin` returned true.
    mutating func verify(_ passcode: SecretBuffer) -> PasscodeVerdict
    /// Closes the stack. Safe to call when not begun.
    mutating func end()
}

/// Kinds of messages shown to the person.
public enum MessageKind: Equatable {
    case info
    case error
}

/// The answer to one echo-off prompt.
public enum PromptAnswer: Equatable {
    /// Non-empty text, now in the secret buffer.
    case entered
    /// An empty line.
    case empty
    /// No answer: end of input, conversation failure, or none available.
    case failed
    /// The person chose the fallback instead of answering (an app's
    /// fallback button): policy biometrics ends with userFallback, policy
    /// owner asks for the password.
    case fallback
}

/// What the person chose while the reader waited for a finger, when the
/// conversation can tell (an app's buttons; a terminal whose keys the
/// module reads; a terminal's Ctrl-C alone cannot).
public enum WaitChoice: Equatable {
    case cancel
    /// The fallback: taken when it is offered, a cancel before.
    case fallback
    /// Touch or type: the person typed the password and pressed Enter; the
    /// prompter holds it (`takeTypedPassword`).
    case typedPassword
    /// Touch or type: Enter on an empty line, to be asked the password.
    case passwordWanted
}

/// The conversation with the person.
public protocol Prompter {
    /// Asks with echo off; the answer goes straight into `secret`.
    mutating func ask(_ text: String, into secret: SecretBuffer) -> PromptAnswer
    mutating func tell(_ text: String, _ kind: MessageKind)
    /// After a wait for a finger was interrupted: what the person chose,
    /// nil when the conversation cannot say (Ctrl-C on a terminal).
    mutating func takeChoice() -> WaitChoice?
    /// From now on the person may choose the fallback (its title): a
    /// conversation with a button for it shows the button. Said once per
    /// fingerprint phase, never when the title is empty.
    mutating func offerFallback(_ title: String)
    /// Touch or type (terminal mode, policy owner): starts reading the
    /// person's keys while the reader waits; false when this conversation
    /// cannot (no terminal of the caller's to read).
    mutating func watchKeys() -> Bool
    /// Moves the password typed while the reader waited into `secret`;
    /// false when there is none.
    mutating func takeTypedPassword(into secret: SecretBuffer) -> Bool
    /// Touch or type in a dialog (prompt mode, policy owner, an agent that
    /// takes the verdict while prompting): gets ready to leave a prompt
    /// open (everything that can fail but the thread itself); false when
    /// this conversation cannot, and the first prompt then asks.
    mutating func readyToLeavePromptOpen() -> Bool
    /// Asks `text` with echo off and leaves the question open while the
    /// reader waits; its answer ends the wait. Until it is answered nothing
    /// else is said. False when it could not be asked.
    mutating func leavePromptOpen(_ text: String) -> Bool
}

extension Prompter {
    public mutating func takeChoice() -> WaitChoice? { nil }
    public mutating func offerFallback(_ title: String) {}
    public mutating func watchKeys() -> Bool { false }
    public mutating func takeTypedPassword(into secret: SecretBuffer) -> Bool { false }
    public mutating func readyToLeavePromptOpen() -> Bool { false }
    public mutating func leavePromptOpen(_ text: String) -> Bool { false }
}

public enum LogLevel: Equatable {
    case debug
    case notice
    case warning
    case error
}

/// The administrator's log (syslog through `pam_syslog` in the module).
public protocol EventLog {
    mutating func log(_ level: LogLevel, _ message: String)
}
