// The evidence rule for a fingerprint attempt stopped before its verdict,
// as a table: fprintd's messages as received (serials as fprintd numbers
// them), the serial of its reply to the stop, and how the attempt ends.
import XCTest
import LocalAuth

final class VerifyStopTests: XCTestCase {
    struct Row {
        var name: String
        var log: [FprintdSignal]
        var unread = 0
        var reply: UInt64?
        var reason: StopReason = .interrupted
        var end: AttemptEnd
    }

    static func needed(_ value: Bool, _ serial: UInt64) -> FprintdSignal { FprintdSignal(.fingerNeeded(value), serial: serial) }
    static func present(_ value: Bool, _ serial: UInt64) -> FprintdSignal { FprintdSignal(.fingerPresent(value), serial: serial) }
    static func status(_ result: FprintdResult, _ serial: UInt64) -> FprintdSignal { FprintdSignal(.status(result), serial: serial) }

    /// What fprintd sends when it stops a verify that was still waiting
    /// (measured: finger-needed=false, its own no-match, the reply).
    static var waiting: [FprintdSignal] { [Self.needed(true, 10)] }
    static var stopped: [FprintdSignal] { [Self.needed(false, 20), Self.status(.noMatch, 21)] }

    var rows: [Row] { [
        Row(name: "a stop while waiting: refunded", log: Self.waiting + Self.stopped, reply: 22, end: .interrupted),
        Row(name: "the same on a timeout", log: Self.waiting + Self.stopped, reply: 22, reason: .timeout, end: .timeout),
        Row(name: "the same after a wait failure", log: Self.waiting + Self.stopped, reply: 22, reason: .deviceError, end: .deviceError),
        Row(name: "retry hints before the stop do not prevent the refund",
            log: Self.waiting + [Self.status(.hint(.retryScan), 12), Self.status(.hint(.swipeTooShort), 13)] + Self.stopped, reply: 22, end: .interrupted),
        Row(name: "a real miss read only during the stop counts",
            log: Self.waiting + [Self.status(.noMatch, 15), Self.needed(false, 16)], reply: 17, end: .noMatch),
        Row(name: "a real match read only during the stop succeeds",
            log: Self.waiting + [Self.status(.match, 15), Self.needed(false, 16)], reply: 17, end: .match),
        Row(name: "a miss queued behind other traffic still counts before the artifact check",
            log: Self.waiting + [Self.status(.noMatch, 15), Self.needed(false, 16)] + Self.stopped, reply: 22, end: .noMatch),
        Row(name: "a finger reported present: charged",
            log: Self.waiting + [Self.present(true, 14), Self.needed(false, 20), Self.present(false, 20), Self.status(.noMatch, 21)], reply: 22,
            end: .stoppedAfterPossibleScan(.interrupted)),
        Row(name: "the stop failed: charged", log: Self.waiting, reply: nil, end: .stoppedAfterPossibleScan(.interrupted)),
        Row(name: "nothing before the reply (messages lost): charged", log: Self.waiting, reply: 22, reason: .timeout,
            end: .stoppedAfterPossibleScan(.timeout)),
        Row(name: "no-match and reply not adjacent: charged",
            log: Self.waiting + [Self.needed(false, 20), Self.status(.noMatch, 21)], reply: 23, end: .noMatch),
        Row(name: "finger-needed=false after the no-match: a real verdict",
            log: Self.waiting + [Self.status(.noMatch, 20), Self.needed(false, 21)], reply: 22, end: .noMatch),
        Row(name: "the no-match without finger-needed=false before it: charged as a miss",
            log: Self.waiting + [Self.status(.noMatch, 21)], reply: 22, end: .noMatch),
        Row(name: "verdicts already acted on are not read again",
            log: Self.waiting + [Self.status(.hint(.retryScan), 11)] + Self.stopped, unread: 2, reply: 22, end: .interrupted),
        Row(name: "a disconnect reported during the stop", log: Self.waiting + [Self.status(.disconnected, 15)], reply: 16, end: .disconnected),
        Row(name: "an error reported during the stop", log: Self.waiting + [Self.status(.unknownError, 15)], reply: 16, end: .deviceError),
        Row(name: "a reply serial too small to have a triple: charged", log: [], reply: 1,
            end: .stoppedAfterPossibleScan(.interrupted)),
    ] }

    func testEveryRow() {
        for row in rows {
            let end = VerifyStopRule.end(after: row.reason, log: row.log, unread: row.unread, stopReplySerial: row.reply)
            XCTAssertEqual(end, row.end, row.name)
        }
    }

    func testUnreadBeyondTheLogIsSafe() {
        let end = VerifyStopRule.end(after: .interrupted, log: Self.waiting, unread: 99, stopReplySerial: 22)
        XCTAssertEqual(end, .stoppedAfterPossibleScan(.interrupted))
    }

    func testFprintdResultNames() {
        XCTAssertEqual(FprintdResult(Array("verify-match".utf8)), .match)
        XCTAssertEqual(FprintdResult(Array("verify-no-match".utf8)), .noMatch)
        XCTAssertEqual(FprintdResult(Array("verify-retry-scan".utf8)), .hint(.retryScan))
        XCTAssertEqual(FprintdResult(Array("verify-disconnected".utf8)), .disconnected)
        XCTAssertNil(FprintdResult(Array("verify-match ".utf8)))
    }
}
