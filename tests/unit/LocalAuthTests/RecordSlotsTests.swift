// The two-slot record file: a write in place cut short at any byte, or
// with any of its sectors lost, leaves a whole copy at least as new as the
// last write that waited for the disk.
import XCTest
import LocalAuth

final class RecordSlotsTests: XCTestCase {
    /// One change as the store makes it: when it is not known which copy
    /// is on disk, a sync and the mark first; then the next slot and
    /// generation, and after a durable one (its sync returned) the mark.
    /// Returns the file before the write (after any sync first), the new
    /// file and where the slot went.
    func written(_ file: [UInt8], _ record: StateRecord, durable: Bool)
        -> (base: [UInt8], file: [UInt8], offset: Int, slot: [UInt8], syncedFirst: Bool) {
        var base = file
        let slots = RecordSlots.read(file)
        let syncedFirst = slots.plan == .otherSlotAfterSync
        if syncedFirst { mark(&base, slots.header?.generation ?? 0) }
        let slot = RecordFormat.encode(record, generation: slots.nextGeneration, durable: durable)
        var next = base
        let offset = slots.nextSlot * RecordFormat.size
        for index in 0..<slot.count { next[offset + index] = slot[index] }
        if durable { mark(&next, slots.nextGeneration) }
        return (base, next, offset, slot, syncedFirst)
    }

    func mark(_ file: inout [UInt8], _ generation: UInt64) {
        let mark = RecordFormat.syncMark(generation)
        for index in 0..<mark.count { file[RecordFormat.syncMarkOffset + index] = mark[index] }
    }

    /// The changes of a day: charges wait for the disk, the rest do not.
    func changes() -> [(StateRecord, Bool)] {
        var record = storedRecord()
        var steps: [(StateRecord, Bool)] = []
        func step(_ change: (inout StateRecord) -> Void) {
            let before = record
            change(&record)
            steps.append((record, record.mustBeDurable(replacing: before)))
        }
        step { $0.fingerprintFailures += 1; _ = $0.appendFailure(kind: .fingerprint, wallSeconds: 1, service: bytes("sudo"), tty: [], remoteHost: []) }
        step { $0.fingerprintFailures = 0; $0.settleFailures() }                     // a match
        step { $0.lastUnlockBootNanoseconds = 99 }                                   // and what it records
        step { $0.passcodeFailures += 1; $0.backoffRemainingMilliseconds = 1000; _ = $0.appendFailure(kind: .passcode, wallSeconds: 2, service: bytes("login"), tty: [], remoteHost: []) }
        step { $0.backoffRemainingMilliseconds = 400; $0.backoffAnchorBootNanoseconds = 7 }  // the wait's progress
        step { $0.passcodeFailures -= 1; $0.backoffRemainingMilliseconds = 0; $0.recentFailures.removeLast() }  // a refund
        step { $0.fingerprintFailures += 1; _ = $0.appendFailure(kind: .fingerprint, wallSeconds: 3, service: bytes("sudo"), tty: [], remoteHost: []) }
        step { $0.fingerprintFailures += 1; _ = $0.appendFailure(kind: .fingerprint, wallSeconds: 4, service: bytes("sudo"), tty: [], remoteHost: []) }
        return steps
    }

    func testOnlyChangesThatRaiseWhatIsOwedWaitForTheDisk() {
        XCTAssertEqual(changes().map { $0.1 }, [true, false, false, true, false, false, true, true])
    }

    /// Every cut of every write of the day: the copy read back is whole, it
    /// is one of the records written, and it is never older than the last
    /// write that waited for the disk.
    func testAWriteCutAtEveryByteLeavesTheLastDurableRecordOrNewer() {
        var file = RecordSlots.newFile(storedRecord())
        var recordOfGeneration: [UInt64: StateRecord] = [1: storedRecord()]
        var lastDurable: UInt64 = 1
        var cuts = 0
        for (record, durable) in changes() {
            let (base, next, offset, slot, syncedFirst) = written(file, record, durable: durable)
            if syncedFirst { lastDurable = RecordSlots.read(file).header?.generation ?? lastDurable }
            let generation = RecordSlots.read(file).nextGeneration
            recordOfGeneration[generation] = record
            for cut in 0...slot.count {
                var torn = base
                for index in 0..<cut { torn[offset + index] = slot[index] }
                assertSound(torn, atLeast: lastDurable, recordOfGeneration, "cut at byte \(cut) of generation \(generation)")
                cuts += 1
            }
            // Sectors of 512 bytes reaching the disk in any order.
            for subset in 0..<16 {
                var torn = base
                for sector in 0..<4 where subset & (1 << sector) != 0 {
                    for index in (sector * 512)..<((sector + 1) * 512) { torn[offset + index] = slot[index] }
                }
                assertSound(torn, atLeast: lastDurable, recordOfGeneration, "sectors \(subset) of generation \(generation)")
            }
            file = next
            XCTAssertEqual(RecordSlots.read(file).header?.generation, generation)
            if durable { lastDurable = generation }
        }
        XCTAssertEqual(cuts, 8 * 2049)
    }

    func assertSound(_ file: [UInt8], atLeast generation: UInt64, _ records: [UInt64: StateRecord], _ message: String,
                     file source: StaticString = #filePath, line: UInt = #line) {
        let slots = RecordSlots.read(file)
        guard let current = slots.current, let header = slots.header else {
            return XCTFail("no whole copy: \(message)", file: source, line: line)
        }
        XCTAssertGreaterThanOrEqual(header.generation, generation, message, file: source, line: line)
        let slot = RecordSlots.slot(file, current)
        let decoded = try? RecordFormat.decode(slot, uid: alice.uid, userName: alice.name).get()
        XCTAssertEqual(decoded, records[header.generation], message, file: source, line: line)
        // The store's read: the slot checked once, the same record.
        let read = RecordSlots.readCurrent(file, uid: alice.uid, userName: alice.name)
        XCTAssertEqual(read.slots, slots, message, file: source, line: line)
        XCTAssertEqual(try? read.record?.get(), decoded, message, file: source, line: line)
    }

    func testAfterAWriteThatWasNotSyncedTheSameSlotIsWrittenAgain() {
        var file = RecordSlots.newFile(storedRecord())
        var record = storedRecord(f: 1)
        var placed: [Int] = []
        for durable in [true, false, false, true, true] {
            record.nextSequence += 1
            let slots = RecordSlots.read(file)
            placed.append(slots.nextSlot)
            file = written(file, record, durable: durable).file
        }
        // 1 (synced) → other slot; unsynced twice → the same slot, keeping
        // the synced copy; synced → that slot once more; then alternate.
        XCTAssertEqual(placed, [1, 0, 0, 0, 1])
    }

    /// A charge whose sync failed, or whose writer was killed between its
    /// sync and its mark, or whose mark a power cut lost: which copy is on
    /// disk is not known, so the next write syncs first, marks the current
    /// copy and then goes over the other one.
    func testWhenTheMarkDoesNotNameTheCurrentCopyTheWriteSyncsFirst() {
        var file = RecordSlots.newFile(storedRecord())
        file = written(file, storedRecord(f: 1), durable: true).file      // slot 1, generation 2, marked
        let charge = RecordFormat.encode(storedRecord(f: 2), generation: 3, durable: true)
        for index in 0..<charge.count { file[index] = charge[index] }      // slot 0, generation 3, no mark
        XCTAssertEqual(RecordSlots.read(file).current, 0)
        XCTAssertEqual(RecordSlots.read(file).syncedGeneration, 2)
        XCTAssertEqual(RecordSlots.read(file).plan, .otherSlotAfterSync)
        XCTAssertEqual(RecordSlots.read(file).nextSlot, 1)
        let next = written(file, storedRecord(f: 0), durable: false)
        XCTAssertTrue(next.syncedFirst)
        XCTAssertEqual(RecordSlots.read(next.file).plan, .currentSlot, "then a reset stays over itself")
        var cut = file
        for index in (RecordFormat.syncMarkOffset + 3)..<(RecordFormat.syncMarkOffset + 16) { cut[index] = 0xFF }
        XCTAssertNil(RecordSlots.read(cut).syncedGeneration, "a cut mark names nothing")
        XCTAssertEqual(RecordSlots.read(cut).plan, .otherSlotAfterSync)
    }

    func testNoWholeSlotIsDamage() {
        var file = RecordSlots.newFile(storedRecord())
        file[100] ^= 1
        XCTAssertNil(RecordSlots.read(file).current)
        XCTAssertEqual(RecordSlots.read(file).damage, .badChecksum)
        XCTAssertEqual(RecordSlots.read(Array(file.prefix(4096))).damage, .wrongSize)
        XCTAssertEqual(RecordSlots.read([UInt8](repeating: 0, count: RecordFormat.fileSize)).damage, .badMagic)
    }

    func testTheHigherGenerationWinsAndAOneSlotFileIsLegacy() {
        let older = RecordFormat.encode(storedRecord(f: 1), generation: 7)
        let newer = RecordFormat.encode(storedRecord(f: 2), generation: 8)
        let mark = RecordFormat.syncMark(8)
        XCTAssertEqual(RecordSlots.read(newer + older + mark).current, 0)
        XCTAssertEqual(RecordSlots.read(older + newer + mark).current, 1)
        XCTAssertEqual(RecordSlots.read(older + newer + mark).nextGeneration, 9)
        XCTAssertEqual(RecordSlots.read(older + newer + mark).nextSlot, 0)
        XCTAssertNil(RecordSlots.read(older + newer).current, "no room for the mark: wrong size")
        // A version 1 file has one copy; version 2 needs two.
        var legacy = RecordFormat.encode(storedRecord(f: 3))
        legacy[8] = 1
        legacy[RecordFormat.size - 8..<RecordFormat.size] = ArraySlice(littleEndian(fnv(legacy)))
        let slots = RecordSlots.read(legacy)
        XCTAssertTrue(slots.isLegacy)
        XCTAssertEqual(slots.current, 0)
        XCTAssertEqual(try? RecordFormat.decode(legacy, uid: alice.uid, userName: alice.name).get().fingerprintFailures, 3)
        XCTAssertNil(RecordSlots.read(newer).current, "a version 2 slot alone is no file")
        XCTAssertNil(RecordSlots.read(legacy + legacy + mark).current, "version 1 slots in a two-slot file")
    }
}

/// FNV-1a 64 over a slot's bytes before its checksum.
func fnv(_ slot: [UInt8]) -> UInt64 {
    var hash: UInt64 = 0xcbf2_9ce4_8422_2325
    for byte in slot[0..<(RecordFormat.size - 8)] {
        hash ^= UInt64(byte)
        hash = hash &* 0x0000_0100_0000_01B3
    }
    return hash
}

func littleEndian(_ value: UInt64) -> [UInt8] { (0..<8).map { UInt8(truncatingIfNeeded: value >> (8 * UInt64($0))) } }
