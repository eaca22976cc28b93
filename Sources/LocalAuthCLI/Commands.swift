// Every command of `localauth`, declared once: its options, its line in the
// usage, its help and what runs it. Parsing (`Arguments`), `localauth
// --help`, `localauth <command> --help` and the man page's synopsis (checked
// by the CLI's tests against `--help`) all read this table.
import LocalAuth

/// An option of a command: a flag, or a key and its value's placeholder.
struct CommandOption {
    let name: String
    /// What the value is ("NAME", "owner|biometrics"); nil for a flag.
    let value: String?
    /// Shown in the usage's list of commands (a common option is described
    /// once, under it, and shown in each command's help).
    let listed: Bool
    /// What a common option does, for the usage.
    var summary = ""

    static func flag(_ name: String) -> CommandOption { CommandOption(name: name, value: nil, listed: true) }
    static func value(_ name: String, _ placeholder: String) -> CommandOption {
        CommandOption(name: name, value: placeholder, listed: true)
    }
    /// `--conf FILE`: another configuration file, for the commands that read it
    /// as the module would (status, check, reset, test; root only).
    static var conf: CommandOption { CommandOption(name: "--conf", value: "FILE", listed: false,
                                    summary: "read FILE instead of \(Options.defaultConfigPath) (root only)") }
    /// The options the usage describes once, under the commands.
    static var common: [CommandOption] { [conf] }

    var synopsis: String { "[" + name + (value.map { " " + $0 } ?? "") + "]" }
}

/// One command of the tool.
struct Command {
    let name: String
    /// A flag the command cannot run without, shown bare (config's `--check`).
    let required: String?
    let options: [CommandOption]
    /// The placeholder of its positional arguments, if any (one, optional,
    /// unless `positionalCount` says more, which the command checks).
    let positional: String?
    /// Its line in the usage.
    let summary: String
    /// Its help, after the usage line: paragraphs of two-space-indented text.
    let help: String
    let run: (Arguments) throws -> ExitCode
    /// How many positional arguments it takes; a command of more than one
    /// shows them without brackets.
    var positionalCount = 1

    /// The command's arguments as its help shows them (`all`) or as the
    /// usage's list does (without the common options).
    func synopsis(all: Bool) -> [String] {
        var words = [name]
        if let required { words.append(required) }
        if let positional { words.append(positionalCount > 1 ? positional : "[\(positional)]") }
        words += options.filter { all || $0.listed }.map(\.synopsis)
        return words
    }

    var flags: Set<String> { Set(options.filter { $0.value == nil }.map(\.name) + (required.map { [$0] } ?? [])) }
    var values: Set<String> { Set(options.filter { $0.value != nil }.map(\.name)) }

    /// `localauth <command> --help`.
    var helpText: String {
        "usage: " + wrapped(["localauth"] + synopsis(all: true), width: 96, indent: "usage: localauth ".count + name.count + 1) + "\n" + help
    }

    static var all: [Command] { [
        Command(name: "status", required: nil, options: [.value("--user", "NAME"), .flag("--json"), .conf], positional: nil,
                summary: "sensor, counters, back-off, recent failures, configuration", help: """
                  Shows the fingerprint reader (device, enrolled fingers, domain state), the
                  failure counts, whether the fingerprint is locked and why, the password
                  back-off, recent failures and the effective configuration with where each
                  value came from. Only root may name another user.

                """, run: statusCommand),
        Command(name: "check", required: nil,
                options: [.value("--user", "NAME"), .value("--policy", "owner|biometrics"), .flag("--json"), .conf], positional: nil,
                summary: "can the policy run? never prompts (exit codes in localauth(1))", help: """
                  The canEvaluatePolicy preflight: never prompts, never counts an attempt.
                  Exit 0 when the policy can run; otherwise 10 passcodeNotSet,
                  11 biometryNotAvailable, 12 biometryNotEnrolled, 13 biometryLockout, with
                  the error's name on stderr. A user other than root may ask about
                  themselves; the lockout state is then unknown (readable by root only).

                """, run: checkCommand),
        Command(name: "reset", required: nil, options: [.value("--user", "NAME"), .conf], positional: nil,
                summary: "clear the counters and the back-off (root only)", help: """
                  Clears the fingerprint and password failure counts and the back-off of a
                  user (root only), like faillock --reset.

                """, run: resetCommand),
        Command(name: "test", required: nil,
                options: [.value("--user", "NAME"), .value("--policy", "owner|biometrics"), .value("--reason", "TEXT"), .conf],
                positional: nil, summary: "a real evaluation in this terminal (root only)", help: """
                  Runs a real evaluation in this terminal through the engine, fprintd and the
                  passcode service, counting attempts like any prompt (root only). Try it
                  before putting the module into sudo.

                """, run: testCommand),
        Command(name: "evaluate", required: nil,
                options: [.value("--policy", "owner|biometrics"), .value("--reason", "TEXT"), .value("--fallback-title", "T"),
                          .value("--cancel-title", "T"), .flag("--non-interactive"), .flag("--json")], positional: nil,
                summary: "an app's evaluation for scripts; one exit code per error", help: """
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

                """, run: evaluateCommand),
        Command(name: "secret", required: nil,
                options: [.value("--access", "REQUIREMENT"), .value("--reason", "TEXT")], positional: "store|load|delete|list [NAME]",
                summary: "your secrets behind the finger: store, load, delete, list", help: """
                  Keeps your own secrets (at most 4096 bytes each, 1000 per user) in the
                  root-only store, encrypted, through localauth-helper. store NAME reads
                  the secret from standard input (a pipe or a file); --access says what
                  releases it: default (a finger or the password), biometry (a finger
                  only), biometry-current-set (a finger only, and the secret is deleted
                  once the enrolled fingers change), biometry-then-password (a finger, the
                  password once the finger cannot be used). load NAME writes the secret
                  to standard output after the touch or the password it requires, asked
                  on the terminal with the same counts, lockout and back-off as every
                  prompt. delete NAME removes it; list prints your names. Exit 0 on
                  success; 30 no such secret, 31 invalidated (it was deleted), 32 quota
                  reached, 33 the password is needed once, 34 the store failed; an
                  evaluation's error exits as for evaluate; 1 when the helper cannot be
                  used, 2 for bad usage.

                """, run: secretCommand, positionalCount: 2),
        Command(name: "config", required: "--check", options: [.value("--pam-dir", "DIR"), .value("--nsswitch", "FILE")],
                positional: "FILE", summary: "validate the configuration file and lint the PAM stacks", help: """
                  Validates FILE (default /etc/security/localauth.conf), naming each bad
                  line, and lints the PAM stacks in DIR (default /etc/pam.d) against the
                  rules of pam_localauth(8): no 'done' on its lines, every path that skips
                  it reaches a mandatory password module or pam_deny.so, an authsucc line
                  after a policy=biometrics line, and a passcode service that is an
                  explicit list without fingerprint, token, pam_rootok or pam_permit
                  modules. Warns when nsswitch.conf (FILE, default /etc/nsswitch.conf)
                  lists a directory (sss, ldap, winbind) whose accounts no module of the
                  passcode service can check. Exit 1 when an error was found.

                """, run: configCommand),
    ] }

    static func named(_ name: String) -> Command? { all.first { $0.name == name } }

    /// `localauth --help`: every command's line, then the common options.
    static var usageText: String {
        let column = 41   // where each summary starts, at least two spaces after the synopsis
        var text = "usage: localauth <command> [options]\n\ncommands:\n"
        for command in all {
            let synopsis = "  " + wrapped(command.synopsis(all: false), width: 94, indent: 2 + command.name.count + 1)
            let lastLine = synopsis.split(separator: "\n").last.map(String.init) ?? synopsis
            let gap = lastLine.count + 2 <= column ? column - lastLine.count : nil
            text += synopsis + (gap.map { String(repeating: " ", count: $0) } ?? "\n" + String(repeating: " ", count: column))
                + command.summary + "\n"
        }
        text += "\ncommon options:\n"
        for option in CommandOption.common + [CommandOption(name: "--help", value: nil, listed: false, summary: "help for a command")] {
            let shown = option.name + (option.value.map { " " + $0 } ?? "")
            text += "  " + shown + String(repeating: " ", count: max(1, 15 - shown.count)) + option.summary + "\n"
        }
        text += "\n"
        return text
    }
}

/// `words` joined by spaces into lines of at most `width` characters, each
/// line after the first indented by `indent` spaces.
func wrapped(_ words: [String], width: Int, indent: Int) -> String {
    var lines: [String] = []
    var line = ""
    for word in words {
        if !line.isEmpty, line.count + 1 + word.count > width {
            lines.append(line)
            line = String(repeating: " ", count: indent) + word
        } else {
            line += (line.isEmpty ? "" : " ") + word
        }
    }
    lines.append(line)
    return lines.joined(separator: "\n")
}
