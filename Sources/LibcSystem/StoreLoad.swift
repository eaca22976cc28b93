// Reading a record file: the identity of the file at its name checked,
// the two slots decoded, damage named.
import LocalAuth

extension FileStateStore {
    /// A record as read: the decoded current slot, why it was not
    /// accepted, and, for a sound file, the open file and its slots for a
    /// write in place.
    struct FoundRecord {
        var record: StateRecord?
        var status: LoadStatus
        var fd: Int32? = nil
        var slots: RecordSlots? = nil
        var writableInPlace = false
    }

    /// Reads the record; a file that cannot be read (an I/O error opening,
    /// examining or reading it) is read once more before it counts as
    /// damaged, so that one transient error does not replace a sound
    /// record with R12's (the finger locked, the first wait). An error
    /// that persists is the disk's, and the replacement is the answer
    /// that neither refunds what the record may hold nor locks the owner
    /// out. Other damage is in the bytes, and reading again would find
    /// the same.
    /// `readOnly` opens the file only to read it (a read-only disk's), and
    /// it is then never written in place.
    func load(directory: Int32, _ names: RecordFiles, uid: UInt32, userName: [UInt8], readOnly: Bool = false) throws(StoreFailure) -> FoundRecord {
        let found = try loadOnce(directory: directory, names, uid: uid, userName: userName, readOnly: readOnly)
        guard found.status == .damaged(.unreadable) else { return found }
        return try loadOnce(directory: directory, names, uid: uid, userName: userName, readOnly: readOnly)
    }

    func loadOnce(directory: Int32, _ names: RecordFiles, uid: UInt32, userName: [UInt8], readOnly: Bool) throws(StoreFailure) -> FoundRecord {
        let fd: Int32
        do {
            fd = try Syscalls.open(at: directory, names.record, readOnly ? .readFile : .updateFile)
        } catch {
            if error == .noEntry { return FoundRecord(record: nil, status: .absent) }
            if error == .symlinkLoop { return FoundRecord(record: nil, status: .damaged(.unsafeFile)) }
            // Out of descriptors or memory: the record may be sound and hold
            // more than a replacement would (R12 lowers a long wait to the
            // first); refuse this attempt instead.
            if error.isShortage { throw .readFailed(error) }
            return FoundRecord(record: nil, status: .damaged(.unreadable))
        }
        var found = FoundRecord(record: nil, status: .damaged(.unreadable))
        defer { if found.fd == nil { Syscalls.close(fd) } }
        // A failure of the file itself (an I/O error) makes the record
        // damaged (R12); a shortage of descriptors or memory is this
        // attempt's failure, not the record's.
        let facts: FileFacts
        do {
            facts = try Syscalls.facts(fd)
        } catch {
            if error.isShortage { throw .readFailed(error) }
            return found
        }
        let sizes = names.isBucket ? [FileStateStore.lookAlikeFileSize] : [RecordFormat.fileSize, RecordFormat.size]
        if !facts.isRegular || facts.owner != trustedOwner || facts.mode & 0o022 != 0 {
            found.status = .damaged(.unsafeFile)
            return found
        }
        guard sizes.contains(facts.size) else {
            found.status = .damaged(.wrongSize)
            return found
        }
        let bytes: [UInt8]
        do {
            bytes = names.isBucket ? try Syscalls.read(fd, count: RecordFormat.fileSize, at: names.base)
                                   : try Syscalls.readAll(fd, limit: RecordFormat.fileSize)
        } catch {
            if error.isShortage { throw .readFailed(error) }
            return found
        }
        // A bucket of a sound look-alike file is written in place whatever
        // it holds: another name's record, the record of no name it was
        // made with, or damage (then R12's record).
        if names.isBucket && facts.links == 1 {
            found.fd = fd
            found.writableInPlace = true
        }
        // A per-uid record made under another name of this same account is
        // this account's; in a look-alike bucket only the name counts.
        let sameAccount: ([UInt8]) -> Bool = { stored in !names.isBucket && accountUID(stored) == uid }
        let (slots, decoded) = RecordSlots.readCurrent(bytes, uid: uid, userName: userName, sameAccount: sameAccount)
        found.slots = slots
        guard let decoded, !(names.isBucket && slots.isLegacy) else {
            found.status = .damaged(slots.damage ?? .badChecksum)
            return found
        }
        switch decoded {
        case .success(let record):
            // A one-slot file, or one with a second name, is read but
            // never written in place: the next change replaces the name.
            found.record = record
            found.status = .loaded
            found.fd = fd
            found.writableInPlace = !slots.isLegacy && facts.links == 1
        case .failure(let error):
            found.status = .damaged(error.damage)
        }
        return found
    }
}
