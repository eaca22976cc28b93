// The PAM stack lint: reads service files the way libpam does (controls,
// includes, jumps) and finds stacks that would weaken the policy: `done` on
// the module's line, a path past the module that reaches only optional
// modules, policy owner without default=die, a biometrics line without a
// later authsucc line reachable only through the password module's success,
// and a passcode service that is not an explicit list of password modules.
import LocalAuth

/// One problem found in a stack: "error" or "warning", and what it is.
public struct Finding: Equatable {
    public var severity: String
    public var text: String
}

/// One `auth` rule of a stack, after includes are expanded.
struct Rule {
    let file: String
    let line: Int
    let control: String
    let module: String
    let arguments: [String]
    /// Worked out once: the checks ask them of every rule many times.
    let moduleName: String
    private let simpleControl: String?
    private let explicitActions: [String: String]
    private let defaultAction: String

    init(file: String, line: Int, control: String, module: String, arguments: [String]) {
        self.file = file
        self.line = line
        self.control = control
        self.module = module
        self.arguments = arguments
        moduleName = String(module.split(separator: "/").last ?? Substring(module))
        let lowered = control.lowercased()
        if ["required", "requisite", "sufficient", "optional"].contains(lowered) {
            simpleControl = lowered
            explicitActions = [:]
            defaultAction = "bad"
            return
        }
        simpleControl = nil
        var explicit: [String: String] = [:]
        var fallback = "bad"
        let inner = lowered.hasPrefix("[") ? String(lowered.dropFirst().dropLast()) : lowered
        for pair in inner.split(whereSeparator: { $0 == " " || $0 == "\t" }) {
            let parts = pair.split(separator: "=", maxSplits: 1).map(String.init)
            guard parts.count == 2 else { continue }
            if parts[0] == "default" { fallback = parts[1] }
            if explicit[parts[0]] == nil { explicit[parts[0]] = parts[1] }   // the first one counts
        }
        explicitActions = explicit
        defaultAction = fallback
    }

    var isLocalAuth: Bool { moduleName == "pam_localauth.so" }
    var isAuthsucc: Bool { isLocalAuth && arguments.contains("authsucc") }
    var location: String { "\(file):\(line)" }

    func action(for code: String) -> String {
        let succeeded = code == "success" || code == "new_authtok_reqd"
        switch simpleControl {
        case "required"?: return succeeded ? "ok" : (code == "ignore" ? "ignore" : "bad")
        case "requisite"?: return succeeded ? "ok" : (code == "ignore" ? "ignore" : "die")
        case "sufficient"?: return succeeded ? "done" : "ignore"
        case "optional"?: return succeeded ? "ok" : "ignore"
        default: return explicitActions[code] ?? defaultAction
        }
    }

    var failureDies: Bool { action(for: "auth_err") == "die" }
}

public struct StackLint {
    let readFile: (String) -> [UInt8]?

    public init(read: @escaping (String) -> [UInt8]?) {
        readFile = read
    }

    static let passwordModules: Set<String> = [
        "pam_unix.so", "pam_sss.so", "pam_ldap.so", "pam_krb5.so", "pam_winbind.so", "pam_systemd_home.so", "pam_matrix.so",
    ]
    static let forbiddenInPasscodeService: Set<String> = [
        "pam_fprintd.so", "pam_u2f.so", "pam_oath.so", "pam_google_authenticator.so", "pam_yubico.so", "pam_rootok.so",
        "pam_permit.so", "pam_p11.so", "pam_pkcs11.so", "pam_howdy.so", "pam_localauth.so", "pam_succeed_if.so",
    ]

    func read(_ name: String) -> [(line: Int, words: [String])]? {
        guard let contents = readFile(name) else { return nil }
        var result: [(Int, [String])] = []
        var number = 0
        for raw in splitBytes(contents[...], on: 0x0A) {
            number += 1
            var text = String(decoding: raw, as: UTF8.self)
            if let hash = text.firstIndex(of: "#") { text = String(text[..<hash]) }
            var words: [String] = []
            var current = ""
            var depth = 0
            for character in text {
                if character == "[" { depth += 1 }
                if character == "]" { depth = max(0, depth - 1) }
                if (character == " " || character == "\t") && depth == 0 {
                    if !current.isEmpty { words.append(current); current = "" }
                } else {
                    current.append(character)
                }
            }
            if !current.isEmpty { words.append(current) }
            if !words.isEmpty { result.append((number, words)) }
        }
        return result
    }

    /// The most rules a service expands to, and the most files it reads:
    /// files that include each other many times over would otherwise
    /// expand without end (a fuzzer found the lint taking minutes).
    static let maxExpandedRules = 4096
    static let maxFilesRead = 256

    /// The auth rules of a service with @include, include and substack
    /// expanded. A file that includes one already on its own include path
    /// is not expanded again (libpam would loop until its depth limit).
    func authRules(_ name: String) -> [Rule] {
        var filesRead = 0
        return authRules(name, path: [], filesRead: &filesRead)
    }

    func authRules(_ name: String, path: [String], filesRead: inout Int) -> [Rule] {
        guard path.count < 8, !path.contains(name), filesRead < StackLint.maxFilesRead else { return [] }
        filesRead += 1
        guard let lines = read(name) else { return [] }
        var rules: [Rule] = []
        for (number, words) in lines {
            guard rules.count < StackLint.maxExpandedRules else { break }
            if words[0] == "@include", words.count > 1 {
                rules += authRules(words[1], path: path + [name], filesRead: &filesRead)
                continue
            }
            let type = (words[0].hasPrefix("-") ? String(words[0].dropFirst()) : words[0]).lowercased()
            guard type == "auth", words.count >= 3 else { continue }
            if words[1].lowercased() == "include" || words[1].lowercased() == "substack" {
                rules += authRules(words[2], path: path + [name], filesRead: &filesRead)
                continue
            }
            rules.append(Rule(file: name, line: number, control: words[1], module: words[2], arguments: Array(words.dropFirst(3))))
        }
        return Array(rules.prefix(StackLint.maxExpandedRules))
    }

    /// Whether this rule is a check a failure cannot step over: pam_deny
    /// that an ignore does not skip, or a password module whose failure
    /// ends or fails the stack.
    static func isMandatoryCheck(_ rule: Rule) -> Bool {
        if rule.moduleName == "pam_deny.so" && rule.action(for: "auth_err") != "ignore" { return true }
        if StackLint.passwordModules.contains(rule.moduleName) {
            let onFailure = rule.action(for: "auth_err")
            // [success=N default=ignore]: a failure goes on, to pam_deny usually.
            return onFailure == "die" || onFailure == "bad"
        }
        return false
    }

    /// For each index (and the end), whether some rule from there on is a
    /// mandatory check: one pass from the end instead of a walk per question.
    static func mandatoryFrom(_ rules: [Rule]) -> [Bool] {
        var table = [Bool](repeating: false, count: rules.count + 1)
        for index in stride(from: rules.count - 1, through: 0, by: -1) {
            table[index] = table[index + 1] || isMandatoryCheck(rules[index])
        }
        return table
    }

    /// Where execution goes after `action` at `index` (nil: the stack ends).
    /// "bad" records a failure but goes on to the next rule.
    func landing(_ action: String, from index: Int) -> Int? {
        switch action {
        case "ignore", "ok", "bad", "reset": return index + 1
        case "die", "done": return nil
        default:
            // libpam takes only a positive count of rules to skip.
            if let jump = Int(action), jump > 0 { return index + 1 + jump }
            return nil
        }
    }

    /// The module's step-aside answer, by libpam's name for it.
    static let stepAside = ResultTable.stepAside.libpamName
    /// Each code the module answers when it does not grant, with what it
    /// means, from the result table: what the lint tells an administrator
    /// the module will do on a line.
    /// The step-aside first: it is what an administrator most often meets.
    static let moduleFailures: [(code: String, meaning: String)] =
        ([ResultTable.stepAside] + PAMCode.allCases.filter { ![.success, .ignore, ResultTable.stepAside].contains($0) }).map { code in
            let meaning: String
            switch code {
            case .authInfoUnavailable: meaning = "steps aside (out of scope, the biometrics fallback, no reader, a locked fingerprint)"
            case .authError: meaning = "refuses (a wrong password, the misses used up, an unknown user)"
            case .conversationError: meaning = "is cancelled"
            case .systemError: meaning = "hits an internal error"
            case .success, .ignore: meaning = "answers \(code.libpamName)"
            }
            return (code.libpamName, meaning)
        }

    static let failureCodes = ["auth_err", "cred_insufficient", "authinfo_unavail", "user_unknown", "maxtries", "conv_err",
                               "system_err", "ignore", "abort"]

    public func serviceFindings(_ name: String) -> [Finding] {
        let rules = authRules(name)
        var findings: [Finding] = []
        func error(_ rule: Rule, _ text: String) { findings.append(Finding(severity: "error", text: "\(rule.location): \(text)")) }
        // Tables over the rules, each built in one pass, so that a service
        // of thousands of rules is checked in time linear in its size.
        let count = rules.count
        let mandatory = StackLint.mandatoryFrom(rules)
        var passwordModulesBefore = [Int](repeating: 0, count: count + 1)
        var authsuccFrom = [Bool](repeating: false, count: count + 1)
        for index in 0..<count {
            passwordModulesBefore[index + 1] = passwordModulesBefore[index]
                + (StackLint.passwordModules.contains(rules[index].moduleName) ? 1 : 0)
        }
        for index in stride(from: count - 1, through: 0, by: -1) {
            authsuccFrom[index] = authsuccFrom[index + 1] || rules[index].isAuthsucc
        }
        func passwordModules(_ range: Range<Int>) -> Int { passwordModulesBefore[range.upperBound] - passwordModulesBefore[range.lowerBound] }
        for (index, rule) in rules.enumerated() where rule.isLocalAuth && !rule.isAuthsucc {
            let biometrics = rule.arguments.contains("policy=biometrics")
            if rule.control.lowercased() == "sufficient" || rule.control.lowercased().contains("=done") {
                error(rule, "'done' on the pam_localauth.so line ends the whole service when the file is included; jump with success=N")
            }
            // Every way past the module must meet a mandatory password check:
            // on a line that ignores a failure, nothing the module (or any
            // module) returns can fail the stack.
            for (code, meaning) in StackLint.moduleFailures {
                let action = rule.action(for: code)
                guard action != "bad", let next = landing(action, from: index) else { continue }
                if !(next < count && mandatory[next]) {
                    error(rule, "when the module \(meaning) it answers \(code), which this line turns into '\(action)' and the stack "
                          + "goes on to only optional modules: it would succeed on the lines before it with no match and no password; "
                          + "add a mandatory password module or pam_deny.so after it")
                    break
                }
            }
            // Where the step-aside fails the stack, say what that costs.
            let onStepAside = rule.action(for: StackLint.stepAside)
            if onStepAside == "bad" || onStepAside == "die" {
                findings.append(Finding(severity: "warning", text: "\(rule.location): when the module steps aside (out of scope: "
                    + "another service, a remote login, another user\(biometrics ? "; the fallback, no reader, a locked fingerprint" : "")) "
                    + "it answers \(StackLint.stepAside), which this line turns into '\(onStepAside)': nobody gets in here that way, "
                    + "not even with the right password; write \(StackLint.stepAside)=ignore (or a jump) to let the password module decide"))
            }
            if let successLanding = landing(rule.action(for: "success"), from: index), successLanding < rules.count,
               rules[successLanding].moduleName == "pam_deny.so" {
                error(rule, "success jumps onto pam_deny.so: every match and correct password would fail")
            }
            if !biometrics {
                // A wrong passcode, a cancel or an internal error must end the
                // stack: going on to the password line would give an uncounted
                // guess and bypass the back-off (R3, R9).
                for code in ["auth_err", "conv_err", "system_err"] {
                    let action = rule.action(for: code)
                    let landsOnDeny = landing(action, from: index).map { $0 < rules.count && rules[$0].moduleName == "pam_deny.so" } ?? false
                    if action != "die" && !landsOnDeny {
                        error(rule, "policy owner: \(code) must end the stack (default=die); here it is '\(action)', which lets the password line give an uncounted guess")
                        break
                    }
                }
                if let successLanding = landing(rule.action(for: "success"), from: index), successLanding <= count {
                    if passwordModules((index + 1)..<successLanding) == 0, passwordModules(successLanding..<count) > 0 {
                        findings.append(Finding(severity: "warning", text: "\(rule.location): success does not jump past the password module, which will ask again"))
                    }
                }
            }
            if biometrics && !authsuccFrom[index + 1] {
                error(rule, "a policy=biometrics line needs a later 'pam_localauth.so authsucc' line reached through the password module's success (R11)")
            }
        }
        if StackLint.lockersRunningAsTheUser.contains(name) {
            findings += lockerFindings(name, rules)
        }
        // R11: an authsucc line must be reachable only through a password
        // module's success. Every jump is listed once, by where it lands.
        var jumpsInto: [Int: [(source: Int, code: String)]] = [:]
        for (index, source) in rules.enumerated() {
            for code in ["success"] + StackLint.failureCodes {
                guard let jump = Int(source.action(for: code)), jump > 0, index + 1 + jump < count,
                      rules[index + 1 + jump].isAuthsucc else { continue }
                jumpsInto[index + 1 + jump, default: []].append((index, code))
            }
        }
        for (target, rule) in rules.enumerated() where rule.isAuthsucc {
            if rule.action(for: StackLint.stepAside) != "ignore" {
                error(rule, "the authsucc line only records and always answers \(StackLint.stepAside), which this line turns into "
                      + "'\(rule.action(for: StackLint.stepAside))': every login that reaches it would fail; make it optional")
            }
            let previous = target > 0 ? rules[target - 1] : nil
            if previous == nil || previous!.moduleName != "pam_deny.so" || !previous!.failureDies {
                error(rule, "the authsucc line must follow 'auth requisite pam_deny.so', so that only a jump from the password module's success reaches it (R11)")
            }
            for (index, code) in jumpsInto[target] ?? [] where index < target - 1 {
                let source = rules[index]
                let allowed = code == "success" && (StackLint.passwordModules.contains(source.moduleName) || source.isLocalAuth)
                if !allowed {
                    error(rule, "\(source.location) reaches the authsucc line on \(code); only the password module's success may (R11)")
                }
            }
        }
        return findings
    }

    /// Screen lockers that run PAM as the user: the module reaches the policy
    /// through the setuid helper, which takes only presentation from the
    /// stack line. (vlock is setuid root: the module runs in-process there.)
    static let lockersRunningAsTheUser: Set<String> = ["i3lock", "swaylock", "xscreensaver", "xsecurelock", "hyprlock"]
    /// Options the helper takes only from the configuration file.
    static let administratorOnlyKeys = ["state_dir", "passcode_service", "lockout", "max_tries", "passcode_backoff",
                                        "max_backoff", "even_deny_root", "conf", "fallback_after", "mode", "debug"]

    func lockerFindings(_ name: String, _ rules: [Rule]) -> [Finding] {
        var findings: [Finding] = []
        for rule in rules where rule.isLocalAuth && !rule.isAuthsucc {
            if rule.arguments.contains("policy=biometrics") {
                findings.append(Finding(severity: "error", text: "\(rule.location): \(name) runs as the user: a password accepted by a later module cannot reset the fingerprint count there (only root can write it); use policy owner"))
            }
            for argument in rule.arguments {
                let key = String(argument.split(separator: "=", maxSplits: 1).first ?? "")
                if StackLint.administratorOnlyKeys.contains(key) {
                    findings.append(Finding(severity: "warning", text: "\(rule.location): \(key) is ignored for \(name), which runs as the user: set it in /etc/security/localauth.conf"))
                }
            }
            if name == "xscreensaver" && rule.arguments.contains("instruction_in_prompt=no") {
                findings.append(Finding(severity: "warning", text: "\(rule.location): xscreensaver holds every message until a key is pressed: without instruction_in_prompt a message stands between Enter and the fingerprint reader"))
            }
        }
        return findings
    }

    /// The passcode services named by `passcode_service=` on module lines.
    public func passcodeServicesNamed(_ name: String) -> [String] {
        var names: [String] = []
        for rule in authRules(name) where rule.isLocalAuth {
            for argument in rule.arguments where argument.hasPrefix("passcode_service=") {
                names.append(String(argument.dropFirst("passcode_service=".count)))
            }
        }
        return names
    }

    public func passcodeServiceFindings(_ name: String) -> [Finding] {
        guard let lines = read(name) else { return [Finding(severity: "error", text: "\(name): missing or unreadable")] }
        var findings: [Finding] = []
        var passwordModules = 0
        for (number, words) in lines {
            let control = words.count > 1 ? words[1].lowercased() : ""
            if words[0] == "@include" || control == "include" || control == "substack" {
                findings.append(Finding(severity: "error", text: "\(name):\(number): the passcode service must be an explicit list, not an include (it may bring in fingerprint or token modules)"))
                continue
            }
            let type = (words[0].hasPrefix("-") ? String(words[0].dropFirst()) : words[0]).lowercased()
            guard type == "auth", words.count >= 3 else { continue }
            let rule = Rule(file: name, line: number, control: words[1], module: words[2], arguments: Array(words.dropFirst(3)))
            if StackLint.forbiddenInPasscodeService.contains(rule.moduleName) {
                findings.append(Finding(severity: "error", text: "\(rule.location): \(rule.moduleName) must not be in the passcode service: it could stand in for the password"))
            }
            // A success that ends or skips the stack could pass a wrong passcode.
            let onSuccess = rule.action(for: "success")
            if onSuccess == "done" || Int(onSuccess) != nil || StackLint.failureCodes.contains(where: { Int(rule.action(for: $0)) != nil }) {
                findings.append(Finding(severity: "error", text: "\(rule.location): no jumps, 'sufficient' or 'done' in the passcode service: every line must be able to fail the check"))
            }
            if StackLint.passwordModules.contains(rule.moduleName) {
                passwordModules += 1
                let onFailure = rule.action(for: "auth_err")
                if onFailure != "bad" && onFailure != "die" {
                    findings.append(Finding(severity: "error", text: "\(rule.location): \(rule.moduleName) must be required or requisite here: a wrong passcode must fail the check"))
                }
            }
        }
        if passwordModules == 0 {
            findings.append(Finding(severity: "error", text: "\(name): no password module (such as pam_unix.so) checks the passcode"))
        }
        return findings
    }
}
