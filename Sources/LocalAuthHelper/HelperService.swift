// localauth-helper, the setuid-root program through which callers that are
// not root (screen lockers, `localauth`, apps) get the same policy, counters
// and lockout as sudo. It trusts nothing from its caller but presentation:
// it becomes wholly root, resets limits, signals, umask, descriptors and the
// environment, reads only the administrator's configuration, and
// authenticates only the caller's own account, in prompt mode, under a hard
// deadline. docs/HELPER-PROTOCOL.md describes the conversation.
import LocalAuth
import LibcSystem
import PAMAndBusAdapters
import Secrets

/// The helper's exit statuses. The verdict travels in the RESULT frame; the
/// status is for a person who ran the helper by hand.
public enum HelperExit: Int32, Error {
    case success = 0
    case failure = 1
    /// Not started the way it must be (no socket on standard input).
    case usage = 2
    /// The client broke the protocol or went away.
    case protocolError = 3
}

public enum HelperService {
    /// How long the client may take to say HELLO and send its request.
    static let openingSeconds: Int64 = 10
    /// Extra silence a client should allow beyond the fingerprint timeout
    /// (the password check, the state lock).
    static let workSlackMilliseconds = 10_000

    /// The whole helper. Called first thing by its `main`.
    public static func run() -> HelperExit {
        // The real uid is the caller's: record it before anything else.
        let callerUID = Syscalls.realUserID()
        let callerGID = Syscalls.realGroupID()
        let privileged = Syscalls.becomeRoot()
        Syscalls.resetSignals()
        // However it ends, its deadline too, the process ends as its
        // caller's: one the caller leaves unreaped is the caller's own.
        if privileged { Syscalls.endAtDeadline(asCaller: callerUID, gid: callerGID) }
        defer { if privileged { Syscalls.returnToCaller() } }
        Syscalls.resetLimits()
        Syscalls.setFileCreationMask(0o077)
        Syscalls.clearEnvironment()
        Syscalls.changeToRootDirectory()
        Syscalls.openSystemLog("localauth-helper")
        // Out of the caller's session: its terminal's signals stop here. A
        // caller that made this a process-group leader keeps it in its
        // session, where a terminal could stop it holding the reader.
        guard Syscalls.leaveSession() else {
            Syscalls.writeError("localauth-helper: cannot leave the caller's session (started as a process-group leader)")
            return .usage
        }
        guard Syscalls.isSocket(0) else {
            Syscalls.writeError("localauth-helper: this program talks to pam_localauth.so and localauth over a socket "
                                + "on its standard input; run `localauth test` instead")
            return .usage
        }
        Syscalls.closeDescriptors(from: 3)
        Syscalls.pointAtNull(1)
        Syscalls.pointAtNull(2)
        // A first backstop until the configuration says how long this may take.
        Syscalls.setAlarm(seconds: UInt32(openingSeconds) + 5)

        let channel = FrameChannel(fd: 0)
        var session = HelperSession(channel: channel, callerUID: callerUID)
        return session.serve(privileged: privileged)
    }
}

/// The state shared by the helper and its prompter: whether the client
/// cancelled or broke the conversation.
final class ClientState {
    var cancelled = false
    var violation: ProtocolViolation? = nil
    /// The protocol version the client spoke in its HELLO.
    var version: UInt8 = HelperWire.oldestVersion
    /// The client reads the person's keys while the reader waits (touch or
    /// type), as its request said: PASSWORD_TYPED may end the wait.
    var readsKeys = false
}

/// The engine's prompter over the channel: every message and prompt goes to
/// the client, whose answer goes straight into the secret buffer.
struct ChannelPrompter: Prompter {
    let channel: FrameChannel
    let state: ClientState
    /// How long one answer may take.
    let answerNanoseconds: Int64
    /// The hard deadline of the whole request.
    let hardDeadline: Int64

    mutating func ask(_ text: String, into secret: SecretBuffer) -> PromptAnswer {
        secret.wipe()
        guard state.violation == nil, !state.cancelled else { return .failed }
        guard channel.send(.promptEchoOff, utf8Bytes(text), deadline: sendDeadline()) else {
            state.violation = .channelError
            return .failed
        }
        let deadline = min(Syscalls.bootTimeNanoseconds() + answerNanoseconds, hardDeadline)
        // A PASSWORD_TYPED sent as the wait ended (Enter with the last miss)
        // crossed this prompt: the typed line's REPLY follows it.
        var crossed = false
        while true {
            switch channel.receive(deadline: deadline, secret: secret) {
            case .success(let frame):
                switch frame.type {
                case .passwordTyped where state.readsKeys && !crossed && frame.payload.isEmpty:
                    crossed = true
                    continue
                case .reply: return secret.isEmpty ? .empty : .entered
                case .noAnswer, .userCancel, .userFallback:
                    guard frame.payload.isEmpty else {
                        state.violation = .outOfOrder(frame.type)
                        return .failed
                    }
                    return frame.type == .userFallback ? .fallback : .failed
                case .cancel:
                    state.cancelled = true
                    return .failed
                default:
                    state.violation = .outOfOrder(frame.type)
                    return .failed
                }
            case .failure(let violation):
                secret.wipe()
                state.violation = violation
                return .failed
            }
        }
    }

    /// Touch or type through a client that reads the keys: the wait ends
    /// on its PASSWORD_TYPED.
    mutating func watchKeys() -> Bool { state.readsKeys }

    /// The frame that interrupted a wait for a finger: the person's cancel
    /// or fallback, the password typed (a client that reads the keys), or
    /// the app's cancel. The end of the channel and any other frame break
    /// the conversation.
    mutating func takeChoice() -> WaitChoice? {
        guard state.violation == nil, !state.cancelled else { return nil }
        // The wait ended because the channel was readable: a whole frame or
        // its end is there; anything else breaks the conversation.
        switch channel.receive(deadline: Syscalls.bootTimeNanoseconds() + 100_000_000) {
        case .success(let frame):
            if frame.type == .userCancel || frame.type == .userFallback || frame.type == .cancel || frame.type == .passwordTyped,
               !frame.payload.isEmpty {
                state.violation = .outOfOrder(frame.type)
                return nil
            }
            switch frame.type {
            case .userCancel: return .cancel
            case .userFallback: return .fallback
            // The password prompt follows; the client answers it with the typed line.
            case .passwordTyped where state.readsKeys: return .passwordWanted
            case .cancel:
                state.cancelled = true
                return .cancel
            default:
                state.violation = .outOfOrder(frame.type)
                return nil
            }
        case .failure(let violation):
            state.violation = violation
            return nil
        }
    }

    /// FALLBACK_OFFERED, to a client that speaks it.
    mutating func offerFallback(_ title: String) {
        guard state.violation == nil, state.version >= 2 else { return }
        if !channel.send(.fallbackOffered, utf8Bytes(title), deadline: sendDeadline()) {
            state.violation = .channelError
        }
    }

    mutating func tell(_ text: String, _ kind: MessageKind) {
        guard state.violation == nil else { return }
        if !channel.send(kind == .error ? .errorText : .textInfo, utf8Bytes(text), deadline: sendDeadline()) {
            state.violation = .channelError
        }
    }

    func sendDeadline() -> Int64 {
        min(Syscalls.bootTimeNanoseconds() + 5_000_000_000, hardDeadline)
    }
}

/// The administrator's log for the helper: syslog (authpriv).
struct HelperLog: EventLog {
    let debug: Bool
    mutating func log(_ level: LogLevel, _ message: String) {
        if level == .debug && !debug { return }
        Syscalls.systemLog(level, message)
    }
}

/// One client's request, from HELLO to RESULT.
struct HelperSession {
    let channel: FrameChannel
    let callerUID: UInt32
    let state = ClientState()

    init(channel: FrameChannel, callerUID: UInt32) {
        self.channel = channel
        self.callerUID = callerUID
    }

    mutating func serve(privileged: Bool) -> HelperExit {
        var log = HelperLog(debug: false)
        let opening = Syscalls.bootTimeNanoseconds() + HelperService.openingSeconds * 1_000_000_000
        let configuration = Configuration.load()
        configuration.report(to: &log)
        let configured = configuration.options
        log = HelperLog(debug: configured.debug)
        let silence = configured.timeoutSeconds * 1000 + HelperService.workSlackMilliseconds
        // A bounded number of helpers per caller, counted before anything
        // is read from it: a helper runs as root, so the caller's process
        // limit does not count it, and each one waiting for HELLO is a
        // process the caller could otherwise multiply without end. The
        // refusal is written at once, HELLO first, for the client to read
        // after this process has gone.
        var slot = privileged ? HelperSlots.take(stateDir: configured.stateDir, callerUID: callerUID) : .unavailable
        // A read-only state directory (which a user may cause) keeps the
        // bound with slots in /run.
        if privileged && slot == .unavailable {
            slot = HelperSlots.take(stateDir: utf8Bytes("\(RuntimeCounting.directory)"), callerUID: callerUID)
        }
        if privileged && slot == .unavailable {
            log.log(.notice, "no helper slot can be made for uid \(callerUID) (state directory unusable or full): running unbounded")
        }
        // Helpers this caller left unreaped: each holds a process id until
        // the caller reaps it. Past the bound the caller is refused before
        // any work (it leaves one more, which its process limit counts).
        // Root's own callers are not bounded so: a process killed before
        // it became root is root's in /proc, and anyone can leave those.
        let unreaped = privileged && callerUID != 0
            ? Syscalls.unreapedProcesses(of: callerUID, named: utf8Bytes(HelperBounds.endedName), limit: HelperBounds.unreaped) : 0
        if slot == .allTaken || HelperBounds.refusesUnreaped(unreaped) {
            log.log(.notice, slot == .allTaken ? "uid \(callerUID) already runs \(HelperBounds.live) prompts; refused"
                : "uid \(callerUID) left \(unreaped) helpers unreaped; refused")
            let now = Syscalls.bootTimeNanoseconds()
            _ = channel.send(.hello, HelloFrame.helper(silenceMilliseconds: UInt32(silence)), deadline: now + 1_000_000_000)
            _ = channel.send(.errorText, utf8Bytes("localauth-helper: too many prompts at once for this account"),
                             deadline: now + 1_000_000_000)
            return finish(ResultFrame(status: .refused, pamCode: PAMCode.systemError.rawValue, error: .invalidContext), &log)
        }
        // HELLO, then the request, both within the opening deadline.
        switch channel.receive(deadline: opening) {
        case .success(let frame) where frame.type == .hello && HelloFrame.clientVersion(frame.payload) != nil:
            state.version = HelloFrame.clientVersion(frame.payload) ?? HelperWire.oldestVersion
        case .success: return protocolFailure(.badHello, &log)
        case .failure(let violation): return protocolFailure(violation, &log)
        }
        guard channel.send(.hello, HelloFrame.helper(silenceMilliseconds: UInt32(silence), version: state.version),
                           deadline: opening) else {
            return protocolFailure(.channelError, &log)
        }
        let payload: [UInt8]
        switch channel.receive(deadline: opening) {
        case .success(let frame) where frame.type == .request: payload = frame.payload
        case .success(let frame): return protocolFailure(.outOfOrder(frame.type), &log)
        case .failure(let violation): return protocolFailure(violation, &log)
        }
        guard privileged else {
            log.log(.error, "not running as root (the setuid bit had no effect: a nosuid mount, no_new_privs or a container)")
            return finish(ResultFrame(status: .notPrivileged, pamCode: PAMCode.authInfoUnavailable.rawValue), &log)
        }
        let request: HelperRequest
        switch HelperRequest.decode(payload) {
        case .success(let decoded): request = decoded
        case .failure(let refusal): return refuse(refusal, &log)
        }
        let ownName = Syscalls.userName(uid: callerUID)
        if ownName == nil { log.log(.error, "uid \(callerUID) has no user name; refused") }
        let target: UserIdentity?
        switch HelperPolicy.target(callerUID: callerUID, callerName: ownName, requested: request.user, action: request.action,
                                   lookup: { Syscalls.lookupUser($0).map { UserIdentity(uid: $0.uid, name: $0.name) } }) {
        case .success(.account(let account)): target = account
        case .success(.unknownName): target = nil
        case .failure(let refusal):
            if ownName != nil { log.log(.notice, "uid \(callerUID) asked for another user's prompt; refused") }
            return refuse(refusal, &log)
        }
        let (options, scopeOptions, diagnostics) = HelperPolicy.options(configured: configured, request: request)
        for message in diagnostics { log.log(.notice, "from the caller: \(message)") }
        let hardSeconds = HelperPolicy.hardDeadlineSeconds(options)
        Syscalls.setAlarm(seconds: UInt32(hardSeconds + 5))
        let hardDeadline = Syscalls.bootTimeNanoseconds() + Int64(hardSeconds) * 1_000_000_000

        let facts = ScopeFacts(service: request.service, callerUID: callerUID, targetUID: target?.uid, targetName: target?.name ?? request.user,
                               requestingUser: [], remoteHost: [], localHostName: Syscalls.hostName(),
                               sessionIsRemote: LogindSession.callerIsRemote())
        let scope = Scope.decide(facts, options: scopeOptions)
        if case .outOfScope = scope {
            log.log(.debug, "out of scope for service \(printableText(request.service)); ignoring")
            return finish(ResultFrame(status: .evaluated, pamCode: ResultTable.pamCode(for: .outOfScope).rawValue), &log)
        }
        let prompter = ChannelPrompter(channel: channel, state: state,
                                       answerNanoseconds: Int64(options.answerTimeoutSeconds) * 1_000_000_000, hardDeadline: hardDeadline)
        if request.action.isSecret {
            guard let target else { return refuse(.badSecretRequest, &log) }
            return serveSecret(request, target: target, scope: scope, options: options, prompter: prompter, &log)
        }
        let mode = HelperPolicy.mode(options, service: request.service)
        var engine = makeSystemEngine(options, RequestFacts(mode: mode, channel: channel.fd), prompter: prompter, log: log)
        let session = request.action == .evaluate ? LogindSession.callerSession() : []
        guard let target else {
            // A root caller's name without an account: the look-alike (R14).
            return evaluate(request, scope: scope, userName: request.user, target: nil, options: options, mode: mode, session: session,
                            engine: &engine, &log)
        }
        var path = HelperPolicy.path(request)
        while true {
            switch path {
            case .preflight:
                switch engine.canEvaluate(options.policy, user: target, service: request.service) {
                case .success(let domainState):
                    return finish(ResultFrame(status: .evaluated, pamCode: PAMCode.success.rawValue, method: .biometry,
                                               domainState: domainState), &log)
                case .failure(let error):
                    return finish(ResultFrame(status: .evaluated, outcome: .failure(error), failDelay: false), &log)
                }
            case .reuse(let seconds, let then):
                if let method = engine.ledger.recentUnlock(target, session: session, withinSeconds: seconds) {
                    log.log(.notice, "uid \(target.uid): a success in this session within \(seconds) s stands in for localauth-app")
                    return finish(ResultFrame(status: .evaluated, pamCode: PAMCode.success.rawValue, method: method), &log)
                }
                path = then
            case .withoutPrompt:
                let error = HelperPolicy.errorWithoutPrompt(preflight: engine.canEvaluate(options.policy, user: target,
                                                                                          service: request.service))
                return finish(ResultFrame(status: .evaluated, outcome: .failure(error), failDelay: false), &log)
            case .evaluate:
                return evaluate(request, scope: scope, userName: target.name, target: target, options: options, mode: mode,
                                session: session, engine: &engine, &log)
            }
        }
    }

    /// The evaluation (prompt, scan or password mode), and what the client
    /// sent as it ended.
    mutating func evaluate(_ request: HelperRequest, scope: ScopeDecision, userName: [UInt8], target: UserIdentity?, options: Options,
                           mode: InteractionMode, session: [UInt8],
                           engine: inout SystemEngine<ChannelPrompter, FileStateStore, HelperLog>, _ log: inout HelperLog) -> HelperExit {
        let passcode = SecretBuffer()
        defer { passcode.wipe() }
        let outcome: Outcome
        let failDelay: Bool
        switch runEvaluation(request, scope: scope, userName: userName, target: target, options: options, mode: mode, session: session,
                             passcode: passcode, engine: &engine, &log) {
        case .success(let ended): (outcome, failDelay) = ended
        case .failure(let exit): return exit
        }
        if outcome != .success(.passcode) { passcode.wipe() }
        var answer = ResultFrame(status: .evaluated, outcome: outcome, failDelay: failDelay)
        if HelperPolicy.carriesDomainState(outcome, service: request.service), let target,
           case .success(let domainState) = engine.canEvaluate(options.policy, user: target, service: request.service) {
            answer.domainState = Array(domainState.prefix(ResultFrame.maxDomainState))
        }
        let exit = finish(answer, &log)
        // The right password passed through here (a locker's unlock, an
        // app's fallback): the user's secrets key is kept openable with it.
        if outcome == .success(.passcode), let target {
            rememberAfterVerdict(passcode, keeper: SecretKeeper(items: ItemStore(stateDirectory: options.stateDir, uid: target.uid,
                                                                                 accountName: target.name, tpm: options.tpm)),
                                 userName: target.name, &log)
        }
        return exit
    }

    /// One evaluation under `options.policy`, and what the client sent as it
    /// ended: the outcome to report, or the exit of a broken conversation.
    /// The password typed is left in `passcode` (the caller wipes it).
    mutating func runEvaluation(_ request: HelperRequest, scope: ScopeDecision, userName: [UInt8], target: UserIdentity?, options: Options,
                                mode: InteractionMode, session: [UInt8], passcode: SecretBuffer,
                                engine: inout SystemEngine<ChannelPrompter, FileStateStore, HelperLog>,
                                _ log: inout HelperLog) -> Result<(Outcome, Bool), HelperExit> {
        var evaluation = Request(scope: scope, userName: userName, user: target, service: request.service,
                                 tty: request.tty, mode: mode, silent: false)
        evaluation.session = session
        evaluation.callerActsForAName = callerUID == 0
        // Only an app's own prompt under policy owner, with a person at the
        // keys of a client that speaks version 3.
        state.readsKeys = request.clientReadsKeys && request.interactive && state.version >= 3 && options.policy == .owner
            && KnownServices.kind(of: request.service) == .app
        evaluation.clientReadsKeys = state.readsKeys
        let result = engine.evaluate(evaluation, policy: options.policy, passcode: passcode)
        if let violation = state.violation { return .failure(protocolFailure(violation, &log)) }
        if case .failure = result.outcome, !state.cancelled {
            // What ended a fingerprint wait early and was not read yet.
            switch pendingFromClient() {
            case .success(let frame):
                switch HelperPolicy.lateFrame(frame.type) {
                case .appCancel: state.cancelled = true
                case .ignored: break
                case .violation: return .failure(protocolFailure(.outOfOrder(frame.type), &log))
                }
            case .failure(.timedOut): break
            case .failure(let violation): return .failure(protocolFailure(violation, &log))
            }
        }
        return .success((HelperPolicy.reported(result.outcome, appCancelled: state.cancelled), result.failDelay))
    }

    /// A frame (or the end of the channel) that is already waiting.
    func pendingFromClient() -> Result<ReceivedFrame, ProtocolViolation> {
        channel.receive(deadline: Syscalls.bootTimeNanoseconds() + 1_000_000)
    }

    func refuse(_ refusal: HelperRequest.Refusal, _ log: inout HelperLog) -> HelperExit {
        let text: String
        switch refusal {
        case .malformed: text = "malformed request"
        case .missingService: text = "request without a service name"
        case .badSecretRequest: text = "a secret request names one of your own items under the apps' service (from a client of version 4)"
        case .notAllowed(let key):
            text = bytesEqual(key, "user") ? "only your own account can be authenticated here"
                : "option \(printableText(key)) is set by the administrator only (in the configuration file)"
        }
        log.log(.notice, "request from uid \(callerUID) refused: \(text)")
        _ = channel.send(.errorText, utf8Bytes("localauth-helper: \(text)"), deadline: Syscalls.bootTimeNanoseconds() + 1_000_000_000)
        return finish(ResultFrame(status: .refused, pamCode: PAMCode.systemError.rawValue, error: .invalidContext), &log)
    }

    func finish(_ result: ResultFrame, _ log: inout HelperLog) -> HelperExit {
        let sent = channel.send(.result, result.encoded(), deadline: Syscalls.bootTimeNanoseconds() + 5_000_000_000)
        if !sent { log.log(.notice, "client of uid \(callerUID) gone before the result") }
        return result.pamCode == PAMCode.success.rawValue ? .success : .failure
    }

    func protocolFailure(_ violation: ProtocolViolation, _ log: inout HelperLog) -> HelperExit {
        log.log(.notice, "client of uid \(callerUID): \(violation.text); ended without a result")
        return .protocolError
    }
}

/// Slots that bound how many helpers run at once for one caller: a lock on
/// one of the caller's four bytes (at uid × 4) of the one file
/// `helpers/slots` in the state directory, held until the helper exits. One
/// file for every caller: a new caller needs no inode, so the bound holds
/// on a full filesystem, and no caller can take another's bytes.
enum HelperSlots {
    static let perCaller = HelperBounds.live

    enum Taken: Equatable {
        /// This descriptor holds the slot until the process exits.
        case held(Int32)
        /// The caller's every slot is held by another helper.
        case allTaken
        /// The slots file cannot be had (the directory unusable, or no room
        /// ever to make it): the bound cannot be told, and a right password
        /// must not be refused for that; the state store's checks decide.
        case unavailable
    }

    static func take(stateDir: [UInt8], callerUID: UInt32) -> Taken {
        guard let parts = TrustedPath.parts(stateDir),
              case .success(let state) = TrustedPath.openDirectory(parts, trusted: TrustedPath.rootsOrSticky) else { return .unavailable }
        defer { Syscalls.close(state) }
        let name = literalBytes("helpers")
        if (try? Syscalls.facts(at: state, name)) == nil { try? Syscalls.makeDirectory(at: state, name, mode: 0o700) }
        guard let slots = try? Syscalls.open(at: state, name, .directory) else { return .unavailable }
        defer { Syscalls.close(slots) }
        guard let facts = try? Syscalls.facts(slots), facts.owner == 0, facts.mode & 0o077 == 0,
              let fd = try? Syscalls.open(at: slots, literalBytes("slots"), .lockFile) else { return .unavailable }
        guard let file = try? Syscalls.facts(fd), file.isRegular, file.owner == 0 else {
            Syscalls.close(fd)
            return .unavailable
        }
        for index in 0..<perCaller {
            switch try? Syscalls.tryLockByte(fd, at: Int64(callerUID) * Int64(perCaller) + Int64(index)) {
            case true?: return .held(fd)
            case false?: continue
            case nil:
                Syscalls.close(fd)
                return .unavailable
            }
        }
        Syscalls.close(fd)
        return .allTaken
    }
}
