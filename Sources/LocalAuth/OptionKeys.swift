// Every option key, declared once: its name, the kind and range of its
// value, and who may set it. The parser, the clamping, the helper's
// presentation filter, the stack lint, `localauth status` and the checks of
// the man pages and the protocol document all read this table.

/// Who may set an option key.
public struct OptionSetters: OptionSet, Sendable {
    public let rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }
    /// A module argument on a stack line.
    public static let stackLine = OptionSetters(rawValue: 1)
    /// The root-owned configuration file.
    public static let configFile = OptionSetters(rawValue: 2)
    /// A caller of the setuid helper (a locker's stack line, an app), as
    /// presentation: how the prompt looks, never what it takes to pass.
    public static let presentation = OptionSetters(rawValue: 4)

    /// Stack line and configuration file: every administrator's key.
    public static let administrator: OptionSetters = [.stackLine, .configFile]
}

/// The shape of a key's value.
public enum OptionValueKind: Equatable, Sendable {
    /// Bare, or yes/no, true/false, on/off, 1/0.
    case flag
    /// A decimal number, clamped to the range.
    case number(ClosedRange<Int>)
    /// Seconds (`90`, `90s`, `5m`, `1h`), clamped to the range.
    case duration(ClosedRange<Int>)
    /// A comma list of service names.
    case serviceList
    /// One service name.
    case serviceName
    /// Printable UTF-8 of at most `maxLength` bytes.
    case text(maxLength: Int, mayBeEmpty: Bool)
    /// An absolute path without `.` or `..` parts.
    case path
    /// `owner` or `biometrics`.
    case policy
    /// `terminal`, `prompt`, `scan` or `password`.
    case mode
    /// `N:duration` steps.
    case backoff
    /// `auto`, `off`, a device path or `swtpm:PORT` (`TPMChoice`).
    case tpm
}

/// One option key.
public enum OptionKey: CaseIterable, Sendable {
    case policy, services, maxTries, lockout, timeout, fallbackAfter, fallbackTitle, cancelTitle, reason, mode
    case instructionInPrompt, passcodeService, passcodeBackoff, maxBackoff, evenDenyRoot, passcodeAfterBoot
    case unlockInterval, passcodeInterval, fingerprintInterval, lockerServices, passwordServices, skipWhenLidClosed, answerTimeout
    case userManagerStandIn
    case stateDir, debug, silent, authsucc, conf, tpm

    /// The name an administrator writes.
    public var name: StaticString {
        switch self {
        case .policy: "policy"
        case .services: "services"
        case .maxTries: "max_tries"
        case .lockout: "lockout"
        case .timeout: "timeout"
        case .fallbackAfter: "fallback_after"
        case .fallbackTitle: "fallback_title"
        case .cancelTitle: "cancel_title"
        case .reason: "reason"
        case .mode: "mode"
        case .instructionInPrompt: "instruction_in_prompt"
        case .passcodeService: "passcode_service"
        case .passcodeBackoff: "passcode_backoff"
        case .maxBackoff: "max_backoff"
        case .evenDenyRoot: "even_deny_root"
        case .passcodeAfterBoot: "passcode_after_boot"
        case .unlockInterval: "unlock_interval"
        case .passcodeInterval: "passcode_interval"
        case .fingerprintInterval: "fingerprint_interval"
        case .lockerServices: "locker_services"
        case .passwordServices: "password_services"
        case .skipWhenLidClosed: "skip_when_lid_closed"
        case .userManagerStandIn: "user_manager_stand_in"
        case .answerTimeout: "answer_timeout"
        case .stateDir: "state_dir"
        case .debug: "debug"
        case .silent: "silent"
        case .authsucc: "authsucc"
        case .conf: "conf"
        case .tpm: "tpm"
        }
    }

    public var kind: OptionValueKind {
        switch self {
        case .policy: .policy
        case .services, .lockerServices, .passwordServices: .serviceList
        case .maxTries: .number(1...10)
        case .lockout: .number(1...20)
        case .fallbackAfter: .number(0...10)
        case .timeout: .duration(1...300)
        case .maxBackoff: .duration(1...86_400)
        case .answerTimeout: .duration(5...600)
        case .unlockInterval, .passcodeInterval, .fingerprintInterval: .duration(60...864_000)
        case .fallbackTitle: .text(maxLength: 64, mayBeEmpty: true)
        case .cancelTitle: .text(maxLength: 64, mayBeEmpty: false)
        case .reason: .text(maxLength: 200, mayBeEmpty: false)   // OptionValueKind.expectation names 64 and 200
        case .mode: .mode
        case .passcodeService: .serviceName
        case .passcodeBackoff: .backoff
        case .stateDir, .conf: .path
        case .tpm: .tpm
        case .instructionInPrompt, .evenDenyRoot, .passcodeAfterBoot, .skipWhenLidClosed, .userManagerStandIn, .debug, .silent,
             .authsucc: .flag
        }
    }

    /// Who may set it. A caller of the helper may set only what changes how
    /// the prompt looks; a lower `timeout` and fewer `services` at most.
    public var setters: OptionSetters {
        switch self {
        case .policy, .services, .timeout, .fallbackTitle, .cancelTitle, .reason, .instructionInPrompt, .silent, .mode:
            [.stackLine, .configFile, .presentation]
        case .answerTimeout, .tpm: .configFile
        case .authsucc, .conf: .stackLine
        default: .administrator
        }
    }

    /// The key named `name`, if there is one.
    public init?<C: Collection>(name: C) where C.Element == UInt8 {
        for key in OptionKey.allCases where bytesEqual(name, key.name) {
            self = key
            return
        }
        return nil
    }

    /// The keys a caller of the helper may set.
    public static var presentationKeys: [OptionKey] { allCases.filter { $0.setters.contains(.presentation) } }

    /// A key a stack line may carry that the helper does not take from it:
    /// on a locker that runs PAM as the user, such a key is ignored.
    public var isIgnoredThroughTheHelper: Bool { setters.contains(.stackLine) && !setters.contains(.presentation) }

    /// Those keys.
    public static var ignoredThroughTheHelper: [OptionKey] { allCases.filter { $0.isIgnoredThroughTheHelper } }
}

/// A key's value in `Options`, as the parser sets it and `status` shows it.
public enum OptionValue: Equatable {
    case flag(Bool)
    /// A flag whose default depends on the service (nil: that default).
    case optionalFlag(Bool?)
    /// A number or a duration in seconds.
    case number(Int)
    case services([[UInt8]])
    /// A service list whose default is derived (nil: that default).
    case optionalServices([[UInt8]]?)
    case bytes([UInt8])
    /// Text whose default is derived (nil: that default).
    case optionalBytes([UInt8]?)
    case policy(EvaluationPolicy)
    case mode(InteractionMode?)
    case backoff([BackoffStep])
    case tpm(TPMChoice)
}

extension Options {
    /// The value of `key`.
    public func value(of key: OptionKey) -> OptionValue {
        switch key {
        case .policy: .policy(policy)
        case .services: .services(services)
        case .maxTries: .number(maxTries)
        case .lockout: .number(lockout)
        case .timeout: .number(timeoutSeconds)
        case .fallbackAfter: .number(fallbackAfter)
        case .fallbackTitle: .bytes(fallbackTitle)
        case .cancelTitle: .bytes(cancelTitle)
        case .reason: .optionalBytes(reason)
        case .mode: .mode(mode)
        case .instructionInPrompt: .optionalFlag(instructionInPrompt)
        case .passcodeService: .bytes(passcodeService)
        case .passcodeBackoff: .backoff(backoff)
        case .maxBackoff: .number(maxBackoffSeconds)
        case .evenDenyRoot: .flag(evenDenyRoot)
        case .passcodeAfterBoot: .flag(passcodeAfterBoot)
        case .unlockInterval: .number(unlockIntervalSeconds)
        case .passcodeInterval: .number(passcodeIntervalSeconds)
        case .fingerprintInterval: .number(fingerprintIntervalSeconds)
        case .lockerServices: .optionalServices(lockerServices)
        case .passwordServices: .services(passwordServices)
        case .skipWhenLidClosed: .flag(skipWhenLidClosed)
        case .userManagerStandIn: .flag(userManagerStandIn)
        case .answerTimeout: .number(answerTimeoutSeconds)
        case .stateDir: .bytes(stateDir)
        case .debug: .flag(debug)
        case .silent: .flag(silent)
        case .authsucc: .flag(authsucc)
        case .conf: .optionalBytes(configPath)
        case .tpm: .tpm(tpm)
        }
    }

    /// Sets `key` to a value of its kind (a value of another shape is a
    /// programming error and changes nothing).
    public mutating func set(_ key: OptionKey, to value: OptionValue) {
        switch (key, value) {
        case (.policy, .policy(let new)): policy = new
        case (.services, .services(let new)): services = new
        case (.maxTries, .number(let new)): maxTries = new
        case (.lockout, .number(let new)): lockout = new
        case (.timeout, .number(let new)): timeoutSeconds = new
        case (.fallbackAfter, .number(let new)): fallbackAfter = new
        case (.fallbackTitle, .bytes(let new)): fallbackTitle = new
        case (.cancelTitle, .bytes(let new)): cancelTitle = new
        case (.reason, .bytes(let new)): reason = new
        case (.mode, .mode(let new)): mode = new
        case (.instructionInPrompt, .flag(let new)): instructionInPrompt = new
        case (.passcodeService, .bytes(let new)): passcodeService = new
        case (.passcodeBackoff, .backoff(let new)): backoff = new
        case (.maxBackoff, .number(let new)): maxBackoffSeconds = new
        case (.evenDenyRoot, .flag(let new)): evenDenyRoot = new
        case (.passcodeAfterBoot, .flag(let new)): passcodeAfterBoot = new
        case (.unlockInterval, .number(let new)): unlockIntervalSeconds = new
        case (.passcodeInterval, .number(let new)): passcodeIntervalSeconds = new
        case (.fingerprintInterval, .number(let new)): fingerprintIntervalSeconds = new
        case (.lockerServices, .services(let new)): lockerServices = new
        case (.passwordServices, .services(let new)): passwordServices = new
        case (.skipWhenLidClosed, .flag(let new)): skipWhenLidClosed = new
        case (.userManagerStandIn, .flag(let new)): userManagerStandIn = new
        case (.answerTimeout, .number(let new)): answerTimeoutSeconds = new
        case (.stateDir, .bytes(let new)): stateDir = new
        case (.debug, .flag(let new)): debug = new
        case (.silent, .flag(let new)): silent = new
        case (.authsucc, .flag(let new)): authsucc = new
        case (.conf, .bytes(let new)): configPath = new
        case (.tpm, .tpm(let new)): tpm = new
        default: break
        }
    }

    /// `key`'s value as the helper's request carries it, or nil when it is
    /// not sent: a flag only when on (so a stack line cannot turn off what the
    /// configuration file turned on), a derived default never. Only
    /// presentation keys travel, and none of them is a back-off.
    @inline(never)
    public func wireValue(of key: OptionKey) -> [UInt8]? {
        switch value(of: key) {
        case .flag(let on): return on ? literalBytes("yes") : nil
        case .optionalFlag(let on): return on.map { $0 ? literalBytes("yes") : literalBytes("no") }
        case .number(let number): return utf8Bytes(String(number))
        case .services(let list): return joinedServices(list)
        case .optionalServices(let list): return list.map(joinedServices)
        case .bytes(let bytes): return bytes
        case .optionalBytes(let bytes): return bytes
        case .policy(let policy): return utf8Bytes(policy.name)
        case .mode(let mode): return mode.map { literalBytes($0.name) }
        case .backoff: return nil
        case .tpm(let choice): return choice.name
        }
    }

    /// `key`'s value as `localauth status` shows it.
    public func displayValue(of key: OptionKey) -> String {
        switch (key, value(of: key)) {
        case (.reason, .optionalBytes(nil)): return "(a sentence naming the service)"
        case (.conf, .optionalBytes(nil)): return "(none)"
        case (.instructionInPrompt, .optionalFlag(nil)): return "auto (xscreensaver only)"
        case (.mode, .mode(let mode)): return mode.map { literalText($0.name) } ?? "auto"
        case (.passcodeBackoff, .backoff(let steps)): return steps.map { "\($0.failures):\($0.seconds)s" }.joined(separator: ",")
        case (.lockerServices, _):
            // What is in force: the listed lockers that are also in `services`.
            return services.filter { isLockerService($0) }.map { printableText($0) }.joined(separator: ",")
        case (_, .flag(let on)), (_, .optionalFlag(.some(let on))): return on ? "yes" : "no"
        case (_, .number(let number)):
            if case .duration = key.kind { return "\(number)s" }
            return "\(number)"
        case (_, .services), (_, .optionalServices):
            // The whole list (a value is at most OptionParser.maxValueLength bytes).
            return printableText(wireValue(of: key) ?? [], limit: Int.max)
        default: return printableText(wireValue(of: key) ?? [], limit: 200)
        }
    }
}

/// Service names joined by commas.
func joinedServices(_ list: [[UInt8]]) -> [UInt8] {
    var joined: [UInt8] = []
    for name in list {
        if !joined.isEmpty { joined.append(0x2C) }
        joined += name
    }
    return joined
}
