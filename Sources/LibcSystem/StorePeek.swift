// What counting in /run needs of a store (LocalAuth's RuntimeCounting): a
// record read without a lock and without making or mending anything (a
// read-only disk's, or one kept in /run to fold back), and the removal of
// a record kept in /run once it is on disk.
import LocalAuth

extension FileStateStore {
    /// The store in /run where counting goes on while the state directory
    /// is read-only (RuntimeCounting).
    public static var runtime: FileStateStore { FileStateStore(directoryPath: utf8Bytes("\(RuntimeCounting.directory)")) }

    /// The record as stored. Nothing is made: a missing directory, record,
    /// or look-alike key reads as absent. A shortage of descriptors or
    /// memory is thrown (the caller refuses: a replacement made of it could
    /// hold a shorter wait than the record); a file the disk fails to read
    /// is damaged (R12).
    public func peek(uid: UInt32, userName: [UInt8]) throws(StoreFailure) -> (record: StateRecord?, status: LoadStatus) {
        let directory: Int32
        do {
            directory = try openDirectory(create: false)
        } catch {
            if case .directoryUnusable(.cannotOpen(let errno)) = error {
                if errno == .noEntry { return (nil, .absent) }
                if errno.isShortage { throw .readFailed(errno) }
            }
            return (nil, .damaged(.unreadable))
        }
        defer { Syscalls.close(directory) }
        var names = files(uid: uid)
        if uid == FileStateStore.lookAlikeUID {
            switch try storedLookAlikeKey(directory: directory) {
            case .key(let key): names = lookAlikeFiles(userName: userName, key: key)
            case .missing: return (nil, .absent)
            // As a known user's record the disk fails to read (R12).
            case .unreadable: return (nil, .damaged(.unreadable))
            }
        }
        let found = try load(directory: directory, names, uid: uid, userName: userName, readOnly: true)
        if let fd = found.fd { Syscalls.close(fd) }
        // A bucket holding another name's record is this name's fresh start.
        if names.isBucket && found.status == .damaged(.foreign) { return (nil, .absent) }
        return (found.record, found.status)
    }

    /// The look-alike key as stored: missing also when the file is not a
    /// sound one (the buckets are then no one's yet), unreadable when the
    /// disk fails to read it (EIO), which is said as such: a bucket then
    /// reads as a known user's record the disk fails to read does (R12),
    /// never as a fresh start. A shortage of descriptors or memory is
    /// thrown (this attempt's failure).
    enum StoredKey: Equatable {
        case key([UInt8])
        case missing
        case unreadable
    }

    /// An I/O error is read once more first, as a record's is: one
    /// transient error must not shuffle every unknown name anew.
    func storedLookAlikeKey(directory: Int32) throws(StoreFailure) -> StoredKey {
        let stored = try storedLookAlikeKeyOnce(directory: directory)
        return stored == .unreadable ? try storedLookAlikeKeyOnce(directory: directory) : stored
    }

    func storedLookAlikeKeyOnce(directory: Int32) throws(StoreFailure) -> StoredKey {
        do throws(Errno) {
            let fd = try Syscalls.open(at: directory, FileStateStore.lookAlikeKeyName, .readFile)
            defer { Syscalls.close(fd) }
            let facts = try Syscalls.facts(fd)
            guard facts.isRegular, facts.owner == trustedOwner, facts.mode & 0o077 == 0,
                  facts.size == FileStateStore.lookAlikeKeySize else { return .missing }
            let key = try Syscalls.readAll(fd, limit: FileStateStore.lookAlikeKeySize)
            return key.count == FileStateStore.lookAlikeKeySize ? .key(key) : .missing
        } catch {
            if error.isShortage { throw .readFailed(error) }
            return error == RuntimeCounting.deviceError ? .unreadable : .missing
        }
    }

    /// The key as stored, or nil when there is none to use.
    func existingLookAlikeKey(directory: Int32) throws(StoreFailure) -> [UInt8]? {
        if case .key(let key) = try storedLookAlikeKey(directory: directory) { return key }
        return nil
    }

    /// Removes the record under its lock if it is still `record` (a bucket
    /// is written back as a record of no name, a fresh start for any).
    /// True when it is gone, or was never there.
    public mutating func remove(uid: UInt32, userName: [UInt8], ifStill record: StateRecord) throws(StoreFailure) -> Bool {
        let directory: Int32
        do {
            directory = try openDirectory(create: false)
        } catch {
            if case .directoryUnusable(.cannotOpen(let errno)) = error, errno == .noEntry { return true }
            throw error
        }
        defer { Syscalls.close(directory) }
        let lookAlike = uid == FileStateStore.lookAlikeUID
        var names = files(uid: uid)
        if lookAlike { names.lock = FileStateStore.lookAlikeLockName }
        let (lock, _) = try takeLock(directory: directory, name: names.lock)
        defer { Syscalls.close(lock) }
        if lookAlike {
            switch try storedLookAlikeKey(directory: directory) {
            case .key(let key): names = lookAlikeFiles(userName: userName, key: key)
            case .missing: return true
            case .unreadable: return false
            }
        }
        let found = try load(directory: directory, names, uid: uid, userName: userName)
        defer { if let fd = found.fd { Syscalls.close(fd) } }
        if found.status == .absent { return true }
        guard found.status == .loaded, found.record == record else { return false }
        if names.isBucket, let fd = found.fd {
            let blank = StateRecord(uid: FileStateStore.lookAlikeUID, userName: [], createdWallSeconds: 0)
            try writeInPlace(fd, RecordSlots.newFile(blank), at: names.base, durable: false)
            return true
        }
        do throws(Errno) { try Syscalls.unlink(in: directory, names.record) } catch { throw .writeFailed(error) }
        return true
    }
}
