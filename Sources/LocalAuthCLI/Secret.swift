// `localauth secret`: the caller's own secrets behind the finger, for
// scripts and tools, through the helper (docs/DESIGN.md, "Secrets"). A store
// reads the secret from standard input; a load writes it to standard output
// only after the touch or the password its item requires, the conversation
// on the controlling terminal (so that `$(localauth secret load NAME)` works).
import LocalAuth
import LibcSystem
import LocalAuthTerminal

/// The verbs of `localauth secret`, declared once (the help and the parser
/// read this list).
enum SecretVerb: String, CaseIterable {
    case store, load, delete, list

    var action: HelperAction {
        switch self {
        case .store: return .secretStore
        case .load: return .secretLoad
        case .delete: return .secretDelete
        case .list: return .secretList
        }
    }

    static var synopsis: String { allCases.map(\.rawValue).joined(separator: "|") }
}

func secretCommand(_ arguments: Arguments) throws -> ExitCode {
    guard let word = arguments.positional.first, let verb = SecretVerb(rawValue: word) else {
        throw CLIError("secret needs one of \(SecretVerb.synopsis)\n" + helpText("secret"), .usage)
    }
    var request = HelperRequest()
    request.action = verb.action
    request.service = literalBytes(KnownServices.app)
    request.tty = Terminal.onStandardInput()
    let name = arguments.positional.count > 1 ? arguments.positional[1] : nil
    if verb == .list {
        guard name == nil else { throw CLIError("secret list takes no name", .usage) }
    } else {
        guard let name else { throw CLIError("secret \(verb.rawValue) needs the secret's NAME", .usage) }
        request.item = utf8Bytes(name)
        guard SecretItemFormat.isValidIdentifier(request.item) else {
            throw CLIError("a secret's NAME is 1 to \(SecretItemFormat.maxIdentifierBytes) bytes of UTF-8 without control characters", .usage)
        }
    }
    if let access = arguments.values["--access"] {
        guard verb == .store else { throw CLIError("--access is for secret store", .usage) }
        guard let requirement = SecretRequirement(name: utf8Bytes(access)) else {
            throw CLIError("--access must be one of \(SecretRequirement.allCases.map { "\($0.name)" }.joined(separator: ", "))", .usage)
        }
        request.access = requirement
    }
    if let reason = arguments.values["--reason"] {
        guard !reason.isEmpty else { throw CLIError("--reason must not be empty", .usage) }
        request.present(.reason, utf8Bytes(reason))
    }

    let outgoing = SecretBuffer(limit: SecretItemFormat.maxSecretBytes)
    let incoming = SecretBuffer(limit: SecretItemFormat.maxSecretBytes)
    defer {
        outgoing.wipe()
        incoming.wipe()
    }
    if verb == .store {
        guard !Terminal.standardInputIsTerminal else {
            throw CLIError("secret store reads the secret from standard input: a pipe or a file, not the terminal", .usage)
        }
        do throws(Errno) { try Syscalls.readAll(0, into: outgoing) } catch {
            if error == .fileTooLarge { throw CLIError("a secret holds at most \(SecretItemFormat.maxSecretBytes) bytes", .usage) }
            throw CLIError("cannot read the secret from standard input: \(error.text)")
        }
    }

    let (verdict, names) = runSecretRequest(request, outgoing: outgoing, incoming: incoming)
    switch verdict {
    case .done:
        switch verb {
        case .load:
            do throws(Errno) { try Syscalls.writeAll(1, incoming) } catch {
                throw CLIError("cannot write the secret to standard output: \(error.text)")
            }
        case .list:
            for identifier in names { print(printableText(identifier, limit: SecretItemFormat.maxIdentifierBytes)) }
        case .store, .delete:
            break
        }
        return .success
    case .item(let status):
        standardError("localauth: \(status.sentence)\n")
        return ExitCodeTable.secretExitCode(for: status)
    case .denied(let error):
        standardError("localauth: not authenticated: \(error.name) (\(error.rawValue))\n")
        return ExitCodeTable.evaluationExitCode(for: error)
    case .helper(let helper):
        switch helper.commandAnswer {
        case .notAuthenticated(let error):
            standardError("localauth: not authenticated: \(error.name) (\(error.rawValue))\n")
            return ExitCodeTable.evaluationExitCode(for: error)
        case .granted: throw CLIError("localauth-helper failed: it granted without an answer for the secret")
        case .toolFailure(let text): throw CLIError(text)
        }
    }
}

/// One secret action through the helper, its conversation (a load's) on
/// the controlling terminal as `localauth evaluate` has it: Enter starts
/// the reader, Ctrl-C chooses the fallback once offered and cancels
/// before, a signal that ends the tool cancels. Without a terminal a load
/// cannot ask, and says notInteractive.
func runSecretRequest(_ request: HelperRequest, outgoing: SecretBuffer, incoming: SecretBuffer) -> (SecretVerdict, [[UInt8]]) {
    let answer = TerminalSheet.run { sheet -> (SecretVerdict, [[UInt8]]) in
        var conversation = sheet.conversation
        if request.action == .secretLoad { conversation.tell(SheetKeys.cancelHint(nil), .info) }
        var client = HelperClient(prompter: conversation)
        defer { client.lastAnswer.wipe() }
        client.outgoingSecret = outgoing
        client.incomingSecret = incoming
        return (client.runSecret(request, control: sheet.control, interrupt: sheet.interrupt) { sheet.choice($0) }, client.itemNames)
    }
    if let answer { return answer }
    // Without a terminal nothing can be asked.
    var request = request
    request.interactive = false
    var client = HelperClient(prompter: NoConversation())
    client.outgoingSecret = outgoing
    client.incomingSecret = incoming
    return (client.runSecret(request), client.itemNames)
}
