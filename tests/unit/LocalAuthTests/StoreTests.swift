import XCTest
import Dispatch
import Glibc
@testable import LocalAuth
@testable import LibcSystem

/// The state store (docs/DESIGN.md): records, damage, spares and repairs.
final class StoreTests: StoreFixture {
    func testAbsentThenWrittenThenLoaded() throws {
        XCTAssertEqual(peek()?.1, .absent)
        XCTAssertNil(readFile("1000.rec"), "reading an absent record writes nothing")
        var s = store()
        var record = storedRecord(f: 2, p: 1)
        _ = record.appendFailure(kind: .fingerprint, wallSeconds: 5, service: bytes("sudo"), tty: [], remoteHost: [])
        try s.withRecord(uid: 1000, userName: bytes("alice")) { stored, _ in stored = record }
        XCTAssertTrue(readFile("1000.rec") == RecordSlots.newFile(record), "a new file: the record in its first slot")
        var info = stat()
        XCTAssertEqual(stat(path("1000.rec"), &info), 0)
        XCTAssertEqual(info.st_mode & 0o777, 0o600)
        XCTAssertNotNil(readFile("1000.lock"), "a separate lock file")
        XCTAssertNil(readFile("1000.rec.tmp"), "no temporary left behind")
        let loaded = peek()
        XCTAssertEqual(loaded?.1, .loaded)
        XCTAssertEqual(loaded?.0, record)
    }

    func testAnUnchangedRecordIsNotRewritten() throws {
        var s = store()
        let record = storedRecord(f: 1)
        try s.withRecord(uid: 1000, userName: bytes("alice")) { stored, _ in stored = record }
        var before = stat()
        stat(path("1000.rec"), &before)
        try s.withRecord(uid: 1000, userName: bytes("alice")) { stored, _ in _ = stored }
        var after = stat()
        stat(path("1000.rec"), &after)
        XCTAssertEqual(before.st_ino, after.st_ino, "not replaced")
    }

    /// Changes after the first go into the file in place, into the slot the
    /// newest synced copy is not in; a one-slot file of an earlier release
    /// is read and rewritten whole in the two-slot layout.
    func testChangesAreWrittenInPlaceAndAnOldFileIsRewrittenOnce() throws {
        var s = store()
        try s.withRecord(uid: 1000, userName: bytes("alice")) { stored, _ in stored = storedRecord(f: 1) }
        var first = stat()
        stat(path("1000.rec"), &first)
        XCTAssertEqual(Int(first.st_size), RecordFormat.fileSize)
        let charge: (inout StateRecord?, LoadStatus) -> Void = { stored, _ in
            stored!.fingerprintFailures += 1
            _ = stored!.appendFailure(kind: .fingerprint, wallSeconds: 9, service: bytes("sudo"), tty: [], remoteHost: [])
        }
        try s.withRecord(uid: 1000, userName: bytes("alice"), charge)
        try s.withRecord(uid: 1000, userName: bytes("alice")) { stored, _ in stored!.fingerprintFailures = 0 }
        var after = stat()
        stat(path("1000.rec"), &after)
        XCTAssertEqual(first.st_ino, after.st_ino, "written in place, not replaced")
        let file = readFile("1000.rec") ?? []
        let headers = [0, 1].map { try? RecordFormat.header(RecordSlots.slot(file, $0)).get() }
        XCTAssertEqual(headers[1]?.generation, 2, "the charge went to the other slot")
        XCTAssertEqual(headers[0]?.generation, 3, "the reset over the first copy")
        XCTAssertEqual(RecordSlots.read(file).syncedGeneration, 2, "the charge was synced, the reset was not")
        XCTAssertEqual(peek()?.0?.fingerprintFailures, 0)

        var legacy = RecordFormat.encode(storedRecord(f: 4), generation: 0)
        legacy[8] = 1
        legacy[(RecordFormat.size - 8)..<RecordFormat.size] = ArraySlice(littleEndian(fnv(legacy)))
        writeFile("1000.rec", legacy)
        XCTAssertEqual(peek()?.1, .loaded)
        XCTAssertEqual(peek()?.0?.fingerprintFailures, 4)
        try s.withRecord(uid: 1000, userName: bytes("alice"), charge)
        XCTAssertEqual(readFile("1000.rec")?.count, RecordFormat.fileSize)
        XCTAssertEqual(peek()?.0?.fingerprintFailures, 5)
    }

    /// Threads of one process (an app with several contexts) each open the
    /// record and take its lock for themselves: every charge lands, for one
    /// user and for users of their own. Under `make check-tsan` this is the
    /// test that shows the store shares no memory between transactions.
    func testThreadsOfOneProcessEachChargeExactlyOnce() throws {
        let threads = 8, charges = 25
        let directory = self.directory
        // One slot per thread, each written by its own thread only.
        nonisolated(unsafe) let failures = UnsafeMutablePointer<Int>.allocate(capacity: threads)
        failures.initialize(repeating: 0, count: threads)
        defer { failures.deallocate() }
        DispatchQueue.concurrentPerform(iterations: threads) { index in
            var own = FileStateStore(directoryPath: bytes(directory), trustedOwner: geteuid())
            let other = UserIdentity(uid: 2000 + UInt32(index), name: bytes("user\(index)"))
            for _ in 0..<charges {
                for user in [alice, other] {
                    do {
                        try own.withRecord(uid: user.uid, userName: user.name) { stored, _ in
                            var record = stored ?? StateRecord(uid: user.uid, userName: user.name, createdWallSeconds: 1_700_000_000)
                            record.passcodeFailures += 1
                            stored = record
                        }
                    } catch {
                        failures[index] += 1
                    }
                }
            }
        }
        XCTAssertEqual((0..<threads).map { failures[$0] }, [Int](repeating: 0, count: threads))
        XCTAssertEqual(peek()?.0?.passcodeFailures, threads * charges)
        for index in 0..<threads {
            XCTAssertEqual(peek(2000 + UInt32(index), "user\(index)")?.0?.passcodeFailures, charges)
        }
    }

    func testRecordsArePerUID() throws {
        var s = store()
        try s.withRecord(uid: 1000, userName: bytes("alice")) { stored, _ in stored = storedRecord(f: 3) }
        let bob = UserIdentity(uid: 1001, name: bytes("bob"))
        XCTAssertEqual(peek(1001, "bob")?.1, .absent)
        try s.withRecord(uid: 1001, userName: bytes("bob")) { stored, _ in stored = storedRecord(bob, p: 2) }
        XCTAssertEqual(peek()?.0?.fingerprintFailures, 3)
        XCTAssertEqual(peek(1001, "bob")?.0?.passcodeFailures, 2)
    }

    func testDamagedFilesAreReported() throws {
        let good = RecordSlots.newFile(storedRecord(f: 1))
        writeFile("1000.rec", Array(good.dropLast()))
        XCTAssertEqual(peek()?.1, .damaged(.wrongSize))
        var flipped = good
        flipped[700] ^= 0x10
        writeFile("1000.rec", flipped)
        XCTAssertEqual(peek()?.1, .damaged(.badChecksum))
        writeFile("1000.rec", good)
        XCTAssertEqual(peek(1000, "mallory")?.1, .damaged(.foreign), "a reused uid")
        XCTAssertEqual(peek()?.1, .loaded)
        writeFile("1000.rec", good, mode: 0o622)
        XCTAssertEqual(peek()?.1, .damaged(.unsafeFile), "writable by others")
        writeFile("1000.rec", good, mode: 0o620)
        XCTAssertEqual(peek()?.1, .damaged(.unsafeFile), "writable by the group")
        unlink(path("1000.rec"))
        writeFile("elsewhere", good)
        symlink(path("elsewhere"), path("1000.rec"))
        XCTAssertEqual(peek()?.1, .damaged(.unsafeFile), "a symlink is never followed")
    }

    func testADamagedRecordIsReplacedThroughTheEngine() throws {
        writeFile("1000.rec", [UInt8](repeating: 0x41, count: RecordFormat.size))
        let log = RecordingLog()
        var engine = Engine(options: unitOptions, sensor: FakeSensor(), verifier: FakeVerifier(), prompter: FakePrompter(),
                            store: store(), clock: ManualClock(), log: log)
        let snapshot = engine.ledger.snapshot(alice)
        XCTAssertEqual(snapshot?.fingerprintFailures, 5)
        XCTAssertEqual(snapshot?.passcodeFailures, 5)
        XCTAssertEqual(snapshot?.backoffRemainingMilliseconds, 60_000)
        XCTAssertEqual(peek()?.0?.fingerprintFailures, 5, "the replacement is on disk")
        XCTAssertTrue(log.has(.warning, "not a localauth record"))
    }

    func testAnUnsafeDirectoryRefusesEverything() {
        chmod(directory, 0o777)
        var s = store()
        XCTAssertThrowsError(try s.withRecord(uid: 1000, userName: bytes("alice")) { stored, _ in stored = storedRecord() })
        XCTAssertNil(readFile("1000.rec"))
        let w = World()
        var engine = Engine(options: unitOptions, sensor: w.sensor, verifier: w.verifier, prompter: w.prompter, store: store(),
                            clock: w.clock, log: w.log)
        let result = engine.evaluate(w.request(), policy: .owner, passcode: SecretBuffer())
        XCTAssertEqual(result.pamCode, .systemError)
        XCTAssertEqual(w.prompter.asked, [])
        XCTAssertEqual(w.sensor.openCalls, 0)
        chmod(directory, 0o700)
    }

    func testAForeignOwnerIsUntrusted() {
        var s = FileStateStore(directoryPath: bytes(directory), trustedOwner: geteuid() &+ 4242)
        XCTAssertThrowsError(try s.withRecord(uid: 1000, userName: bytes("alice")) { _, _ in () })
    }

    func spareLockNames() -> [String] { (0..<FileStateStore.spareCount).map { "spare-lock.\($0)" } }

    /// A first lock file that cannot be made for want of room is a spare
    /// one, moved into place; never over a lock file that exists.
    func testASpareLockFileTakesTheMissingName() throws {
        var s = store()
        try s.withRecord(uid: 1000, userName: bytes("alice")) { stored, _ in stored = storedRecord(f: 1) }
        for name in spareLockNames() { XCTAssertEqual(readFile(name), [], name) }
        let dir = open(directory, O_RDONLY | O_DIRECTORY)
        defer { close(dir) }
        let spare = inode("spare-lock.0")
        XCTAssertTrue(s.placeSpareLock(directory: dir, as: bytes("1005.lock")))
        XCTAssertEqual(inode("1005.lock"), spare)
        XCTAssertNil(inode("spare-lock.0"))
        let held = inode("1000.lock")
        XCTAssertTrue(s.placeSpareLock(directory: dir, as: bytes("1000.lock")), "the name exists: open it")
        XCTAssertEqual(inode("1000.lock"), held, "an existing lock file is never replaced")
        XCTAssertNotNil(inode("spare-lock.1"))
        for name in spareLockNames().dropFirst() { unlink(path(name)) }
        XCTAssertFalse(s.placeSpareLock(directory: dir, as: bytes("1006.lock")), "no spare lock left")
        XCTAssertTrue(s.placeSpareLock(directory: dir, as: bytes("1005.lock")),
                      "another prompt put the last spare at this name: it is there to open")
    }

    /// An odd entry at a spare lock's name is never moved to a user's lock,
    /// and the refill replaces it.
    func testAnOddSpareLockIsPassedOverAndReplaced() throws {
        var s = store()
        try s.withRecord(uid: 1000, userName: bytes("alice")) { stored, _ in stored = storedRecord(f: 1) }
        for name in spareLockNames() { unlink(path(name)) }
        XCTAssertEqual(mkdir(path("spare-lock.0"), 0o700), 0)
        XCTAssertEqual(symlink("/etc/passwd", path("spare-lock.1")), 0)
        writeFile("spare-lock.2", [], mode: 0o666)
        let dir = open(directory, O_RDONLY | O_DIRECTORY)
        defer { close(dir) }
        XCTAssertFalse(s.placeSpareLock(directory: dir, as: bytes("1007.lock")))
        XCTAssertNil(inode("1007.lock"))
        s.refillSpares(directory: dir)
        for name in spareLockNames() {
            var info = stat()
            XCTAssertEqual(lstat(path(name), &info), 0, name)
            XCTAssertEqual(info.st_mode & 0o170777, 0o100600, name)
        }
        XCTAssertTrue(s.placeSpareLock(directory: dir, as: bytes("1007.lock")))
    }

    func spareNames() -> [String] { (0..<FileStateStore.spareCount).map { "spare.\($0)" } }

    func assertSparesAreReady(file: StaticString = #filePath, line: UInt = #line) {
        for name in spareNames() {
            var info = stat()
            XCTAssertEqual(lstat(path(name), &info), 0, name, file: file, line: line)
            XCTAssertEqual(info.st_mode & 0o170777, 0o100600, name, file: file, line: line)
            XCTAssertEqual(Int(info.st_size), RecordFormat.fileSize, name, file: file, line: line)
            XCTAssertEqual(info.st_nlink, 1, name, file: file, line: line)
        }
        XCTAssertNil(inode("spare.tmp"), file: file, line: line)
    }

    /// The first whole-file write makes the spares, and the look-alike key
    /// with them; later first records and fresh buckets are spares renamed
    /// (no new inode at that moment), and the pool is made whole again.
    func testNewRecordsTakeSparesAndThePoolIsRefilled() throws {
        var s = store()
        try s.withRecord(uid: 1000, userName: bytes("alice")) { stored, _ in stored = storedRecord(f: 1) }
        assertSparesAreReady()
        XCTAssertEqual(readFile("lookalike.key")?.count, FileStateStore.lookAlikeKeySize,
                       "spares for a first record never exist without the key an unknown name needs")
        let key = readFile("lookalike.key")

        let spare = inode("spare.0")
        try s.withRecord(uid: 1001, userName: bytes("bob")) { stored, _ in stored = storedRecord(UserIdentity(uid: 1001, name: bytes("bob")), f: 1) }
        XCTAssertEqual(inode("1001.rec"), spare, "bob's first record is the spare, renamed")
        XCTAssertNotEqual(inode("spare.0"), spare)
        XCTAssertEqual(peek(1001, "bob")?.0, storedRecord(UserIdentity(uid: 1001, name: bytes("bob")), f: 1))
        assertSparesAreReady()

        // The key came with every bucket made ahead: an unknown name's
        // first charge goes into its bucket in place, and takes no spare.
        XCTAssertEqual(readFile("lookalike.rec")?.count, FileStateStore.lookAlikeFileSize)
        let before = inode("lookalike.rec")
        let spares = spareNames().map { inode($0) }
        chargeLookAlike("nobody-by-this-name")
        XCTAssertEqual(inode("lookalike.rec"), before, "written in place")
        XCTAssertEqual(spareNames().map { inode($0) }, spares)
        XCTAssertEqual(peek(FileStateStore.lookAlikeUID, "nobody-by-this-name")?.0?.passcodeFailures, 1)
        XCTAssertEqual(readFile("lookalike.key"), key)
    }

    /// Only the store's own spares are used: a symlink, a second name, a
    /// wrong size or mode, a directory or a FIFO at a spare's name is never
    /// written through, and the refill puts sound spares in their places.
    func testAnOddSpareIsNeverWrittenAndIsReplaced() throws {
        let outside = directory + ".outside"
        let victim = [UInt8](repeating: 0x41, count: RecordFormat.fileSize)
        let fd = open(outside, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        victim.withUnsafeBytes { _ = write(fd, $0.baseAddress, $0.count) }
        close(fd)
        defer { unlink(outside); unlink(outside + ".link") }
        XCTAssertEqual(symlink(outside, path("spare.0")), 0)
        writeFile("spare.1", victim)
        XCTAssertEqual(link(path("spare.1"), outside + ".link"), 0)
        writeFile("spare.2", [UInt8](repeating: 0x41, count: 100))
        writeFile("spare.3", victim, mode: 0o644)
        XCTAssertEqual(mkdir(path("spare.4"), 0o700), 0)
        XCTAssertEqual(mkfifo(path("spare.5"), 0o600), 0)
        writeFile("spare.tmp", victim)
        let hostile = (0...5).map { inode("spare.\($0)") }

        var s = store()
        try s.withRecord(uid: 1000, userName: bytes("alice")) { stored, _ in stored = storedRecord(f: 1) }
        XCTAssertEqual(peek()?.0, storedRecord(f: 1))
        XCTAssertFalse((0...5).map { inode("1000.rec") == hostile[$0] }.contains(true))
        XCTAssertEqual(readFile(absolute: outside), victim)
        XCTAssertEqual(readFile(absolute: outside + ".link"), victim)
        assertSparesAreReady()
        for index in 0...5 { XCTAssertNotEqual(inode("spare.\(index)"), hostile[index], "spare.\(index) replaced") }
        rmdir(path("spare.4.odd"))
    }

    /// Two prompts never write one spare: a spare claimed (locked) by one
    /// is passed over by the next, and one renamed away is not claimed
    /// through a descriptor opened before the rename.
    func testASpareIsClaimedOnce() throws {
        var s = store()
        try s.withRecord(uid: 1000, userName: bytes("alice")) { stored, _ in stored = storedRecord(f: 1) }
        let dir = open(directory, O_RDONLY | O_DIRECTORY)
        defer { close(dir) }
        let first = try XCTUnwrap(s.claimSpare(directory: dir))
        let second = try XCTUnwrap(s.claimSpare(directory: dir))
        XCTAssertNotEqual(first.name, second.name)
        let early = open(path("spare.2"), O_RDWR)
        defer { close(early) }
        close(first.fd)
        close(second.fd)
        XCTAssertEqual(rename(path("spare.2"), path("taken.rec")), 0)
        let third = try XCTUnwrap(s.claimSpare(directory: dir))
        XCTAssertEqual(String(decoding: third.name, as: UTF8.self), "spare.0")
        close(third.fd)
        unlink(path("taken.rec"))
    }

    /// A repair removes an odd entry, never the sound file another prompt
    /// put there meanwhile (two prompts would then hold locks on two files),
    /// even when that file got the odd one's inode number.
    func testARepairLeavesAFreshLockFileAlone() throws {
        let s = store()
        XCTAssertEqual(mkfifo(path("1000.lock"), 0o600), 0)
        let fd = open(directory, O_RDONLY | O_DIRECTORY)
        defer { close(fd) }
        unlink(path("1000.lock"))
        writeFile("1000.lock", [])  // another prompt's fresh lock file
        let fresh = try Syscalls.facts(at: fd, bytes("1000.lock"))
        try s.replaceOddEntry(directory: fd, bytes("1000.lock")) { !s.isSoundLock($0) }
        XCTAssertEqual(try Syscalls.facts(at: fd, bytes("1000.lock")).inode, fresh.inode)
        unlink(path("1000.lock"))
        XCTAssertEqual(mkfifo(path("1000.lock"), 0o600), 0)
        try s.replaceOddEntry(directory: fd, bytes("1000.lock")) { !s.isSoundLock($0) }
        XCTAssertThrowsError(try Syscalls.facts(at: fd, bytes("1000.lock")), "the FIFO is gone")
    }
}
