// pam_localauth.so's entry points, called by the C shim. Each reads the
// call's facts, builds the real engine and maps its outcome to a PAM code
// through the result table; everything else lives in the library and the
// adapters.
import LocalAuth
import LibcSystem
import PAMAndBusAdapters

/// Every answer goes through `ResultTable.authenticationAnswer`: whatever
/// path made it, the module never answers `PAM_IGNORE`, which `required`
/// would pass through as if nothing had been asked.
@_cdecl("localauth_authenticate")
public func localauthAuthenticate(_ pamh: OpaquePointer?, _ flags: Int32, _ argc: Int32,
                                  _ argv: UnsafePointer<UnsafePointer<CChar>?>?) -> Int32 {
    ResultTable.authenticationAnswer(authenticate(pamh, flags, argc, argv))
}

func authenticate(_ pamh: OpaquePointer?, _ flags: Int32, _ argc: Int32, _ argv: UnsafePointer<UnsafePointer<CChar>?>?) -> Int32 {
    guard let pamh else { return PAMCode.systemError.rawValue }
    // An instance reached inside our own password check steps aside, and
    // the visit is noted: that check then gives no verdict, whatever the
    // control flag of this line made of the answer.
    if PAMHandle.insideOwnPasscodeCheck { return ResultTable.stepAside.rawValue }
    let handle = PAMHandle(raw: pamh)
    guard let arguments = moduleArguments(argc, argv) else {
        // More arguments than the module reads: it would act on a line other
        // than the one written (and the lint judges). Refuse the line.
        var log = PAMLog(handle: handle, debug: false)
        log.log(.error, "more than " + String(OptionParser.maxArguments) + " arguments on the stack line; refused")
        return PAMCode.systemError.rawValue
    }
    let options = loadOptions(handle, arguments: arguments)
    var log = PAMLog(handle: handle, debug: options.debug)
    if options.authsucc {
        // Resets happen only in the root path; the helper never accepts one.
        guard Syscalls.effectiveUserID() == 0 else {
            log.log(.notice, "authsucc not running as root: nothing reset")
            return ResultTable.stepAside.rawValue
        }
        return resetAfterPasswordModule(handle, options: options, log: log)
    }
    let scope: ScopeDecision, userName: [UInt8], target: (uid: UInt32, name: [UInt8])?, session: CallerSession
    let socketAgentProgram: [UInt8]?
    switch callScope(handle, options: options, log: &log) {
    case .decided(let end): return end
    case .acting(let decision, let name, let found, let caller, let agentProgram):
        (scope, userName, target, session, socketAgentProgram) = (decision, name, found, caller, agentProgram)
    }
    let service = handle.service
    let tty = handle.tty
    // Screen lockers run as the user, who can neither keep the attempt
    // state nor read the passwords: the setuid helper evaluates for them.
    // A root caller in scan mode goes through it too: such a program ends
    // the conversation by killing its process (GDM sends SIGTERM), and only
    // a process of its own can then give back an attempt no finger reached.
    if Syscalls.effectiveUserID() != 0 {
        // Not root: an unknown name is out of scope already (R1).
        guard scope == .inScope else { return ResultTable.stepAside.rawValue }
        return authenticateThroughHelper(handle, options: options, flags: flags, userName: userName, log: log)
    }
    // sudo's own arguments are read only where a person could be at the terminal.
    let owns = Syscalls.isControllingTerminal(tty)
    let reads = owns && Syscalls.standardInputIsControllingTerminal()
    let caller = CallerFacts(ownsItsTerminal: owns, readsItsTerminal: reads,
                             inForeground: reads && Syscalls.standardInputIsForeground(), threads: Syscalls.threadCount(),
                             passwordFromElsewhere: reads && SudoCommandLine.takesThePasswordElsewhere(Syscalls.ownArguments()))
    let mode = InteractionMode.chosen(options, service: service, caller: caller)
    var user: UserIdentity? = nil
    if scope == .inScope, let target {
        user = UserIdentity(uid: target.uid, name: target.name)
        // This module's line ran for the uid in this run of the stack (R11's
        // authsucc line resets only after one), whichever path evaluates it.
        handle.setMarker(uid: target.uid)
    }
    // Unknown names too, so that the two take the same way and time (R14).
    if mode == .scan && (scope == .inScope || scope == .unknownUser) {
        return authenticateThroughHelper(handle, options: options, flags: flags, userName: userName, log: log)
    }
    let remoteHost = handle.remoteHost
    let requestingUser = handle.requestingUser
    var request = Request(scope: scope, userName: userName, user: user, service: service, tty: tty, remoteHost: remoteHost,
                          mode: mode, silent: flags & PAMValue.silentFlag != 0)
    request.session = session.name
    // A root caller acts for whatever name it was given, except polkit's
    // socket-activated helper, whose agent is the account's own (scope):
    // the agent stands for the caller there, as the setuid helper's real
    // uid does, and hears why the reader is not used.
    request.callerActsForAName = Syscalls.realUserID() == 0 && socketAgentProgram == nil
    // polkit's dialogs whose agent takes the verdict while prompting: the
    // password prompt stays open while the reader waits (touch or type).
    request.promptStaysOpen = AdministratorDialog.promptStaysOpen(service: service, mode: mode, ownProgram: Syscalls.ownProgram(),
                                                                  agentProgram: socketAgentProgram ?? Syscalls.parentProgram())
    // A person at the program's own terminal: the module reads the keys
    // while the reader waits (touch or type), and puts the terminal back.
    let keyboard = TerminalKeyboard()
    defer { keyboard.end() }
    let openPrompt = request.promptStaysOpen ? OpenPrompt(handle: handle) : OpenPrompt()
    var facts = RequestFacts(mode: mode, tty: tty, remoteHost: remoteHost, requestingUser: requestingUser)
    // The seat rules look at the agent's session where the agent asks.
    if socketAgentProgram != nil {
        facts.sessionID = session.name
        facts.userManagerOwner = session.userManagerOwner
    }
    var engine = makeTerminalEngine(options, facts,
                                    conversation: PAMPrompter(handle: handle), keyboard: keyboard, openPrompt: openPrompt,
                                    promptStaysOpen: request.promptStaysOpen, log: log)
    let passcode = SecretBuffer()
    defer { passcode.wipe() }
    let result = engine.evaluate(request, policy: options.policy, passcode: passcode)
    // Nothing is said between a match and the answer: the agent helper
    // writes its verdict next, and the prompt left open is left to its exit
    // (the stack's account modules may still send it messages meanwhile:
    // polkit's helper writes those without reading).
    openPrompt.end(succeeded: result.pamCode == .success)
    if case .success(.passcode) = result.outcome { handle.setAuthToken(passcode) }
    if result.failDelay { handle.requestFailDelay() }
    log.log(.debug, "result \(result.pamCode.rawValue) for service \(printableText(service))")
    return result.pamCode.rawValue
}

/// The non-root path: the same scope rules decide whether to act; the helper
/// then runs the policy as root and this relays its conversation. Only the
/// helper's RESULT frame can make this a success.
func authenticateThroughHelper(_ handle: PAMHandle, options: Options, flags: Int32, userName: [UInt8], log: PAMLog) -> Int32 {
    var log = log
    let service = handle.service
    var request = HelperRequest()
    request.service = service
    request.user = userName
    request.tty = handle.tty
    request.presentation = presentationFields(options, silent: flags & PAMValue.silentFlag != 0)
    var client = HelperClient(prompter: PAMPrompter(handle: handle))
    defer { client.lastAnswer.wipe() }
    let verdict = client.run(request)
    switch verdict {
    case .granted(let method, _):
        if method == .passcode { handle.setAuthToken(client.lastAnswer) }
    case .denied(_, let failDelay):
        if failDelay { handle.requestFailDelay() }
    case .unavailable:
        log.log(.error, (verdict.problem ?? "") + "; leaving the decision to the rest of the stack")
    case .refused, .failed:
        log.log(.error, verdict.problem ?? "")
    case .outOfScope:
        break
    }
    log.log(.debug, "result \(verdict.pamCode.rawValue) from localauth-helper for service \(printableText(service))")
    return verdict.pamCode.rawValue
}

/// The outcome of the scope rules (R1) for this call, the same for both paths.
enum CallScope {
    /// Nothing more to do: the PAM code to return (no user, out of scope).
    case decided(Int32)
    /// The module acts: the decision, the target as PAM named it, the
    /// account if it exists, the caller's logind session, and in polkit's
    /// socket-activated helper the agent's program.
    case acting(ScopeDecision, [UInt8], (uid: UInt32, name: [UInt8])?, CallerSession, [UInt8]?)
}

func callScope(_ handle: PAMHandle, options: Options, log: inout PAMLog) -> CallScope {
    let service = handle.service
    let userName: [UInt8]
    switch handle.userName() {
    case .name(let name): userName = name
    case .failed(let code): return .decided(code.rawValue)
    }
    let target = Syscalls.lookupUser(userName)
    let callerUID = Syscalls.realUserID()
    // polkit's socket-activated helper: the agent on its standard input
    // asks, from the agent's session (the helper itself is in none).
    let inPolkitsSocketHelper = callerUID == 0 && Scope.isPolkit(service)
    let agent = inPolkitsSocketHelper ? PolkitAgent.onStandardInput() : nil
    let session = inPolkitsSocketHelper ? agent?.session ?? .none : LogindSession.caller()
    let facts = ScopeFacts(service: service, callerUID: callerUID, targetUID: target?.uid, targetName: userName,
                           requestingUser: handle.requestingUser, remoteHost: handle.remoteHost,
                           localHostName: Syscalls.hostName(), sessionIsRemote: session.isRemote, polkitAgentUID: agent?.uid)
    let scope = Scope.decide(facts, options: options)
    if case .outOfScope = scope {
        log.log(.debug, "out of scope for service \(printableText(service)); ignoring")
        return .decided(ResultTable.pamCode(for: .outOfScope).rawValue)
    }
    return .acting(scope, userName, target, session, agent?.program)
}

/// What the stack line may tell the helper: presentation only.
func presentationFields(_ options: Options, silent: Bool) -> [([UInt8], [UInt8])] {
    var shown = options
    if silent { shown.silent = true }
    var fields: [([UInt8], [UInt8])] = []
    for key in OptionKey.allCases where key.setters.contains(.presentation) {
        if let value = shown.wireValue(of: key) { fields.append((literalBytes(key.name), value)) }
    }
    return fields
}

@_cdecl("localauth_setcred")
public func localauthSetcred(_ pamh: OpaquePointer?, _ flags: Int32, _ argc: Int32,
                             _ argv: UnsafePointer<UnsafePointer<CChar>?>?) -> Int32 {
    PAMCode.success.rawValue
}

/// Never fails the account and never resets anything (R11).
@_cdecl("localauth_acct_mgmt")
public func localauthAccountManagement(_ pamh: OpaquePointer?, _ flags: Int32, _ argc: Int32,
                                       _ argv: UnsafePointer<UnsafePointer<CChar>?>?) -> Int32 {
    PAMCode.ignore.rawValue
}

/// R11: reached only through the password module's success; resets the
/// counters only when this module's own authenticate ran for the same uid,
/// a module set `PAM_AUTHTOK` in this run of the stack (libpam clears it
/// when each pam_authenticate begins), and that token passes the passcode
/// service (so a misplaced line never resets after a wrong password). The marker alone outlives a run: sudo
/// calls pam_authenticate up to three times on one handle, and an authsucc
/// line placed before the password line would otherwise reset, in the next
/// run, the misses of a run whose password was wrong.
/// The line only records: it is no credential, so it never answers success
/// (under `sufficient` that would end the stack as granted) and always
/// steps aside; its line is `optional`.
func resetAfterPasswordModule(_ handle: PAMHandle, options: Options, log: PAMLog) -> Int32 {
    var log = log
    guard case .name(let name) = handle.userName(), let target = Syscalls.lookupUser(name),
          let marked = handle.marker(), marked == target.uid else {
        log.log(.notice, "authsucc without a matching earlier prompt in this transaction; nothing reset")
        return ResultTable.stepAside.rawValue
    }
    guard handle.authTokenIsSet else {
        log.log(.notice, "authsucc before any password in this run of the stack; nothing reset (the line belongs after the password module)")
        return ResultTable.stepAside.rawValue
    }
    // The token is what was typed, right or wrong (pam_unix sets it before
    // it checks): it must pass the passcode service here, so that no stack
    // shape, control flag or locale can bring a wrong password to a reset.
    let token = SecretBuffer()
    defer { token.wipe() }
    var verifier = PAMPasscodeVerifier(service: options.passcodeService, tty: handle.tty, remoteHost: handle.remoteHost,
                                       requestingUser: handle.requestingUser)
    let verdict: PasscodeVerdict = handle.copyAuthToken(into: token) && verifier.begin(userName: target.name)
        ? verifier.verify(token) : .wrong
    verifier.end()
    guard verdict == .correct else {
        log.log(.warning, "authsucc reached with a password that is not the account's (checked through the passcode service): nothing reset; the line is misplaced (localauth config --check)")
        return ResultTable.stepAside.rawValue
    }
    var ledger = makeSystemLedger(options, log: log)
    // A failed write is logged by the ledger; the answer is the same.
    _ = ledger.resetAfterPasswordSuccess(UserIdentity(uid: target.uid, name: target.name),
                                         enrollment: currentEnrollment(userName: target.name))
    return ResultTable.stepAside.rawValue
}

/// The line's arguments; nil when there are more than the module reads.
func moduleArguments(_ argc: Int32, _ argv: UnsafePointer<UnsafePointer<CChar>?>?) -> [[UInt8]]? {
    guard let argv, argc > 0 else { return [] }
    guard Int(argc) <= OptionParser.maxArguments else { return nil }
    var arguments: [[UInt8]] = []
    for index in 0..<Int(argc) {
        if let argument = argv[index] { arguments.append(Syscalls.bytes(ofCString: argument, limit: 8192)) }
    }
    return arguments
}

/// The configuration file (if trusted) and the arguments; every problem is
/// logged and safe values stay.
func loadOptions(_ handle: PAMHandle, arguments: [[UInt8]]) -> Options {
    let configuration = Configuration.load(arguments: arguments)
    var log = PAMLog(handle: handle, debug: false)
    configuration.report(to: &log)
    return configuration.options
}
