import CLocalAuth
import LocalAuth

/// The module's entry points, called by the C shim. Each reads the call's
/// facts, builds the engine over the real adapters and maps the outcome to a
/// PAM code through `ResultTable`.

@_cdecl("localauth_authenticate")
public func localauthAuthenticate(_ pamh: OpaquePointer?, _ flags: Int32, _ argc: Int32,
                                  _ argv: UnsafePointer<UnsafePointer<CChar>?>?) -> Int32 {
    guard let pamh else { return PAMCode.systemError.rawValue }
    // SPEC §6: an instance reached inside our own passcode check does nothing.
    if la_passcode_guard_active() != 0 { return PAMCode.ignore.rawValue }
    let handle = PAMHandle(raw: pamh)
    let options = loadOptions(handle, arguments: moduleArguments(argc, argv))
    var log = PAMLog(handle: handle, debug: options.debug)
    if options.authsucc { return resetAfterPasswordModule(handle, options: options, log: &log) }
    // Without root the attempt state cannot be kept (screen lockers run as
    // the user; the privileged helper of SPEC §8 is still to come): step
    // aside rather than fail, so the stack's password line decides (R12).
    if Syscalls.effectiveUserID() != 0 {
        log.log(.notice, "not running as root: the attempt state cannot be kept; ignoring")
        return PAMCode.ignore.rawValue
    }

    let service = handle.stringItem(PAM_SERVICE)
    let (userStatus, userName) = handle.userName()
    if userStatus != PAM_SUCCESS {
        return userStatus == PAM_CONV_ERR ? PAMCode.conversationError.rawValue : PAMCode.systemError.rawValue
    }
    let tty = handle.stringItem(PAM_TTY)
    let remoteHost = handle.stringItem(PAM_RHOST)
    let requestingUser = handle.stringItem(PAM_RUSER)
    let target = Syscalls.lookupUser(userName)
    let facts = ScopeFacts(service: service, callerUID: Syscalls.realUserID(), targetUID: target?.uid, targetName: userName,
                           requestingUser: requestingUser, remoteHost: remoteHost, localHostName: Syscalls.hostName(),
                           sessionIsRemote: loginSessionIsRemote())
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
                          mode: mode, silent: flags & PAMConstant.silentFlag != 0)
    var engine = Engine(options: options, sensor: FprintdSensor(interruptible: mode == .terminal),
                        verifier: PAMPasscodeVerifier(service: options.passcodeService, tty: tty, remoteHost: remoteHost,
                                                      requestingUser: requestingUser),
                        prompter: PAMPrompter(handle: handle), store: FileStateStore(directoryPath: options.stateDir),
                        clock: SystemClock(), log: log)
    let passcode = SecretBuffer()
    defer { passcode.wipe() }
    let result = engine.evaluate(request, policy: options.policy, passcode: passcode)
    engine.sensor.close()
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
func resetAfterPasswordModule(_ handle: PAMHandle, options: Options, log: inout PAMLog) -> Int32 {
    let (status, name) = handle.userName()
    guard status == PAM_SUCCESS, let target = Syscalls.lookupUser(name), let marked = handle.marker(), marked == target.uid else {
        log.log(.notice, "authsucc without a matching earlier prompt in this transaction; nothing reset")
        return PAMCode.ignore.rawValue
    }
    var engine = Engine(options: options, sensor: NoSensor(),
                        verifier: PAMPasscodeVerifier(service: options.passcodeService, tty: [], remoteHost: [], requestingUser: []),
                        prompter: PAMPrompter(handle: handle), store: FileStateStore(directoryPath: options.stateDir),
                        clock: SystemClock(), log: log)
    return engine.resetAfterPasswordSuccess(UserIdentity(uid: target.uid, name: target.name))
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

/// Reads the configuration file (if trusted) and the arguments; logs every
/// problem and carries on with safe values.
func loadOptions(_ handle: PAMHandle, arguments: [[UInt8]]) -> Options {
    var parser = OptionParser()
    let path = OptionParser.configPath(in: arguments) ?? literalBytes(Options.defaultConfigPath)
    let (contents, problem) = Syscalls.readTrustedFile(path, limit: OptionParser.maxConfigSize)
    if let problem { parser.note("configuration file \(printableText(path)) ignored: \(problem)") }
    if let contents { parser.applyConfigFile(contents) }
    parser.applyArguments(arguments)
    parser.finish()
    for message in parser.diagnostics { handle.log(LOG_WARNING, message) }
    return parser.options
}
