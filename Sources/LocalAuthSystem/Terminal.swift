// System calls for the command-line tool and the app library: users by
// uid and the terminal (echo, keys, the controlling terminal).
import CLibc
import LocalAuth

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

    /// The controlling terminal, opened for reading and writing; nil without one.
    public static func openControllingTerminal() -> Int32? {
        try? open(at: nil, literalBytes("/dev/tty"), flags: O_RDWR | O_NOCTTY)
    }

    /// Turns echo and signal characters off on a terminal (Ctrl-C then
    /// arrives as a byte) and line editing on (Backspace edits the
    /// password, whatever mode the terminal was in); returns what to
    /// restore, nil when not a terminal.
    public static func quietTerminal(_ fd: Int32) -> TerminalSettings? {
        var saved = termios()
        guard tcgetattr(fd, &saved) == 0 else { return nil }
        var quiet = saved
        quiet.c_lflag &= ~tcflag_t(ECHO | ISIG)
        quiet.c_lflag |= tcflag_t(ICANON)
        _ = tcsetattr(fd, TCSAFLUSH, &quiet)
        return TerminalSettings(saved: saved)
    }

    /// Turns echo, signal characters and line editing off (each key
    /// arrives as it is pressed); returns what to restore.
    public static func keyTerminal(_ fd: Int32) -> TerminalSettings? {
        var saved = termios()
        guard tcgetattr(fd, &saved) == 0 else { return nil }
        var keys = saved
        keys.c_lflag &= ~tcflag_t(ECHO | ISIG | ICANON)
        withUnsafeMutableBytes(of: &keys.c_cc) { cc in
            cc[Int(VMIN)] = 1
            cc[Int(VTIME)] = 0
        }
        _ = tcsetattr(fd, TCSANOW, &keys)
        return TerminalSettings(saved: saved)
    }

    /// Puts a terminal changed by `keyTerminal` back to line editing, still
    /// without echo or signal characters (for a password).
    public static func lineTerminal(_ fd: Int32, from settings: TerminalSettings) {
        var line = settings.saved
        line.c_lflag &= ~tcflag_t(ECHO | ISIG)
        line.c_lflag |= tcflag_t(ICANON)
        _ = tcsetattr(fd, TCSANOW, &line)
    }

    public static func restoreTerminal(_ fd: Int32, _ settings: TerminalSettings) {
        var saved = settings.saved
        _ = tcsetattr(fd, TCSAFLUSH, &saved)
    }

    /// Makes writes (and reads) on `fd` return at once instead of waiting.
    public static func setNonBlocking(_ fd: Int32) {
        let flags = la_fcntl_getfl(fd)
        if flags >= 0 { _ = la_fcntl_setfl(fd, flags | O_NONBLOCK) }
    }

    /// Runs `body` with this thread at the lowest real-time priority where
    /// the process may (root), so that no ordinary process — the bus daemon
    /// that the first of two sends wakes, or a busy machine's load — takes
    /// the processor between two sends that must leave close together.
    /// `body` must be short and never wait. The former scheduling is
    /// restored before returning; without the privilege `body` simply runs.
    public static func withUrgentScheduling<R>(_ body: () -> R) -> R {
        var former = sched_param()
        let policy = la_urgent_scheduling(&former)
        let result = body()
        la_restore_scheduling(policy, &former)
        return result
    }

    /// A pipe (read end, write end), both close-on-exec.
    public static func pipe() -> (read: Int32, write: Int32)? {
        var fds: [Int32] = [-1, -1]
        guard fds.withUnsafeMutableBufferPointer({ la_pipe_cloexec($0.baseAddress!) }) == 0 else { return nil }
        return (fds[0], fds[1])
    }

    /// One byte from `fd`; nil at end of input or on an error other than EINTR.
    public static func readByte(_ fd: Int32) -> UInt8? {
        var byte: UInt8 = 0
        return retryingInterrupted { CLibc.read(fd, &byte, 1) } == 1 ? byte : nil
    }
}

/// A terminal's settings before `Syscalls.quietTerminal` changed them.
public struct TerminalSettings {
    fileprivate let saved: termios
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
