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

public enum VerifyStopRule {
    /// The end of an attempt that was stopped for `reason` before a verdict
    /// was read. `log` holds every message fprintd sent about the attempt up
    /// to its reply to our VerifyStop (one sender's messages arrive in
    /// order, so nothing it sent before that reply is missing); `unread` is
    /// where the ones not yet acted on start; `stopReplySerial` is the
    /// reply's serial, nil when the stop failed.
    ///
    /// A verdict among the unread messages is the attempt's verdict: a match
    /// may succeed, a no-match counts. Otherwise the attempt is given back
    /// only on proof that no finger was judged: fprintd stopping a running
    /// verify sends `finger-needed=false`, then a `verify-no-match` of its
    /// own, then the reply, back to back; a real verdict puts the status
    /// before `finger-needed=false`. So a refund needs exactly that triple
    /// of consecutive serials, and no `finger-present` in the whole attempt.
    /// Anything else (a stop that failed or timed out, messages lost by a
    /// flooded bus, a finger on the reader) leaves the attempt charged.
    public static func end(after reason: StopReason, log: [FprintdSignal], unread: Int, stopReplySerial: UInt64?) -> AttemptEnd {
        let artifact = stopArtifactSerial(log, stopReplySerial: stopReplySerial)
        for signal in log[min(unread, log.count)...] {
            guard case .status(let result) = signal.kind else { continue }
            switch result {
            case .match: return .match
            case .noMatch:
                if signal.serial == artifact { continue }
                return .noMatch
            case .hint: continue
            case .disconnected: return .disconnected
            case .unknownError: return .deviceError
            }
        }
        let fingerSeen = log.contains { $0.kind == .fingerPresent(true) }
        guard artifact != nil, !fingerSeen else { return .stoppedAfterPossibleScan(reason) }
        switch reason {
        case .interrupted: return .interrupted
        case .timeout: return .timeout
        case .deviceError: return .deviceError
        }
    }

    /// The serial of the `verify-no-match` that the stop itself produced,
    /// when the log shows the whole triple; nil otherwise.
    static func stopArtifactSerial(_ log: [FprintdSignal], stopReplySerial: UInt64?) -> UInt64? {
        guard let reply = stopReplySerial, reply >= 2 else { return nil }
        let status = log.contains { $0.serial == reply - 1 && $0.kind == .status(.noMatch) }
        let needed = log.contains { $0.serial == reply - 2 && $0.kind == .fingerNeeded(false) }
        return status && needed ? reply - 1 : nil
    }
}
