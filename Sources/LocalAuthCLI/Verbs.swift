import LocalAuth
import LibcSystem
import LocalAuthTerminal
import PAMAndBusAdapters

// MARK: - status

/// What `localauth status` reports, computed once; rendered as text or JSON.
struct StatusReport {
    var user: UserIdentity
    var availability: String
    var device: [UInt8]
    var fingers: [[UInt8]]
    var domainState: [UInt8]?
    /// The record could be read (root only).
    var readable: Bool
    var recordStatus: String
    var damage: String?
    var record: StateRecord?
    var fingerprintFailures: Int
    var lockout: Int
    var locked: Bool
    var lockReason: String?
    var remainingBackoffMilliseconds: Int64
    /// The rule that asks for the password before the finger (nil: none;
    /// unknown when the record is not readable).
    var passcodeRequirement: PasscodeRequirement?
    /// What logind says about the caller's session and the lid.
    var seat: SeatObservation
    /// Whose-touch verdict for a service that is no screen locker.
    var touchDenial: TouchDenial?
    /// (key, value, where it came from)
    var configuration: [(String, String, String)]
    var problems: [String]
    /// Where the counting goes on while the state directory's filesystem
    /// is read-only (RuntimeCounting); nil while it counts on disk.
    var runtimeCounting: String? = nil
    /// What protects the stored secrets' machine key: `tpm` or `file`, and
    /// the sentence.
    var secretsKey: (kind: String, text: String) = ("file", "")
}

func statusCommand(_ arguments: Arguments) throws -> ExitCode {
    let report = statusReport(user: try targetUser(arguments), try loadConfiguration(arguments))
    print(arguments.flags.contains("--json") ? statusJSON(report) : statusText(report), terminator: "")
    return .success
}

func statusReport(user: UserIdentity, _ configuration: LoadedConfiguration) -> StatusReport {
    let options = configuration.options
    var sensorOnly = FprintdSensor(interruption: .none, clock: SystemClock())
    let sensor = sensorOnly.describe(userName: user.name)
    sensorOnly.close()
    var ledger = makeSystemLedger(options, log: StandardErrorLog(verbose: options.debug))
    let inspection = Syscalls.effectiveUserID() == 0 ? ledger.inspect(user) : nil

    // Only root's inspection touches the store.
    let runtimeCounting = inspection != nil && ledger.lastCountedInRuntime
        ? "state directory read-only: counting in \(RuntimeCounting.directory) until it is writable" : nil
    var availability = "unreachable"
    var domainState: [UInt8]? = nil
    switch sensor.availability {
    case .available(let state): availability = "available"; domainState = state
    case .notEnrolled: availability = "not-enrolled"
    case .noDevice: availability = "no-device"
    case .unreachable: availability = "unreachable"
    case .failing: availability = "failing"
    }
    let record = inspection?.record
    let recordStatus: String
    var damage: String? = nil
    switch inspection?.status {
    case .none: recordStatus = "unreadable"
    case .some(.absent): recordStatus = "absent"
    case .some(.loaded): recordStatus = "loaded"
    case .some(.damaged(let why)): recordStatus = "damaged"; damage = "\(why.text)"
    }
    let fingerprintFailures = record?.fingerprintFailures ?? (recordStatus == "damaged" ? options.lockout : 0)
    let locked = fingerprintFailures >= options.lockout
    var lockReason: String? = nil
    if recordStatus == "damaged" {
        lockReason = "the record is damaged (\(damage ?? "")); the next prompt replaces it locked (R12)"
    } else if locked {
        lockReason = "\(fingerprintFailures) consecutive failed fingerprint attempts (lockout \(options.lockout))"
    }
    var requirement: PasscodeRequirement? = nil
    if inspection != nil, recordStatus != "damaged" {
        let moment = ledger.now()
        let current = record ?? StateRecord(uid: user.uid, userName: user.name, createdWallSeconds: moment.wall)
        requirement = BiometryRules.passcodeRequirement(current, moment: moment, domainState: domainState ?? [], options: options)
    }
    var logind = LogindSeat(standInAllowed: options.userManagerStandIn)
    let seat = logind.observe()
    let denial = BiometryRules.touchDenial(seat, user: user, service: literalBytes(KnownServices.test), options: options)
    let rows = configurationRows(options).map { key, value in
        (key, value, configuration.keysFromFile.contains(key) ? printableText(configuration.path) : "default")
    }
    let tpmUse = TPMUse(options.tpm, deviceExists: options.tpm == .auto && Syscalls.isTPMDevice(literalBytes(TPMChoice.defaultDevice)))
    let protection = MachineKeyPolicy.protection(options.tpm, use: tpmUse)
    var protectionText = protection.text
    // Root sees a root-only key file kept beside a sealed key (made while
    // `tpm = off`): it is on the disk in the clear. Looked at, not read:
    // its bytes are the key. Only a file the secrets would take for one
    // (reached through root's directories; root's, for root alone, one
    // name, a key's size) is named so.
    if inspection != nil, tpmUse == .automatic || tpmUse == .named, rootOnlyKeyFileExists(stateDir: options.stateDir) {
        protectionText += "; a root-only key file made while tpm = off lies beside it, in the clear (the log says more)"
    }
    return StatusReport(user: user, availability: availability, device: sensor.device, fingers: sensor.fingers, domainState: domainState,
                        readable: inspection != nil, recordStatus: recordStatus, damage: damage, record: record,
                        fingerprintFailures: fingerprintFailures, lockout: options.lockout, locked: locked, lockReason: lockReason,
                        remainingBackoffMilliseconds: inspection?.remainingBackoffMilliseconds ?? 0,
                        passcodeRequirement: requirement, seat: seat, touchDenial: denial, configuration: rows,
                        problems: configuration.problems, runtimeCounting: runtimeCounting,
                        secretsKey: (literalText(protection.kind), protectionText))
}

func statusJSON(_ report: StatusReport) -> String {
    let record = report.record
    let json = JSONWriter()
    json.object {
        json.field("user", printableText(report.user.name, limit: 255))
        json.field("uid", Int64(report.user.uid))
        json.key("sensor")
        json.object {
            json.field("availability", report.availability)
            json.field("device", report.device.isEmpty ? nil : printableText(report.device, limit: 255))
            json.key("fingers")
            json.array { for finger in report.fingers { json.value(printableText(finger)) } }
            json.field("domain_state", report.domainState.map(hex))
        }
        json.key("record")
        json.object {
            json.field("status", report.recordStatus)
            json.field("damage", report.damage)
        }
        json.field("counting_in_run", report.runtimeCounting)
        json.key("fingerprint")
        json.object {
            json.field("failures", report.readable ? Int64(report.fingerprintFailures) : nil)
            json.field("lockout", Int64(report.lockout))
            json.field("locked", report.readable ? report.locked : nil)
            json.field("reason", report.lockReason)
            json.field("last_success", (record?.lastFingerprintSuccessWallSeconds).flatMap { $0 > 0 ? $0 : nil })
        }
        json.key("passcode")
        json.object {
            json.field("failures", record.map { Int64($0.passcodeFailures) } ?? (report.readable ? 0 : nil))
            json.field("backoff_remaining_ms", report.readable ? report.remainingBackoffMilliseconds : nil)
            json.field("last_success", (record?.lastPasscodeSuccessWallSeconds).flatMap { $0 > 0 ? $0 : nil })
        }
        json.field("passcode_required", report.readable ? (report.passcodeRequirement?.statusText ?? "no") : nil)
        json.key("logind")
        json.object {
            switch report.seat {
            case .noLogind:
                json.field("present", false)
            case .unanswered:
                json.field("present", true)
                json.field("answered", false)
            case .seen(let session, let lidClosed):
                json.field("present", true)
                json.field("answered", true)
                json.field("lid_closed", lidClosed)
                json.key("session")
                if let session {
                    json.object {
                        json.field("id", printableText(session.id))
                        json.field("uid", Int64(session.uid))
                        json.field("active", session.active)
                        json.field("remote", session.remote)
                        json.field("seat", session.seat.isEmpty ? nil : printableText(session.seat))
                        json.field("locked", session.locked)
                    }
                } else {
                    json.value(nil as String?)
                }
            }
            json.field("fingerprint_blocked", report.touchDenial?.statusText)
        }
        json.key("recent_failures")
        json.array {
            for entry in record?.recentFailures ?? [] {
                json.object {
                    json.field("time", entry.wallSeconds)
                    json.field("kind", entry.kind == .fingerprint ? "fingerprint" : "passcode")
                    json.field("service", printableText(entry.service))
                    json.field("tty", printableText(entry.tty))
                    json.field("rhost", printableText(entry.remoteHost))
                }
            }
        }
        json.key("secrets_key")
        json.object {
            json.field("protection", report.secretsKey.kind)
            json.field("text", report.secretsKey.text)
        }
        json.key("config")
        json.array {
            for (key, value, source) in report.configuration {
                json.object {
                    json.field("key", key)
                    json.field("value", value)
                    json.field("source", source)
                }
            }
        }
        json.key("config_problems")
        json.array { for problem in report.problems { json.value(problem) } }
    }
    return json.text + "\n"
}

func statusText(_ report: StatusReport) -> String {
    var lines: [String] = []
    let record = report.record
    lines.append("user: \(printableText(report.user.name)) (uid \(report.user.uid))")
    var sensorLine = "sensor: \(report.availability)"
    if !report.device.isEmpty { sensorLine += ", device \(printableText(report.device))" }
    if !report.fingers.isEmpty { sensorLine += ", enrolled: " + report.fingers.map { printableText($0) }.joined(separator: ", ") }
    lines.append(sensorLine)
    if let domainState = report.domainState { lines.append("domain state: \(hex(domainState))") }
    if let runtimeCounting = report.runtimeCounting {
        lines.append(runtimeCounting + " (from one short of each limit; the finger, the back-off and the lockout as on a writable disk)")
    } else if !report.readable {
        lines.append("record: not readable (run as root to see the counters)")
    } else {
        lines.append("record: \(report.recordStatus)" + (report.damage.map { " (\($0))" } ?? ""))
        lines.append("fingerprint: \(report.fingerprintFailures) consecutive failures of \(report.lockout), "
                     + (report.locked ? "LOCKED: \(report.lockReason ?? "")" : "not locked"))
        let remaining = report.remainingBackoffMilliseconds
        let waitText = remaining > 0 ? "wait \(durationText(remaining)) before the next entry" : "no wait"
        lines.append("password: \(record?.passcodeFailures ?? 0) consecutive wrong, \(waitText)")
        lines.append(report.passcodeRequirement?.statusText ?? "password required: no")
        if let seconds = record?.lastPasscodeSuccessWallSeconds, seconds > 0 { lines.append("last password success: \(utcTimestamp(seconds))") }
        if let seconds = record?.lastFingerprintSuccessWallSeconds, seconds > 0 {
            lines.append("last fingerprint success: \(utcTimestamp(seconds))")
        }
        let failures = record?.recentFailures ?? []
        lines.append("recent failures: \(failures.isEmpty ? "none" : "")")
        for entry in failures.reversed() {
            let kind = entry.kind == .fingerprint ? "fingerprint" : "password"
            let host = entry.remoteHost.isEmpty ? "-" : printableText(entry.remoteHost)
            let tty = entry.tty.isEmpty ? "-" : printableText(entry.tty)
            lines.append("  \(utcTimestamp(entry.wallSeconds))  \(kind)  service=\(printableText(entry.service))  tty=\(tty)  rhost=\(host)")
        }
    }
    lines.append(seatText(report.seat, denial: report.touchDenial))
    lines.append("secrets key: \(report.secretsKey.text)")
    lines.append("configuration:")
    for (key, value, source) in report.configuration { lines.append("  \(key) = \(value)  (\(source))") }
    for problem in report.problems { lines.append("  note: \(problem)") }
    lines.append("  (module arguments in the PAM stack may override these per service)")
    return lines.joined(separator: "\n") + "\n"
}

/// logind's answer in one line.
func seatText(_ seat: SeatObservation, denial: TouchDenial?) -> String {
    switch seat {
    case .noLogind:
        return "logind: not on the system bus; the session, screen-lock and lid rules do not apply"
    case .unanswered:
        return "logind: did not answer; the fingerprint is not used until it does"
    case .seen(let session, let lidClosed):
        var text = "logind: "
        if let session {
            text += "session \(printableText(session.id)) of uid \(session.uid), " + (session.active ? "active" : "not active")
                + (session.remote ? ", remote" : ", local")
                + (session.seat.isEmpty ? ", on no seat" : ", seat \(printableText(session.seat))")
                + (session.locked ? ", locked" : ", not locked")
        } else {
            text += "this command is in no session"
        }
        text += lidClosed ? "; lid closed" : "; lid open"
        return text + (denial.map { "; \($0.statusText)" } ?? "")
    }
}

/// Every option key with the value in force, in the table's order.
func configurationRows(_ options: Options) -> [(String, String)] {
    OptionKey.allCases.map { (String(describing: $0.name), options.displayValue(of: $0)) }
}

// MARK: - check

/// The attempt state as an unprivileged caller sees it: unreadable, so
/// treated as absent, and never written.
struct UnreadableStateStore: StateStore {
    mutating func withRecord<Result>(uid: UInt32, userName: [UInt8],
                                     _ body: (inout StateRecord?, LoadStatus) -> Result) throws(StoreFailure) -> Result {
        var record: StateRecord? = nil
        return body(&record, .absent)
    }
    func peek(uid: UInt32, userName: [UInt8]) -> (record: StateRecord?, status: LoadStatus) { (nil, .absent) }
    mutating func remove(uid: UInt32, userName: [UInt8], ifStill record: StateRecord) -> Bool { true }
}

func checkCommand(_ arguments: Arguments) throws -> ExitCode {
    let user = try targetUser(arguments)
    let policy = try parsePolicy(arguments, default: .owner)
    let configuration = try loadConfiguration(arguments)
    let options = configuration.options
    let result: Result<[UInt8], LAErrorCode>
    var block: BiometryBlock? = nil
    let log = StandardErrorLog(verbose: options.debug)
    if Syscalls.realUserID() == 0 && Syscalls.effectiveUserID() == 0 {
        var engine = makeSystemEngine(options, RequestFacts(mode: .prompt), prompter: NoConversation(), log: log)
        (result, block) = engine.canEvaluateExplained(policy, user: user, service: literalBytes(KnownServices.test))
    } else {
        // A user asking about themselves: the helper reads the record too.
        var request = HelperRequest()
        request.action = .check
        request.service = literalBytes(KnownServices.test)
        request.present(.policy, utf8Bytes(policy.name))
        var client = HelperClient(prompter: NoConversation())
        result = try helperPreflight(client.run(request))
    }
    let code: ExitCode
    var errorName: String? = nil
    var domainState: [UInt8]? = nil
    switch result {
    case .success(let state):
        code = .success
        domainState = state
    case .failure(let error):
        errorName = error.name
        code = ExitCodeTable.exitCode(for: error)
    }
    if arguments.flags.contains("--json") {
        let json = JSONWriter()
        json.object {
            json.field("user", printableText(user.name, limit: 255))
            json.field("policy", policy.name)
            json.field("can_evaluate", errorName == nil)
            json.field("error", errorName)
            json.field("error_code", errorName == nil ? nil : Int64(resultErrorCode(result)))
            json.field("domain_state", domainState.flatMap { $0.isEmpty ? nil : hex($0) })
            json.field("fingerprint_blocked", block?.statusText)
        }
        print(json.text)
    } else if errorName == nil {
        print("\(policy.name): can evaluate for \(printableText(user.name))")
        if let block { print(block.statusText) }
    }
    if let errorName { standardError(errorName + (block.map { " (\($0.statusText))" } ?? "") + "\n") }
    return code
}

/// The preflight's answer from the helper; a helper that cannot be used or
/// fails is an error of the command, never an answer.
func helperPreflight(_ verdict: HelperVerdict) throws -> Result<[UInt8], LAErrorCode> {
    switch verdict.commandAnswer {
    case .granted(_, let state): return .success(state)
    case .notAuthenticated(let error): return .failure(error)
    case .toolFailure(let text): throw CLIError(text)
    }
}

func resultErrorCode(_ result: Result<[UInt8], LAErrorCode>) -> Int32 {
    if case .failure(let error) = result { return error.rawValue }
    return 0
}

// MARK: - reset

func resetCommand(_ arguments: Arguments) throws -> ExitCode {
    try requireRoot("reset")
    let user = try targetUser(arguments)
    let configuration = try loadConfiguration(arguments)
    var ledger = makeSystemLedger(configuration.options, log: StandardErrorLog(verbose: configuration.options.debug))
    let before = ledger.inspect(user)
    guard ledger.resetCounts(user) else { throw CLIError("cannot write the record of \(printableText(user.name))") }
    let record = before?.record
    print("reset \(printableText(user.name)) (uid \(user.uid)): fingerprint failures \(record?.fingerprintFailures ?? 0) -> 0, password failures \(record?.passcodeFailures ?? 0) -> 0, wait cleared")
    return .success
}

// MARK: - test

func testCommand(_ arguments: Arguments) throws -> ExitCode {
    let user = try testedUser(arguments)
    let configuration = try loadConfiguration(arguments)
    var options = configuration.options
    options.policy = try parsePolicy(arguments, default: options.policy)
    if let reason = arguments.values["--reason"] { options.reason = utf8Bytes(reason) }
    if Syscalls.realUserID() != 0 || Syscalls.effectiveUserID() != 0 {
        return try testThroughHelper(options, reason: arguments.values["--reason"])
    }
    let tty = Terminal.onStandardInput()
    let mode: InteractionMode = options.mode ?? (tty.isEmpty ? .prompt : .terminal)
    // At a terminal: touch or type, as sudo's prompt.
    let keyboard = TerminalKeyboard()
    defer { keyboard.end() }
    var engine = makeTerminalEngine(options, RequestFacts(mode: mode, tty: tty), conversation: TerminalConversation(),
                                    keyboard: keyboard, log: StandardErrorLog(verbose: options.debug))
    let request = Request(scope: .inScope, userName: user.name, user: user, service: literalBytes(KnownServices.test), tty: tty,
                          mode: mode, silent: false)
    let passcode = SecretBuffer()
    defer { passcode.wipe() }
    let result = engine.evaluate(request, policy: options.policy, passcode: passcode)
    switch result.outcome {
    case .success(.biometry): print("authenticated: fingerprint"); return .success
    case .success(.passcode): print("authenticated: password"); return .success
    case .failure(let error):
        print("not authenticated: \(error.name) (\(error.rawValue)), PAM code \(result.pamCode.rawValue)")
        return .failure
    case .internalError:
        print("not authenticated: internal error (see above)")
        return .failure
    case .outOfScope:
        return .failure
    }
}

/// Whose prompt `localauth test` tries: `--user`'s; else, for root through
/// sudo, the account that ran sudo (root has no finger of its own, and the
/// person wants to try theirs); else the caller's, said first when that is
/// root's. SUDO_USER only picks among the accounts root may test anyway.
func testedUser(_ arguments: Arguments) throws -> UserIdentity {
    if arguments.values["--user"] != nil || Syscalls.realUserID() != 0 { return try targetUser(arguments) }
    if let invoker = Syscalls.environmentValue("SUDO_USER"), !invoker.isEmpty, invoker != utf8Bytes("root"),
       let found = Syscalls.lookupUser(invoker) {
        print(UserText.testingInvoker(printableText(found.name)))
        return UserIdentity(uid: found.uid, name: found.name)
    }
    print(UserText.testingRoot)
    return try targetUser(arguments)
}

/// `localauth test` run by a user: the helper evaluates (in prompt mode),
/// this shows its conversation in the terminal.
func testThroughHelper(_ options: Options, reason: String?) throws -> ExitCode {
    var request = HelperRequest()
    request.service = literalBytes(KnownServices.test)
    request.tty = Terminal.onStandardInput()
    request.present(.policy, utf8Bytes(options.policy.name))
    if let reason { request.present(.reason, utf8Bytes(reason)) }
    var client = HelperClient(prompter: TerminalConversation())
    defer { client.lastAnswer.wipe() }
    let verdict = client.run(request)
    switch verdict.commandAnswer {
    case .toolFailure(let text): throw CLIError(text)
    case .granted(let method, _):
        print(method == .passcode ? "authenticated: password" : "authenticated: fingerprint")
        return .success
    case .notAuthenticated(let error):
        print("not authenticated: \(error.name) (\(error.rawValue)), PAM code \(verdict.pamCode.rawValue)")
        return .failure
    }
}

/// Whether `stateDir/secrets/machine.key` is a root-only key file, found as
/// the secrets find it: every directory on the way root's and closed to
/// others (TrustedPath), `secrets` itself root's alone, the file root's,
/// private, with one name and a key's size. Only its facts are read.
func rootOnlyKeyFileExists(stateDir: [UInt8]) -> Bool {
    guard let parts = TrustedPath.parts(stateDir),
          case .success(let secrets) = TrustedPath.openDirectory(parts + [literalBytes("secrets")],
                                                                 trusted: TrustedPath.rootsOrSticky) else { return false }
    defer { Syscalls.close(secrets) }
    guard let directory = try? Syscalls.facts(secrets), directory.mode & 0o077 == 0 else { return false }
    guard let file = try? Syscalls.facts(at: secrets, literalBytes("machine.key")) else { return false }
    return file.isPrivateFile(of: 0, sizes: SecretKeyFile.keySize...SecretKeyFile.keySize)
}
