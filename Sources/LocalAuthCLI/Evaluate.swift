// `localauth evaluate`: an app's evaluation for scripts and people at a
// terminal, through the helper. Under policy owner at a terminal it is touch
// or type: the keys typed while the reader waits are the password.
import LocalAuth
import LibcSystem
import LocalAuthTerminal

/// `localauth evaluate`: an app's evaluation for scripts, through the
/// helper under the same service as the LocalAuthentication library (an
/// administrator who turns apps off turns this off too).
func evaluateCommand(_ arguments: Arguments) throws -> ExitCode {
    let policy = try parsePolicy(arguments, default: .owner)
    var request = HelperRequest()
    request.service = literalBytes(KnownServices.app)
    request.tty = Terminal.onStandardInput()
    // Apple's sheet, as for the library: the helper's mode for apps.
    request.present(.policy, utf8Bytes(policy.name))
    if let reason = arguments.values["--reason"] {
        guard !reason.isEmpty else { throw CLIError("--reason must not be empty", .usage) }
        request.present(.reason, utf8Bytes(reason))
    }
    if let title = arguments.values["--fallback-title"] { request.present(.fallbackTitle, utf8Bytes(title)) }
    if let title = arguments.values["--cancel-title"] { request.present(.cancelTitle, utf8Bytes(title)) }

    let verdict: Result<AuthenticationMethod, LAErrorCode>
    if arguments.flags.contains("--non-interactive") {
        request.interactive = false
        var client = HelperClient(prompter: NoConversation())
        verdict = try helperVerdict(client.run(request))
    } else if let answer = try TerminalSheet.run({ sheet throws -> Result<AuthenticationMethod, LAErrorCode> in
        var conversation = sheet.conversation
        conversation.tell(SheetKeys.cancelHint(arguments.values["--cancel-title"]), .info)
        if policy == .owner && sheet.readsKeys {
            // Touch or type: the keys typed while the reader waits are the password.
            request.clientReadsKeys = true
            let typed = TypedWhileWaiting()
            let answerSeconds = Configuration.load(path: nil).options.answerTimeoutSeconds
            var client = HelperClient(prompter: TypedFirstConversation(conversation, typed: typed, terminal: sheet.terminal,
                                                                       interrupt: sheet.interrupt, answerSeconds: answerSeconds))
            defer { client.lastAnswer.wipe() }
            return try helperVerdict(client.run(request, control: sheet.terminal, interrupt: sheet.interrupt) { byte in typed.key(byte) })
        }
        var client = HelperClient(prompter: conversation)
        defer { client.lastAnswer.wipe() }
        return try helperVerdict(client.run(request, control: sheet.control, interrupt: sheet.interrupt) { sheet.choice($0) })
    }) {
        verdict = answer
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
func helperVerdict(_ verdict: HelperVerdict) throws -> Result<AuthenticationMethod, LAErrorCode> {
    switch verdict.commandAnswer {
    case .granted(let method, _): return .success(method)
    case .notAuthenticated(let error): return .failure(error)
    case .toolFailure(let text): throw CLIError(text)
    }
}

/// The helper's conversation for touch or type: its password prompt is
/// answered with the line typed while the reader waited (a line begun and
/// not yet entered is finished first, without a new prompt); with none, or
/// after Enter alone, the prompt is shown and the line read the same way:
/// keys one at a time with the same editing, Ctrl-C cancels, and a signal
/// that ends the tool or `answer_timeout` gives up.
struct TypedFirstConversation: Prompter {
    var conversation: TerminalConversation
    let typed: TypedWhileWaiting
    let terminal: Int32
    /// The signalfd of the signals that end the tool.
    let interrupt: Int32?
    let answerSeconds: Int

    init(_ conversation: TerminalConversation, typed: TypedWhileWaiting, terminal: Int32, interrupt: Int32?, answerSeconds: Int) {
        self.conversation = conversation
        self.typed = typed
        self.terminal = terminal
        self.interrupt = interrupt
        self.answerSeconds = answerSeconds
    }

    mutating func ask(_ text: String, into secret: SecretBuffer) -> PromptAnswer {
        // Enter alone while the reader waited: this prompt asks.
        if typed.entered && typed.line.isEmpty { typed.discard() }
        let shown = !typed.entered && !typed.midLine
        if shown { try? Syscalls.writeAll(terminal, utf8Bytes(text)) }
        defer { if shown { try? Syscalls.writeAll(terminal, [0x0A]) } }
        let deadline = Syscalls.bootTimeNanoseconds() + Int64(answerSeconds) * 1_000_000_000
        while !typed.entered {
            var requests = [PollRequest(fd: terminal, events: PollRequest.readable)]
            if let interrupt { requests.append(PollRequest(fd: interrupt, events: PollRequest.readable)) }
            let left = (deadline - Syscalls.bootTimeNanoseconds()) / 1_000_000
            guard left > 0, let ready = Syscalls.poll(requests, timeoutMilliseconds: Int32(min(left, 1000))),
                  !(ready.count > 1 && ready[1] != 0) else {
                typed.discard()
                return .failed
            }
            guard ready[0] != 0 else { continue }
            guard let byte = Syscalls.readByte(terminal), typed.key(byte) != .userCancel else {
                typed.discard()
                return .failed
            }
        }
        return typed.take(into: secret) ? .entered : .empty
    }

    mutating func tell(_ text: String, _ kind: MessageKind) {
        conversation.tell(text, kind)
    }
}
