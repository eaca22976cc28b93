// R16's choice of how a prompt talks to the person, from what the module
// can see of its caller. Pure: the adapter reads the facts (the controlling
// terminal, standard input, the threads, the caller's command line), the
// rule lives here and is table-tested.

/// What a root caller's process shows of who will answer its conversation.
public struct CallerFacts: Equatable {
    /// PAM_TTY names the process's controlling terminal.
    public var ownsItsTerminal: Bool
    /// Standard input is that terminal: a person types there, not a pipe,
    /// a file or /dev/null.
    public var readsItsTerminal: Bool
    /// The process's group is the terminal's foreground one (not a job
    /// sent to the background).
    public var inForeground: Bool
    /// The number of threads of the process.
    public var threads: Int
    /// The caller was told to take the password from elsewhere than the
    /// person at the terminal: sudo's `-A` (an askpass program) or `-S`
    /// (standard input).
    public var passwordFromElsewhere: Bool

    public init(ownsItsTerminal: Bool, readsItsTerminal: Bool, inForeground: Bool = true, threads: Int,
                passwordFromElsewhere: Bool = false) {
        self.ownsItsTerminal = ownsItsTerminal
        self.readsItsTerminal = readsItsTerminal
        self.inForeground = inForeground
        self.threads = threads
        self.passwordFromElsewhere = passwordFromElsewhere
    }

    /// A person at the caller's own terminal answers it.
    public var personAtTheTerminal: Bool { ownsItsTerminal && readsItsTerminal && inForeground && !passwordFromElsewhere }
}

extension InteractionMode {
    /// R16's choice: `mode=` when set; the password alone for a service
    /// whose program runs a fingerprint conversation of its own beside it;
    /// terminal when a person at the process's own terminal answers it and
    /// the process has one thread; else prompt, whose first answer is
    /// checked at once as the password: a script (`sudo -S` fed by a pipe,
    /// `sudo -A`, no controlling terminal) never waits for a finger, and
    /// neither do login screens, polkit's dialogs or askpass programs
    /// until the person asks for the reader with an empty answer.
    public static func chosen(_ options: Options, service: [UInt8], caller: CallerFacts) -> InteractionMode {
        if let mode = options.mode { return mode }
        if options.passwordServices.contains(service) { return .password }
        return caller.personAtTheTerminal && caller.threads == 1 ? .terminal : .prompt
    }
}

/// sudo's command line, read for the two options that send its password
/// prompt elsewhere than the person at the terminal. The arguments are the
/// caller's own; reading them can only make a prompt ask the password
/// first, which is never less safe.
public enum SudoCommandLine {
    /// Whether `arguments` (argv, the program's name first) run sudo or
    /// sudoedit with `-A`/`--askpass` or `-S`/`--stdin` among its options.
    public static func takesThePasswordElsewhere(_ arguments: [[UInt8]]) -> Bool {
        guard let program = arguments.first, isSudo(program) else { return false }
        var index = 1
        while index < arguments.count {
            let argument = arguments[index]
            index += 1
            guard argument.count >= 2, argument[0] == 0x2D else { return false }    // the command: options end
            if argument == [0x2D, 0x2D] { return false }
            if argument[1] == 0x2D {
                let name = Array(argument[2...].prefix { $0 != 0x3D })
                guard let option = longOption(name) else { return false }        // sudo would refuse the line
                if bytesEqual(option.name, "askpass") || bytesEqual(option.name, "stdin") { return true }
                if option.takesValue && !argument.contains(0x3D) { index += 1 }
                continue
            }
            var position = 1
            while position < argument.count {
                let letter = argument[position]
                position += 1
                if letter == 0x41 || letter == 0x53 { return true }                 // A, S
                if letter == 0x68 { break }                                          // h[host]: the rest is its value
                if shortOptionsWithValues.contains(letter) {
                    if position == argument.count { index += 1 }                     // the value is the next argument
                    break
                }
            }
        }
        return false
    }

    /// sudo's short options that take a value: a C c D g p R r T t U u.
    static var shortOptionsWithValues: [UInt8] { literalBytes("aCcDgpRrTtUu") }

    /// sudo's long options (getopt_long: a unique prefix is enough), and
    /// whether each takes a value.
    static var longOptions: [(name: [UInt8], takesValue: Bool)] { [
        (literalBytes("askpass"), false), (literalBytes("auth-type"), true), (literalBytes("background"), false), (literalBytes("bell"), false), (literalBytes("close-from"), true),
        (literalBytes("login-class"), true), (literalBytes("chdir"), true), (literalBytes("preserve-env"), false), (literalBytes("edit"), false), (literalBytes("group"), true),
        (literalBytes("set-home"), false), (literalBytes("help"), false), (literalBytes("host"), true), (literalBytes("login"), false), (literalBytes("remove-timestamp"), false),
        (literalBytes("reset-timestamp"), false), (literalBytes("list"), false), (literalBytes("no-update"), false), (literalBytes("non-interactive"), false),
        (literalBytes("preserve-groups"), false), (literalBytes("prompt"), true), (literalBytes("chroot"), true), (literalBytes("role"), true), (literalBytes("stdin"), false),
        (literalBytes("shell"), false), (literalBytes("type"), true), (literalBytes("command-timeout"), true), (literalBytes("other-user"), true), (literalBytes("user"), true),
        (literalBytes("version"), false), (literalBytes("validate"), false),
    ] }

    static func longOption(_ name: [UInt8]) -> (name: [UInt8], takesValue: Bool)? {
        guard !name.isEmpty else { return nil }
        var found: (name: [UInt8], takesValue: Bool)? = nil
        for option in longOptions {
            if option.name == name { return option }
            if option.name.starts(with: name) {
                if found != nil { return nil }                                      // ambiguous
                found = option
            }
        }
        return found
    }

    static func isSudo(_ program: [UInt8]) -> Bool {
        let base = program.split(separator: 0x2F, omittingEmptySubsequences: false).last.map { Array($0) } ?? program
        return bytesEqual(base, "sudo") || bytesEqual(base, "sudoedit")
    }
}
