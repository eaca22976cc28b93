import CLocalAuth

/// Why the store could not do its work. The engine refuses the attempt.
public enum StoreFailure: Error, Equatable {
    /// The state directory is missing and cannot be made, or is unsafe.
    case directoryUnusable
    case lockFailed(Errno)
    case writeFailed(Errno)
    /// `ulimit -f` forbids writing a record and cannot be raised.
    case fileSizeLimited
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
        let lock = try takeLock(directory: directory, uid: uid, userName: userName)
        defer { Syscalls.close(lock) }
        let (loaded, status) = load(directory: directory, uid: uid, userName: userName)
        var record = loaded
        let result = body(&record, status)
        if let changed = record, changed != loaded || status != .loaded {
            try write(RecordFormat.encode(changed), directory: directory, uid: uid, userName: userName)
        }
        return result
    }

    /// Opens (creating if missing, 0700) the state directory and checks that
    /// only its owner can use it.
    func openDirectory() throws(StoreFailure) -> Int32 {
        let fd: Int32
        do {
            fd = try Syscalls.open(at: nil, directoryPath, flags: O_RDONLY | O_DIRECTORY)
        } catch {
            guard error.code == ENOENT else { throw .directoryUnusable }
            do throws(Errno) {
                try Syscalls.makeDirectory(directoryPath, mode: 0o700)
                fd = try Syscalls.open(at: nil, directoryPath, flags: O_RDONLY | O_DIRECTORY)
            } catch {
                throw .directoryUnusable
            }
        }
        // 0700: others may not even list which uids have records.
        guard let facts = try? Syscalls.facts(fd), facts.isDirectory, facts.owner == trustedOwner, facts.mode & 0o077 == 0 else {
            Syscalls.close(fd)
            throw .directoryUnusable
        }
        return fd
    }

    func takeLock(directory: Int32, uid: UInt32, userName: [UInt8]) throws(StoreFailure) -> Int32 {
        let fd: Int32
        do {
            fd = try Syscalls.open(at: directory, lockName(uid: uid, userName: userName), flags: O_RDWR | O_CREAT | O_NONBLOCK, mode: 0o600)
        } catch {
            throw .lockFailed(error)
        }
        do throws(Errno) {
            let facts = try Syscalls.facts(fd)
            guard facts.isRegular, facts.owner == trustedOwner else { throw Errno(EPERM) }
            try Syscalls.lockExclusive(fd)
        } catch {
            Syscalls.close(fd)
            throw .lockFailed(error)
        }
        return fd
    }

    func load(directory: Int32, uid: UInt32, userName: [UInt8]) -> (StateRecord?, LoadStatus) {
        let fd: Int32
        do {
            fd = try Syscalls.open(at: directory, recordName(uid: uid, userName: userName), flags: O_RDONLY | O_NONBLOCK)
        } catch {
            if error.code == ENOENT { return (nil, .absent) }
            if error.code == ELOOP { return (nil, .damaged(.unsafeFile)) }
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
        do throws(Errno) {
            try Syscalls.unlink(in: directory, temporary)
            let fd = try Syscalls.open(at: directory, temporary, flags: O_WRONLY | O_CREAT | O_EXCL, mode: 0o600)
            do throws(Errno) {
                try Syscalls.writeAll(fd, bytes)
                try Syscalls.sync(fd)
            } catch {
                Syscalls.close(fd)
                try? Syscalls.unlink(in: directory, temporary)
                throw error
            }
            Syscalls.close(fd)
            try Syscalls.rename(in: directory, from: temporary, to: recordName(uid: uid, userName: userName))
            try Syscalls.sync(directory)
        } catch {
            throw .writeFailed(error)
        }
    }
}
