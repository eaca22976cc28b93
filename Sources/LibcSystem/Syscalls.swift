// The system layer's core calls, each wrapped once with one rule for EINTR:
// errno, files, locks, directories and the caller's facts. The other calls
// of the layer live beside it by role (DESIGN's layout lists the files).
import CLibc
import LocalAuth

extension Errno {
    static var current: Errno { Errno(la_errno()) }
    /// The system's message and the number: "No space left on device (errno 28)".
    public var text: String { Syscalls.errorMessage(code) + " (errno " + String(code) + ")" }
    /// ENOTCONN: what a closed bus connection reports.
    public static var notConnected: Errno { Errno(ENOTCONN) }
    public static var noEntry: Errno { Errno(ENOENT) }
    public static var symlinkLoop: Errno { Errno(ELOOP) }
    public static var notDirectory: Errno { Errno(ENOTDIR) }
    public static var isDirectory: Errno { Errno(EISDIR) }
    public static var noDeviceOrAddress: Errno { Errno(ENXIO) }
    public static var accessDenied: Errno { Errno(EACCES) }
    public static var notPermitted: Errno { Errno(EPERM) }
    public static var tryAgain: Errno { Errno(EAGAIN) }
    public static var stale: Errno { Errno(ESTALE) }
    public static var notEmpty: Errno { Errno(ENOTEMPTY) }
    public static var exists: Errno { Errno(EEXIST) }
    public static var fileTooLarge: Errno { Errno(EFBIG) }

    /// The filesystem (or the owner's quota) has no room for a new file.
    public var isNoRoom: Bool { code == ENOSPC || code == EDQUOT }

    /// The system ran short of something (descriptors, memory) or was
    /// interrupted: a failure of the moment, which says nothing about the
    /// file being opened or read.
    public var isShortage: Bool {
        code == EMFILE || code == ENFILE || code == ENOMEM || code == EAGAIN || code == EINTR || code == ENOBUFS
    }
}

/// How a file is opened. Every mode adds O_CLOEXEC and O_NOFOLLOW.
public enum OpenMode {
    /// A directory, to read or to open files below it.
    case directory
    /// A file to read; never blocks on a FIFO.
    case readFile
    /// A lock file, made (0600) when missing; never blocks on a FIFO.
    case lockFile
    /// A new file to write (0600); fails when the name exists.
    case newFile
    /// An existing record, read and written in place; never blocks on a FIFO.
    case updateFile
    /// A terminal, read and written, never made the controlling one.
    case terminal

    var flags: Int32 {
        switch self {
        case .directory: return O_RDONLY | O_DIRECTORY
        case .readFile: return O_RDONLY | O_NONBLOCK
        case .lockFile: return O_RDWR | O_CREAT | O_NONBLOCK
        case .newFile: return O_WRONLY | O_CREAT | O_EXCL
        case .updateFile: return O_RDWR | O_NONBLOCK
        case .terminal: return O_RDWR | O_NOCTTY
        }
    }
}

/// One descriptor to wait on with `Syscalls.poll`.
public struct PollRequest: Equatable {
    public var fd: Int32
    public var events: Int16
    public init(fd: Int32, events: Int16) {
        self.fd = fd
        self.events = events
    }
    /// Readable data.
    public static var readable: Int16 { Int16(POLLIN) }
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
    /// How many names the file has.
    public var links: UInt64

    /// A file as the stores make their own: regular, `owner`'s, closed to
    /// group and others, with no other name, and of a size in `sizes`.
    public func isPrivateFile(of owner: UInt32, sizes: ClosedRange<Int>) -> Bool {
        isRegular && self.owner == owner && mode & 0o077 == 0 && links == 1 && sizes.contains(size)
    }
}

/// The libc calls of the system layer, each wrapped once (this file and its
/// extensions beside it). Callers see Swift types and typed errors.
public enum Syscalls {
    /// The one rule for EINTR: a call a signal interrupted before it did
    /// anything is made again; any other result is returned (with errno
    /// still set when it is negative).
    @inline(__always)
    static func retryingInterrupted<Result: BinaryInteger>(_ call: () -> Result) -> Result {
        while true {
            let result = call()
            if result >= 0 || la_errno() != EINTR { return result }
        }
    }

    /// Overwrites memory in a way the compiler may not elide.
    public static func wipe(_ pointer: UnsafeMutablePointer<UInt8>, count: Int) {
        explicit_bzero(pointer, count)
    }

    /// The system's message for an errno (glibc's strerror returns a
    /// static string for every code, and a generic one for unknown codes).
    public static func errorMessage(_ code: Int32) -> String {
        guard let text = strerror(code) else { return "" }
        return String(cString: text)
    }

    /// Opens a path relative to a directory descriptor (or AT_FDCWD),
    /// always with O_CLOEXEC and O_NOFOLLOW. Retries on EINTR.
    public static func open(at directory: Int32?, _ path: [UInt8], _ how: OpenMode) throws(Errno) -> Int32 {
        try open(at: directory, path, flags: how.flags, mode: 0o600)
    }

    static func open(at directory: Int32?, _ path: [UInt8], flags: Int32, mode: UInt32 = 0o600, followLinks: Bool = false) throws(Errno) -> Int32 {
        let fd = withCString(path) { pointer -> Int32 in
            retryingInterrupted { la_openat(directory ?? AT_FDCWD, pointer, flags | O_CLOEXEC | (followLinks ? 0 : O_NOFOLLOW), mode) }
        }
        if fd < 0 { throw Errno.current }
        return fd
    }

    public static func close(_ fd: Int32) {
        _ = CLibc.close(fd)
    }

    public static func facts(_ fd: Int32) throws(Errno) -> FileFacts {
        var info = stat()
        if fstat(fd, &info) != 0 { throw Errno.current }
        return FileFacts(isRegular: la_s_isreg(info.st_mode) != 0, isDirectory: la_s_isdir(info.st_mode) != 0,
                         owner: info.st_uid, mode: info.st_mode & 0o7777, size: Int(info.st_size),
                         device: UInt64(info.st_dev), inode: UInt64(info.st_ino), links: UInt64(info.st_nlink))
    }

    /// Takes an exclusive `flock`, waiting for it; retries on EINTR.
    public static func lockExclusive(_ fd: Int32) throws(Errno) {
        if retryingInterrupted({ flock(fd, LOCK_EX) }) != 0 { throw Errno.current }
    }

    /// Takes an exclusive `flock` if it is free; false when another holds it.
    public static func tryLockExclusive(_ fd: Int32) throws(Errno) -> Bool {
        guard retryingInterrupted({ flock(fd, LOCK_EX | LOCK_NB) }) != 0 else { return true }
        if la_errno() == EWOULDBLOCK { return false }
        throw Errno.current
    }

    /// Takes a lock on the one byte at `offset` of `fd`'s file if it is free
    /// (an open-file-description lock: held while this descriptor is open,
    /// by nobody else); false when another holds it. No byte need exist.
    public static func tryLockByte(_ fd: Int32, at offset: Int64) throws(Errno) -> Bool {
        guard retryingInterrupted({ la_try_lock_byte(fd, offset) }) != 0 else { return true }
        if la_errno() == EAGAIN || la_errno() == EACCES { return false }
        throw Errno.current
    }

    /// Sleeps; a signal may end it early.
    public static func sleep(milliseconds: Int) {
        sleep(nanoseconds: Int64(milliseconds) * 1_000_000)
    }

    /// The same, to the nanosecond (a signal may end it early).
    public static func sleep(nanoseconds: Int64) {
        var request = timespec(tv_sec: Int(nanoseconds / 1_000_000_000), tv_nsec: Int(nanoseconds % 1_000_000_000))
        _ = nanosleep(&request, nil)
    }

    /// Releases a `flock`.
    public static func unlock(_ fd: Int32) {
        _ = flock(fd, LOCK_UN)
    }

    /// Bytes from the kernel's random source (getrandom, which waits until it
    /// is seeded); retries on EINTR; nil when the source fails, never a
    /// partly filled buffer.
    public static func randomBytes(_ count: Int) -> [UInt8]? {
        var result = [UInt8](repeating: 0, count: count)
        var filled = 0
        while filled < count {
            let got = retryingInterrupted { result.withUnsafeMutableBytes { buffer in getrandom(buffer.baseAddress! + filled, count - filled, 0) } }
            if got < 0 { return nil }
            filled += got
        }
        return result
    }

    /// Reads up to `limit` bytes; more than `limit` available is an error (EFBIG).
    public static func readAll(_ fd: Int32, limit: Int) throws(Errno) -> [UInt8] {
        var result = [UInt8](repeating: 0, count: limit + 1)
        var total = 0
        while total <= limit {
            let got = retryingInterrupted { result.withUnsafeMutableBytes { buffer in CLibc.read(fd, buffer.baseAddress! + total, limit + 1 - total) } }
            if got < 0 { throw Errno.current }
            if got == 0 { break }
            total += got
        }
        if total > limit { throw Errno(EFBIG) }
        result.removeSubrange(total..<result.count)
        return result
    }

    /// The next bytes of `fd`, at most `count`; empty at the end.
    public static func readChunk(_ fd: Int32, count: Int) throws(Errno) -> [UInt8] {
        var result = [UInt8](repeating: 0, count: count)
        let got = retryingInterrupted { result.withUnsafeMutableBytes { buffer in CLibc.read(fd, buffer.baseAddress!, count) } }
        if got < 0 { throw Errno.current }
        result.removeSubrange(got..<count)
        return result
    }

    /// Reads exactly `count` bytes at `offset` (EIO when the file ends
    /// first), leaving the file offset alone.
    public static func read(_ fd: Int32, count: Int, at offset: Int) throws(Errno) -> [UInt8] {
        var result = [UInt8](repeating: 0, count: count)
        var total = 0
        while total < count {
            let got = retryingInterrupted {
                result.withUnsafeMutableBytes { buffer in CLibc.pread(fd, buffer.baseAddress! + total, count - total, off_t(offset + total)) }
            }
            if got < 0 { throw Errno.current }
            if got == 0 { throw Errno(EIO) }
            total += got
        }
        return result
    }

    public static func writeAll(_ fd: Int32, _ bytes: [UInt8]) throws(Errno) {
        var written = 0
        while written < bytes.count {
            let result = retryingInterrupted { bytes.withUnsafeBytes { buffer in CLibc.write(fd, buffer.baseAddress! + written, bytes.count - written) } }
            if result < 0 { throw Errno.current }
            if result == 0 { throw Errno(EIO) }
            written += result
        }
    }

    /// Writes all of `bytes` at `offset`, leaving the file offset alone.
    public static func writeAll(_ fd: Int32, _ bytes: [UInt8], at offset: Int) throws(Errno) {
        var written = 0
        while written < bytes.count {
            let result = retryingInterrupted {
                bytes.withUnsafeBytes { buffer in CLibc.pwrite(fd, buffer.baseAddress! + written, bytes.count - written, off_t(offset + written)) }
            }
            if result < 0 { throw Errno.current }
            if result == 0 { throw Errno(EIO) }
            written += result
        }
    }

    public static func sync(_ fd: Int32) throws(Errno) {
        if fsync(fd) != 0 { throw Errno.current }
    }

    /// The file's data on disk (and the metadata needed to read it back).
    public static func syncData(_ fd: Int32) throws(Errno) {
        if fdatasync(fd) != 0 { throw Errno.current }
    }

    public static func rename(in directory: Int32, from: [UInt8], to: [UInt8]) throws(Errno) {
        let result = withCStrings(from, to) { renameat(directory, $0, directory, $1) }
        if result != 0 { throw Errno.current }
    }

    /// Renames `from` to `to` in one directory only when `to` does not
    /// exist (EEXIST otherwise), in one step.
    public static func renameWithoutReplacing(in directory: Int32, from: [UInt8], to: [UInt8]) throws(Errno) {
        let result = withCStrings(from, to) { la_rename_noreplace(directory, $0, $1) }
        if result != 0 { throw Errno.current }
    }

    /// Removes a file (not a directory) below a directory; a missing file is fine.
    public static func unlink(in directory: Int32, _ name: [UInt8]) throws(Errno) {
        let result = withCString(name) { pointer in
            unlinkat(directory, pointer, 0)
        }
        if result != 0 && la_errno() != ENOENT { throw Errno.current }
    }

    /// What `fstatat` tells about `name` below `directory`, not following a symlink.
    public static func facts(at directory: Int32, _ name: [UInt8]) throws(Errno) -> FileFacts {
        var info = stat()
        let result = withCString(name) { pointer in fstatat(directory, pointer, &info, AT_SYMLINK_NOFOLLOW) }
        if result != 0 { throw Errno.current }
        return FileFacts(isRegular: la_s_isreg(info.st_mode) != 0, isDirectory: la_s_isdir(info.st_mode) != 0,
                         owner: info.st_uid, mode: info.st_mode & 0o7777, size: Int(info.st_size),
                         device: UInt64(info.st_dev), inode: UInt64(info.st_ino), links: UInt64(info.st_nlink))
    }

    /// Whether `path` (links followed) is a TPM's character device: the
    /// kernel's class of its device number (`/sys/dev/char/MAJ:MIN`) is
    /// `tpm` or `tpmrm`. Never a file, a socket or a terminal, whoever made
    /// the path (Debian's udev rule gives the TPM's node to the group tss).
    public static func isTPMDevice(_ path: [UInt8]) -> Bool {
        var info = stat()
        guard withCString(path, { pointer in fstatat(AT_FDCWD, pointer, &info, 0) }) == 0, la_s_ischr(info.st_mode) != 0 else {
            return false
        }
        let device = UInt64(info.st_rdev)
        let subsystem = programLink(utf8Bytes("/sys/dev/char/\(la_major(device)):\(la_minor(device))/subsystem"))
        let name = subsystem.split(separator: 0x2F).last.map { Array($0) } ?? []
        return bytesEqual(name, "tpm") || bytesEqual(name, "tpmrm")
    }

    /// The lowest port an unprivileged process may listen on
    /// (`net.ipv4.ip_unprivileged_port_start`, 1024 unless lowered, as
    /// containers often do); nil when it cannot be read.
    public static func unprivilegedPortStart() -> Int? {
        guard let bytes = readRegularFile(at: nil, literalBytes("/proc/sys/net/ipv4/ip_unprivileged_port_start"), limit: 16) else {
            return nil
        }
        return parseDecimal(trimmedSpaces(bytes.prefix { $0 != 0x0A }[...]), limit: 65_536)
    }

    /// Creates the directory `name` below `directory` with `mode`.
    public static func makeDirectory(at directory: Int32, _ name: [UInt8], mode: UInt32) throws(Errno) {
        let result = withCString(name) { pointer in
            mkdirat(directory, pointer, mode_t(mode))
        }
        if result != 0 { throw Errno.current }
    }

    /// Removes whatever is at `name` below `directory` (never following a
    /// symlink): a file of any kind, an empty directory, or a non-empty
    /// directory moved to `aside` (replacing an earlier one of that name
    /// when that is a file or an empty directory). A missing entry is fine.
    public static func removeEntry(in directory: Int32, _ name: [UInt8], movingNonEmptyDirectoryTo aside: [UInt8]) throws(Errno) {
        let removed = withCString(name) { pointer -> Int32 in
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
            _ = withCString(aside) { pointer in
                unlinkat(directory, pointer, 0)
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
    public static func realGroupID() -> UInt32 { getgid() }
    public static func effectiveUserID() -> UInt32 { geteuid() }

    /// The user's uid and canonical name, or nil when no such user exists.
    public static func lookupUser(_ name: [UInt8]) -> (uid: UInt32, name: [UInt8])? {
        guard !name.isEmpty, name.count < 256, !name.contains(0) else { return nil }
        var entry = passwd()
        var result: UnsafeMutablePointer<passwd>? = nil
        var scratch = [CChar](repeating: 0, count: 16384)
        let status = withCString(name) { cName in
            scratch.withUnsafeMutableBufferPointer { scratchBuffer in
                getpwnam_r(cName, &entry, scratchBuffer.baseAddress!, scratchBuffer.count, &result)
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
            let name = entryName(entry)
            if name.isEmpty || bytesEqual(name, ".") || bytesEqual(name, "..") { continue }
            entries.append((name, entry.pointee.d_type == UInt8(DT_DIR)))
        }
        entries.sort { $0.name.lexicographicallyPrecedes($1.name) }
        return entries
    }

    /// A directory entry's name, read where readdir put it, up to its NUL.
    /// (A copy of the whole `d_name` field would read 256 bytes, past the
    /// end of a short entry that ends readdir's buffer.)
    public static func entryName(_ entry: UnsafeMutablePointer<dirent>) -> [UInt8] {
        bytes(ofCString: la_dirent_name(entry), limit: 255)
    }

    /// Reads a regular file below `directory`, up to `limit` bytes; nil otherwise.
    public static func readRegularFile(at directory: Int32?, _ path: [UInt8], limit: Int) -> [UInt8]? {
        guard let fd = try? open(at: directory, path, flags: O_RDONLY | O_NONBLOCK) else { return nil }
        defer { close(fd) }
        guard let facts = try? facts(fd), facts.isRegular, facts.size <= limit else { return nil }
        return try? readAll(fd, limit: limit)
    }
}

/// A file as another program reading it through symbolic links finds it.
public enum FileRead {
    case bytes([UInt8])
    /// There, but not a regular file (a directory, a device).
    case notRegular
    case tooLarge
    /// Not there: no such file, a directory on the way missing, or a loop of
    /// symbolic links (what makes any opener fail alike).
    case missing
    /// There may be a file, but this process could not open it.
    case cannotOpen
}

extension Syscalls {
    /// Reads `path` through symbolic links, as libpam opens its files: only
    /// for files read to be judged, never for files trusted.
    public static func readFollowingLinks(_ path: [UInt8], limit: Int) -> FileRead {
        let fd: Int32
        do {
            fd = try open(at: nil, path, flags: O_RDONLY | O_NONBLOCK, followLinks: true)
        } catch {
            return error == .noEntry || error == .notDirectory || error == .symlinkLoop ? .missing : .cannotOpen
        }
        defer { close(fd) }
        guard let facts = try? facts(fd) else { return .cannotOpen }
        guard facts.isRegular else { return .notRegular }
        guard facts.size <= limit, let bytes = try? readAll(fd, limit: limit) else { return .tooLarge }
        return .bytes(bytes)
    }
}
