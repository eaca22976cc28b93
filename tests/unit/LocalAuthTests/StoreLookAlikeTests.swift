import XCTest
import Glibc
@testable import LocalAuth
@testable import LibcSystem

/// Unknown names' look-alike records (R14): a bounded set of buckets in one
/// file under one lock, and every lock waited for within a bound.
final class StoreLookAlikeTests: StoreFixture {
    func testInventedNamesNeverMakeMoreThanTheBucketsAndOneLock() {
        for index in 0..<3000 { chargeLookAlike("invented-\(index)") }
        let files = names()
        XCTAssertEqual(files, ["lookalike.key", "lookalike.lock", "lookalike.rec"],
                       "every charge went into its bucket in place: no spare was needed")
        XCTAssertEqual(readFile("lookalike.rec")?.count, FileStateStore.lookAlikeFileSize)
        let s = store()
        let key = readFile("lookalike.key") ?? []
        let buckets = Set((0..<3000).map { s.lookAlikeFiles(userName: bytes("invented-\($0)"), key: key).base })
        XCTAssertGreaterThan(buckets.count, 900, "3000 names spread over the buckets")
        XCTAssertEqual(peek(FileStateStore.lookAlikeUID, "invented-2999")?.0?.passcodeFailures, 1)
    }

    /// A store of an earlier release, one file per bucket: the first
    /// unknown name makes the shared file (the old files go) and charges its
    /// bucket there, in place from then on.
    func testTheLookAlikeFileIsMadeOnceAndUsedInPlace() throws {
        writeFile("lookalike.key", [UInt8](repeating: 9, count: FileStateStore.lookAlikeKeySize))
        writeFile("u000.rec", [UInt8](repeating: 0, count: RecordFormat.fileSize))
        writeFile("u3ff.rec", [UInt8](repeating: 0, count: RecordFormat.fileSize))
        chargeLookAlike("first")
        XCTAssertEqual(names(), ["lookalike.key", "lookalike.lock", "lookalike.rec"])
        let made = inode("lookalike.rec")
        chargeLookAlike("first")
        chargeLookAlike("second")
        XCTAssertEqual(inode("lookalike.rec"), made)
        XCTAssertEqual(peek(FileStateStore.lookAlikeUID, "first")?.0?.passcodeFailures, 2)
        XCTAssertEqual(peek(FileStateStore.lookAlikeUID, "second")?.0?.passcodeFailures, 1)
    }

    /// A store with the key but no look-alike file (an earlier release's,
    /// or a crash between the two): the next known user's write makes the
    /// file, so that no unknown name's first prompt has to.
    func testAKnownUsersWriteMakesAMissingLookAlikeFile() throws {
        var s = store()
        try s.withRecord(uid: 1000, userName: bytes("alice")) { stored, _ in stored = storedRecord(f: 1) }
        let key = readFile("lookalike.key")
        unlink(path("lookalike.rec"))
        try s.withRecord(uid: 1000, userName: bytes("alice")) { stored, _ in stored = storedRecord(f: 2) }
        XCTAssertEqual(readFile("lookalike.rec")?.count, FileStateStore.lookAlikeFileSize)
        XCTAssertEqual(readFile("lookalike.key"), key, "the key is kept")
        unlink(path("lookalike.key"))
        try s.withRecord(uid: 1000, userName: bytes("alice")) { stored, _ in stored = storedRecord(f: 3) }
        XCTAssertEqual(readFile("lookalike.key")?.count, FileStateStore.lookAlikeKeySize)
    }

    /// A damaged bucket is R12's record, written into its region in place;
    /// a look-alike file of the wrong size is made again.
    func testADamagedBucketOrLookAlikeFileFailsClosed() throws {
        chargeLookAlike("someone")
        let s = store()
        let key = try XCTUnwrap(readFile("lookalike.key"))
        let base = s.lookAlikeFiles(userName: bytes("someone"), key: key).base
        var file = try XCTUnwrap(readFile("lookalike.rec"))
        for index in base..<(base + RecordFormat.fileSize) { file[index] ^= 0x5A }
        writeFile("lookalike.rec", file)
        let made = inode("lookalike.rec")
        XCTAssertEqual(peek(FileStateStore.lookAlikeUID, "someone")?.1, .damaged(.badMagic))
        var t = store()
        try t.withRecord(uid: FileStateStore.lookAlikeUID, userName: bytes("someone")) { record, status in
            XCTAssertEqual(status, .damaged(.badMagic))
            record = StateRecord(uid: FileStateStore.lookAlikeUID, userName: bytes("someone"), createdWallSeconds: 1)
            record?.fingerprintFailures = 5
        }
        XCTAssertEqual(inode("lookalike.rec"), made, "in place")
        XCTAssertEqual(peek(FileStateStore.lookAlikeUID, "someone")?.0?.fingerprintFailures, 5)
        writeFile("lookalike.rec", [1, 2, 3])
        XCTAssertEqual(peek(FileStateStore.lookAlikeUID, "someone")?.1, .damaged(.wrongSize))
        try t.withRecord(uid: FileStateStore.lookAlikeUID, userName: bytes("someone")) { record, _ in
            record = StateRecord(uid: FileStateStore.lookAlikeUID, userName: bytes("someone"), createdWallSeconds: 1)
        }
        XCTAssertEqual(readFile("lookalike.rec")?.count, FileStateStore.lookAlikeFileSize)
        XCTAssertEqual(peek(FileStateStore.lookAlikeUID, "someone")?.1, .loaded)
    }

    func testABucketHeldByAnotherNameIsAFreshStart() {
        let s = store()
        let key = [UInt8](repeating: 7, count: FileStateStore.lookAlikeKeySize)
        writeFile("lookalike.key", key)
        // Two names in one bucket under this key.
        var first = "", second = ""
        var seen: [Int: String] = [:]
        for index in 0..<5000 {
            let name = "n\(index)"
            let bucket = s.lookAlikeFiles(userName: bytes(name), key: key).base
            if let earlier = seen[bucket] { first = earlier; second = name; break }
            seen[bucket] = name
        }
        XCTAssertFalse(second.isEmpty)
        chargeLookAlike(first)
        chargeLookAlike(first)
        var t = store()
        let status = try? t.withRecord(uid: FileStateStore.lookAlikeUID, userName: bytes(second)) { record, status -> LoadStatus in
            XCTAssertNil(record)
            return status
        }
        XCTAssertEqual(status, .absent, "never the fail-closed record: another unknown name is no damage")
        let before = inode("lookalike.rec")
        chargeLookAlike(second)
        XCTAssertEqual(inode("lookalike.rec"), before, "the bucket is taken over in place")
        XCTAssertEqual(peek(FileStateStore.lookAlikeUID, second)?.0?.passcodeFailures, 1)
        XCTAssertNil(peek(FileStateStore.lookAlikeUID, first)?.0, "the first name starts afresh in its turn")
    }

    func testAnOddLookAlikeKeyIsReplaced() {
        writeFile("lookalike.key", [1, 2, 3])
        chargeLookAlike("someone")
        XCTAssertEqual(readFile("lookalike.key")?.count, FileStateStore.lookAlikeKeySize)
        let key = readFile("lookalike.key")
        chargeLookAlike("someone-else")
        XCTAssertEqual(readFile("lookalike.key"), key, "a sound key is kept")
    }

    // MARK: Locks, each waited for within a bound

    /// A second open of the lock file, as another prompt's: its locks
    /// conflict with the store's though both are this process's.
    func otherPrompt(_ name: String) throws -> Int32 {
        let fd = open(path(name), O_RDWR | O_CREAT, 0o600)
        XCTAssertGreaterThanOrEqual(fd, 0)
        return fd
    }

    /// The record as it is, read without the lock another prompt holds.
    func unlocked(_ uid: UInt32 = 1000, _ name: String = "alice") -> StateRecord? {
        (try? store().peek(uid: uid, userName: bytes(name)))?.record
    }

    /// A prompt its user stopped while it wrote an unknown name's bucket
    /// (SIGSTOP, a frozen cgroup) holds up unknown names for the bound and
    /// no longer: they are refused uncounted, and every known user goes on
    /// at once.
    func testAStoppedUnknownNamesPromptHoldsUpUnknownNamesOnlyForTheBound() throws {
        chargeLookAlike("stopped")
        let held = try otherPrompt("lookalike.lock")
        defer { close(held) }
        XCTAssertEqual(flock(held, LOCK_EX | LOCK_NB), 0)
        var s = store()
        s.lockWaitMilliseconds = 40
        for name in ["stopped", "other"] {
            XCTAssertThrowsError(try s.withRecord(uid: FileStateStore.lookAlikeUID, userName: bytes(name)) { record, _ in
                record?.passcodeFailures += 1
            }) { XCTAssertEqual($0 as? StoreFailure, .lockHeld(milliseconds: 40)) }
        }
        XCTAssertEqual(unlocked(FileStateStore.lookAlikeUID, "stopped")?.passcodeFailures, 1, "nothing charged, nothing lost")
        try s.withRecord(uid: 1000, userName: bytes("alice")) { stored, _ in stored = storedRecord(p: 1) }
        XCTAssertEqual(unlocked()?.passcodeFailures, 1)
        close(held)
        chargeLookAlike("stopped")
        XCTAssertEqual(unlocked(FileStateStore.lookAlikeUID, "stopped")?.passcodeFailures, 2, "free again")
    }

    /// A known user's lock held by a stopped prompt (the user's own, or
    /// anyone's `su` to that user) is waited for within the bound, then this
    /// attempt is refused uncounted; the record is as it was, and the next
    /// prompt after the holder lets go counts as ever.
    func testAKnownUsersHeldLockIsWaitedForWithinTheBound() throws {
        var s = store()
        try s.withRecord(uid: 1000, userName: bytes("alice")) { stored, _ in stored = storedRecord(p: 2) }
        let held = try otherPrompt("1000.lock")
        defer { close(held) }
        XCTAssertEqual(flock(held, LOCK_EX | LOCK_NB), 0)
        s.lockWaitMilliseconds = 40
        XCTAssertThrowsError(try s.withRecord(uid: 1000, userName: bytes("alice")) { stored, _ in stored?.passcodeFailures += 1 }) {
            XCTAssertEqual($0 as? StoreFailure, .lockHeld(milliseconds: 40))
        }
        XCTAssertEqual(unlocked()?.passcodeFailures, 2)
        close(held)
        try s.withRecord(uid: 1000, userName: bytes("alice")) { stored, _ in stored?.passcodeFailures += 1 }
        XCTAssertEqual(peek()?.0?.passcodeFailures, 3)
    }
}
