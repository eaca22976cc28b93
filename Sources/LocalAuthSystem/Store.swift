// The attempt state on disk (docs/DESIGN.md, "The state store"): one record per uid,
// locked, checked at every step of the path, written so that a crash never lowers a count.
import LocalAuth

/// The state store on disk: `<dir>/<uid>.rec`, two slots updated in place
/// (made and replaced whole by rename), locked through `<dir>/<uid>.lock`
/// (never the record, which a rename can replace), everything opened
/// relative to the directory with O_NOFOLLOW.
public struct FileStateStore: StateStore {
    /// The system's message for an errno.
    public func describe(_ errno: Errno) -> String { errno.text }

    public let directoryPath: [UInt8]
    /// Owner that the directory, lock and record files must have.
    public let trustedOwner: UInt32

    /// The uid a user name leads to today (the system's user database):
    /// a record made under another name of the same uid is still its.
    public var accountUID: ([UInt8]) -> UInt32? = { Syscalls.lookupUser($0)?.uid }

    public init(directoryPath: [UInt8], trustedOwner: UInt32 = 0) {
        self.directoryPath = directoryPath
        self.trustedOwner = trustedOwner
    }

    /// The uid of look-alike records for unknown user names (R14): never a
    /// real uid ((uid_t)-1 is reserved).
    public static var lookAlikeUID: UInt32 { StateRecord.lookAlikeUID }
    /// How many spare record files the store keeps made: a new or
    /// replaced record takes one, so a filesystem whose space or inodes
    /// someone used up still takes a first record (or an unknown name's
    /// fresh bucket) until the spares run out, for every name alike.
    public static let spareCount = 8
    /// How many look-alike records there can be: unknown names share 1024
    /// buckets and one lock file, so no number of invented names can fill
    /// the state directory.
    public static let lookAlikeBuckets = 1024

    /// The files of one record: `<uid>.rec` and `<uid>.lock`, or for an
    /// unknown name its bucket, a region of the shared `lookalike.rec`,
    /// and the shared `lookalike.lock`.
    struct RecordFiles {
        var record: [UInt8]
        var lock: [UInt8]
        /// Where the record starts in its file: a bucket's region of the
        /// look-alike file, else 0.
        var base = 0
        var temporary: [UInt8] { record + literalBytes(".tmp") }
        var isBucket: Bool { record == FileStateStore.lookAlikeRecordName }
    }

    func files(uid: UInt32) -> RecordFiles {
        RecordFiles(record: utf8Bytes("\(uid).rec"), lock: utf8Bytes("\(uid).lock"))
    }

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

    static var lookAlikeLockName: [UInt8] { literalBytes("lookalike.lock") }
    static var lookAlikeKeyName: [UInt8] { literalBytes("lookalike.key") }
    static let lookAlikeKeySize = 32

    /// The secret that places unknown names in buckets, made on first use.
    /// Called under the look-alike lock; a key file that is not a sound
    /// 32-byte root file is replaced (the buckets are then shuffled anew,
    /// which costs nothing but the counts of invented names).
    /// A shortage of descriptors or memory is this attempt's failure: a new
    /// key then would move every unknown name to another bucket.
    func lookAlikeKey(directory: Int32) throws(StoreFailure) -> [UInt8] {
        let name = FileStateStore.lookAlikeKeyName
        do throws(Errno) {
            let fd = try Syscalls.open(at: directory, name, .readFile)
            defer { Syscalls.close(fd) }
            let facts = try Syscalls.facts(fd)
            if facts.isRegular, facts.owner == trustedOwner, facts.mode & 0o077 == 0, facts.size == FileStateStore.lookAlikeKeySize {
                let key = try Syscalls.readAll(fd, limit: FileStateStore.lookAlikeKeySize)
                if key.count == FileStateStore.lookAlikeKeySize { return key }
            }
        } catch {
            if error.isShortage { throw .readFailed(error) }
        }
        guard let key = Syscalls.randomBytes(FileStateStore.lookAlikeKeySize) else { throw .writeFailed(Errno.tryAgain) }
        // The buckets before the key: a key on disk means they were made.
        if (try? Syscalls.facts(at: directory, FileStateStore.lookAlikeRecordName)) == nil {
            try makeLookAlikeFile(directory: directory)
        }
        try write(key, directory: directory, to: name, through: name + literalBytes(".tmp"))
        return key
    }

    public func recordName(uid: UInt32) -> [UInt8] { files(uid: uid).record }

    public mutating func withRecord<Result>(uid: UInt32, userName: [UInt8],
                                            _ body: (inout StateRecord?, LoadStatus) -> Result) throws(StoreFailure) -> Result {
        // One transaction for every result type: the body's result is
        // carried out through a closure, so the store's code exists once.
        var result: Result? = nil
        try update(uid: uid, userName: userName) { record, status in result = body(&record, status) }
        return result!
    }

    /// The transaction behind `withRecord`. A change to a sound record is
    /// written in place into the slot that does not hold the newest copy
    /// on disk; it waits for the disk (`fdatasync`) only when losing it
    /// could leave less charged than was charged (R3). A new, replaced or
    /// one-slot record is written whole through a temporary file.
    mutating func update(uid: UInt32, userName: [UInt8], _ body: (inout StateRecord?, LoadStatus) -> Void) throws(StoreFailure) {
        let directory = try openDirectory()
        defer { Syscalls.close(directory) }
        let lookAlike = uid == FileStateStore.lookAlikeUID
        var names = files(uid: uid)
        if lookAlike { names.lock = FileStateStore.lookAlikeLockName }
        let (lock, lockWasOdd) = try takeLock(directory: directory, name: names.lock)
        defer { Syscalls.close(lock) }
        if lookAlike { names = lookAlikeFiles(userName: userName, key: try lookAlikeKey(directory: directory)) }
        var found = try load(directory: directory, names, uid: uid, userName: userName)
        if lookAlike, found.status == .absent {
            // No look-alike file (a store from before it was made with the
            // key): make it once, then use this bucket in place.
            try makeLookAlikeFile(directory: directory)
            found = try load(directory: directory, names, uid: uid, userName: userName)
        }
        defer { if let fd = found.fd { Syscalls.close(fd) } }
        var stored = found.record
        var status = found.status
        // A bucket holding another unknown name's record (or the record of
        // no name it was made with) is this name's fresh start, written
        // over in place.
        let freshBucket = lookAlike && status == .damaged(.foreign)
        if freshBucket { status = .absent }
        // Someone other than the store put a file where the lock belongs:
        // the record beside it is not to be trusted either (R12).
        if lockWasOdd, status == .loaded || status == .absent {
            stored = nil
            status = .damaged(.unsafeLock)
        }
        var record = stored
        body(&record, status)
        guard let changed = record, changed != stored || status != .loaded else { return }
        let base = names.base
        if status == .loaded || freshBucket, let fd = found.fd, let slots = found.slots, found.writableInPlace {
            // A new owner of a bucket must be on disk like any new count.
            let durable = stored.map { changed.mustBeDurable(replacing: $0) } ?? true
            if slots.plan == .otherSlotAfterSync {
                // Which copy is on disk is not known: make the current one
                // so, and say it, before writing over the other.
                try syncAndMark(fd, generation: slots.header?.generation ?? 0, base: base)
            }
            let generation = slots.nextGeneration
            try writeInPlace(fd, RecordFormat.encode(changed, generation: generation, durable: durable),
                             at: base + slots.nextSlot * RecordFormat.size, durable: durable)
            // Only now is this copy known to be on disk.
            if durable { try mark(fd, generation: generation, base: base) }
        } else if names.isBucket, let fd = found.fd {
            // A damaged bucket in a sound look-alike file: its region is
            // written whole, in place (R12's record, on disk at once).
            try writeInPlace(fd, RecordSlots.newFile(changed), at: base, durable: true)
        } else if names.isBucket {
            // The look-alike file itself is unusable: made again, with
            // this bucket's record in it.
            var image = FileStateStore.blankLookAlikeFile()
            image.replaceSubrange(base..<(base + RecordFormat.fileSize), with: RecordSlots.newFile(changed))
            try makeLookAlikeFile(directory: directory, image)
        } else {
            try writeRecordFile(RecordSlots.newFile(changed), directory: directory, names)
            refillSpares(directory: directory)
            return
        }
        if !lookAlike { prepareLookAlike(directory: directory) }
    }

    /// Opens the state directory, walking from `/` without following
    /// symlinks. Every directory on the way must be owned by root (or the
    /// trusted owner) and not writable by group or others, unless sticky:
    /// otherwise its owner could move the state directory away and have a
    /// fresh, empty one made. The state directory itself must be the trusted
    /// owner's and 0700 (others may not even list which uids have records).
    /// A missing one is made only in a parent nobody else can write: in a
    /// sticky /tmp another user could have made it first.
    func openDirectory() throws(StoreFailure) -> Int32 {
        guard let parts = TrustedPath.parts(directoryPath), let last = parts.last else { throw .directoryUnusable(.notAbsolute) }
        let parent: Int32
        switch TrustedPath.openDirectory(Array(parts.dropLast()), trusted: { isTrustedAncestor($0, allowSticky: true) }) {
        case .success(let fd): parent = fd
        case .failure(.missingDirectory): throw .directoryUnusable(.missingAncestor)
        case .failure: throw .directoryUnusable(.unsafeAncestor)
        }
        defer { Syscalls.close(parent) }
        let fd: Int32
        do {
            fd = try Syscalls.open(at: parent, last, .directory)
        } catch {
            guard error == .noEntry else {
                // A symlink or a file in its place is unsafe; anything else
                // is a failure of the system, said as such.
                let unsafe = error == .symlinkLoop || error == .notDirectory
                throw .directoryUnusable(unsafe ? .unsafeDirectory : .cannotOpen(error))
            }
            guard let facts = try? Syscalls.facts(parent), isTrustedAncestor(facts, allowSticky: false) else {
                throw .directoryUnusable(.missingInWritableParent)
            }
            do throws(Errno) {
                // Another prompt may make it at the same moment: then use its.
                do { try Syscalls.makeDirectory(at: parent, last, mode: 0o700) } catch { if error != .exists { throw error } }
                fd = try Syscalls.open(at: parent, last, .directory)
            } catch {
                throw .directoryUnusable(.unsafeDirectory)
            }
        }
        guard let facts = try? Syscalls.facts(fd), facts.isDirectory, facts.owner == trustedOwner, facts.mode & 0o077 == 0 else {
            Syscalls.close(fd)
            throw .directoryUnusable(.unsafeDirectory)
        }
        return fd
    }

    /// A directory on the way to the state directory: owned by root or the
    /// trusted owner, and not writable by group or others (or, when allowed,
    /// sticky, so that others cannot move its entries).
    func isTrustedAncestor(_ facts: FileFacts, allowSticky: Bool) -> Bool {
        guard facts.isDirectory, facts.owner == 0 || facts.owner == trustedOwner else { return false }
        return facts.mode & 0o022 == 0 || (allowSticky && facts.mode & 0o1000 != 0)
    }

    /// Opens and locks a lock file. Anything else at its name (a symlink,
    /// FIFO, directory, or a file not the store's) is replaced, and reported
    /// so the record is treated as damaged (R12): such a file must not
    /// refuse every prompt. After the lock is taken the name must still lead
    /// to the locked file, or the lock is taken again.
    func takeLock(directory: Int32, name: [UInt8]) throws(StoreFailure) -> (fd: Int32, wasOdd: Bool) {
        var wasOdd = false
        var lastError = Errno.tryAgain
        for _ in 0..<4 {
            let fd: Int32
            do {
                fd = try Syscalls.open(at: directory, name, .lockFile)
            } catch {
                lastError = error
                // A first lock file on a full filesystem: a spare one.
                if error.isNoRoom, placeSpareLock(directory: directory, as: name) { continue }
                guard error == .symlinkLoop || error == .isDirectory || error == .noDeviceOrAddress || error == .accessDenied else {
                    throw .lockFailed(error)
                }
                wasOdd = true
                try replaceOddEntry(directory: directory, name) { !isSoundLock($0) }
                continue
            }
            guard let facts = try? Syscalls.facts(fd), isSoundLock(facts) else {
                Syscalls.close(fd)
                wasOdd = true
                try replaceOddEntry(directory: directory, name) { !isSoundLock($0) }
                continue
            }
            do throws(Errno) {
                try Syscalls.lockExclusive(fd)
                if let current = try? Syscalls.facts(at: directory, name), current.device == facts.device, current.inode == facts.inode {
                    return (fd, wasOdd)
                }
                lastError = .stale
            } catch {
                lastError = error
            }
            Syscalls.close(fd)
        }
        throw .lockFailed(lastError)
    }

    /// Removes the entry at `name` (a file, a symlink never followed, a
    /// FIFO, or a directory; a non-empty directory is moved aside under a
    /// name of its own) if it still is odd by `isOdd` when looked at under a
    /// lock on the directory: repairs are serialized, so a prompt never
    /// removes the sound file another prompt has just put there (an inode
    /// number alone could have been reused).
    ///
    /// Only repairs take this lock, and never wait for it long: a prompt
    /// stopped by its user while it holds the lock must not hold up
    /// everyone else's writes. After about a second the repair fails, and
    /// with it this one attempt (the next prompt tries again).
    func replaceOddEntry(directory: Int32, _ name: [UInt8], isOdd: (FileFacts) -> Bool) throws(StoreFailure) {
        do throws(Errno) {
            var tries = 0
            while !(try Syscalls.tryLockExclusive(directory)) {
                tries += 1
                guard tries < 100 else { throw Errno.tryAgain }
                Syscalls.sleep(milliseconds: 10)
            }
            defer { Syscalls.unlock(directory) }
            guard let current = try? Syscalls.facts(at: directory, name), isOdd(current) else { return }
            try Syscalls.removeEntry(in: directory, name, movingNonEmptyDirectoryTo: name + utf8Bytes(".odd-\(current.inode)"))
        } catch {
            throw .writeFailed(error)
        }
    }

    /// A lock file as the store makes it: regular, the trusted owner's, not
    /// writable by group or others.
    func isSoundLock(_ facts: FileFacts) -> Bool {
        facts.isRegular && facts.owner == trustedOwner && facts.mode & 0o022 == 0
    }

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

    func load(directory: Int32, _ names: RecordFiles, uid: UInt32, userName: [UInt8]) throws(StoreFailure) -> FoundRecord {
        let fd: Int32
        do {
            fd = try Syscalls.open(at: directory, names.record, .updateFile)
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
        let slots = RecordSlots.read(bytes)
        found.slots = slots
        guard let current = slots.current, !(names.isBucket && slots.isLegacy) else {
            found.status = .damaged(slots.damage ?? .badChecksum)
            return found
        }
        let slot = slots.isLegacy ? bytes : RecordSlots.slot(bytes, current)
        // A per-uid record made under another name of this same account is
        // this account's; in a look-alike bucket only the name counts.
        let sameAccount: ([UInt8]) -> Bool = { stored in !names.isBucket && accountUID(stored) == uid }
        switch RecordFormat.decode(slot, uid: uid, userName: userName, sameAccount: sameAccount) {
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

    /// Lifts `RLIMIT_FSIZE` so that a write may reach `end`, where the
    /// caller's limit would stop it; returns the limit to put back after
    /// the write, or nil when none was changed.
    func allowWrite(upTo end: Int) throws(StoreFailure) -> (soft: UInt64, hard: UInt64)? {
        let saved = Syscalls.fileSizeLimit()
        guard saved.soft < UInt64(end) else { return nil }
        if !Syscalls.setFileSizeLimit(soft: UInt64.max, hard: UInt64.max) {
            Syscalls.setFileSizeLimit(soft: saved.hard, hard: saved.hard)
        }
        if Syscalls.fileSizeLimit().soft < UInt64(end) {
            Syscalls.setFileSizeLimit(soft: saved.soft, hard: saved.hard)
            throw .fileSizeLimited
        }
        return saved
    }

    func restoreLimit(_ saved: (soft: UInt64, hard: UInt64)?) {
        if let saved { Syscalls.setFileSizeLimit(soft: saved.soft, hard: saved.hard) }
    }

    /// Syncs the file and marks `generation` as on disk.
    func syncAndMark(_ fd: Int32, generation: UInt64, base: Int) throws(StoreFailure) {
        #if !LOCALAUTH_BENCHMARK_WITHOUT_SYNC
        do throws(Errno) { try Syscalls.syncData(fd) } catch { throw .writeFailed(error) }
        #endif
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
            #if !LOCALAUTH_BENCHMARK_WITHOUT_SYNC
            if durable { try Syscalls.syncData(fd) }
            #endif
        } catch {
            throw .writeFailed(error)
        }
    }

    /// Writes `bytes` to `temporary`, fsyncs it, renames it over `name` and
    /// fsyncs the directory, with `RLIMIT_FSIZE` lifted for the write. Odd
    /// entries at either name are replaced first.
    func write(_ bytes: [UInt8], directory: Int32, to name: [UInt8], through temporary: [UInt8]) throws(StoreFailure) {
        let saved = try allowWrite(upTo: bytes.count)
        defer { restoreLimit(saved) }
        // A leftover temporary file (of a killed write) goes; the record's
        // lock is held, so no other write uses this name. Only something
        // that is not a file (a directory) needs the repair.
        do throws(Errno) {
            try Syscalls.unlink(in: directory, temporary)
        } catch {
            guard error == .isDirectory || error == .notPermitted else { throw .writeFailed(error) }
            try replaceOddEntry(directory: directory, temporary) { _ in true }
        }
        do throws(Errno) {
            let fd = try Syscalls.open(at: directory, temporary, .newFile)
            do throws(Errno) {
                try Syscalls.writeAll(fd, bytes)
                #if !LOCALAUTH_BENCHMARK_WITHOUT_SYNC
                try Syscalls.sync(fd)
                #endif
            } catch {
                Syscalls.close(fd)
                try? Syscalls.unlink(in: directory, temporary)
                throw error
            }
            Syscalls.close(fd)
            try moveIntoPlace(directory: directory, from: temporary, to: name)
            #if !LOCALAUTH_BENCHMARK_WITHOUT_SYNC
            try Syscalls.sync(directory)
            #endif
        } catch {
            throw .writeFailed(error)
        }
    }

    /// Renames `source` over `name`; a directory at the name, which cannot
    /// be renamed over, is moved away first.
    func moveIntoPlace(directory: Int32, from source: [UInt8], to name: [UInt8]) throws(Errno) {
        do {
            try Syscalls.rename(in: directory, from: source, to: name)
        } catch {
            guard error == .isDirectory || error == .notEmpty || error == .exists else { throw error }
            do throws(StoreFailure) {
                try replaceOddEntry(directory: directory, name) { $0.isDirectory }
            } catch {
                if case .writeFailed(let cause) = error { throw cause }
                throw Errno.isDirectory
            }
            try Syscalls.rename(in: directory, from: source, to: name)
        }
    }

    // MARK: - Spare record files

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
            #if !LOCALAUTH_BENCHMARK_WITHOUT_SYNC
            try Syscalls.sync(spare.fd)
            #endif
        } catch {
            // A spare that cannot be written (a bad block) is retired, so
            // that the next prompt takes another and the refill makes a
            // new one: it must not refuse every first record. (A full disk
            // or a quota says ENOSPC or EDQUOT here only where overwrites
            // need new blocks: the spare is kept.)
            if !error.isNoRoom, let facts = try? Syscalls.facts(spare.fd),
               let current = try? Syscalls.facts(at: directory, spare.name),
               current.device == facts.device, current.inode == facts.inode {
                try? Syscalls.unlink(in: directory, spare.name)
            }
            throw .writeFailed(error)
        }
        do throws(Errno) { try moveIntoPlace(directory: directory, from: spare.name, to: names.record) } catch {
            throw .writeFailed(error)
        }
        #if !LOCALAUTH_BENCHMARK_WITHOUT_SYNC
        do throws(Errno) { try Syscalls.sync(directory) } catch { throw .writeFailed(error) }
        #endif
        // A temporary file a killed write left behind goes with the next
        // whole-file write, as it would on the other path.
        try? Syscalls.unlink(in: directory, names.temporary)
    }

    static func spareName(_ index: Int) -> [UInt8] { literalBytes("spare.") + utf8Bytes(String(index)) }
    static func spareLockName(_ index: Int) -> [UInt8] { literalBytes("spare-lock.") + utf8Bytes(String(index)) }
    static var spareTemporaryName: [UInt8] { literalBytes("spare.tmp") }

    /// Puts a spare lock file at `name`, which is missing and cannot be
    /// made for want of room: a known user's first lock file then needs
    /// no inode, like the look-alike lock that already exists. Never over
    /// a lock file another prompt made meanwhile (two prompts would then
    /// hold locks on two files).
    func placeSpareLock(directory: Int32, as name: [UInt8]) -> Bool {
        for index in 0..<FileStateStore.spareCount {
            let spare = FileStateStore.spareLockName(index)
            guard let facts = try? Syscalls.facts(at: directory, spare), isSoundLock(facts) else { continue }
            do {
                try Syscalls.renameWithoutReplacing(in: directory, from: spare, to: name)
                return true
            } catch {
                if error == .exists { return true }
            }
        }
        // Another prompt may have put the last spare at this very name.
        return (try? Syscalls.facts(at: directory, name)) != nil
    }

    /// A spare as the store makes it: a whole record's size, the trusted
    /// owner's, private, and with no other name.
    func isSoundSpare(_ facts: FileFacts) -> Bool {
        facts.isRegular && facts.owner == trustedOwner && facts.mode & 0o077 == 0 && facts.size == RecordFormat.fileSize
            && facts.links == 1
    }

    /// Opens and locks a sound spare that still has its name, or nil when
    /// none is ready. The lock keeps two prompts from writing one spare;
    /// the name, looked at again under the lock, tells that no other
    /// prompt already renamed it into a record.
    func claimSpare(directory: Int32) -> (fd: Int32, name: [UInt8])? {
        for index in 0..<FileStateStore.spareCount {
            let name = FileStateStore.spareName(index)
            guard let fd = try? Syscalls.open(at: directory, name, .updateFile) else { continue }
            if (try? Syscalls.tryLockExclusive(fd)) == true, let facts = try? Syscalls.facts(fd), isSoundSpare(facts),
               let current = try? Syscalls.facts(at: directory, name), current.device == facts.device, current.inode == facts.inode {
                return (fd, name)
            }
            Syscalls.close(fd)
        }
        return nil
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
              let current = try? Syscalls.facts(at: directory, FileStateStore.lookAlikeLockName),
              current.device == facts.device, current.inode == facts.inode else { return }
        if missing(FileStateStore.lookAlikeRecordName) { _ = try? makeLookAlikeFile(directory: directory) }
        _ = try? lookAlikeKey(directory: directory)
    }

    /// Makes the spares that are missing, and before them the look-alike
    /// file and key when either is missing. Called after a known user's
    /// whole-file write (a look-alike bucket is never written whole
    /// through a spare). At most one prompt refills at a time (under the
    /// directory's lock, never waited for); a full filesystem leaves the
    /// pool short, which fails nothing now.
    func refillSpares(directory: Int32) {
        prepareLookAlike(directory: directory)
        guard (try? Syscalls.tryLockExclusive(directory)) == true else { return }
        defer { Syscalls.unlock(directory) }
        let saved: (soft: UInt64, hard: UInt64)?
        do { saved = try allowWrite(upTo: RecordFormat.fileSize) } catch { return }
        defer { restoreLimit(saved) }
        let blank = [UInt8](repeating: 0, count: RecordFormat.fileSize)
        let temporary = FileStateStore.spareTemporaryName
        for index in 0..<FileStateStore.spareCount {
            let name = FileStateStore.spareLockName(index)
            if let facts = try? Syscalls.facts(at: directory, name) {
                if isSoundLock(facts) { continue }
                guard (try? Syscalls.removeEntry(in: directory, name, movingNonEmptyDirectoryTo: name + literalBytes(".odd"))) != nil
                else { return }
            }
            guard let fd = try? Syscalls.open(at: directory, name, .newFile) else { return }
            Syscalls.close(fd)
        }
        for index in 0..<FileStateStore.spareCount {
            let name = FileStateStore.spareName(index)
            if let facts = try? Syscalls.facts(at: directory, name), isSoundSpare(facts) { continue }
            do throws(Errno) {
                // The directory's lock is held: no other prompt uses the
                // temporary name, and only this one puts spares in place.
                try Syscalls.removeEntry(in: directory, temporary, movingNonEmptyDirectoryTo: temporary + literalBytes(".odd"))
                let fd = try Syscalls.open(at: directory, temporary, .newFile)
                do throws(Errno) {
                    try Syscalls.writeAll(fd, blank)
                    // On disk, so that its blocks are there to be written
                    // over when the filesystem is full.
                    try Syscalls.sync(fd)
                } catch {
                    Syscalls.close(fd)
                    throw error
                }
                Syscalls.close(fd)
                // Whatever else holds the name (a directory, a short file
                // a crash left) goes; a sound spare is never replaced.
                do { try Syscalls.rename(in: directory, from: temporary, to: name) } catch {
                    try Syscalls.removeEntry(in: directory, name, movingNonEmptyDirectoryTo: name + literalBytes(".odd"))
                    try Syscalls.rename(in: directory, from: temporary, to: name)
                }
            } catch {
                try? Syscalls.unlink(in: directory, temporary)
                return
            }
        }
    }
}
