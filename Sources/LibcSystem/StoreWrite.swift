// Writing: in place in the record's slots with a sync mark, or a whole new
// file through a spare or a temporary (WholeFile), under the file size limit.
import LocalAuth

extension FileStateStore {
    /// The store's one durability step (`WholeFile.syncForDurability`).
    func syncForDurability(_ fd: Int32, dataOnly: Bool = false) throws(Errno) {
        try WholeFile.syncForDurability(fd, dataOnly: dataOnly)
    }

    func allowWrite(upTo end: Int) throws(StoreFailure) -> (soft: UInt64, hard: UInt64)? { try WholeFile.allowWrite(upTo: end) }

    func restoreLimit(_ saved: (soft: UInt64, hard: UInt64)?) { WholeFile.restoreLimit(saved) }

    /// Syncs the file and marks `generation` as on disk.
    func syncAndMark(_ fd: Int32, generation: UInt64, base: Int) throws(StoreFailure) {
        do throws(Errno) { try syncForDurability(fd, dataOnly: true) } catch { throw .writeFailed(error) }
        try mark(fd, generation: generation, base: base)
    }

    /// Marks `generation` as on disk, once its sync has returned. The mark
    /// itself need not wait: lost, the next write syncs first.
    func mark(_ fd: Int32, generation: UInt64, base: Int) throws(StoreFailure) {
        try writeInPlace(fd, RecordFormat.syncMark(generation), at: base + RecordFormat.syncMarkOffset, durable: false)
    }

    /// One slot written in place, and for a durable change its data synced
    /// before returning.
    func writeInPlace(_ fd: Int32, _ bytes: [UInt8], at offset: Int, durable: Bool) throws(StoreFailure) {
        let saved = try allowWrite(upTo: offset + bytes.count)
        defer { restoreLimit(saved) }
        do throws(Errno) {
            try Syscalls.writeAll(fd, bytes, at: offset)
            if durable { try syncForDurability(fd, dataOnly: true) }
        } catch {
            throw .writeFailed(error)
        }
    }

    /// A whole record file through a temporary (`WholeFile.write`).
    func write(_ bytes: [UInt8], directory: Int32, to name: [UInt8], through temporary: [UInt8]) throws(StoreFailure) {
        try WholeFile.write(bytes, directory: directory, to: name, through: temporary)
    }

    func moveIntoPlace(directory: Int32, from source: [UInt8], to name: [UInt8]) throws(Errno) {
        try WholeFile.moveIntoPlace(directory: directory, from: source, to: name)
    }

    /// A new, replaced or migrated record file. It goes into a spare when
    /// one is ready: writing over a spare's blocks and renaming it needs
    /// no new inode or block, so a filesystem someone filled still takes
    /// it, for a known user's first record and an unknown name's fresh
    /// bucket alike (R14). Without a spare it is written through a
    /// temporary file, which needs room, for every name alike too.
    func writeRecordFile(_ bytes: [UInt8], directory: Int32, _ names: RecordFiles) throws(StoreFailure) {
        guard let spare = claimSpare(directory: directory) else {
            try write(bytes, directory: directory, to: names.record, through: names.temporary)
            return
        }
        defer { Syscalls.close(spare.fd) }
        let saved = try allowWrite(upTo: bytes.count)
        defer { restoreLimit(saved) }
        do throws(Errno) {
            try Syscalls.writeAll(spare.fd, bytes, at: 0)
            try syncForDurability(spare.fd)
        } catch {
            // A spare that cannot be written (a bad block) is retired, so
            // that the next prompt takes another and the refill makes a
            // new one: it must not refuse every first record. (A full disk
            // or a quota says ENOSPC or EDQUOT here only where overwrites
            // need new blocks: the spare is kept.)
            if !error.isNoRoom, let facts = try? Syscalls.facts(spare.fd),
               isStillAtName(facts, directory: directory, spare.name) {
                try? Syscalls.unlink(in: directory, spare.name)
            }
            throw .writeFailed(error)
        }
        do throws(Errno) { try moveIntoPlace(directory: directory, from: spare.name, to: names.record) } catch {
            throw .writeFailed(error)
        }
        do throws(Errno) { try syncForDurability(directory) } catch { throw .writeFailed(error) }
        // A temporary file a killed write left behind goes with the next
        // whole-file write, as it would on the other path.
        try? Syscalls.unlink(in: directory, names.temporary)
    }
}
