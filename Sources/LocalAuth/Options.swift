// Module options (docs/DESIGN.md, localauth.conf(5)): module arguments and the same keys in the
// root-owned configuration file. Bad input is reported and ignored; values
// out of range are clamped to the nearest safe bound. Nothing here can make
// the policy weaker than the defaults because of malformed input.

/// How the fallback and cancel are chosen (R16).
public enum InteractionMode: Equatable, CaseIterable {
    /// Fingerprint first; Ctrl-C chooses the fallback once offered.
    case terminal
    /// One echo-off prompt first: a passcode, or Enter for the fingerprint.
    case prompt
    /// Fingerprint first with messages only, for a conversation nobody
    /// answers while the reader waits (GNOME's gdm-fingerprint): nothing to
    /// press, and no prompt before the misses are used up.
    case scan
    /// The password only, never the reader: another conversation of the same
    /// program has it (GNOME's gdm-password beside gdm-fingerprint).
    case password

    /// The name an administrator writes.
    public var name: StaticString {
        switch self {
        case .terminal: "terminal"
        case .prompt: "prompt"
        case .scan: "scan"
        case .password: "password"
        }
    }

    public init?(name: ArraySlice<UInt8>) {
        for mode in InteractionMode.allCases where bytesEqual(name, mode.name) {
            self = mode
            return
        }
        return nil
    }
}

/// One step of the passcode back-off: from `failures` consecutive wrong
/// passcodes on, wait `seconds` before the next entry.
public struct BackoffStep: Equatable, Sendable {
    public var failures: Int
    public var seconds: Int
    public init(failures: Int, seconds: Int) {
        self.failures = failures
        self.seconds = seconds
    }
}

/// Where an option's value came from, for logs and `localauth status`.
public enum OptionSource: Equatable {
    case configFile
    case moduleArgument
}

public struct Options: Equatable {
    public var policy: EvaluationPolicy = .owner
    public var services: [[UInt8]] = Options.defaultServices
    public var maxTries = 3
    public var lockout = 5
    public var timeoutSeconds = 30
    public var fallbackAfter = 1
    public var fallbackTitle: [UInt8] = literalBytes("Enter Password")
    /// What cancel is called where a prompt names it (the app library).
    public var cancelTitle: [UInt8] = literalBytes("Cancel")
    /// How long the helper waits for the answer to one prompt (configuration file only).
    public var answerTimeoutSeconds = 120
    /// nil: the default sentence naming the service.
    public var reason: [UInt8]? = nil
    /// nil: chosen by R16 from the terminal and thread count.
    public var mode: InteractionMode? = nil
    public var passcodeService: [UInt8] = literalBytes("localauth-passcode")
    public var backoff: [BackoffStep] = Options.defaultBackoff
    public var maxBackoffSeconds = 3600
    public var evenDenyRoot = false
    public var stateDir: [UInt8] = literalBytes("/var/lib/localauth")
    public var debug = false
    public var silent = false
    /// Prompt mode: the reason goes into the first prompt and no message is
    /// sent before the fingerprint wait, for applications that hold each
    /// message on screen until a key is pressed. nil: only for xscreensaver.
    public var instructionInPrompt: Bool? = nil

    /// Whether `service` gets the instruction in its first prompt.
    public func wantsInstructionInPrompt(service: [UInt8]) -> Bool {
        instructionInPrompt ?? bytesEqual(service, "xscreensaver")
    }
    /// The first prompt of a boot goes to the password (no correct password
    /// since this boot: the fingerprint is not enough).
    public var passcodeAfterBoot = true
    /// No unlock of any kind for this long: the password is required.
    public var unlockIntervalSeconds = 48 * 3600
    /// No correct password for `passcodeIntervalSeconds` and no fingerprint
    /// match for `fingerprintIntervalSeconds`: the password is required.
    public var passcodeIntervalSeconds = 156 * 3600
    public var fingerprintIntervalSeconds = 4 * 3600
    /// The services that may use the reader while the seat's session is
    /// locked; nil: the screen lockers among `services`.
    public var lockerServices: [[UInt8]]? = nil
    /// Services whose program runs a fingerprint conversation of its own
    /// beside them: there the module asks only the password (mode password).
    public var passwordServices: [[UInt8]] = Options.defaultPasswordServices
    /// No fingerprint while logind reports the lid closed.
    public var skipWhenLidClosed = true
    /// A caller in no session that runs in its account's own user manager
    /// stands in that account's session (BiometryRules.userManagerStandIn);
    /// off: such a caller gets no fingerprint.
    public var userManagerStandIn = true

    /// The screen lockers localauth knows, for the `locker_services` default.
    public static var knownLockers: [[UInt8]] { KnownServices.table.filter { $0.unlocksTheScreen }.map { $0.bytes } }

    /// Whether `service` may use the reader while the screen is locked.
    public func isLockerService(_ service: [UInt8]) -> Bool {
        if let lockerServices { return lockerServices.contains(service) }
        return covers(service: service) && Options.knownLockers.contains(service)
    }

    /// The R11 action: reset the counters after the password module succeeded.
    public var authsucc = false
    /// `conf=`: another configuration file (module arguments only).
    public var configPath: [UInt8]? = nil
    /// What seals the secrets' machine key (the configuration file's alone).
    public var tpm: TPMChoice = .auto

    public static let defaultConfigPath: StaticString = "/etc/security/localauth.conf"
    /// Every known service (Services.swift).
    public static var defaultServices: [[UInt8]] { KnownServices.table.map { $0.bytes } }
    public static var defaultPasswordServices: [[UInt8]] { KnownServices.table.filter { $0.passwordOnly }.map { $0.bytes } }
    public static var defaultBackoff: [BackoffStep] { [
        BackoffStep(failures: 5, seconds: 60), BackoffStep(failures: 6, seconds: 300),
        BackoffStep(failures: 7, seconds: 900), BackoffStep(failures: 9, seconds: 3600),
    ] }

    public init() {}

    /// The helper's options for one request: these (the administrator's),
    /// with the presentation keys a caller may set applied over them. A
    /// caller may shorten the fingerprint timeout, never lengthen it, and
    /// narrow the services, never add one.
    public func withPresentation(_ fields: [([UInt8], [UInt8])]) -> (options: Options, diagnostics: [String]) {
        var parser = OptionParser(starting: self)
        parser.applyArguments(fields.filter { HelperRequest.isPresentationKey($0.0) }.map { $0.0 + [0x3D] + $0.1 })
        parser.finish()
        var options = parser.options
        options.timeoutSeconds = min(options.timeoutSeconds, timeoutSeconds)
        options.services = options.services.filter { covers(service: $0) }
        return (options, parser.diagnostics)
    }

    /// Whether `service` is one the module acts for (R1).
    public func covers(service: [UInt8]) -> Bool {
        for candidate in services where candidate == service { return true }
        return false
    }

    /// The wait after `failures` consecutive wrong passcodes, capped by
    /// `max_backoff`; 0 below the first step.
    public func backoffSeconds(afterFailures failures: Int) -> Int {
        var seconds = 0
        for step in backoff where failures >= step.failures { seconds = step.seconds }
        return min(seconds, maxBackoffSeconds)
    }

    /// The failure count at which back-off starts (R9), used by R12.
    public var firstBackoffThreshold: Int {
        backoff.first?.failures ?? Options.defaultBackoff[0].failures
    }
}

/// Parses options and collects what was wrong with them.
public struct OptionParser {
    /// Longest value accepted for any key; longer values are ignored whole.
    public static let maxValueLength = 512
    /// Largest configuration file read.
    public static let maxConfigSize = 64 * 1024
    /// The most arguments a stack line may carry: the module refuses a line
    /// with more (it would otherwise read a shorter line than the one
    /// written), and the lint reports it.
    public static let maxArguments = 256

    public private(set) var options = Options()
    /// One line per problem, for `pam_syslog`. Never contains secrets.
    public private(set) var diagnostics: [String] = []
    /// Keys set by a valid line of the configuration file (for `localauth status`).
    public private(set) var keysFromConfigFile: [[UInt8]] = []

    public init() {}

    /// A parser that applies further sources over `options`.
    public init(starting options: Options) {
        self.options = options
    }

    /// Applies the `key = value` lines of a configuration file.
    public mutating func applyConfigFile(_ contents: [UInt8]) {
        var lineNumber = 0
        for rawLine in splitBytes(contents[...], on: 0x0A) {
            lineNumber += 1
            var line = rawLine
            if let hash = line.firstIndex(of: 0x23) { line = line[line.startIndex..<hash] }
            line = trimmedSpaces(line)
            if line.isEmpty { continue }
            let key: ArraySlice<UInt8>
            let value: ArraySlice<UInt8>?
            if let equals = line.firstIndex(of: 0x3D) {
                key = trimmedSpaces(line[line.startIndex..<equals])
                value = trimmedSpaces(line[(equals + 1)..<line.endIndex])
            } else {
                key = line
                value = nil
            }
            let problems = diagnostics.count
            apply(key: key, value: value, source: .configFile, where: "line " + String(lineNumber))
            if diagnostics.count == problems { keysFromConfigFile.append(Array(key)) }
        }
    }

    /// Applies module arguments in order (later ones win).
    public mutating func applyArguments(_ arguments: [[UInt8]]) {
        var index = 0
        for argument in arguments {
            index += 1
            let slice = argument[...]
            if let equals = slice.firstIndex(of: 0x3D) {
                apply(key: slice[slice.startIndex..<equals], value: slice[(equals + 1)..<slice.endIndex],
                      source: .moduleArgument, where: "argument " + String(index))
            } else {
                apply(key: slice, value: nil, source: .moduleArgument, where: "argument " + String(index))
            }
        }
    }

    /// Finds `conf=PATH` among module arguments without applying anything.
    /// Only a safe absolute path counts; anything else leaves the default
    /// file in force (and `apply` reports it).
    public static func configPath(in arguments: [[UInt8]]) -> [UInt8]? {
        var found: [UInt8]? = nil
        for argument in arguments where argument.count > 5 && bytesEqual(argument.prefix(5), "conf=") {
            let path = argument.dropFirst(5)
            if isSafeAbsolutePath(path) { found = Array(path) }
        }
        return found
    }

    /// Clamps values to their ranges and makes them consistent. Call once,
    /// after every source has been applied.
    public mutating func finish() {
        for key in OptionKey.allCases {
            switch key.kind {
            case .number(let range), .duration(let range):
                if case .number(let value) = options.value(of: key) {
                    options.set(key, to: .number(clamp(value, range.lowerBound, range.upperBound, key.name)))
                }
            default: break
            }
        }
        if options.lockout < options.maxTries {
            diagnostics.append("max_tries " + String(options.maxTries) + " is above lockout " + String(options.lockout) + "; using "
                               + String(options.lockout))
            options.maxTries = options.lockout
        }
    }

    /// Records a problem with an input.
    public mutating func note(_ message: String) {
        diagnostics.append(message)
    }

    private mutating func clamp(_ value: Int, _ low: Int, _ high: Int, _ key: StaticString) -> Int {
        guard value < low || value > high else { return value }
        let bound = value < low ? low : high
        diagnostics.append(literalText(key) + " " + String(value) + (value < low ? " is below " : " is above ")
                           + String(bound) + "; using " + String(bound))
        return bound
    }

    private mutating func reject(_ key: ArraySlice<UInt8>, _ location: String, _ why: StaticString) {
        diagnostics.append("ignored option " + printableText(key, limit: 40) + " (" + location + "): " + literalText(why))
    }

    private mutating func apply(key: ArraySlice<UInt8>, value: ArraySlice<UInt8>?, source: OptionSource, where location: String) {
        if let value, value.count > OptionParser.maxValueLength {
            reject(key, location, "value too long")
            return
        }
        guard let option = OptionKey(name: key) else { return reject(key, location, "unknown option") }
        switch source {
        case .configFile where !option.setters.contains(.configFile):
            return reject(key, location, "only valid as a module argument")
        case .moduleArgument where !option.setters.contains(.stackLine):
            return reject(key, location, "only valid in the configuration file")
        default: break
        }
        if case .flag = option.kind {
            guard let flag = parseFlag(value) else { return reject(key, location, "expected no value, yes or no") }
            return options.set(option, to: .flag(flag))
        }
        guard let value else { return reject(key, location, "missing value") }
        guard let parsed = parseValue(value, as: option.kind) else { return reject(key, location, option.kind.expectation) }
        options.set(option, to: parsed)
    }
}

/// `value` read as a value of `kind`, or nil when it is not one.
func parseValue(_ value: ArraySlice<UInt8>, as kind: OptionValueKind) -> OptionValue? {
    switch kind {
    case .flag: return parseFlag(value).map { .flag($0) }
    case .policy: return EvaluationPolicy(name: value).map { .policy($0) }
    case .mode: return InteractionMode(name: value).map { .mode($0) }
    case .serviceList: return parseServiceList(value).map { .services($0) }
    case .serviceName: return isServiceName(value) ? .bytes(Array(value)) : nil
    case .number: return parseDecimal(value, limit: 1_000_000).map { .number($0) }
    case .duration: return parseDuration(value).map { .number($0) }
    case .backoff: return parseBackoff(value).map { .backoff($0) }
    case .tpm: return TPMChoice(name: value).map { .tpm($0) }
    case .text(let maxLength, let mayBeEmpty):
        return (mayBeEmpty || !value.isEmpty) && isDisplayText(value, maxLength: maxLength) ? .bytes(Array(value)) : nil
    case .path: return isSafeAbsolutePath(value) ? .bytes(Array(value)) : nil
    }
}

extension OptionValueKind {
    /// What a value of this kind looks like, for the diagnostic of a bad one.
    public var expectation: StaticString {
        switch self {
        case .flag: "expected no value, yes or no"
        case .number: "expected a number"
        case .duration: "expected a duration such as 90s, 5m or 1h"
        case .serviceList: "expected a comma list of service names"
        case .serviceName: "expected a service name"
        case .text(let maxLength, _):
            maxLength <= 64 ? "expected printable text of at most 64 bytes" : "expected printable text of at most 200 bytes"
        case .path: "expected an absolute path without . or .. parts"
        case .policy: "expected owner or biometrics"
        case .mode: "expected terminal, prompt, scan or password"
        case .backoff: "expected N:duration steps such as 5:1m,6:5m"
        case .tpm: "expected auto, off, a device path or swtpm:PORT (a port below 1023)"
        }
    }
}

/// At most 64 service names, comma separated (spaces around each allowed).
func parseServiceList(_ value: ArraySlice<UInt8>) -> [[UInt8]]? {
    var list: [[UInt8]] = []
    for piece in splitBytes(value, on: 0x2C) {
        let name = trimmedSpaces(piece)
        guard isServiceName(name), list.count < 64 else { return nil }
        list.append(Array(name))
    }
    return list
}

/// A flag given bare, or with yes/no, true/false, on/off, 1/0.
func parseFlag(_ value: ArraySlice<UInt8>?) -> Bool? {
    guard let value else { return true }
    if bytesEqual(value, "yes") || bytesEqual(value, "true") || bytesEqual(value, "on") || bytesEqual(value, "1") { return true }
    if bytesEqual(value, "no") || bytesEqual(value, "false") || bytesEqual(value, "off") || bytesEqual(value, "0") { return false }
    return nil
}

/// Seconds in `90`, `90s`, `5m`, `1h`; nil for anything else or above ten days.
public func parseDuration(_ value: ArraySlice<UInt8>) -> Int? {
    guard let last = value.last else { return nil }
    var multiplier = 1
    var digits = value
    switch last {
    case 0x73: digits = value.dropLast()            // s
    case 0x6D: multiplier = 60; digits = value.dropLast()    // m
    case 0x68: multiplier = 3600; digits = value.dropLast()  // h
    default: break
    }
    guard let number = parseDecimal(digits, limit: 864_000) else { return nil }
    let seconds = number * multiplier
    return seconds <= 864_000 ? seconds : nil
}

/// `N:duration` steps, comma separated, with strictly increasing N.
func parseBackoff(_ value: ArraySlice<UInt8>) -> [BackoffStep]? {
    var steps: [BackoffStep] = []
    for piece in splitBytes(value, on: 0x2C) {
        let item = trimmedSpaces(piece)
        guard let colon = item.firstIndex(of: 0x3A),
              let failures = parseDecimal(item[item.startIndex..<colon], limit: 1000), failures >= 1,
              let seconds = parseDuration(item[(colon + 1)..<item.endIndex]), seconds >= 1,
              steps.count < 32 else { return nil }
        if let previous = steps.last, previous.failures >= failures { return nil }
        steps.append(BackoffStep(failures: failures, seconds: seconds))
    }
    return steps.isEmpty ? nil : steps
}

/// PAM service names: lowercase letters, digits, `.`, `_`, `-`; at most 64
/// bytes. libpam lowercases the name an application passes, so a name with
/// capitals would name one file here and open another there.
func isServiceName(_ value: ArraySlice<UInt8>) -> Bool {
    guard !value.isEmpty, value.count <= 64, value.first != 0x2E else { return false }
    for byte in value {
        let ok = (byte >= 0x61 && byte <= 0x7A) || (byte >= 0x30 && byte <= 0x39) || byte == 0x2E || byte == 0x5F || byte == 0x2D
        if !ok { return false }
    }
    return true
}

/// Valid UTF-8 without control characters, within `maxLength` bytes.
func isDisplayText(_ value: ArraySlice<UInt8>, maxLength: Int) -> Bool {
    guard value.count <= maxLength else { return false }
    for byte in value where byte < 0x20 || byte == 0x7F { return false }
    var iterator = value.makeIterator()
    var decoder = UTF8()
    while true {
        switch decoder.decode(&iterator) {
        case .scalarValue: continue
        case .emptyInput: return true
        case .error: return false
        }
    }
}

/// An absolute path of at most 256 bytes with no empty, `.` or `..` parts.
func isSafeAbsolutePath(_ value: ArraySlice<UInt8>) -> Bool {
    guard value.count >= 2, value.count <= 256, value.first == 0x2F else { return false }
    for part in splitBytes(value.dropFirst(), on: 0x2F) {
        if part.isEmpty || bytesEqual(part, ".") || bytesEqual(part, "..") { return false }
        for byte in part where byte < 0x20 || byte == 0x7F { return false }
    }
    return true
}
