// What the module can see of the process that loaded it, for the choice of
// how a prompt talks to the person (R16): its controlling terminal, whether
// standard input is that terminal, its threads, its own command line.
import CLibc
import LocalAuth

extension Syscalls {
    /// Whether `tty` (a PAM_TTY value such as `/dev/pts/3` or `pts/3`) is the
    /// process's controlling terminal: its device number equals `tty_nr` of
    /// /proc/self/stat (an fd opened on /dev/tty would only show /dev/tty's).
    public static func isControllingTerminal(_ tty: [UInt8]) -> Bool {
        guard !tty.isEmpty, let controlling = procSelfStatField(7), controlling != 0 else { return false }
        let path = tty.first == 0x2F ? tty : literalBytes("/dev/") + tty
        // stat, not open: opening a device node as root has side effects.
        var info = stat()
        let status = withCString(path) { pointer in fstatat(AT_FDCWD, pointer, &info, AT_SYMLINK_NOFOLLOW) }
        guard status == 0, la_s_ischr(info.st_mode) != 0 else { return false }
        return UInt64(info.st_rdev) == UInt64(controlling)
    }

    /// Whether standard input is the process's controlling terminal (not a
    /// pipe, a file, /dev/null or another terminal).
    public static func standardInputIsControllingTerminal() -> Bool {
        guard let controlling = procSelfStatField(7), controlling != 0 else { return false }
        var info = stat()
        guard fstat(0, &info) == 0, la_s_ischr(info.st_mode) != 0 else { return false }
        return UInt64(info.st_rdev) == UInt64(controlling)
    }

    /// Whether this process's group is the foreground one of the terminal
    /// on standard input (false for a job in the background, or no terminal).
    public static func standardInputIsForeground() -> Bool {
        let foreground = tcgetpgrp(0)
        return foreground > 0 && foreground == getpgrp()
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

    /// This process's arguments (argv, the program's name first), up to
    /// `limit` bytes in all; empty when they cannot be read.
    public static func ownArguments(limit: Int = 64 * 1024) -> [[UInt8]] {
        guard let fd = try? open(at: nil, literalBytes("/proc/self/cmdline"), flags: O_RDONLY) else { return [] }
        defer { close(fd) }
        guard let text = try? readAll(fd, limit: limit), !text.isEmpty else { return [] }
        var arguments = splitBytes(text[...], on: 0).map { Array($0) }
        if text.last == 0 { arguments.removeLast() }
        return arguments
    }
}

// MARK: - Programs (polkit's agent helper and its agent)
extension Syscalls {
    /// The executable of this process, as /proc/self/exe names it.
    public static func ownProgram() -> [UInt8] {
        programLink(literalBytes("/proc/self/exe"))
    }

    /// The executable of this process's parent (for polkit's agent helper,
    /// the agent that started it); empty when it cannot be read.
    public static func parentProgram() -> [UInt8] {
        programLink(Array("/proc/\(getppid())/exe".utf8))
    }

    static func programLink(_ path: [UInt8]) -> [UInt8] {
        var buffer = [CChar](repeating: 0, count: 4096)
        let length = withCString(path) { pointer in
            buffer.withUnsafeMutableBufferPointer { readlink(pointer, $0.baseAddress!, $0.count) }
        }
        guard length > 0, length < buffer.count else { return [] }
        return buffer[0..<length].map { UInt8(bitPattern: $0) }
    }
}
