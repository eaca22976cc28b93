// The unprivileged side of the helper: starts the setuid `localauth-helper`
// over a socket pair and relays its conversation to the caller's prompter.
// The verdict is the helper's RESULT frame and nothing else: its exit
// status, its silence or its garbage can only ever be a failure.
import LocalAuth

public struct HelperClient<Conversation: Prompter> {
    public var prompter: Conversation
    /// Whether a SECRET arrived (an empty secret is one too).
    var receivedSecret = false
    /// The answer to the latest prompt: the passcode, when the RESULT says a
    /// passcode won. The caller wipes it (it is wiped on deinit too).
    public let lastAnswer = SecretBuffer()
    /// How long the helper may take to say HELLO.
    public static var helloMilliseconds: Int64 { 10_000 }
    /// The longest silence accepted whatever the helper announces.
    public static var maximumSilenceMilliseconds: Int64 { 330_000 }

    /// A secret action's frames (version 4): the secret a store sends
    /// after its REQUEST; where a load's SECRET lands (one that comes with
    /// none given breaks the conversation); the names a list received; the
    /// SECRET_STATUS and the RESULT, which `secretVerdict` reads together.
    public var outgoingSecret: SecretBuffer? = nil
    public var incomingSecret: SecretBuffer? = nil
    public private(set) var itemNames: [[UInt8]] = []
    public private(set) var secretStatus: SecretStatus? = nil
    public private(set) var lastResult: ResultFrame? = nil

    public init(prompter: Conversation) {
        self.prompter = prompter
    }

    /// Runs a secret action (`run`), and reads its end as one verdict.
    public mutating func runSecret(_ request: HelperRequest, path: [UInt8] = Syscalls.helperPath, control: Int32? = nil,
                                   interrupt: Int32? = nil,
                                   choice: (UInt8) -> ClientChoice? = { ClientChoice(rawValue: $0) }) -> SecretVerdict {
        let verdict = run(request, path: path, control: control, interrupt: interrupt, choice: choice)
        guard let result = lastResult else { return .helper(verdict) }
        let read = SecretVerdict(status: secretStatus, result: result)
        if case .done = read, request.action == .secretLoad, !receivedSecret {
            return .helper(.failed("it released no secret"))
        }
        if case .done = read {} else { incomingSecret?.wipe() }
        return read
    }

    /// Runs one request through the helper at `path`. Bytes read from
    /// `control` (`ClientChoice` raw values) are passed on as the caller's
    /// choices while no prompt is open; `interrupt` readable (a signalfd:
    /// the program is asked to end) is the person's cancel, sent once.
    public mutating func run(_ request: HelperRequest, path: [UInt8] = Syscalls.helperPath, control: Int32? = nil,
                             interrupt: Int32? = nil,
                             choice: (UInt8) -> ClientChoice? = { ClientChoice(rawValue: $0) }) -> HelperVerdict {
        if let problem = TrustedPath.setuidProgramProblem(path) {
            return .unavailable("\(printableText(path)): \(problem)")
        }
        guard let (mine, theirs) = Syscalls.socketPair() else { return .failed("cannot make a socket pair") }
        let child = Syscalls.spawn(path, channel: theirs)
        Syscalls.close(theirs)
        let channel = FrameChannel(fd: mine)
        defer {
            channel.close()
            // The helper ends as soon as the channel closes; it is root, so
            // it cannot be signalled from here: wait briefly, never forever.
            if let child { Syscalls.reap(child, waitingMilliseconds: 2000) }
        }
        guard child != nil else { return .failed("cannot start \(printableText(path))") }
        return converse(channel, request, control: control, interrupt: interrupt, choice: choice)
    }

    mutating func converse(_ channel: FrameChannel, _ request: HelperRequest, control: Int32? = nil, interrupt: Int32? = nil,
                           choice: (UInt8) -> ClientChoice? = { ClientChoice(rawValue: $0) }) -> HelperVerdict {
        var control = control
        var interrupt = interrupt
        let helloDeadline = Syscalls.bootTimeNanoseconds() + HelperClient.helloMilliseconds * 1_000_000
        guard channel.send(.hello, HelloFrame.client(), deadline: helloDeadline) else { return .failed("the helper did not take HELLO") }
        let silence: Int64
        let helperVersion: UInt8
        switch channel.receive(deadline: helloDeadline) {
        case .failure(let violation): return .failed("no HELLO from the helper: \(violation.text)")
        case .success(let frame):
            guard frame.type == .hello, let hello = HelloFrame.helperHello(frame.payload) else {
                return .failed("bad HELLO from the helper")
            }
            silence = min(max(Int64(hello.silence), 1000), HelperClient.maximumSilenceMilliseconds) * 1_000_000
            helperVersion = hello.version
        }
        // A helper that refused at once (too many prompts) has written its
        // answer and gone: the request then finds no reader, and the
        // frames already sent are still read.
        // A helper older than version 3 neither reads PASSWORD_TYPED nor the key that announces it.
        var request = request
        if helperVersion < 3 { request.clientReadsKeys = false }
        if request.action.isSecret && helperVersion < 4 { return .failed("it is too old to keep secrets (protocol version \(helperVersion))") }
        var requestTaken = channel.send(.request, request.encoded(), deadline: Syscalls.bootTimeNanoseconds() + silence)
        if requestTaken && request.action == .secretStore {
            guard let secret = outgoingSecret else { return .failed("no secret to store") }
            requestTaken = channel.sendSecret(.secret, secret, deadline: Syscalls.bootTimeNanoseconds() + silence)
        }
        while true {
            let frame: ReceivedFrame
            let deadline = Syscalls.bootTimeNanoseconds() + silence
            // The caller's choices go out while the helper has nothing to say.
            while control != nil || interrupt != nil {
                var requests = [channel.pollRequest, PollRequest(fd: control ?? -1, events: PollRequest.readable)]
                if let interrupt { requests.append(PollRequest(fd: interrupt, events: PollRequest.readable)) }
                guard let left = FrameChannel.millisecondsLeft(deadline),
                      let ready = Syscalls.poll(requests, timeoutMilliseconds: left) else { break }
                if ready[0] != 0 { break }
                if ready.count > 2 && ready[2] != 0 {
                    // Asked to end: the person's cancel, once (the signal stays pending for the caller).
                    interrupt = nil
                    if !channel.send(.userCancel, [], deadline: Syscalls.bootTimeNanoseconds() + silence) {
                        return .failed("the helper stopped reading")
                    }
                    continue
                }
                guard let fd = control, ready[1] != 0 else { continue }
                guard let byte = Syscalls.readByte(fd) else {
                    control = nil
                    break
                }
                if let chosen = choice(byte), chosen != .passwordTyped || request.clientReadsKeys,
                   !channel.send(chosen.frame, [], deadline: Syscalls.bootTimeNanoseconds() + silence) {
                    return .failed("the helper stopped reading")
                }
            }
            let landing = request.action == .secretLoad && !receivedSecret ? incomingSecret : nil
            switch channel.receive(deadline: deadline, secret: landing) {
            case .failure(.closed):
                return .failed(requestTaken ? "the helper ended without a result" : "the helper did not take the request")
            case .failure(let violation): return .failed("helper: \(violation.text)")
            case .success(let received): frame = received
            }
            switch frame.type {
            case .textInfo, .errorText:
                prompter.tell(printableMessage(frame.payload), frame.type == .errorText ? .error : .info)
            case .promptEchoOff, .promptEchoOn:
                let answer = prompter.ask(printableMessage(frame.payload), into: lastAnswer)
                let deadline = Syscalls.bootTimeNanoseconds() + silence
                let sent: Bool
                switch answer {
                case .entered, .empty: sent = channel.sendSecret(.reply, lastAnswer, deadline: deadline)
                case .failed:
                    lastAnswer.wipe()
                    sent = channel.send(.noAnswer, [], deadline: deadline)
                case .fallback:
                    lastAnswer.wipe()
                    sent = channel.send(.userFallback, [], deadline: deadline)
                }
                if !sent { return .failed("the helper stopped reading") }
            case .fallbackOffered:
                // Version 2's frame; a helper that answered in version 1 has no business sending it.
                guard helperVersion >= 2 else { return .failed("helper: \(ProtocolViolation.outOfOrder(frame.type).text)") }
                prompter.offerFallback(printableMessage(frame.payload))
            case .secret:
                // Only where a load awaited it, once (the channel refused it otherwise).
                receivedSecret = true
            case .itemName:
                guard request.action == .secretList, itemNames.count < SecretItemFormat.maxItemsPerUser,
                      SecretItemFormat.isValidIdentifier(frame.payload) else {
                    return .failed("helper: \(ProtocolViolation.outOfOrder(frame.type).text)")
                }
                itemNames.append(frame.payload)
            case .secretStatus:
                guard request.action.isSecret, secretStatus == nil, frame.payload.count == 1,
                      let status = SecretStatus(rawValue: frame.payload[0]) else {
                    return .failed("helper: \(ProtocolViolation.outOfOrder(frame.type).text)")
                }
                secretStatus = status
            case .result:
                guard let result = ResultFrame.decode(frame.payload) else { return .failed("helper: malformed RESULT") }
                lastResult = result
                if result.method != .passcode { lastAnswer.wipe() }
                return HelperVerdict(result)
            case .hello, .request, .reply, .noAnswer, .cancel, .userCancel, .userFallback, .passwordTyped:
                return .failed("helper: \(ProtocolViolation.outOfOrder(frame.type).text)")
            }
        }
    }
}

/// Message text from the helper, made safe to show: control bytes (but
/// newlines) and invalid UTF-8 become `?`.
func printableMessage(_ bytes: [UInt8]) -> String {
    var cleaned: [UInt8] = []
    cleaned.reserveCapacity(bytes.count)
    for byte in bytes { cleaned.append((byte < 0x20 && byte != 0x0A) || byte == 0x7F ? 0x3F : byte) }
    return String(decoding: cleaned, as: UTF8.self)
}
