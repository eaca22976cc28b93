// `localauth evaluate`: an app's evaluation for scripts and people at a
// terminal, through the helper. Under policy owner at a terminal it is touch
// or type: the keys typed while the reader waits are the password.
import LocalAuth
import LocalAuthSystem
import LocalAuthTerminal

/// `localauth evaluate`: an app's evaluation for scripts, through the
/// helper under the same service as the LocalAuthentication library (an
/// administrator who turns apps off turns this off too).
func evaluateCommand(_ arguments: Arguments) throws -> ExitCode {
    let policy = try parsePolicy(arguments, default: .owner)
    var request = HelperRequest()
    request.service = literalBytes("localauth-app")
    request.tty = Terminal.onStandardInput()
    // Apple's sheet, as for the library: the helper's mode for apps.
    request.presentation = [(literalBytes("policy"), utf8Bytes(policy.name))]
    if let reason = arguments.values["--reason"] {
        guard !reason.isEmpty else { throw CLIError("--reason must not be empty", .usage) }
        request.presentation.append((literalBytes("reason"), utf8Bytes(reason)))
    }
    if let title = arguments.values["--fallback-title"] { request.presentation.append((literalBytes("fallback_title"), utf8Bytes(title))) }
    if let title = arguments.values["--cancel-title"] { request.presentation.append((literalBytes("cancel_title"), utf8Bytes(title))) }

    let verdict: Result<AuthenticationMethod, LAError>
    if arguments.flags.contains("--non-interactive") {
        request.interactive = false
        var client = HelperClient(prompter: NoConversation())
        verdict = try helperVerdict(client.run(request))
    } else if let terminal = Terminal.openControlling() {
        defer { Syscalls.close(terminal) }
        // Keys arrive one by one and Ctrl-C as a byte: the sheet's choices
        // while the reader waits (a prompt reads its own line).
        let saved = Terminal.keys(terminal)
        defer { if let saved { Terminal.restore(terminal, saved) } }
        let offered = OfferedFlag()
        var conversation = TerminalConversation(messagesOnStandardError: true, fallbackOffered: offered)
        conversation.tell(SheetKeys.cancelHint(arguments.values["--cancel-title"]), .info)
        if policy == .owner && saved != nil {
            // Touch or type: the keys typed while the reader waits are the password.
            request.clientReadsKeys = true
            let typed = TypedWhileWaiting()
            var client = HelperClient(prompter: TypedFirstConversation(conversation, typed: typed, terminal: terminal))
            defer { client.lastAnswer.wipe() }
            verdict = try helperVerdict(client.run(request, control: terminal) { byte in typed.key(byte) })
        } else {
            var client = HelperClient(prompter: conversation)
            defer { client.lastAnswer.wipe() }
            verdict = try helperVerdict(client.run(request, control: saved == nil ? nil : terminal) { byte in
                SheetKeys.choice(byte, fallbackOffered: offered.value)
            })
        }
    } else {
        verdict = .failure(.notInteractive)
    }

    let code: ExitCode
    switch verdict {
    case .success: code = .success
    case .failure(let error): code = ExitCodeTable.evaluationExitCode(for: error)
    }
    if arguments.flags.contains("--json") {
        let json = JSONWriter()
        json.object {
            json.field("policy", policy.name)
            switch verdict {
            case .success(let method):
                json.field("success", true)
                json.field("method", method == .passcode ? "password" : "fingerprint")
                json.field("error", nil as String?)
                json.field("error_code", nil as Int64?)
            case .failure(let error):
                json.field("success", false)
                json.field("method", nil as String?)
                json.field("error", error.name)
                json.field("error_code", Int64(error.rawValue))
            }
            json.field("exit_code", Int64(code.rawValue))
        }
        print(json.text)
    } else {
        switch verdict {
        case .success(let method): print(method == .passcode ? "authenticated: password" : "authenticated: fingerprint")
        case .failure(let error): print("not authenticated: \(error.name) (\(error.rawValue))")
        }
    }
    return code
}

/// An evaluation's answer from the helper; what is not an answer is the
/// tool's own failure (exit 1).
func helperVerdict(_ outcome: HelperOutcome) throws -> Result<AuthenticationMethod, LAError> {
    switch HelperVerdict(outcome).commandAnswer {
    case .granted(let method, _): return .success(method)
    case .notAuthenticated(let error): return .failure(error)
    case .toolFailure(let text): throw CLIError(text)
    }
}

/// The helper's conversation for touch or type: its password prompt is
/// answered with the line typed while the reader waited (a line begun and
/// not yet entered is finished first, without a new prompt); with none,
/// the terminal asks as usual.
struct TypedFirstConversation: Prompter {
    var conversation: TerminalConversation
    let typed: TypedWhileWaiting
    let terminal: Int32

    init(_ conversation: TerminalConversation, typed: TypedWhileWaiting, terminal: Int32) {
        self.conversation = conversation
        self.typed = typed
        self.terminal = terminal
    }

    mutating func ask(_ text: String, into secret: SecretBuffer) -> PromptAnswer {
        while typed.midLine {
            guard let byte = Syscalls.readByte(terminal) else { return .failed }
            if typed.key(byte) == .userCancel { return .failed }
        }
        if typed.take(into: secret) { return .entered }
        return conversation.ask(text, into: secret)
    }

    mutating func tell(_ text: String, _ kind: MessageKind) {
        conversation.tell(text, kind)
    }
}
