import XCTest
import Glibc
@testable import LibcSystem

/// Collecting the helper's exit after its last frame (`Syscalls.reap`): a
/// child that ended is collected and leaves no zombie, one that outlives the
/// wait is left running and collected later, and one collected elsewhere
/// counts as gone. Real children: /bin/true, and /bin/cat on the channel,
/// which runs until the channel closes.
final class ReapTests: XCTestCase {
    private func start(_ path: String, channel: Int32) -> Int32? {
        Syscalls.spawn(Array(path.utf8), channel: channel)
    }

    private func isChild(_ pid: Int32) -> Bool {
        var status: Int32 = 0
        return waitpid(pid, &status, WNOHANG) >= 0
    }

    func testAChildThatEndedIsCollectedAndLeavesNoZombie() throws {
        let (mine, theirs) = try XCTUnwrap(Syscalls.socketPair())
        defer { Syscalls.close(mine) }
        let pid = try XCTUnwrap(start("/bin/true", channel: theirs))
        Syscalls.close(theirs)
        XCTAssertTrue(Syscalls.reap(pid, waitingMilliseconds: 10_000))
        XCTAssertFalse(isChild(pid), "collected: waitpid no longer knows it")
    }

    func testAChildThatOutlivesTheWaitIsLeftAndCollectedOnceItEnds() throws {
        let (mine, theirs) = try XCTUnwrap(Syscalls.socketPair())
        let pid = try XCTUnwrap(start("/bin/cat", channel: theirs))
        Syscalls.close(theirs)
        XCTAssertFalse(Syscalls.reap(pid, waitingMilliseconds: 30), "cat reads until the channel closes")
        XCTAssertEqual(kill(pid, 0), 0, "still running, not killed by the wait")
        XCTAssertTrue(isChild(pid))
        Syscalls.close(mine)  // cat reads the end of its input and exits
        XCTAssertTrue(Syscalls.reap(pid, waitingMilliseconds: 10_000))
        XCTAssertFalse(isChild(pid))
    }

    func testAChildCollectedElsewhereCountsAsGone() throws {
        let (mine, theirs) = try XCTUnwrap(Syscalls.socketPair())
        defer { Syscalls.close(mine) }
        let pid = try XCTUnwrap(start("/bin/true", channel: theirs))
        Syscalls.close(theirs)
        var status: Int32 = 0
        XCTAssertEqual(waitpid(pid, &status, 0), pid)
        XCTAssertTrue(Syscalls.reap(pid, waitingMilliseconds: 10_000), "ECHILD: nothing left to wait for")
    }
}
