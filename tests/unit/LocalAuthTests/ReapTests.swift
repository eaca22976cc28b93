import XCTest
import Glibc
@testable import LibcSystem
import CLibc

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

    /// Without a descriptor for the pidfd (no file left under the limit),
    /// waitpid is tried on a timer instead, with the same outcome.
    func testWithoutAPidfdTheChildIsStillCollected() throws {
        let (mine, theirs) = try XCTUnwrap(Syscalls.socketPair())
        let pid = try XCTUnwrap(start("/bin/cat", channel: theirs))
        Syscalls.close(theirs)
        Syscalls.close(mine)
        var saved = rlimit()
        XCTAssertEqual(getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &saved), 0)
        let lowestFree = dup(0)
        XCTAssertGreaterThanOrEqual(lowestFree, 0)
        close(lowestFree)
        var none = saved
        none.rlim_cur = rlim_t(lowestFree)
        XCTAssertEqual(setrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &none), 0)
        XCTAssertLessThan(la_pidfd_open(pid), 0, "no descriptor can be made")
        let gone = Syscalls.reap(pid, waitingMilliseconds: 10_000)
        XCTAssertEqual(setrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &saved), 0)
        XCTAssertTrue(gone)
        XCTAssertFalse(isChild(pid))
    }
}
