import CLocalAuth

/// A failed system call's errno.
public struct Errno: Error, Equatable {
    public var code: Int32
    public init(_ code: Int32) { self.code = code }
    static var current: Errno { Errno(la_errno()) }
}

/// What `fstat` told about an open file.
public struct FileFacts: Equatable {
    public var isRegular: Bool
    public var isDirectory: Bool
    public var owner: UInt32
    public var mode: UInt32
    public var size: Int
    public var device: UInt64
    public var inode: UInt64
}

/// Every libc call of the library, in one place. Callers see Swift types and
/// typed errors; nothing else in the library imports the C module.
public enum Syscalls {
    /// Overwrites memory in a way the compiler may not elide.
    public static func wipe(_ pointer: UnsafeMutablePointer<UInt8>, count: Int) {
        explicit_bzero(pointer, count)
    }

    /// Opens a path relative to a directory descriptor (or AT_FDCWD),
    /// always with O_CLOEXEC and O_NOFOLLOW. Retries on EINTR.
    public static func open(at directory: Int32?, _ path: [UInt8], flags: Int32, mode: UInt32 = 0o600) throws(Errno) -> Int32 {
        var cPath = path
        cPath.append(0)
        let fd = cPath.withUnsafeBufferPointer { buffer -> Int32 in
            let pointer = UnsafeRawPointer(buffer.baseAddress!).assumingMemoryBound(to: CChar.self)
            while true {
                let result = la_openat(directory ?? AT_FDCWD, pointer, flags | O_CLOEXEC | O_NOFOLLOW, mode)
                if result >= 0 || la_errno() != EINTR { return result }
            }
        }
        if fd < 0 { throw Errno.current }
        return fd
    }

    public static func close(_ fd: Int32) {
        _ = CLocalAuth.close(fd)
    }

    public static func facts(_ fd: Int32) throws(Errno) -> FileFacts {
        var info = stat()
        if fstat(fd, &info) != 0 { throw Errno.current }
        return FileFacts(isRegular: la_s_isreg(info.st_mode) != 0, isDirectory: la_s_isdir(info.st_mode) != 0,
                         owner: info.st_uid, mode: info.st_mode & 0o7777, size: Int(info.st_size),
                         device: UInt64(info.st_dev), inode: UInt64(info.st_ino))
    }

    /// Takes an exclusive `flock`, waiting for it; retries on EINTR.
    public static func lockExclusive(_ fd: Int32) throws(Errno) {
        while flock(fd, LOCK_EX) != 0 {
            if la_errno() != EINTR { throw Errno.current }
        }
    }

    /// Reads up to `limit` bytes; more than `limit` available is an error (EFBIG).
    public static func readAll(_ fd: Int32, limit: Int) throws(Errno) -> [UInt8] {
        var result = [UInt8](repeating: 0, count: limit + 1)
        var total = 0
        while total <= limit {
            let got = result.withUnsafeMutableBytes { buffer in
                CLocalAuth.read(fd, buffer.baseAddress! + total, limit + 1 - total)
            }
            if got < 0 {
                if la_errno() == EINTR { continue }
                throw Errno.current
            }
            if got == 0 { break }
            total += got
        }
        if total > limit { throw Errno(EFBIG) }
        result.removeSubrange(total..<result.count)
        return result
    }

    public static func writeAll(_ fd: Int32, _ bytes: [UInt8]) throws(Errno) {
        var written = 0
        while written < bytes.count {
            let result = bytes.withUnsafeBytes { buffer in
                CLocalAuth.write(fd, buffer.baseAddress! + written, bytes.count - written)
            }
            if result < 0 {
                if la_errno() == EINTR { continue }
                throw Errno.current
            }
            if result == 0 { throw Errno(EIO) }
            written += result
        }
    }

    public static func sync(_ fd: Int32) throws(Errno) {
        if fsync(fd) != 0 { throw Errno.current }
    }

    public static func rename(in directory: Int32, from: [UInt8], to: [UInt8]) throws(Errno) {
        var cFrom = from, cTo = to
        cFrom.append(0)
        cTo.append(0)
        let result = cFrom.withUnsafeBufferPointer { fromBuffer in
            cTo.withUnsafeBufferPointer { toBuffer in
                renameat(directory, UnsafeRawPointer(fromBuffer.baseAddress!).assumingMemoryBound(to: CChar.self),
                         directory, UnsafeRawPointer(toBuffer.baseAddress!).assumingMemoryBound(to: CChar.self))
            }
        }
        if result != 0 { throw Errno.current }
    }

    /// Removes a file (not a directory) below a directory; a missing file is fine.
    public static func unlink(in directory: Int32, _ name: [UInt8]) throws(Errno) {
        var cName = name
        cName.append(0)
        let result = cName.withUnsafeBufferPointer { buffer in
            unlinkat(directory, UnsafeRawPointer(buffer.baseAddress!).assumingMemoryBound(to: CChar.self), 0)
        }
        if result != 0 && la_errno() != ENOENT { throw Errno.current }
    }

    /// What `fstatat` tells about `name` below `directory`, not following a symlink.
    public static func facts(at directory: Int32, _ name: [UInt8]) throws(Errno) -> FileFacts {
        var cName = name
        cName.append(0)
        var info = stat()
        let result = cName.withUnsafeBufferPointer { buffer in
            fstatat(directory, UnsafeRawPointer(buffer.baseAddress!).assumingMemoryBound(to: CChar.self), &info, AT_SYMLINK_NOFOLLOW)
        }
        if result != 0 { throw Errno.current }
        return FileFacts(isRegular: la_s_isreg(info.st_mode) != 0, isDirectory: la_s_isdir(info.st_mode) != 0,
                         owner: info.st_uid, mode: info.st_mode & 0o7777, size: Int(info.st_size),
                         device: UInt64(info.st_dev), inode: UInt64(info.st_ino))
    }

    /// Creates the directory `name` below `directory` with `mode`.
    public static func makeDirectory(at directory: Int32, _ name: [UInt8], mode: UInt32) throws(Errno) {
        var cName = name
        cName.append(0)
        let result = cName.withUnsafeBufferPointer { buffer in
            mkdirat(directory, UnsafeRawPointer(buffer.baseAddress!).assumingMemoryBound(to: CChar.self), mode_t(mode))
        }
        if result != 0 { throw Errno.current }
    }

    /// Removes whatever is at `name` below `directory` (never following a
    /// symlink): a file of any kind, an empty directory, or a non-empty
    /// directory moved to `aside` (replacing an earlier one of that name
    /// when that is a file or an empty directory). A missing entry is fine.
    public static func removeEntry(in directory: Int32, _ name: [UInt8], movingNonEmptyDirectoryTo aside: [UInt8]) throws(Errno) {
        var cName = name
        cName.append(0)
        let removed = cName.withUnsafeBufferPointer { buffer -> Int32 in
            let pointer = UnsafeRawPointer(buffer.baseAddress!).assumingMemoryBound(to: CChar.self)
            if unlinkat(directory, pointer, 0) == 0 { return 0 }
            guard la_errno() == EISDIR else { return -1 }
            return unlinkat(directory, pointer, AT_REMOVEDIR)
        }
        if removed == 0 || la_errno() == ENOENT { return }
        guard la_errno() == ENOTEMPTY || la_errno() == EEXIST else { throw Errno.current }
        do {
            try rename(in: directory, from: name, to: aside)
        } catch {
            guard error.code == ENOTEMPTY || error.code == EEXIST || error.code == EISDIR || error.code == ENOTDIR else { throw error }
            var cAside = aside
            cAside.append(0)
            _ = cAside.withUnsafeBufferPointer { buffer in
                unlinkat(directory, UnsafeRawPointer(buffer.baseAddress!).assumingMemoryBound(to: CChar.self), 0)
            }
            try rename(in: directory, from: name, to: aside)
        }
    }

    /// The soft file-size limit (`ulimit -f`), in bytes; nil when unlimited.
    public static func fileSizeLimit() -> (soft: UInt64, hard: UInt64) {
        var limit = rlimit()
        _ = getrlimit(__rlimit_resource_t(RLIMIT_FSIZE.rawValue), &limit)
        return (UInt64(limit.rlim_cur), UInt64(limit.rlim_max))
    }

    /// Sets the file-size limit; false when not permitted.
    @discardableResult
    public static func setFileSizeLimit(soft: UInt64, hard: UInt64) -> Bool {
        var limit = rlimit(rlim_cur: rlim_t(soft), rlim_max: rlim_t(hard))
        return setrlimit(__rlimit_resource_t(RLIMIT_FSIZE.rawValue), &limit) == 0
    }

    /// Nanoseconds on CLOCK_BOOTTIME: monotonic, counts suspend, starts at boot.
    public static func bootTimeNanoseconds() -> Int64 {
        var now = timespec()
        clock_gettime(CLOCK_BOOTTIME, &now)
        return Int64(now.tv_sec) * 1_000_000_000 + Int64(now.tv_nsec)
    }

    /// Seconds since the epoch by the wall clock: for display and R10 only.
    public static func wallSeconds() -> Int64 {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return Int64(now.tv_sec)
    }

    public static func realUserID() -> UInt32 { getuid() }
    public static func effectiveUserID() -> UInt32 { geteuid() }

    /// The user's uid and canonical name, or nil when no such user exists.
    public static func lookupUser(_ name: [UInt8]) -> (uid: UInt32, name: [UInt8])? {
        guard !name.isEmpty, name.count < 256, !name.contains(0) else { return nil }
        var cName = name
        cName.append(0)
        var entry = passwd()
        var result: UnsafeMutablePointer<passwd>? = nil
        var scratch = [CChar](repeating: 0, count: 16384)
        let status = cName.withUnsafeBufferPointer { nameBuffer in
            scratch.withUnsafeMutableBufferPointer { scratchBuffer in
                getpwnam_r(UnsafeRawPointer(nameBuffer.baseAddress!).assumingMemoryBound(to: CChar.self), &entry,
                           scratchBuffer.baseAddress!, scratchBuffer.count, &result)
            }
        }
        guard status == 0, let found = result, let foundName = found.pointee.pw_name else { return nil }
        return (found.pointee.pw_uid, bytes(ofCString: foundName))
    }

    /// The bytes of a NUL-terminated C string, at most `limit` of them.
    public static func bytes(ofCString pointer: UnsafePointer<CChar>, limit: Int = 4096) -> [UInt8] {
        let length = strnlen(pointer, limit)
        var result: [UInt8] = []
        result.reserveCapacity(length)
        pointer.withMemoryRebound(to: UInt8.self, capacity: length) { bytes in
            for index in 0..<length { result.append(bytes[index]) }
        }
        return result
    }

    /// The kernel's id of this boot (16 bytes); zeros when unreadable, which
    /// makes every wait resume in full rather than end early.
    public static func bootID() -> [UInt8] {
        var id = [UInt8](repeating: 0, count: 16)
        guard let fd = try? open(at: nil, literalBytes("/proc/sys/kernel/random/boot_id"), flags: O_RDONLY) else { return id }
        defer { close(fd) }
        guard let text = try? readAll(fd, limit: 64) else { return id }
        var nibbles: [UInt8] = []
        for byte in text {
            switch byte {
            case 0x30...0x39: nibbles.append(byte - 0x30)
            case 0x61...0x66: nibbles.append(byte - 0x61 + 10)
            default: continue
            }
        }
        guard nibbles.count == 32 else { return id }
        for index in 0..<16 { id[index] = nibbles[2 * index] << 4 | nibbles[2 * index + 1] }
        return id
    }

    /// Fills with random bytes from the kernel.
    public static func randomBytes(_ count: Int) -> [UInt8] {
        var result = [UInt8](repeating: 0, count: count)
        var filled = 0
        while filled < count {
            let got = result.withUnsafeMutableBytes { buffer in
                getrandom(buffer.baseAddress! + filled, count - filled, 0)
            }
            if got <= 0 { if la_errno() == EINTR { continue }; break }
            filled += got
        }
        return result
    }

    /// Reads a small configuration file that must be a regular file owned by
    /// root and not writable by group or others. nil with a reason otherwise.
    /// Every directory on the way must be a real directory (no symlinks)
    /// owned by root and not writable by group or others, unless sticky (as
    /// /tmp): otherwise another user could swap the file.
    public static func readTrustedFile(_ path: [UInt8], limit: Int) -> (contents: [UInt8]?, problem: String?) {
        guard path.first == 0x2F else { return (nil, "not an absolute path") }
        let parts = splitBytes(path.dropFirst(), on: 0x2F)
        guard let fileName = parts.last, !fileName.isEmpty else { return (nil, "not a file path") }
        guard var directory = try? open(at: nil, literalBytes("/"), flags: O_RDONLY | O_DIRECTORY) else { return (nil, "cannot open /") }
        defer { close(directory) }
        func trusted(_ fd: Int32) -> Bool {
            guard let facts = try? facts(fd) else { return false }
            return facts.owner == 0 && (facts.mode & 0o022 == 0 || facts.mode & 0o1000 != 0)
        }
        let untrusted = "a directory on its path is not owned by root or is writable by others"
        for part in parts.dropLast() {
            guard trusted(directory) else { return (nil, untrusted) }
            let next: Int32
            do {
                next = try open(at: directory, Array(part), flags: O_RDONLY | O_DIRECTORY)
            } catch {
                if error.code == ENOENT { return (nil, nil) }
                return (nil, error.code == ELOOP || error.code == ENOTDIR ? "a directory on its path is a symbolic link or not a directory"
                                                                           : "cannot open a directory on its path (errno \(error.code))")
            }
            close(directory)
            directory = next
        }
        guard trusted(directory) else { return (nil, untrusted) }
        let fd: Int32
        do {
            fd = try open(at: directory, Array(fileName), flags: O_RDONLY | O_NONBLOCK)
        } catch {
            if error.code == ENOENT { return (nil, nil) }
            return (nil, "cannot open (errno \(error.code))")
        }
        defer { close(fd) }
        guard let facts = try? facts(fd) else { return (nil, "cannot stat") }
        guard facts.isRegular else { return (nil, "not a regular file") }
        guard facts.owner == 0, facts.mode & 0o022 == 0 else { return (nil, "not owned by root or writable by group/others") }
        guard facts.size <= limit else { return (nil, "larger than \(limit) bytes") }
        do {
            return (try readAll(fd, limit: limit), nil)
        } catch {
            return (nil, "cannot read (errno \(error.code))")
        }
    }
}

// MARK: - Facts about the caller, for scope (R1) and interaction mode (R16)
extension Syscalls {
    /// This machine's host name.
    public static func hostName() -> [UInt8] {
        var buffer = [CChar](repeating: 0, count: 256)
        let ok = buffer.withUnsafeMutableBufferPointer { gethostname($0.baseAddress!, 255) == 0 }
        guard ok else { return [] }
        return buffer.withUnsafeBufferPointer { bytes(ofCString: $0.baseAddress!, limit: 255) }
    }

    /// Whether `tty` (a PAM_TTY value such as `/dev/pts/3` or `pts/3`) is the
    /// process's controlling terminal: its device number equals `tty_nr` of
    /// /proc/self/stat (an fd opened on /dev/tty would only show /dev/tty's).
    public static func isControllingTerminal(_ tty: [UInt8]) -> Bool {
        guard !tty.isEmpty, let controlling = procSelfStatField(7), controlling != 0 else { return false }
        var path = tty.first == 0x2F ? tty : literalBytes("/dev/") + tty
        path.append(0)
        // stat, not open: opening a device node as root has side effects.
        var info = stat()
        let status = path.withUnsafeBufferPointer { buffer in
            fstatat(AT_FDCWD, UnsafeRawPointer(buffer.baseAddress!).assumingMemoryBound(to: CChar.self), &info, AT_SYMLINK_NOFOLLOW)
        }
        guard status == 0, la_s_ischr(info.st_mode) != 0 else { return false }
        return UInt64(info.st_rdev) == UInt64(controlling)
    }

    /// A numeric field of /proc/self/stat, numbered as in proc(5).
    static func procSelfStatField(_ number: Int) -> Int? {
        guard number >= 3, let fd = try? open(at: nil, literalBytes("/proc/self/stat"), flags: O_RDONLY) else { return nil }
        defer { close(fd) }
        // The command name (field 2) may hold spaces; fields resume after its ")".
        guard let text = try? readAll(fd, limit: 4096), let closing = text.lastIndex(of: 0x29), closing + 2 < text.count else { return nil }
        let fields = splitBytes(text[(closing + 2)...], on: 0x20)
        guard fields.count > number - 3 else { return nil }
        return parseDecimal(trimmedSpaces(fields[number - 3]), limit: Int(Int32.max))
    }

    /// The number of threads of this process (field 20 of /proc/self/stat).
    public static func threadCount() -> Int {
        procSelfStatField(20) ?? 0
    }
}

// MARK: - Directories
extension Syscalls {
    /// The entries of a directory below `directory` (or an absolute path),
    /// without `.` and `..`, sorted bytewise, with whether each is a
    /// directory; nil when it cannot be opened as a directory (symlinks are
    /// not followed).
    public static func directoryEntries(at directory: Int32?, _ path: [UInt8], limit: Int = 256) -> [(name: [UInt8], isDirectory: Bool)]? {
        guard let fd = try? open(at: directory, path, flags: O_RDONLY | O_DIRECTORY) else { return nil }
        guard let stream = fdopendir(fd) else {
            close(fd)
            return nil
        }
        defer { closedir(stream) }
        var entries: [(name: [UInt8], isDirectory: Bool)] = []
        while entries.count < limit, let entry = readdir(stream) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                bytes(ofCString: raw.baseAddress!.assumingMemoryBound(to: CChar.self), limit: 255)
            }
            if name.isEmpty || bytesEqual(name, ".") || bytesEqual(name, "..") { continue }
            entries.append((name, entry.pointee.d_type == UInt8(DT_DIR)))
        }
        entries.sort { $0.name.lexicographicallyPrecedes($1.name) }
        return entries
    }

    /// Reads a regular file below `directory`, up to `limit` bytes; nil otherwise.
    public static func readRegularFile(at directory: Int32?, _ path: [UInt8], limit: Int) -> [UInt8]? {
        guard let fd = try? open(at: directory, path, flags: O_RDONLY | O_NONBLOCK) else { return nil }
        defer { close(fd) }
        guard let facts = try? facts(fd), facts.isRegular, facts.size <= limit else { return nil }
        return try? readAll(fd, limit: limit)
    }
}

// MARK: - Users by uid, the terminal (for the command-line tool)
extension Syscalls {
    /// The name of the user with `uid`, nil when there is none.
    public static func userName(uid: UInt32) -> [UInt8]? {
        var entry = passwd()
        var result: UnsafeMutablePointer<passwd>? = nil
        var scratch = [CChar](repeating: 0, count: 16384)
        let status = scratch.withUnsafeMutableBufferPointer { getpwuid_r(uid, &entry, $0.baseAddress!, $0.count, &result) }
        guard status == 0, let found = result, let name = found.pointee.pw_name else { return nil }
        return bytes(ofCString: name)
    }

    /// The path of the terminal on standard input, empty when it is not one.
    public static func standardInputTerminal() -> [UInt8] {
        guard isatty(0) == 1, let name = ttyname(0) else { return [] }
        return bytes(ofCString: name, limit: 256)
    }

    /// Reads one line from the controlling terminal with echo and signals
    /// off (Ctrl-C arrives as a byte and cancels), straight into `secret`.
    /// nil when there is no terminal; false on cancel or end of input.
    public static func readSecretFromTerminal(prompt: String, into secret: SecretBuffer) -> Bool? {
        guard let fd = try? open(at: nil, literalBytes("/dev/tty"), flags: O_RDWR | O_NOCTTY) else { return nil }
        defer { close(fd) }
        var saved = termios()
        guard tcgetattr(fd, &saved) == 0 else { return nil }
        var quiet = saved
        quiet.c_lflag &= ~tcflag_t(ECHO | ISIG)
        _ = tcsetattr(fd, TCSAFLUSH, &quiet)
        defer {
            _ = tcsetattr(fd, TCSAFLUSH, &saved)
            try? writeAll(fd, [0x0A])
        }
        try? writeAll(fd, utf8Bytes(prompt))
        let buffer = UnsafeMutablePointer<UInt8>.allocate(capacity: SecretBuffer.capacity + 1)
        defer {
            wipe(buffer, count: SecretBuffer.capacity + 1)
            buffer.deallocate()
        }
        var count = 0
        while true {
            var byte: UInt8 = 0
            let got = CLocalAuth.read(fd, &byte, 1)
            if got < 0 && la_errno() == EINTR { continue }
            if got <= 0 || byte == 0x03 || byte == 0x04 { return false }
            if byte == 0x0A || byte == 0x0D { break }
            if count <= SecretBuffer.capacity { buffer[count] = byte }
            count += 1
            byte = 0
        }
        secret.assign(from: buffer, length: count)
        return true
    }
}

/// Seconds since the epoch as `2026-11-29T18:01:02Z` (UTC), without Foundation.
public func utcTimestamp(_ seconds: Int64) -> String {
    let days = seconds >= 0 ? seconds / 86_400 : (seconds - 86_399) / 86_400
    let secondOfDay = seconds - days * 86_400
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468
    let era = (z >= 0 ? z : z - 146_096) / 146_097
    let dayOfEra = z - era * 146_097
    let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
    let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
    let monthIndex = (5 * dayOfYear + 2) / 153
    let day = dayOfYear - (153 * monthIndex + 2) / 5 + 1
    let month = monthIndex < 10 ? monthIndex + 3 : monthIndex - 9
    let year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
    func two(_ value: Int64) -> String { value < 10 ? "0\(value)" : "\(value)" }
    return "\(year)-\(two(month))-\(two(day))T\(two(secondOfDay / 3600)):\(two(secondOfDay % 3600 / 60)):\(two(secondOfDay % 60))Z"
}

extension Syscalls {
    /// Flushes stdio and ends the process (the command-line tool only).
    public static func exitProcess(_ code: Int32) -> Never {
        exit(code)
    }
}

extension Syscalls {
    /// The current working directory (the command-line tool only).
    public static func currentDirectory() -> [UInt8]? {
        var buffer = [CChar](repeating: 0, count: 4096)
        return buffer.withUnsafeMutableBufferPointer { pointer -> [UInt8]? in
            guard getcwd(pointer.baseAddress!, pointer.count) != nil else { return nil }
            return bytes(ofCString: pointer.baseAddress!, limit: 4096)
        }
    }
}
