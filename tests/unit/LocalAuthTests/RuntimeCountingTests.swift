import XCTest
#if canImport(Glibc)
import Glibc
#endif
import LocalAuth
import LibcSystem

/// When a store failure moves the counting to /run: only a read-only filesystem or a
/// failing disk, and only for a process no unprivileged user set up.
final class RuntimeCountingTests: XCTestCase {
    func testTheErrnosAreLinuxs() {
        XCTAssertEqual(RuntimeCounting.readOnlyFilesystem, Errno(EROFS))
        XCTAssertEqual(RuntimeCounting.deviceError, Errno(EIO))
    }

    func testTheTable() {
        let system = StorageFacts(readOnlyFilesystem: true, systemPrivileged: true)
        let systemWritable = StorageFacts(readOnlyFilesystem: false, systemPrivileged: true)
        let userMade = StorageFacts(readOnlyFilesystem: true, systemPrivileged: false)
        let rofs = RuntimeCounting.readOnlyFilesystem, eio = RuntimeCounting.deviceError
        let rows: [(String, StoreFailure, StorageFacts, Bool)] = [
            ("lock on a read-only filesystem", .lockFailed(rofs), system, true),
            ("write on a read-only filesystem", .writeFailed(rofs), system, true),
            ("making the state directory on a read-only filesystem", .directoryUnusable(.cannotOpen(rofs)), system, true),
            ("EROFS while the filesystem is not read-only (a forged errno)", .writeFailed(rofs), systemWritable, false),
            ("the disk fails a write, and the filesystem went read-only", .writeFailed(eio), system, true),
            ("the disk fails the lock, and the filesystem went read-only", .lockFailed(eio), system, true),
            ("the disk fails a write, the filesystem still writable (over-committed storage a user filled)",
             .writeFailed(eio), systemWritable, false),
            ("the disk fails a read, the filesystem still writable", .readFailed(eio), systemWritable, false),
            ("read-only, in namespaces a user set up", .lockFailed(rofs), userMade, false),
            ("failing disk, in namespaces a user set up", .writeFailed(eio), userMade, false),
            ("nothing known", .lockFailed(rofs), .unknown, false),
            ("no space", .writeFailed(Errno(ENOSPC)), system, false),
            ("quota", .writeFailed(Errno(EDQUOT)), system, false),
            ("permission", .lockFailed(Errno(EACCES)), system, false),
            ("no memory", .readFailed(Errno(ENOMEM)), system, false),
            ("no descriptors", .lockFailed(Errno(EMFILE)), system, false),
            ("file size limit", .fileSizeLimited, system, false),
            ("an unsafe state directory", .directoryUnusable(.unsafeDirectory), system, false),
            ("an unsafe path", .directoryUnusable(.unsafeAncestor), system, false),
            ("a missing path", .directoryUnusable(.missingAncestor), system, false),
            ("opening the directory refused", .directoryUnusable(.cannotOpen(Errno(EACCES))), system, false),
            ("/run failed too (it never moves again)", .runtimeUnusable(.lockFailed(rofs)), system, false),
        ]
        for (name, failure, facts, suspends) in rows {
            XCTAssertEqual(RuntimeCounting.applies(to: failure, facts: facts), suspends, name)
        }
    }

    /// mountinfo is read as a stream up to the mount's line; a line too long
    /// for any mount of the state directory is skipped whole, so no tail of
    /// a user's long mount point is ever read as a line of its own.
    func testTheMountsLineIsFoundInAStreamAndALongLineNeverSplitsIntoAFakeOne() {
        func chunks(_ text: [UInt8], size: Int) -> () -> [UInt8]? {
            var offset = 0
            return {
                let end = min(offset + size, text.count)
                defer { offset = end }
                return Array(text[offset..<end])
            }
        }
        let table = utf8Bytes("22 1 0:21 / /proc rw - proc proc rw\n66 46 7:0 / /var rw - ext4 /dev/sda1 rw,emergency_ro\n")
        for size in [1, 7, 64, 65536] {
            XCTAssertEqual(MountTable.line(startingWith: utf8Bytes("66 "), chunks(table, size: size)),
                           utf8Bytes("66 46 7:0 / /var rw - ext4 /dev/sda1 rw,emergency_ro"), "chunks of \(size)")
        }
        XCTAssertNil(MountTable.line(startingWith: utf8Bytes("6 "), chunks(table, size: 5)))
        XCTAssertNil(MountTable.line(startingWith: utf8Bytes("66 "), { nil }))
        // A user's mount point of over 1 MiB whose tail looks like the line.
        let fake = utf8Bytes("66 46 7:0 / /var rw - ext4 /dev/sda1 ro")
        let long = utf8Bytes("90 1 0:50 / /home/u/") + [UInt8](repeating: 0x61, count: (1 << 20) + 10) + fake + [0x0A]
        let real = utf8Bytes("66 46 7:0 / /var rw - ext4 /dev/sda1 rw\n")
        XCTAssertEqual(MountTable.line(startingWith: utf8Bytes("66 "), chunks(long + real, size: 65536)), Array(real.dropLast()))
        XCTAssertNil(MountTable.line(startingWith: utf8Bytes("66 "), chunks(long, size: 4096)))
    }

    /// The superblock's options in /proc/self/mountinfo, not one mount's view.
    func testTheSuperblockDecidesWhetherTheFilesystemIsReadOnly() {
        let table = Array("""
            22 1 0:21 / /proc rw,nosuid - proc proc rw
            66 46 7:0 / /var rw,relatime - ext4 /dev/loop0 rw,errors=remount-ro,emergency_ro
            68 67 0:41 / /mnt ro,relatime - tmpfs none ro,size=1024k
            70 69 0:42 / /srv ro,relatime - tmpfs none rw,size=1024k
            71 1 0:43 / /opt rw shared:5 master:2 - ext4 /dev/sda2 rw,errors=remount-ro
            72 1 0:44 / /x\\040y rw - ext4 /dev/sdb1 ro
            73 1 0:45 / /empty rw - tmpfs  ro,size=1024k
            """.utf8)
        let rows: [(UInt64, Bool, String)] = [
            (66, true, "ext4 after an error (emergency_ro)"),
            (68, true, "a filesystem mounted read-only"),
            (70, false, "a read-only bind of a writable filesystem"),
            (71, false, "optional fields before the separator, writable"),
            (72, true, "an escaped mount point"),
            (73, true, "an empty source"),
            (22, false, "procfs"),
            (99, false, "a mount that is not listed"),
        ]
        for (id, readOnly, name) in rows {
            var chunks = [table, []].makeIterator()
            let line = MountTable.line(startingWith: utf8Bytes("\(id) ")) { chunks.next() }
            XCTAssertEqual(line.map(MountTable.superblockIsReadOnly) ?? false, readOnly, name)
        }
    }

    // MARK: - The fold

    /// The larger of the two wins, field by field: nothing counted in
    /// either is lost, and the later success is the one kept.
    func testTheFoldKeepsTheLargerOfEach() {
        let clock = ManualClock()
        let moment = Moment(boot: clock.boot, wall: clock.wall, bootID: clock.bootIdentifier)
        var disk = storedRecord(f: 4, p: 2)
        disk.nextSequence = 40
        disk.recentFailures = [FailureEntry(sequence: 38, wallSeconds: 100, kind: .passcode, service: [], tty: [], remoteHost: [])]
        disk.lastPasscodeSuccessBootID = moment.bootID
        disk.lastPasscodeSuccessBootNanoseconds = moment.boot - 5_000_000_000
        disk.lastPasscodeSuccessWallSeconds = moment.wall - 5
        var run = storedRecord(f: 1, p: 6)
        run.nextSequence = 44
        run.backoffRemainingMilliseconds = 300_000
        run.backoffAnchorBootNanoseconds = moment.boot
        run.backoffBootID = moment.bootID
        run.recentFailures = [FailureEntry(sequence: 38, wallSeconds: 100, kind: .passcode, service: [], tty: [], remoteHost: []),
                              FailureEntry(sequence: 42, wallSeconds: 200, kind: .passcode, service: [], tty: [], remoteHost: [])]
        run.lastPasscodeSuccessBootID = moment.bootID
        run.lastPasscodeSuccessBootNanoseconds = moment.boot - 1_000_000_000
        run.lastPasscodeSuccessWallSeconds = moment.wall - 1
        run.lastPasscodeSuccessDigest = RecordFormat.storedDigest([7])
        let folded = RuntimeCounting.fold(disk: disk, runtime: run, options: unitOptions, backoffApplies: true, moment: moment)
        XCTAssertEqual(folded.fingerprintFailures, 4, "F: the disk's, larger")
        XCTAssertEqual(folded.passcodeFailures, 6, "P: /run's, larger")
        XCTAssertEqual(folded.backoffRemainingMilliseconds, 300_000, "the wait with more to run")
        XCTAssertEqual(folded.nextSequence, 44)
        XCTAssertEqual(folded.recentFailures.map { $0.sequence }, [38, 42], "both lists, once each")
        XCTAssertEqual(folded.lastPasscodeSuccessWallSeconds, moment.wall - 1, "the later password success")
        XCTAssertEqual(folded.lastPasscodeSuccessDigest, RecordFormat.storedDigest([7]))
        XCTAssertEqual(folded.createdWallSeconds, disk.createdWallSeconds, "the disk's identity")
        // Folding again changes nothing (a crash before /run's copy went).
        XCTAssertEqual(RuntimeCounting.fold(disk: folded, runtime: run, options: unitOptions, backoffApplies: true, moment: moment), folded)
        // No record on disk: /run's whole.
        XCTAssertEqual(RuntimeCounting.fold(disk: nil, runtime: run, options: unitOptions, backoffApplies: true, moment: moment), run)
        // A wait on disk with more to run stays.
        var waiting = disk
        waiting.backoffRemainingMilliseconds = 900_000
        waiting.backoffAnchorBootNanoseconds = moment.boot
        waiting.backoffBootID = moment.bootID
        XCTAssertEqual(RuntimeCounting.fold(disk: waiting, runtime: run, options: unitOptions, backoffApplies: true, moment: moment)
            .backoffRemainingMilliseconds, 900_000)
    }

    /// A disk of the system's goes read-only: the prompts go on counting in
    /// /run from the disk's record raised to one short of each limit, the
    /// back-off holds, and once the disk is writable the counts are folded
    /// back and /run's copy goes.
    func testCountingGoesOnInRunAndComesBackToTheDisk() {
        let disk = FakeStore(storedRecord(p: 2))
        let w = World(sensor: FakeSensor(.unreachable), store: disk)
        disk.failReads = true
        disk.readFailure = .lockFailed(RuntimeCounting.readOnlyFilesystem)
        disk.facts = StorageFacts(readOnlyFilesystem: true, systemPrivileged: true)
        XCTAssertEqual(w.prompt(answers: [wrongAnswer]).pamCode, .authError)
        XCTAssertEqual(w.runtime.passcodeFailures, 5, "counted on from one short of the first wait (4), not the disk's 2")
        XCTAssertEqual(w.runtime.fingerprintFailures, unitOptions.lockout - 1)
        XCTAssertEqual(w.runtime.record?.backoffRemainingMilliseconds, 60_000, "the back-off of the 5th")
        XCTAssertEqual(disk.writes, 0)
        XCTAssertEqual(disk.passcodeFailures, 2, "the read-only disk as it was")
        let refused = w.prompt()
        XCTAssertTrue(refused.refusedDuringBackoff, "the wait holds on a read-only disk")
        XCTAssertEqual(w.verifier.verifyCalls, 1)
        XCTAssertTrue(w.log.has(.notice, "counting in /run/localauth"))
        w.clock.advance(seconds: 61)
        XCTAssertEqual(w.prompt(answers: [wrongAnswer]).pamCode, .authError)
        XCTAssertEqual(w.runtime.passcodeFailures, 6)
        // The disk is writable again.
        disk.failReads = false
        disk.facts = .unknown
        w.clock.advance(seconds: 301)
        XCTAssertEqual(w.prompt(answers: [wrongAnswer]).pamCode, .authError)
        XCTAssertEqual(disk.passcodeFailures, 7, "folded back (6) and counted (7) on disk")
        XCTAssertNil(w.runtime.record, "/run's copy gone once the disk has it")
        XCTAssertTrue(w.log.has(.notice, "are back in"))
        XCTAssertEqual(w.prompt(answers: [rightAnswer]).outcome, .failure(.authenticationFailed), "P = 7: a wait")
        w.clock.advance(seconds: 3601)
        XCTAssertEqual(w.prompt(answers: [rightAnswer]).outcome, .success(.passcode))
        XCTAssertEqual(disk.passcodeFailures, 0)
    }

    /// /run is lost at a restart, and the read-only disk cannot say what it
    /// held: each new start is one short of each limit, so a restart gives
    /// one password guess (and one finger), never the guesses before the
    /// first wait again. The owner's right password then counts as ever.
    func testARestartWhileTheDiskIsReadOnlyGivesOneGuessNotTheFreeOnes() {
        let disk = FakeStore()
        disk.failReads = true
        disk.readFailure = .lockFailed(RuntimeCounting.readOnlyFilesystem)
        disk.facts = StorageFacts(readOnlyFilesystem: true, systemPrivileged: true)
        for restart in 0..<3 {
            let w = World(sensor: FakeSensor(.unreachable), store: disk)
            XCTAssertEqual(w.prompt(answers: [wrongAnswer]).pamCode, .authError, "restart \(restart): one guess")
            XCTAssertTrue(w.prompt(answers: [rightAnswer]).refusedDuringBackoff, "restart \(restart): then the wait")
            XCTAssertEqual(w.verifier.verifyCalls, 1, "restart \(restart)")
            XCTAssertEqual(w.runtime.passcodeFailures, unitOptions.firstBackoffThreshold)
        }
        let owner = World(sensor: FakeSensor(.unreachable), store: disk)
        XCTAssertEqual(owner.prompt(answers: [rightAnswer]).outcome, .success(.passcode), "the owner's password, the first one")
        XCTAssertEqual(owner.runtime.passcodeFailures, 0)
        XCTAssertEqual(owner.runtime.fingerprintFailures, 0)
    }

    /// /run held a record when this prompt looked, and another prompt
    /// folded it back into the disk and removed it before this one took
    /// /run's lock (the disk read-only again in between): the start is the
    /// disk's record as read under that lock, its wait still running, never
    /// a fresh one.
    func testARecordRemovedFromRunMeanwhileStartsFromTheDiskReadUnderTheLock() {
        let clock = ManualClock()
        var onDisk = storedRecord(p: 8)
        onDisk.backoffRemainingMilliseconds = 900_000
        onDisk.backoffAnchorBootNanoseconds = clock.boot
        onDisk.backoffBootID = clock.bootIdentifier
        let disk = FakeStore(onDisk)
        disk.failReads = true
        disk.readFailure = .lockFailed(RuntimeCounting.readOnlyFilesystem)
        disk.facts = StorageFacts(readOnlyFilesystem: true, systemPrivileged: true)
        let run = FakeStore(storedRecord(p: 2))
        run.beforeNextTransaction = { run.clear() }
        let w = World(sensor: FakeSensor(.unreachable), store: disk, runtime: run, clock: clock)
        let result = w.prompt(answers: [rightAnswer])
        XCTAssertTrue(result.refusedDuringBackoff, "the disk's running wait holds")
        XCTAssertEqual(w.verifier.verifyCalls, 0, "nothing checked")
        XCTAssertNotEqual(run.passcodeFailures, unitOptions.firstBackoffThreshold - 1, "never a fresh start")
    }

    /// The start in /run: the disk's counts, raised to one short of the
    /// lockout and of the first wait; never lowered.
    func testTheStartInRunIsOneShortOfEachLimit() {
        var options = unitOptions
        options.lockout = 3
        options.backoff = [BackoffStep(failures: 2, seconds: 30)]
        let rows: [(disk: (f: Int, p: Int), start: (f: Int, p: Int))] = [
            ((0, 0), (2, 1)),
            ((1, 0), (2, 1)),
            ((2, 1), (2, 1)),
            ((3, 0), (3, 1)),
            ((0, 9), (2, 9)),
        ]
        for row in rows {
            let seed = RuntimeCounting.seed(storedRecord(f: row.disk.f, p: row.disk.p), options: options)
            XCTAssertEqual(seed.fingerprintFailures, row.start.f, "\(row)")
            XCTAssertEqual(seed.passcodeFailures, row.start.p, "\(row)")
        }
        options.lockout = 1
        options.backoff = [BackoffStep(failures: 1, seconds: 30)]
        let seed = RuntimeCounting.seed(storedRecord(), options: options)
        XCTAssertEqual([seed.fingerprintFailures, seed.passcodeFailures], [0, 0], "limits of one: nothing to be short of")
    }

    /// /run's copy that cannot be removed after the fold (a crash between
    /// the disk's write and the removal) is folded again: a count is never
    /// lowered, and after a success the counts stay what the success made
    /// them once the copy is gone.
    func testAFoldThatIsNotRemovedIsFoldedAgainAndNeverLowersACount() {
        let disk = FakeStore(storedRecord(p: 1))
        var held = storedRecord(p: 4)
        held.nextSequence = 9
        let run = FakeStore(held)
        run.removeFailure = .writeFailed(Errno(EIO))
        let w = World(sensor: FakeSensor(.unreachable), store: disk, runtime: run)
        XCTAssertEqual(w.prompt(answers: [wrongAnswer]).pamCode, .authError)
        XCTAssertEqual(disk.passcodeFailures, 5, "folded (4) and counted")
        XCTAssertNotNil(run.record, "the copy stays")
        XCTAssertTrue(w.log.has(.warning, "are on disk but stay there"))
        w.clock.advance(seconds: 61)
        XCTAssertEqual(w.prompt(answers: [wrongAnswer]).pamCode, .authError)
        XCTAssertEqual(disk.passcodeFailures, 6, "folded again: max(5, 4) + 1")
        run.removeFailure = nil
        w.clock.advance(seconds: 301)
        XCTAssertEqual(w.prompt(answers: [rightAnswer]).outcome, .success(.passcode))
        XCTAssertNil(run.record)
        XCTAssertEqual(disk.passcodeFailures, 0)
    }

    /// A shortage reading /run (a caller's low descriptor limit) refuses
    /// the attempt: a fold skipped would let the disk's lower count decide.
    func testAShortageReadingRunRefusesTheAttempt() {
        let disk = FakeStore(storedRecord(p: 1))
        let run = FakeStore(storedRecord(p: 9))
        run.peekFailure = .readFailed(Errno(EMFILE))
        let w = World(sensor: FakeSensor(.unreachable), store: disk, runtime: run)
        let result = w.prompt(answers: [rightAnswer])
        XCTAssertEqual(result.outcome, .internalError)
        XCTAssertEqual(w.verifier.verifyCalls, 0, "nothing checked")
        XCTAssertEqual(disk.passcodeFailures, 1)
        XCTAssertTrue(w.prompter.saw(UserText.notRecorded, kind: .error))
    }

    /// The first record in /run is the disk's as it still reads; a disk
    /// that fails even that read gives R12's replacement. A shortage
    /// reading the disk refuses (a replacement could hold a shorter wait).
    func testTheFirstRecordInRunIsTheDisksOrR12s() {
        let damaged = FakeStore.damaged(.badChecksum)
        damaged.failReads = true
        damaged.readFailure = .writeFailed(RuntimeCounting.deviceError)
        damaged.facts = StorageFacts(readOnlyFilesystem: true, systemPrivileged: true)
        let w = World(sensor: FakeSensor(.unreachable), store: damaged)
        XCTAssertEqual(w.prompt(answers: [rightAnswer]).refusedDuringBackoff, true)
        XCTAssertEqual(w.runtime.fingerprintFailures, unitOptions.lockout)
        XCTAssertEqual(w.runtime.passcodeFailures, unitOptions.firstBackoffThreshold)

        let short = FakeStore(storedRecord(p: 9))
        short.failReads = true
        short.readFailure = .lockFailed(RuntimeCounting.readOnlyFilesystem)
        short.facts = StorageFacts(readOnlyFilesystem: true, systemPrivileged: true)
        short.peekFailure = .readFailed(Errno(ENOMEM))
        let v = World(sensor: FakeSensor(.unreachable), store: short)
        XCTAssertEqual(v.prompt(answers: [rightAnswer]).outcome, .internalError)
        XCTAssertNil(v.runtime.record, "nothing made of a read that fell short")
    }
}
