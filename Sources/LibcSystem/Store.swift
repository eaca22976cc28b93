// The attempt state on disk (docs/DESIGN.md, "The state store"): one record per uid,
// locked, checked at every step of the path, written so that a crash never lowers a count.
// This file holds the transaction; each job it needs has a file of its own:
// StorePath (the trusted path), StoreLocks (locks and odd entries), StoreLoad,
// StoreWrite (the in-place write plan), StoreSpares, StoreLookAlike.
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

    /// The longest a prompt waits for a record's lock (`waitForLock`).
    public var lockWaitMilliseconds = FileStateStore.defaultLockWaitMilliseconds
    public static let defaultLockWaitMilliseconds = 3_000

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
        var keyWasUnreadable = false
        if lookAlike {
            let (key, replacedUnreadable) = try lookAlikeKey(directory: directory)
            names = lookAlikeFiles(userName: userName, key: key)
            keyWasUnreadable = replacedUnreadable
        }
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
        // A key the disk failed to read was replaced: what this name's
        // bucket held is not known, as for a record the disk fails to read.
        if keyWasUnreadable, status == .loaded || status == .absent {
            stored = nil
            status = .damaged(.unreadable)
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
        } else if names.isBucket, try writeUnreadableBucket(directory: directory, RecordSlots.newFile(changed), at: base) {
            // A bucket the disk failed to read in a sound look-alike file:
            // R12's record written over its region, the other buckets kept.
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
}
