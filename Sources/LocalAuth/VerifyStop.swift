// How a fingerprint attempt that was stopped before its verdict ends: the
// evidence rule that decides whether the attempt may be given back (R3).
// Pure, so that unit tests walk it as a table; the fprintd adapter only
// collects the messages.

/// fprintd's VerifyStatus results.
public enum FprintdResult: Equatable {
    case match
    case noMatch
    case hint(RetryHint)
    case disconnected
    case unknownError

    public init?(_ text: [UInt8]) {
        if bytesEqual(text, "verify-match") { self = .match }
        else if bytesEqual(text, "verify-no-match") { self = .noMatch }
        else if bytesEqual(text, "verify-retry-scan") { self = .hint(.retryScan) }
        else if bytesEqual(text, "verify-swipe-too-short") { self = .hint(.swipeTooShort) }
        else if bytesEqual(text, "verify-finger-not-centered") { self = .hint(.fingerNotCentered) }
        else if bytesEqual(text, "verify-remove-and-retry") { self = .hint(.removeAndRetry) }
        else if bytesEqual(text, "verify-disconnected") { self = .disconnected }
        else if bytesEqual(text, "verify-unknown-error") { self = .unknownError }
        else { return nil }
    }
}

/// One message from fprintd about the attempt, as received, with its serial
/// (fprintd numbers every message it sends from one counter).
public struct FprintdSignal: Equatable {
    public enum Kind: Equatable {
        case status(FprintdResult)
        /// The device's `finger-needed` property changed.
        case fingerNeeded(Bool)
        /// The device's `finger-present` property changed.
        case fingerPresent(Bool)
    }
    public var kind: Kind
    public var serial: UInt64

    public init(_ kind: Kind, serial: UInt64) {
        self.kind = kind
        self.serial = serial
    }
}

/// The device's state as fprintd answered a `Properties.GetAll` sent just
/// before the stop: a reply is ordered after everything fprintd sent before
/// it.
public struct ReaderProbe: Equatable {
    public var serial: UInt64
    public var fingerNeeded: Bool
    public var fingerPresent: Bool

    public init(serial: UInt64, fingerNeeded: Bool, fingerPresent: Bool) {
        self.serial = serial
        self.fingerNeeded = fingerNeeded
        self.fingerPresent = fingerPresent
    }
}

public enum VerifyStopRule {
    /// The longest time between sending the probe and sending the stop for
    /// which a refund can still be proven: a longer gap means the prompt was
    /// paused (stopped or starved by its user), and a finger put on the
    /// reader meanwhile could be judged after the probe and before the stop.
    /// Capturing and judging a finger takes a reader tens of milliseconds;
    /// the two sends take microseconds.
    public static let maximumSendGapNanoseconds: Int64 = 1_000_000

    /// The end of an attempt that was stopped for `reason` before a verdict
    /// was read. The module sends a probe (`GetAll` on the device) and
    /// `VerifyStop` back to back, `sendGapNanoseconds` apart, and reads
    /// everything fprintd sent until both are answered (one sender's
    /// messages arrive in order). `log` holds fprintd's messages about the
    /// attempt; `unread` is where the ones not yet acted on start; `probe` is
    /// the probe's answer and `stopReplySerial` the stop reply's serial (nil
    /// when anything failed or was not read in time).
    ///
    /// A verdict among the unread messages is the attempt's verdict (a
    /// match may succeed, a no-match counts), except a no-match shaped like
    /// the stop's own. The attempt is given back only on proof that no
    /// finger was judged: the probe found the reader still waiting
    /// (`finger-needed`) with no finger on it, no verdict came before the
    /// probe, no finger was reported present in the attempt, the stop
    /// followed the probe within `maximumSendGapNanoseconds`, and right
    /// after the probe fprintd sent exactly what a stop of a waiting verify
    /// sends — `finger-needed=false`, its own `verify-no-match`, then the
    /// reply — with consecutive serials (nothing lost, nothing in between).
    /// A real verdict looks the same by content on some readers, which is
    /// why the probe must come first and the stop right after it. Anything
    /// else stays charged.
    public static func end(after reason: StopReason, log: [FprintdSignal], unread: Int, probe: ReaderProbe?,
                           stopReplySerial: UInt64?, sendGapNanoseconds: Int64) -> AttemptEnd {
        // A no-match right before the reply, after finger-needed=false, may
        // be the stop's own: it is no verdict, but no proof either.
        let stopShaped = stopShapedSerial(log, stopReplySerial: stopReplySerial)
        for signal in log[min(unread, log.count)...] {
            guard case .status(let result) = signal.kind else { continue }
            switch result {
            case .match: return .match
            case .noMatch:
                if signal.serial == stopShaped { continue }
                return .noMatch
            case .hint: continue
            case .disconnected: return .disconnected
            case .unknownError: return .deviceError
            }
        }
        if let denial = refundDenial(log, probe: probe, stopReplySerial: stopReplySerial, sendGapNanoseconds: sendGapNanoseconds) {
            return .stoppedAfterPossibleScan(reason, unproven: denial)
        }
        switch reason {
        case .interrupted: return .interrupted
        case .timeout: return .timeout
        case .deviceError: return .deviceError
        case .sessionLeft: return .sessionLeft
        }
    }

    /// The serial of a `verify-no-match` sent right before the stop's reply
    /// and right after `finger-needed=false`: what a stop of a waiting verify
    /// sends, and what a verdict just before the stop may look like too.
    static func stopShapedSerial(_ log: [FprintdSignal], stopReplySerial: UInt64?) -> UInt64? {
        guard let reply = stopReplySerial, reply >= 2 else { return nil }
        let status = log.contains { $0.serial == reply - 1 && $0.kind == .status(.noMatch) }
        let needed = log.contains { $0.serial == reply - 2 && $0.kind == .fingerNeeded(false) }
        return status && needed ? reply - 1 : nil
    }

    /// What is missing from the proof that the stop of a waiting verify
    /// produced the messages after the probe; nil when the proof holds.
    static func refundDenial(_ log: [FprintdSignal], probe: ReaderProbe?, stopReplySerial: UInt64?,
                             sendGapNanoseconds: Int64) -> RefundDenial? {
        // A finger seen is the most telling reason, whatever else failed.
        if log.contains(where: { $0.kind == .fingerPresent(true) }) { return .fingerPresent }
        guard let probe, let reply = stopReplySerial else { return .unanswered }
        guard !probe.fingerPresent else { return .fingerPresent }
        guard sendGapNanoseconds >= 0, sendGapNanoseconds <= maximumSendGapNanoseconds else {
            return .sendGap(sendGapNanoseconds)
        }
        guard probe.fingerNeeded else { return .readerNotWaiting }
        // No verdict before the probe (hints are not verdicts).
        let verdictBefore = log.contains { signal in
            guard signal.serial < probe.serial, case .status(let result) = signal.kind else { return false }
            if case .hint = result { return false }
            return true
        }
        guard !verdictBefore else { return .verdictBeforeProbe }
        guard probe.serial < UInt64.max - 3, reply == probe.serial + 3 else { return .unexpectedMessages }
        let needed = log.contains { $0.serial == probe.serial + 1 && $0.kind == .fingerNeeded(false) }
        let status = log.contains { $0.serial == probe.serial + 2 && $0.kind == .status(.noMatch) }
        return needed && status ? nil : .unexpectedMessages
    }
}
