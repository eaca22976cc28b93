// pam_localauth.so's entry points, called by the C shim. Each reads the
// call's facts, builds the real engine and maps its outcome to a PAM code
// through the result table; everything else lives in the library and the
// adapters.
import LocalAuth
import SystemAdapters

@_cdecl("localauth_authenticate")
public func localauthAuthenticate(_ pamh: OpaquePointer?, _ flags: Int32, _ argc: Int32,
                                  _ argv: UnsafePointer<UnsafePointer<CChar>?>?) -> Int32 {
    guard let pamh else { return PAMCode.systemError.rawValue }
    // An instance reached inside our own password check does nothing.
    if PAMHandle.insideOwnPasscodeCheck { return PAMCode.ignore.rawValue }
    let handle = PAMHandle(raw: pamh)
    let options = loadOptions(handle, arguments: moduleArguments(argc, argv))
    var log = PAMLog(handle: handle, debug: options.debug)
    if options.authsucc { return resetAfterPasswordModule(handle, options: options, log: log) }
    // Without root the attempt state cannot be kept (screen lockers run as
    // the user, and the privileged helper is still to come): step aside
    // rather than fail, so the stack's password line decides (R12).
    if Syscalls.effectiveUserID() != 0 {
        log.log(.notice, "not running as root: the attempt state cannot be kept; ignoring")
        return PAMCode.ignore.rawValue
    }

    let service = handle.service
    let userName: [UInt8]
    switch handle.userName() {
    case .name(let name): userName = name
    case .failed(let code): return code.rawValue
    }
    let tty = handle.tty
    let remoteHost = handle.remoteHost
    let requestingUser = handle.requestingUser
    let target = Syscalls.lookupUser(userName)
    let facts = ScopeFacts(service: service, callerUID: Syscalls.realUserID(), targetUID: target?.uid, targetName: userName,
                           requestingUser: requestingUser, remoteHost: remoteHost, localHostName: Syscalls.hostName(),
                           sessionIsRemote: LogindSession.callerIsRemote())
    let scope = Scope.decide(facts, options: options)
    if case .outOfScope = scope {
        log.log(.debug, "out of scope for service \(printableText(service)); ignoring")
        return PAMCode.ignore.rawValue
    }
    var user: UserIdentity? = nil
    if scope == .inScope, let target {
        user = UserIdentity(uid: target.uid, name: target.name)
        handle.setMarker(uid: target.uid)
    }
    let mode = options.mode ?? ((Syscalls.isControllingTerminal(tty) && Syscalls.threadCount() == 1) ? .terminal : .prompt)
    let request = Request(scope: scope, userName: userName, user: user, service: service, tty: tty, remoteHost: remoteHost,
                          mode: mode, silent: flags & PAMValue.silentFlag != 0)
    var engine = makeSystemEngine(options, RequestFacts(mode: mode, tty: tty, remoteHost: remoteHost, requestingUser: requestingUser),
                                  prompter: PAMPrompter(handle: handle), log: log)
    let passcode = SecretBuffer()
    defer { passcode.wipe() }
    let result = engine.evaluate(request, policy: options.policy, passcode: passcode)
    if case .success(.passcode) = result.outcome { handle.setAuthToken(passcode) }
    if result.failDelay { handle.requestFailDelay() }
    log.log(.debug, "result \(result.pamCode.rawValue) for service \(printableText(service))")
    return result.pamCode.rawValue
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
/// counters only when this module's own authenticate ran for the same uid.
func resetAfterPasswordModule(_ handle: PAMHandle, options: Options, log: PAMLog) -> Int32 {
    var log = log
    guard case .name(let name) = handle.userName(), let target = Syscalls.lookupUser(name),
          let marked = handle.marker(), marked == target.uid else {
        log.log(.notice, "authsucc without a matching earlier prompt in this transaction; nothing reset")
        return PAMCode.ignore.rawValue
    }
    var ledger = makeSystemLedger(options, log: log)
    return ledger.resetAfterPasswordSuccess(UserIdentity(uid: target.uid, name: target.name))
        ? PAMCode.success.rawValue : PAMCode.ignore.rawValue
}

func moduleArguments(_ argc: Int32, _ argv: UnsafePointer<UnsafePointer<CChar>?>?) -> [[UInt8]] {
    guard let argv, argc > 0 else { return [] }
    var arguments: [[UInt8]] = []
    for index in 0..<min(Int(argc), 256) {
        if let argument = argv[index] { arguments.append(Syscalls.bytes(ofCString: argument, limit: 8192)) }
    }
    return arguments
}

/// The configuration file (if trusted) and the arguments; every problem is
/// logged and safe values stay.
func loadOptions(_ handle: PAMHandle, arguments: [[UInt8]]) -> Options {
    let configuration = Configuration.load(arguments: arguments)
    if let problem = configuration.fileProblem {
        handle.log(.warning, "configuration file \(printableText(configuration.path)) ignored: \(problem)")
    }
    for message in configuration.diagnostics { handle.log(.warning, message) }
    return configuration.options
}
