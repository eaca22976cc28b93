// `localauth`: see what the module decided, reset it, check and try it, and
// lint the configuration. `main.swift` only calls `run(arguments:)`.
import LocalAuth
import LibcSystem
import LocalAuthTerminal
import PAMAndBusAdapters

/// An error for the person at the terminal: printed on stderr, with its exit code.
struct CLIError: Error {
    var message: String
    var code: ExitCode
    init(_ message: String, _ code: ExitCode = .failure) {
        self.message = message
        self.code = code
    }
}

var usageText: String { Command.usageText }

/// Runs one command; returns the process exit code.
public func run(arguments: [String]) -> Int32 {
    var rest = Array(arguments.dropFirst())
    guard let verb = rest.first else {
        standardError(usageText)
        return ExitCode.usage.rawValue
    }
    rest.removeFirst()
    do {
        switch verb {
        case "--help", "-h", "help":
            print(usageText, terminator: "")
            return ExitCode.success.rawValue
        default:
            guard let command = Command.named(verb) else { throw CLIError("unknown command '\(verb)'\n" + usageText, .usage) }
            return try command.run(try Arguments(rest, for: command)).rawValue
        }
    } catch let error as CLIError {
        if error.code == .success {
            print(error.message, terminator: "")
            return ExitCode.success.rawValue
        }
        standardError("localauth: " + error.message + (error.message.hasSuffix("\n") ? "" : "\n"))
        return error.code.rawValue
    } catch {
        standardError("localauth: unexpected error\n")
        return ExitCode.failure.rawValue
    }
}

func standardError(_ text: String) {
    try? Syscalls.writeAll(2, utf8Bytes(text))
}

/// Parsed options of one command: `--flag`, `--key VALUE` or `--key=VALUE`.
struct Arguments {
    var flags: Set<String> = []
    var values: [String: String] = [:]
    var positional: [String] = []
    let verb: String

    init(_ arguments: [String], for command: Command) throws {
        let verb = command.name
        let (allowedFlags, allowedValues, maxPositional) = (command.flags, command.values, command.positional == nil ? 0 : command.positionalCount)
        self.verb = verb
        var index = 0
        while index < arguments.count {
            let argument = arguments[index]
            index += 1
            if argument == "--help" || argument == "-h" { throw CLIError(helpText(verb), .success) }
            if argument.hasPrefix("--") {
                let parts = argument.split(separator: "=", maxSplits: 1).map(String.init)
                let name = parts[0]
                if allowedFlags.contains(name) && parts.count == 1 {
                    flags.insert(name)
                } else if allowedValues.contains(name) {
                    if parts.count == 2 {
                        values[name] = parts[1]
                    } else {
                        guard index < arguments.count else { throw CLIError("\(name) needs a value\n" + helpText(verb), .usage) }
                        values[name] = arguments[index]
                        index += 1
                    }
                } else {
                    throw CLIError("unknown option '\(name)' for '\(verb)'\n" + helpText(verb), .usage)
                }
            } else if positional.count < maxPositional {
                positional.append(argument)
            } else {
                throw CLIError("unexpected argument '\(argument)'\n" + helpText(verb), .usage)
            }
        }
    }
}

/// A command's help (the usage for a name that is none).
func helpText(_ verb: String) -> String {
    Command.named(verb)?.helpText ?? usageText
}

// MARK: - Shared context

/// The configuration as the module would read it, with where values came from.
struct LoadedConfiguration {
    var options: Options
    var path: [UInt8]
    /// Keys set by a valid line of the file.
    var keysFromFile: [String]
    var problems: [String]
}

func loadConfiguration(_ arguments: Arguments) throws -> LoadedConfiguration {
    var given: [UInt8]? = nil
    if let path = arguments.values["--conf"] {
        guard Syscalls.realUserID() == 0 else { throw CLIError("--conf is for root only", .permissionDenied) }
        given = utf8Bytes(path)
    }
    let configuration = Configuration.load(path: given)
    var problems: [String] = []
    if let problem = configuration.fileProblem { problems.append("\(printableText(configuration.path)): ignored: \(problem)") }
    problems += configuration.diagnostics
    return LoadedConfiguration(options: configuration.options, path: configuration.path, keysFromFile: configuration.keysFromFile,
                               problems: problems)
}

/// The user a command is about: `--user` (root, or the caller's own name) or the caller.
func targetUser(_ arguments: Arguments) throws -> UserIdentity {
    let caller = Syscalls.realUserID()
    if let name = arguments.values["--user"] {
        let bytes = utf8Bytes(name)
        if caller != 0 {
            // R14: the same answer whether or not the named user exists.
            guard let own = Syscalls.userName(uid: caller), own == bytes else {
                throw CLIError("only root may ask about another user", .permissionDenied)
            }
        }
        guard let found = Syscalls.lookupUser(bytes) else { throw CLIError("no such user '\(printableText(bytes))'", .unknownUser) }
        return UserIdentity(uid: found.uid, name: found.name)
    }
    guard let own = Syscalls.userName(uid: caller) else { throw CLIError("the calling user has no name", .unknownUser) }
    return UserIdentity(uid: caller, name: own)
}

func requireRoot(_ what: String) throws {
    guard Syscalls.realUserID() == 0, Syscalls.effectiveUserID() == 0 else {
        throw CLIError("\(what) needs root: the attempt state is readable by root only", .permissionDenied)
    }
}

func parsePolicy(_ arguments: Arguments, default value: EvaluationPolicy) throws -> EvaluationPolicy {
    guard let text = arguments.values["--policy"] else { return value }
    guard let policy = EvaluationPolicy(name: utf8Bytes(text)) else { throw CLIError("--policy must be owner or biometrics", .usage) }
    return policy
}

func hex(_ bytes: [UInt8]) -> String {
    let digits = Array("0123456789abcdef")
    var text = ""
    for byte in bytes {
        text.append(digits[Int(byte >> 4)])
        text.append(digits[Int(byte & 0x0F)])
    }
    return text
}

/// Log lines of the engine go to stderr only with debugging on.
struct StandardErrorLog: EventLog {
    var verbose = false
    mutating func log(_ level: LogLevel, _ message: String) {
        if verbose || level == .error { standardError("localauth: \(message)\n") }
    }
}

/// A prompter for commands that must never prompt (status, check, reset).
struct NoConversation: Prompter {
    mutating func ask(_ text: String, into secret: SecretBuffer) -> PromptAnswer { .failed }
    mutating func tell(_ text: String, _ kind: MessageKind) {}
}

/// The conversation of `localauth test`: messages on stdout, the passcode
/// read from the terminal with echo and signals off (Ctrl-C arrives as a
/// byte and cancels), straight into the secret buffer.
struct TerminalConversation: Prompter {
    /// Messages on stderr instead (stdout carries the result, e.g. JSON).
    var messagesOnStandardError = false
    /// Set when the helper offers the fallback (the sheet's Enter works
    /// from then on).
    var fallbackOffered: OfferedFlag? = nil

    mutating func offerFallback(_ title: String) {
        fallbackOffered?.value = true
        tell(SheetKeys.fallbackHint(title), .info)
    }

    mutating func ask(_ text: String, into secret: SecretBuffer) -> PromptAnswer {
        guard let fd = Terminal.openControlling() else { return .failed }
        defer { Syscalls.close(fd) }
        guard let settings = Terminal.quiet(fd) else { return .failed }
        defer {
            Terminal.restore(fd, settings)
            try? Syscalls.writeAll(fd, [0x0A])
        }
        try? Syscalls.writeAll(fd, utf8Bytes(text))
        let buffer = UnsafeMutablePointer<UInt8>.allocate(capacity: SecretBuffer.capacity + 1)
        defer {
            Syscalls.wipe(buffer, count: SecretBuffer.capacity + 1)
            buffer.deallocate()
        }
        var count = 0
        while true {
            guard let byte = Syscalls.readByte(fd), byte != 0x03, byte != 0x04 else { return .failed }
            if byte == 0x0A || byte == 0x0D { break }
            if count <= SecretBuffer.capacity { buffer[count] = byte }
            count += 1
        }
        secret.assign(from: buffer, length: count)
        return secret.isEmpty ? .empty : .entered
    }

    mutating func tell(_ text: String, _ kind: MessageKind) {
        if messagesOnStandardError { standardError(text + "\n") } else { print(text) }
    }
}

/// Whether the fallback was offered, shared by a conversation and the key
/// reader of the same evaluation.
final class OfferedFlag {
    var value = false
}

/// The controlling terminal as an app's sheet has it (`evaluate`, `secret
/// load`): keys one at a time, Ctrl-C a byte, and the signals that end the
/// tool (a kill's SIGTERM, a hang-up, Ctrl-\\) read from a signalfd, so they
/// cancel.
struct TerminalSheet {
    let terminal: Int32
    /// The signalfd of the signals that end the tool.
    let interrupt: Int32?
    /// Keys arrive one by one (the terminal took the settings).
    let readsKeys: Bool
    let offered = OfferedFlag()

    /// The descriptor the client reads the person's choices from while no
    /// prompt is open; nil where the keys cannot be read one by one.
    var control: Int32? { readsKeys ? terminal : nil }

    /// The sheet's conversation: messages on stderr (stdout carries the
    /// result), the fallback's hint once offered.
    var conversation: TerminalConversation { TerminalConversation(messagesOnStandardError: true, fallbackOffered: offered) }

    /// The sheet's meaning of a key while the reader waits.
    func choice(_ byte: UInt8) -> ClientChoice? { SheetKeys.choice(byte, fallbackOffered: offered.value) }

    /// Runs `body` with the sheet set up; nil without a controlling
    /// terminal. However it ends, the terminal is put back first, then
    /// the signals are unblocked (one that came then ends the tool).
    static func run<Value>(_ body: (TerminalSheet) throws -> Value) rethrows -> Value? {
        guard let terminal = Terminal.openControlling() else { return nil }
        defer { Syscalls.close(terminal) }
        let ending = Syscalls.blockSignals(Syscalls.terminationSignals)
        defer { if let ending { Syscalls.unblockInterrupt(ending) } }
        let saved = Terminal.keys(terminal)
        defer { if let saved { Terminal.restore(terminal, saved) } }
        return try body(TerminalSheet(terminal: terminal, interrupt: ending?.fd, readsKeys: saved != nil))
    }
}

/// Ends the process with `code` after flushing standard output.
public func terminate(_ code: Int32) -> Never {
    Syscalls.exitProcess(code)
}
