// The terminal, for the two programs that talk to a person on one: the
// `localauth` command and the app library's terminal presenter. Neither the
// module nor the setuid helper links this (they reach the terminal only
// through the PAM conversation and the helper's frames).
import CLibc
import LibcSystem

/// A terminal's settings before `Terminal` changed them, to put back.
public struct TerminalSettings {
    fileprivate let saved: termios
}

/// Echo, keys and line editing on a terminal, and which terminal is ours.
public enum Terminal {
    /// The path of the terminal on standard input, empty when it is not one.
    public static func onStandardInput() -> [UInt8] {
        guard isatty(0) == 1, let name = ttyname(0) else { return [] }
        return Syscalls.bytes(ofCString: name, limit: 256)
    }

    /// Whether standard input is a terminal.
    public static var standardInputIsTerminal: Bool { isatty(0) == 1 }

    /// The controlling terminal, opened for reading and writing; nil without one.
    public static func openControlling() -> Int32? {
        try? Syscalls.open(at: nil, Array("/dev/tty".utf8), .terminal)
    }

    /// Turns echo and signal characters off (Ctrl-C then arrives as a byte)
    /// and line editing on (Backspace edits the password, whatever mode the
    /// terminal was in); returns what to restore, nil when not a terminal.
    public static func quiet(_ fd: Int32) -> TerminalSettings? {
        change(fd, when: TCSAFLUSH) { settings in
            settings.c_lflag &= ~tcflag_t(ECHO | ISIG)
            settings.c_lflag |= tcflag_t(ICANON)
        }
    }

    /// Turns echo, signal characters and line editing off (each key arrives
    /// as it is pressed); returns what to restore, nil when not a terminal.
    public static func keys(_ fd: Int32) -> TerminalSettings? {
        change(fd, when: TCSANOW) { settings in
            settings.c_lflag &= ~tcflag_t(ECHO | ISIG | ICANON)
            withUnsafeMutableBytes(of: &settings.c_cc) { cc in
                cc[Int(VMIN)] = 1
                cc[Int(VTIME)] = 0
            }
        }
    }

    /// Puts a terminal changed by `keys` back to line editing, still without
    /// echo or signal characters (for a password).
    public static func line(_ fd: Int32, from settings: TerminalSettings) {
        var line = settings.saved
        line.c_lflag &= ~tcflag_t(ECHO | ISIG)
        line.c_lflag |= tcflag_t(ICANON)
        _ = tcsetattr(fd, TCSANOW, &line)
    }

    /// Puts back what `quiet` or `keys` changed.
    public static func restore(_ fd: Int32, _ settings: TerminalSettings) {
        var saved = settings.saved
        _ = tcsetattr(fd, TCSAFLUSH, &saved)
    }

    /// Reads the settings, changes a copy with `edit` and applies it.
    private static func change(_ fd: Int32, when: Int32, _ edit: (inout termios) -> Void) -> TerminalSettings? {
        var saved = termios()
        guard tcgetattr(fd, &saved) == 0 else { return nil }
        var changed = saved
        edit(&changed)
        _ = tcsetattr(fd, when, &changed)
        return TerminalSettings(saved: saved)
    }
}
