// The look-alike records of unknown user names (R14): 1024 buckets in one
// file made ahead, placed by a keyed hash, under one lock.
import LocalAuth

extension FileStateStore {
    /// The bucket of an unknown name: a hash keyed with this machine's
    /// look-alike key, so that nobody can choose names that share one.
    func lookAlikeFiles(userName: [UInt8], key: [UInt8]) -> RecordFiles {
        let digest = SHA256.hash(key + userName)
        let bucket = (Int(digest[0]) << 8 | Int(digest[1])) % FileStateStore.lookAlikeBuckets
        return RecordFiles(record: FileStateStore.lookAlikeRecordName, lock: FileStateStore.lookAlikeLockName,
                           base: bucket * RecordFormat.fileSize)
    }

    static var lookAlikeRecordName: [UInt8] { literalBytes("lookalike.rec") }
    static var lookAlikeFileSize: Int { lookAlikeBuckets * RecordFormat.fileSize }

    /// The look-alike file as made: every bucket a record file's image
    /// holding a record of no name, which is a fresh start for any name.
    static func blankLookAlikeFile() -> [UInt8] {
        let blank = RecordSlots.newFile(StateRecord(uid: lookAlikeUID, userName: [], createdWallSeconds: 0))
        var file: [UInt8] = []
        file.reserveCapacity(lookAlikeFileSize)
        for _ in 0..<lookAlikeBuckets { file += blank }
        return file
    }

    /// Makes the look-alike file, all its buckets, in one file written
    /// whole (and the per-name bucket files of earlier releases go).
    /// Made ahead, with the key: an unknown name's first charge then goes
    /// into its bucket in place, as a known user's charge goes into that
    /// user's record, and needs no new file on a full filesystem (R14).
    /// Called under the look-alike lock.
    func makeLookAlikeFile(directory: Int32, _ image: [UInt8]? = nil) throws(StoreFailure) {
        let name = FileStateStore.lookAlikeRecordName
        try write(image ?? FileStateStore.blankLookAlikeFile(), directory: directory, to: name, through: name + literalBytes(".tmp"))
        let digits: StaticString = "0123456789abcdef"
        for bucket in 0..<FileStateStore.lookAlikeBuckets {
            var old = literalBytes("u")
            for shift in [8, 4, 0] { old.append(digits.utf8Start[(bucket >> shift) & 0x0F]) }
            try? Syscalls.unlink(in: directory, old + literalBytes(".rec"))
        }
    }

    /// Writes `bytes` over the bucket region at `base` of a look-alike
    /// file that is sound (the store's, of its size, one name) but whose
    /// bucket the disk failed to read: false when the file is not sound or
    /// the disk fails the write too (it is then made again). One bucket
    /// the disk failed to read once must not cost every other bucket its
    /// counts. Called under the look-alike lock.
    func writeUnreadableBucket(directory: Int32, _ bytes: [UInt8], at base: Int) throws(StoreFailure) -> Bool {
        let fd: Int32
        do { fd = try Syscalls.open(at: directory, FileStateStore.lookAlikeRecordName, .updateFile) } catch {
            if error.isShortage { throw .writeFailed(error) }
            return false
        }
        defer { Syscalls.close(fd) }
        guard let facts = try? Syscalls.facts(fd), facts.isRegular, facts.owner == trustedOwner, facts.mode & 0o022 == 0,
              facts.size == FileStateStore.lookAlikeFileSize, facts.links == 1 else { return false }
        do {
            try writeInPlace(fd, bytes, at: base, durable: true)
        } catch {
            // A write over part of a block the disk cannot read needs that
            // block read first, and fails the same way: the file is then
            // made again (every bucket's count goes, as for a file that is
            // not sound), so that no name is refused for good.
            if case .writeFailed(let errno) = error, !errno.isShortage { return false }
            throw error
        }
        return true
    }

    static var lookAlikeLockName: [UInt8] { literalBytes("lookalike.lock") }
    static var lookAlikeKeyName: [UInt8] { literalBytes("lookalike.key") }
    static let lookAlikeKeySize = 32

    /// The secret that places unknown names in buckets, made on first use.
    /// Called under the look-alike lock; a key file that is not a sound
    /// 32-byte root file is replaced (the buckets are then shuffled anew,
    /// which costs nothing but the counts of invented names).
    /// A shortage of descriptors or memory is this attempt's failure: a new
    /// key then would move every unknown name to another bucket. A key the
    /// disk fails to read is replaced too, and said (`replacedUnreadable`):
    /// the bucket is then R12's, as a known user's unreadable record is.
    func lookAlikeKey(directory: Int32) throws(StoreFailure) -> (key: [UInt8], replacedUnreadable: Bool) {
        let name = FileStateStore.lookAlikeKeyName
        let stored = try storedLookAlikeKey(directory: directory)
        if case .key(let key) = stored { return (key, false) }
        guard let key = Syscalls.randomBytes(FileStateStore.lookAlikeKeySize) else { throw .writeFailed(Errno.tryAgain) }
        // The buckets before the key: a key on disk means they were made.
        if (try? Syscalls.facts(at: directory, FileStateStore.lookAlikeRecordName)) == nil {
            try makeLookAlikeFile(directory: directory)
        }
        try write(key, directory: directory, to: name, through: name + literalBytes(".tmp"))
        return (key, stored == .unreadable)
    }

    /// Makes the look-alike file and key when either is missing (a store
    /// of an earlier release, a crash between the two), under the
    /// look-alike lock, never waited for: so that an unknown name's first
    /// prompt finds its bucket made, and does no more work before the
    /// prompt than a known name's (R14), and needs no room on a full disk.
    /// Each known user's write looks (two `fstatat`); the work is done once.
    func prepareLookAlike(directory: Int32) {
        func missing(_ name: [UInt8]) -> Bool {
            do throws(Errno) { _ = try Syscalls.facts(at: directory, name); return false } catch { return error == .noEntry }
        }
        guard missing(FileStateStore.lookAlikeRecordName) || missing(FileStateStore.lookAlikeKeyName),
              let lock = try? Syscalls.open(at: directory, FileStateStore.lookAlikeLockName, .lockFile) else { return }
        defer { Syscalls.close(lock) }
        guard (try? Syscalls.tryLockExclusive(lock)) == true, let facts = try? Syscalls.facts(lock), isSoundLock(facts),
              isStillAtName(facts, directory: directory, FileStateStore.lookAlikeLockName) else { return }
        if missing(FileStateStore.lookAlikeRecordName) { _ = try? makeLookAlikeFile(directory: directory) }
        _ = try? lookAlikeKey(directory: directory)
    }
}
