
/// Why the store could not do its work. The engine refuses the attempt.
public enum StoreFailure: Error, Equatable {
    /// The state directory is missing and cannot be made, or is unsafe.
    case directoryUnusable(DirectoryProblem)
    case lockFailed(Errno)
    case writeFailed(Errno)
    /// `ulimit -f` forbids writing a record and cannot be raised.
    case fileSizeLimited
}

/// What is wrong with the state directory or the way to it.
public enum DirectoryProblem: Equatable, Sendable {
    case notAbsolute
    /// A directory on the way is a symlink, not a directory, not root's, or
    /// writable by group or others without being sticky.
    case unsafeAncestor
    case missingAncestor
    /// Missing, and its parent is writable by others (a sticky /tmp).
    case missingInWritableParent
    /// Not a directory, a symlink, not the trusted owner's, or not 0700.
    case unsafeDirectory
}

/// What the store found before handing the record over.
public enum LoadStatus: Equatable {
    case absent
    case loaded
    case damaged(RecordDamage)
}

/// Persistent attempt state, one record per uid (SPEC §7).
public protocol StateStore {
    /// Runs `body` on the user's record under that user's exclusive lock and
    /// durably writes the record back when `body` changed it. `body` gets nil
    /// for an absent or damaged record. The lock is released on return, so
    /// `body` must never wait for a person or a device.
    mutating func withRecord<Result>(uid: UInt32, userName: [UInt8],
                                     _ body: (inout StateRecord?, LoadStatus) -> Result) throws(StoreFailure) -> Result
}

/// The state store on disk: `<dir>/<uid>.rec` replaced by rename, locked
/// through `<dir>/<uid>.lock` (never the renamed file), everything opened
/// relative to the directory with O_NOFOLLOW.
public struct FileStateStore: StateStore {
    public let directoryPath: [UInt8]
    /// Owner that the directory, lock and record files must have.
    public let trustedOwner: UInt32

    public init(directoryPath: [UInt8], trustedOwner: UInt32 = 0) {
        self.directoryPath = directoryPath
        self.trustedOwner = trustedOwner
    }

    /// The uid of look-alike records for unknown user names (R14): never a
    /// real uid ((uid_t)-1 is reserved), filed by a hash of the name.
    public static let lookAlikeUID = UInt32.max

    /// The file stem of a record: the uid, or `u` and a name hash for the
    /// look-alike records of unknown names.
    func stem(uid: UInt32, userName: [UInt8]) -> String {
        guard uid == FileStateStore.lookAlikeUID else { return "\(uid)" }
        let digest = SHA256.hash(literalBytes("localauth-unknown-name") + userName)
        var text = "u"
        let digits: StaticString = "0123456789abcdef"
        for byte in digest.prefix(12) {
            text.unicodeScalars.append(Unicode.Scalar(digits.utf8Start[Int(byte >> 4)]))
            text.unicodeScalars.append(Unicode.Scalar(digits.utf8Start[Int(byte & 0x0F)]))
        }
        return text
    }
    public func recordName(uid: UInt32, userName: [UInt8] = []) -> [UInt8] { utf8Bytes(stem(uid: uid, userName: userName) + ".rec") }
    func lockName(uid: UInt32, userName: [UInt8]) -> [UInt8] { utf8Bytes(stem(uid: uid, userName: userName) + ".lock") }
    func temporaryName(uid: UInt32, userName: [UInt8]) -> [UInt8] { utf8Bytes(stem(uid: uid, userName: userName) + ".rec.tmp") }

    public mutating func withRecord<Result>(uid: UInt32, userName: [UInt8],
                                            _ body: (inout StateRecord?, LoadStatus) -> Result) throws(StoreFailure) -> Result {
        let directory = try openDirectory()
        defer { Syscalls.close(directory) }
        let (lock, lockWasOdd) = try takeLock(directory: directory, uid: uid, userName: userName)
        defer { Syscalls.close(lock) }
        var (loaded, status) = load(directory: directory, uid: uid, userName: userName)
        // Someone other than the store put a file where the lock belongs:
        // the record beside it is not to be trusted either (R12).
        if lockWasOdd, status == .loaded || status == .absent {
            loaded = nil
            status = .damaged(.unsafeLock)
        }
        var record = loaded
        let result = body(&record, status)
        if let changed = record, changed != loaded || status != .loaded {
            try write(RecordFormat.encode(changed), directory: directory, uid: uid, userName: userName)
        }
        return result
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
            guard error == .noEntry else { throw .directoryUnusable(.unsafeDirectory) }
            guard let facts = try? Syscalls.facts(parent), isTrustedAncestor(facts, allowSticky: false) else {
                throw .directoryUnusable(.missingInWritableParent)
            }
            do throws(Errno) {
                try Syscalls.makeDirectory(at: parent, last, mode: 0o700)
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

    /// Opens and locks the user's lock file. Anything else at its name (a
    /// symlink, FIFO, directory, or a file not the store's) is removed and
    /// replaced, and reported so the record is treated as damaged (R12):
    /// such a file must not refuse every prompt. After the lock is taken the
    /// name must still lead to the locked file, or the lock is taken again.
    func takeLock(directory: Int32, uid: UInt32, userName: [UInt8]) throws(StoreFailure) -> (fd: Int32, wasOdd: Bool) {
        let name = lockName(uid: uid, userName: userName)
        var wasOdd = false
        var lastError = Errno.tryAgain
        for _ in 0..<4 {
            let fd: Int32
            do {
                fd = try Syscalls.open(at: directory, name, .lockFile)
            } catch {
                lastError = error
                guard error == .symlinkLoop || error == .isDirectory || error == .noDeviceOrAddress || error == .accessDenied else {
                    throw .lockFailed(error)
                }
                wasOdd = true
                try removeOddEntry(directory: directory, name)
                continue
            }
            guard let facts = try? Syscalls.facts(fd), facts.isRegular, facts.owner == trustedOwner, facts.mode & 0o022 == 0 else {
                Syscalls.close(fd)
                wasOdd = true
                try removeOddEntry(directory: directory, name)
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

    /// Removes whatever stands at `name` in the state directory, which only
    /// root can write: a file, a symlink (never followed), a FIFO, or a
    /// directory (a non-empty one is moved aside under a name of its own).
    func removeOddEntry(directory: Int32, _ name: [UInt8]) throws(StoreFailure) {
        do throws(Errno) {
            try Syscalls.removeEntry(in: directory, name, movingNonEmptyDirectoryTo: name + literalBytes(".odd"))
        } catch {
            throw .writeFailed(error)
        }
    }

    func load(directory: Int32, uid: UInt32, userName: [UInt8]) -> (StateRecord?, LoadStatus) {
        let fd: Int32
        do {
            fd = try Syscalls.open(at: directory, recordName(uid: uid, userName: userName), .readFile)
        } catch {
            if error == .noEntry { return (nil, .absent) }
            if error == .symlinkLoop { return (nil, .damaged(.unsafeFile)) }
            return (nil, .damaged(.unreadable))
        }
        defer { Syscalls.close(fd) }
        guard let facts = try? Syscalls.facts(fd) else { return (nil, .damaged(.unreadable)) }
        guard facts.isRegular, facts.owner == trustedOwner, facts.mode & 0o022 == 0 else { return (nil, .damaged(.unsafeFile)) }
        guard facts.size == RecordFormat.size else { return (nil, .damaged(.wrongSize)) }
        guard let bytes = try? Syscalls.readAll(fd, limit: RecordFormat.size) else { return (nil, .damaged(.unreadable)) }
        switch RecordFormat.decode(bytes, uid: uid, userName: userName) {
        case .success(let record): return (record, .loaded)
        case .failure(let error): return (nil, .damaged(error.damage))
        }
    }

    /// Writes a temporary file, fsyncs it, renames it over the record and
    /// fsyncs the directory, with `RLIMIT_FSIZE` lifted for the write.
    func write(_ bytes: [UInt8], directory: Int32, uid: UInt32, userName: [UInt8]) throws(StoreFailure) {
        let saved = Syscalls.fileSizeLimit()
        if saved.soft < UInt64(bytes.count) {
            if !Syscalls.setFileSizeLimit(soft: UInt64.max, hard: UInt64.max) {
                Syscalls.setFileSizeLimit(soft: saved.hard, hard: saved.hard)
            }
            if Syscalls.fileSizeLimit().soft < UInt64(bytes.count) {
                Syscalls.setFileSizeLimit(soft: saved.soft, hard: saved.hard)
                throw .fileSizeLimited
            }
        }
        defer {
            if saved.soft < UInt64(bytes.count) { Syscalls.setFileSizeLimit(soft: saved.soft, hard: saved.hard) }
        }
        let temporary = temporaryName(uid: uid, userName: userName)
        try removeOddEntry(directory: directory, temporary)
        do throws(Errno) {
            let fd = try Syscalls.open(at: directory, temporary, .newFile)
            do throws(Errno) {
                try Syscalls.writeAll(fd, bytes)
                try Syscalls.sync(fd)
            } catch {
                Syscalls.close(fd)
                try? Syscalls.unlink(in: directory, temporary)
                throw error
            }
            Syscalls.close(fd)
            let record = recordName(uid: uid, userName: userName)
            do {
                try Syscalls.rename(in: directory, from: temporary, to: record)
            } catch {
                // A directory at the record's name cannot be renamed over.
                guard error == .isDirectory || error == .notEmpty || error == .exists else { throw error }
                try Syscalls.removeEntry(in: directory, record, movingNonEmptyDirectoryTo: record + literalBytes(".odd"))
                try Syscalls.rename(in: directory, from: temporary, to: record)
            }
            try Syscalls.sync(directory)
        } catch {
            throw .writeFailed(error)
        }
    }
}
