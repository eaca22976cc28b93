// The evidence rule for a fingerprint attempt stopped before its verdict,
// as a table: fprintd's messages as received (serials as fprintd numbers
// them), the probe sent right before the stop, the stop reply's serial, and
// how the attempt ends.
import XCTest
import LocalAuth

final class VerifyStopTests: XCTestCase {
    struct Row {
        var name: String
        var log: [FprintdSignal]
        var unread = 0
        var probe: ReaderProbe?
        var reply: UInt64?
        var reason: StopReason = .interrupted
        /// Time between sending the probe and the stop: microseconds unless the prompt was paused.
        var gap: Int64 = 30_000
        var end: AttemptEnd
    }

    static func needed(_ value: Bool, _ serial: UInt64) -> FprintdSignal { FprintdSignal(.fingerNeeded(value), serial: serial) }
    static func present(_ value: Bool, _ serial: UInt64) -> FprintdSignal { FprintdSignal(.fingerPresent(value), serial: serial) }
    static func status(_ result: FprintdResult, _ serial: UInt64) -> FprintdSignal { FprintdSignal(.status(result), serial: serial) }
    static func probe(_ serial: UInt64, needed: Bool = true, present: Bool = false) -> ReaderProbe {
        ReaderProbe(serial: serial, fingerNeeded: needed, fingerPresent: present)
    }

    /// Waiting for a finger since the attempt started.
    static var waiting: [FprintdSignal] { [needed(true, 10)] }
    /// What fprintd sends after the probe (serial 20) when it stops a verify
    /// that was still waiting (measured): finger-needed=false, its own
    /// no-match, then the reply at 23.
    static var stopped: [FprintdSignal] { [needed(false, 21), status(.noMatch, 22)] }

    var rows: [Row] { [
        Row(name: "a stop while waiting: refunded", log: Self.waiting + Self.stopped, probe: Self.probe(20), reply: 23, end: .interrupted),
        Row(name: "the same on a timeout", log: Self.waiting + Self.stopped, probe: Self.probe(20), reply: 23, reason: .timeout,
            end: .timeout),
        Row(name: "the same after a wait failure", log: Self.waiting + Self.stopped, probe: Self.probe(20), reply: 23,
            reason: .deviceError, end: .deviceError),
        Row(name: "retry hints before the stop do not prevent the refund",
            log: Self.waiting + [Self.status(.hint(.retryScan), 12), Self.status(.hint(.swipeTooShort), 13)] + Self.stopped,
            probe: Self.probe(20), reply: 23, end: .interrupted),
        Row(name: "a real miss read only during the stop counts",
            log: Self.waiting + [Self.status(.noMatch, 15), Self.needed(false, 16)], probe: Self.probe(17, needed: false), reply: 18,
            end: .noMatch),
        Row(name: "a real match read only during the stop succeeds",
            log: Self.waiting + [Self.status(.match, 15), Self.needed(false, 16)], probe: Self.probe(17, needed: false), reply: 18,
            end: .match),
        Row(name: "an image reader's miss (finger-needed cleared first) before the probe counts",
            log: Self.waiting + [Self.needed(false, 15), Self.status(.noMatch, 16)], probe: Self.probe(17, needed: false), reply: 18,
            end: .noMatch),
        Row(name: "the same miss when the probe was lost: counted",
            log: Self.waiting + [Self.needed(false, 15), Self.status(.noMatch, 16)], probe: nil, reply: 18, end: .noMatch),
        Row(name: "the same miss right before the reply without a probe: charged, no verdict",
            log: Self.waiting + [Self.needed(false, 16), Self.status(.noMatch, 17)], probe: nil, reply: 18,
            end: .stoppedAfterPossibleScan(.interrupted, unproven: .unanswered)),
        Row(name: "a finger on the reader at the probe: charged",
            log: Self.waiting + [Self.present(true, 14), Self.needed(false, 21), Self.present(false, 21), Self.status(.noMatch, 22)],
            probe: Self.probe(20, present: true), reply: 23, end: .stoppedAfterPossibleScan(.interrupted, unproven: .fingerPresent)),
        Row(name: "a finger reported present earlier in the attempt: charged",
            log: Self.waiting + [Self.present(true, 14), Self.present(false, 15)] + Self.stopped, probe: Self.probe(20), reply: 23,
            end: .stoppedAfterPossibleScan(.interrupted, unproven: .fingerPresent)),
        Row(name: "a finger seen is the reason logged even when the stop also came late",
            log: Self.waiting + [Self.present(true, 14)] + Self.stopped, probe: Self.probe(20), reply: 23, gap: 30_000_000,
            end: .stoppedAfterPossibleScan(.interrupted, unproven: .fingerPresent)),
        Row(name: "a finger seen is the reason logged even when the probe was lost",
            log: Self.waiting + [Self.present(true, 14)], probe: nil, reply: nil,
            end: .stoppedAfterPossibleScan(.interrupted, unproven: .fingerPresent)),
        Row(name: "the reader no longer waiting at the probe: charged",
            log: Self.waiting + Self.stopped, probe: Self.probe(20, needed: false), reply: 23,
            end: .stoppedAfterPossibleScan(.interrupted, unproven: .readerNotWaiting)),
        Row(name: "the stop failed: charged", log: Self.waiting, probe: Self.probe(20), reply: nil,
            end: .stoppedAfterPossibleScan(.interrupted, unproven: .unanswered)),
        Row(name: "nothing between probe and reply (messages lost): charged", log: Self.waiting, probe: Self.probe(20), reply: 23,
            reason: .timeout, end: .stoppedAfterPossibleScan(.timeout, unproven: .unexpectedMessages)),
        Row(name: "a gap between the probe and the stop's messages: charged",
            log: Self.waiting + [Self.needed(false, 22), Self.status(.noMatch, 23)], probe: Self.probe(20), reply: 24,
            end: .stoppedAfterPossibleScan(.interrupted, unproven: .unexpectedMessages)),
        Row(name: "finger-needed=false after the no-match: a real verdict",
            log: Self.waiting + [Self.status(.noMatch, 21), Self.needed(false, 22)], probe: Self.probe(20), reply: 23, end: .noMatch),
        Row(name: "a verdict before the probe is never the stop's",
            log: Self.waiting + [Self.status(.noMatch, 19)] + Self.stopped, probe: Self.probe(20), reply: 23, end: .noMatch),
        Row(name: "verdicts already acted on are not read again",
            log: Self.waiting + [Self.status(.hint(.retryScan), 11)] + Self.stopped, unread: 2, probe: Self.probe(20), reply: 23,
            end: .interrupted),
        Row(name: "a prompt paused between the probe and the stop: charged, whatever fprintd says after",
            log: Self.waiting + Self.stopped, probe: Self.probe(20), reply: 23, gap: 30_000_000,
            end: .stoppedAfterPossibleScan(.interrupted, unproven: .sendGap(30_000_000))),
        Row(name: "a pause just over the bound: charged", log: Self.waiting + Self.stopped, probe: Self.probe(20), reply: 23,
            gap: VerifyStopRule.maximumSendGapNanoseconds + 1,
            end: .stoppedAfterPossibleScan(.interrupted, unproven: .sendGap(VerifyStopRule.maximumSendGapNanoseconds + 1))),
        Row(name: "a pause at the bound: refunded", log: Self.waiting + Self.stopped, probe: Self.probe(20), reply: 23,
            gap: VerifyStopRule.maximumSendGapNanoseconds, end: .interrupted),
        Row(name: "a clock that went backwards: charged", log: Self.waiting + Self.stopped, probe: Self.probe(20), reply: 23, gap: -1,
            end: .stoppedAfterPossibleScan(.interrupted, unproven: .sendGap(-1))),
        Row(name: "a verdict read during the stop counts even after a pause",
            log: Self.waiting + [Self.status(.noMatch, 15), Self.needed(false, 16)], probe: Self.probe(17, needed: false), reply: 18,
            gap: 30_000_000, end: .noMatch),
        Row(name: "a disconnect reported during the stop", log: Self.waiting + [Self.status(.disconnected, 15)],
            probe: Self.probe(16, needed: false), reply: 17, end: .disconnected),
        Row(name: "an error reported during the stop", log: Self.waiting + [Self.status(.unknownError, 15)],
            probe: Self.probe(16, needed: false), reply: 17, end: .deviceError),
    ] }

    func testEveryRow() {
        for row in rows {
            let end = VerifyStopRule.end(after: row.reason, log: row.log, unread: row.unread, probe: row.probe, stopReplySerial: row.reply,
                                         sendGapNanoseconds: row.gap)
            XCTAssertEqual(end, row.end, row.name)
        }
    }

    func testUnreadBeyondTheLogIsSafe() {
        let end = VerifyStopRule.end(after: .interrupted, log: Self.waiting, unread: 99, probe: Self.probe(20), stopReplySerial: 23,
                                     sendGapNanoseconds: 0)
        XCTAssertEqual(end, .stoppedAfterPossibleScan(.interrupted, unproven: .unexpectedMessages))
    }

    func testSerialsNearTheirLimitNeverWrap() {
        let probe = Self.probe(UInt64.max - 1)
        let end = VerifyStopRule.end(after: .interrupted, log: [], unread: 0, probe: probe, stopReplySerial: 1, sendGapNanoseconds: 0)
        XCTAssertEqual(end, .stoppedAfterPossibleScan(.interrupted, unproven: .unexpectedMessages))
    }

    func testFprintdResultNames() {
        XCTAssertEqual(FprintdResult(Array("verify-match".utf8)), .match)
        XCTAssertEqual(FprintdResult(Array("verify-no-match".utf8)), .noMatch)
        XCTAssertEqual(FprintdResult(Array("verify-retry-scan".utf8)), .hint(.retryScan))
        XCTAssertEqual(FprintdResult(Array("verify-disconnected".utf8)), .disconnected)
        XCTAssertNil(FprintdResult(Array("verify-match ".utf8)))
    }
}
