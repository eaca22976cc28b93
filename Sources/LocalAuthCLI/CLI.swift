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

let usageText = """
usage: localauth <command> [options]

commands:
  status [--user NAME] [--json]          sensor, counters, back-off, recent failures, configuration
  check [--user NAME] [--policy owner|biometrics] [--json]
                                         can the policy run? never prompts (exit codes in localauth(1))
  reset [--user NAME]                    clear the counters and the back-off (root only)
  test [--user NAME] [--policy owner|biometrics] [--reason TEXT]
                                         a real evaluation in this terminal (root only)
  evaluate [--policy owner|biometrics] [--reason TEXT] [--fallback-title T] [--cancel-title T]
           [--non-interactive] [--json]  an app's evaluation for scripts; one exit code per error
  config --check [FILE] [--pam-dir DIR] [--nsswitch FILE]  validate the configuration file and lint the PAM stacks

common options:
  --conf FILE    read FILE instead of /etc/security/localauth.conf (root only)
  --help         help for a command

"""

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
        case "status": return try statusCommand(try Arguments(rest, flags: ["--json"], values: ["--user", "--conf"], verb: verb)).rawValue
        case "check": return try checkCommand(try Arguments(rest, flags: ["--json"], values: ["--user", "--conf", "--policy"], verb: verb)).rawValue
        case "reset": return try resetCommand(try Arguments(rest, flags: [], values: ["--user", "--conf"], verb: verb)).rawValue
        case "test": return try testCommand(try Arguments(rest, flags: [], values: ["--user", "--conf", "--policy", "--reason"], verb: verb)).rawValue
        case "evaluate":
            return try evaluateCommand(try Arguments(rest, flags: ["--json", "--non-interactive"],
                                                     values: ["--policy", "--reason", "--fallback-title", "--cancel-title"],
                                                     verb: verb)).rawValue
        case "config": return try configCommand(try Arguments(rest, flags: ["--check"], values: ["--pam-dir", "--nsswitch"], verb: verb, positional: 1)).rawValue
        case "--help", "-h", "help":
            print(usageText, terminator: "")
            return ExitCode.success.rawValue
        default:
            throw CLIError("unknown command '\(verb)'\n" + usageText, .usage)
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

    init(_ arguments: [String], flags allowedFlags: Set<String>, values allowedValues: Set<String>, verb: String, positional maxPositional: Int = 0) throws {
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

func helpText(_ verb: String) -> String {
    switch verb {
    case "status":
        return """
        usage: localauth status [--user NAME] [--json] [--conf FILE]
          Shows the fingerprint reader (device, enrolled fingers, domain state), the
          failure counts, whether the fingerprint is locked and why, the password
          back-off, recent failures and the effective configuration with where each
          value came from. Only root may name another user.

        """
    case "check":
        return """
        usage: localauth check [--user NAME] [--policy owner|biometrics] [--json] [--conf FILE]
          The canEvaluatePolicy preflight: never prompts, never counts an attempt.
          Exit 0 when the policy can run; otherwise 10 passcodeNotSet,
          11 biometryNotAvailable, 12 biometryNotEnrolled, 13 biometryLockout, with
          the error's name on stderr. A user other than root may ask about
          themselves; the lockout state is then unknown (readable by root only).

        """
    case "reset":
        return """
        usage: localauth reset [--user NAME] [--conf FILE]
          Clears the fingerprint and password failure counts and the back-off of a
          user (root only), like faillock --reset.

        """
    case "test":
        return """
        usage: localauth test [--user NAME] [--policy owner|biometrics] [--reason TEXT] [--conf FILE]
          Runs a real evaluation in this terminal through the engine, fprintd and the
          passcode service, counting attempts like any prompt (root only). Try it
          before putting the module into sudo.

        """
    case "evaluate":
        return """
        usage: localauth evaluate [--policy owner|biometrics] [--reason TEXT] [--fallback-title T]
                                  [--cancel-title T] [--non-interactive] [--json]
          Evaluates the policy for the calling user as an app would (the
          LocalAuthentication library's evaluatePolicy), through localauth-helper:
          the same counts, lockout and back-off as sudo and the screen lockers. The
          conversation uses the terminal: Enter starts the fingerprint, Ctrl-C while
          the reader waits chooses the fallback once it is offered (cancels before),
          Ctrl-D cancels. --non-interactive shows nothing: it reports what is
          missing, else notInteractive. Exit 0 on success; otherwise 10
          passcodeNotSet, 11 biometryNotAvailable, 12 biometryNotEnrolled,
          13 biometryLockout, 14 authenticationFailed, 15 userCancel, 16 userFallback,
          17 systemCancel, 18 appCancel, 19 invalidContext, 20 biometryDisconnected,
          21 notInteractive; 1 when the helper cannot be used, 2 for bad usage.
          --json prints {"success", "method", "error", "error_code", "exit_code"}.

        """
    case "config":
        return """
        usage: localauth config --check [FILE] [--pam-dir DIR] [--nsswitch FILE]
          Validates FILE (default /etc/security/localauth.conf), naming each bad
          line, and lints the PAM stacks in DIR (default /etc/pam.d) against the
          rules of pam_localauth(8): no 'done' on its lines, every path that skips
          it reaches a mandatory password module or pam_deny.so, an authsucc line
          after a policy=biometrics line, and a passcode service that is an
          explicit list without fingerprint, token, pam_rootok or pam_permit
          modules. Warns when nsswitch.conf (FILE, default /etc/nsswitch.conf)
          lists a directory (sss, ldap, winbind) whose accounts no module of the
          passcode service can check. Exit 1 when an error was found.

        """
    default:
        return usageText
    }
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

/// Ends the process with `code` after flushing standard output.
public func terminate(_ code: Int32) -> Never {
    Syscalls.exitProcess(code)
}
