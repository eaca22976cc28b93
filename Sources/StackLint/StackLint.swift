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

/// A file as the lint reads it.
public enum LintFile {
    case bytes([UInt8])
    /// Not there: libpam fails an include of it too.
    case missing
    /// There, but the lint cannot read it (too large, or not openable by
    /// this process) where libpam may: the lint cannot judge what includes it.
    case unjudgeable
}

public struct StackLint {
    let readLintFile: (String) -> LintFile
    /// The options the module runs with, given a line's arguments.
    let moduleOptions: ([String]) -> Options
    /// Files read and services expanded, each once per lint: a hostile
    /// directory that includes one large file hundreds of times is read
    /// once, not hundreds of times.
    /// Keyed by a name's bytes: Swift compares strings by canonical
    /// equivalence, so "é" and "e" with a combining accent would be one key
    /// though libpam opens two files.
    final class Memo {
        var files: [[UInt8]: (lines: [(line: Int, words: [String])], complete: Bool)?] = [:]
        var expansions: [[UInt8]: Expansion] = [:]
        var unjudgeable: Set<[UInt8]> = []
        /// Lines of each file with bytes that are not UTF-8.
        var notUTF8: [[UInt8]: [Int]] = [:]
        /// Each file's lines read once into what `load` needs of them: a
        /// file included many times is parsed once, not once per include.
        var readLines: [[UInt8]: [ReadLine]] = [:]
    }

    /// One logical line of a file, with what every include of it uses:
    /// its keyword finding, its type, its control and, for an auth module
    /// line, the rule it becomes (at level 0).
    struct ReadLine {
        let number: Int
        let words: [String]
        let capitalFinding: Finding?
        let type: String
        let control: Control?
        let rule: Rule?
    }

    func readLines(_ name: String, _ lines: [(line: Int, words: [String])]) -> [ReadLine] {
        if let known = memo.readLines[Array(name.utf8)] { return known }
        let parsed = lines.map { number, words in
            // The type, in any case, with or without a leading "-"; Debian's
            // @include is read the same way.
            let type = (words[0].hasPrefix("-") ? String(words[0].dropFirst()) : words[0]).lowercased()
            let control = words.count > 1 ? Control(words[1]) : nil
            let rule = type == "auth" && words.count > 2 && control != nil
                ? Rule(file: name, line: number, level: 0, control: control!, module: words[2], arguments: Array(words.dropFirst(3)),
                       options: moduleOptions)
                : nil
            return ReadLine(number: number, words: words, capitalFinding: StackLint.capitalKeywordFinding("\(name):\(number)", words),
                            type: type, control: control, rule: rule)
        }
        memo.readLines[Array(name.utf8)] = parsed
        return parsed
    }
    let memo = Memo()

    /// `read` gives a file's bytes by service name or absolute path (nil:
    /// unreadable); `options` the module's options for a line's arguments
    /// (by default the arguments alone, over the defaults).
    public init(file: @escaping (String) -> LintFile, options: @escaping ([String]) -> Options = StackLint.optionsFromArguments) {
        readLintFile = file
        moduleOptions = options
    }

    /// A lint over files that are there (bytes) or missing (nil).
    public init(read: @escaping (String) -> [UInt8]?, options: @escaping ([String]) -> Options = StackLint.optionsFromArguments) {
        self.init(file: { name in read(name).map { .bytes($0) } ?? .missing }, options: options)
    }

    /// libpam's keywords. It compares them with strcasecmp, which folds case
    /// in the calling program's locale: in a Turkish one "I" is not "i", so
    /// "REQUISITE" is a keyword for one caller and a broken control for another.
    static let keywords: Set<String> = ["auth", "account", "session", "password", "@include", "required", "requisite",
                                        "sufficient", "optional", "include", "substack"]

    /// An error for a type or control keyword written with capitals.
    static func capitalKeywordFinding(_ location: String, _ words: [String]) -> Finding? {
        for (index, word) in words.prefix(2).enumerated() {
            let bare = index == 0 && word.hasPrefix("-") ? String(word.dropFirst()) : word
            let folded = String(decoding: bare.utf8.map { $0 >= 0x41 && $0 <= 0x5A ? $0 + 0x20 : $0 }, as: UTF8.self)
            if folded != bare && keywords.contains(folded) {
                return Finding(severity: "error", text: "\(location): '\(bare)' in capitals: libpam compares keywords in the calling "
                               + "program's locale, where I need not be i (Turkish); write it in lowercase")
            }
        }
        return nil
    }

    /// The module's options from a line's arguments alone, over the defaults.
    public static func optionsFromArguments(_ arguments: [String]) -> Options {
        var parser = OptionParser()
        parser.applyArguments(arguments.map { Array($0.utf8) })
        parser.finish()
        return parser.options
    }

    static let passwordModules: Set<String> = [
        "pam_unix.so", "pam_sss.so", "pam_ldap.so", "pam_krb5.so", "pam_winbind.so", "pam_systemd_home.so", "pam_matrix.so",
    ]
    static let forbiddenInPasscodeService: Set<String> = [
        "pam_fprintd.so", "pam_u2f.so", "pam_oath.so", "pam_google_authenticator.so", "pam_yubico.so", "pam_rootok.so",
        "pam_permit.so", "pam_p11.so", "pam_pkcs11.so", "pam_howdy.so", "pam_localauth.so", "pam_succeed_if.so",
    ]

    /// Modules besides the password modules whose success is a credential:
    /// a finger or a key was checked.
    static let otherCredentialModules: Set<String> = ["pam_fprintd.so", "pam_u2f.so"]

    /// The logical lines of a file, as libpam assembles them; nil when it
    /// cannot be read.
    func read(_ name: String) -> (lines: [(line: Int, words: [String])], complete: Bool)? {
        if let known = memo.files[Array(name.utf8)] { return known }
        var parsed: (lines: [(line: Int, words: [String])], complete: Bool)? = nil
        switch readLintFile(name) {
        case .bytes(let contents):
            let (lines, complete) = PAMFile.lines(contents)
            // The lint reads fields as text; a byte that is not UTF-8 would
            // name another file or path than libpam opens.
            memo.notUTF8[Array(name.utf8)] = lines.filter { String(validating: $0.text, as: UTF8.self) == nil }.map(\.number)
            parsed = (lines: lines.map { (line: $0.number, words: PAMFile.fields($0.text)) }.filter { !$0.words.isEmpty }, complete: complete)
        case .missing: break
        case .unjudgeable: memo.unjudgeable.insert(Array(name.utf8))
        }
        memo.files[Array(name.utf8)] = .some(parsed)
        return parsed
    }
    /// The most rules a service expands to, and the most files it reads:
    /// files that include each other many times over would otherwise
    /// expand without end (a fuzzer found the lint taking minutes).
    static let maxExpandedRules = 4096
    static let maxFilesRead = 256
    /// libpam's limit on substacks within substacks.
    static let maxSubstackLevel = 16

    /// A service's auth stack with @include, include and substack expanded
    /// as libpam loads them, and what the lint could not follow.
    struct Expansion {
        var rules: [Rule] = []
        var findings: [Finding] = []
        var filesRead = 0
        var capped = false
    }

    func authRules(_ name: String) -> [Rule] { expand(name).rules }

    func expand(_ name: String) -> Expansion {
        if let known = memo.expansions[Array(name.utf8)] { return known }
        let expansion = expandOnce(name)
        memo.expansions[Array(name.utf8)] = expansion
        return expansion
    }

    func expandOnce(_ name: String) -> Expansion {
        var expansion = Expansion()
        if load(name, level: 0, path: [], into: &expansion) == .incomplete {
            expansion.findings.append(Finding(severity: "warning", text: "\(name): libpam cannot read this file to its end (a line "
                + "continued at the end of the file, or longer than \(PAMFile.bufferSize - 1) bytes): every login through it fails"))
        }
        if expansion.capped {
            expansion.findings.append(Finding(severity: "error", text: "\(name): more than \(StackLint.maxExpandedRules) lines or "
                + "\(StackLint.maxFilesRead) files: only the first were checked, so the lint cannot pass it"))
        }
        return expansion
    }

    /// Appends the auth lines of `name` at substack `level`; false when
    /// libpam could not load the file (it then installs a line that fails
    /// where the include was). A file that includes one already on its own
    /// include path is such a failure: libpam would go round until it ran
    /// out of files.
    enum Load { case loaded, unreadable, unjudgeable, incomplete, refused }

    @discardableResult
    func load(_ name: String, level: Int, path: [String], into expansion: inout Expansion) -> Load {
        func note(_ text: String) {
            let finding = Finding(severity: "warning", text: text)
            if !expansion.findings.contains(finding) { expansion.findings.append(finding) }
        }
        if path.contains(where: { $0.utf8.elementsEqual(name.utf8) }) {
            note("\(path.first ?? name): its includes go round in a loop through \(name): libpam fails every login through it")
            return .refused
        }
        if level >= StackLint.maxSubstackLevel {
            note("\(path.first ?? name): substacks more than \(StackLint.maxSubstackLevel) deep: libpam fails every login through it")
            return .refused
        }
        guard expansion.filesRead < StackLint.maxFilesRead else { expansion.capped = true; return .loaded }
        expansion.filesRead += 1
        guard let (lines, complete) = read(name) else { return memo.unjudgeable.contains(Array(name.utf8)) ? .unjudgeable : .unreadable }
        for number in memo.notUTF8[Array(name.utf8)] ?? [] {
            let finding = Finding(severity: "error", text: "\(name):\(number): bytes that are not UTF-8: the lint cannot read this line "
                                  + "as libpam does, so it cannot pass the stack")
            if !expansion.findings.contains(finding) { expansion.findings.append(finding) }
        }
        for line in readLines(name, lines) {
            guard expansion.rules.count < StackLint.maxExpandedRules else { expansion.capped = true; break }
            let (number, words, type) = (line.number, line.words, line.type)
            if let finding = line.capitalFinding, !expansion.findings.contains(finding) {
                expansion.findings.append(finding)
            }
            func failing(_ control: Control) -> Rule { Rule(file: name, line: number, kind: .mustFail, level: level, control: control) }
            let atInclude = type == "@include"
            func include(_ target: String, substack: Bool) {
                if substack { expansion.rules.append(Rule(file: name, line: number, kind: .substack, level: level, control: Control.mustFail)) }
                switch load(target, level: level + (substack ? 1 : 0), path: path + [name], into: &expansion) {
                case .loaded: break
                case .unreadable where atInclude:
                    // Debian's @include names a file for every type (often
                    // common-account, common-session): the lint cannot tell
                    // what libpam makes of one it cannot read, so it adds
                    // no line that would fail.
                    break
                case .unreadable:
                    expansion.rules.append(failing(Control.mustFail))
                    note("\(name):\(number): \(target) cannot be read (missing, or not a regular file): libpam fails every login through this line")
                case .unjudgeable:
                    let finding = Finding(severity: "error", text: "\(name):\(number): \(target) cannot be read here (too large, or "
                                          + "not openable by this process) though libpam may read it: the lint cannot pass this stack")
                    if !expansion.findings.contains(finding) { expansion.findings.append(finding) }
                case .incomplete:
                    expansion.rules.append(failing(Control.mustFail))
                    note("\(target): libpam cannot read this file to its end (a line continued at the end of the file, or longer "
                         + "than \(PAMFile.bufferSize - 1) bytes): it fails every login through \(name):\(number)")
                case .refused:
                    expansion.rules.append(failing(Control.mustFail))
                }
            }
            if atInclude {
                if words.count > 1 { include(words[1], substack: false) }
                continue
            }
            if ["account", "session", "password"].contains(type) { continue }
            // An unknown type is taken by libpam as an auth line: one that
            // fails, or an include or substack that it loads all the same.
            let known = type == "auth"
            guard words.count > 1 else { expansion.rules.append(failing(Control.mustFail)); continue }
            guard let control = line.control else {
                include(words.count > 2 ? words[2] : "", substack: words[1].lowercased() == "substack")
                continue
            }
            guard known, var rule = line.rule else { expansion.rules.append(failing(control)); continue }
            rule.level = level
            expansion.rules.append(rule)
        }
        return complete ? .loaded : .incomplete
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
            case .credentialsInsufficient: meaning = "refuses a password unchecked while its back-off runs"
            case .conversationError: meaning = "is cancelled"
            case .systemError: meaning = "hits an internal error"
            case .success, .ignore: meaning = "answers \(code.libpamName)"
            }
            return (code.libpamName, meaning)
        }

    /// The module's answers that a policy-owner line must turn into the end
    /// of the stack: all but the step-aside, a wrong password first.
    static let answersThatMustEndTheStack: [String] =
        ["auth_err"] + moduleFailures.map(\.code).filter { $0 != stepAside && $0 != "auth_err" }

    /// What a pam_localauth.so line can give besides a grant: the module's
    /// answers, and libpam's own when it cannot load the module (a caller
    /// can make that happen, with a low address-space limit before sudo).
    static let lineFailures: [(code: String, meaning: String)] =
        moduleFailures + [("module_unknown", "cannot be loaded (libpam answers for it)")]

    static let failureCodes = ["auth_err", "cred_insufficient", "authinfo_unavail", "user_unknown", "maxtries", "conv_err",
                               "system_err", "ignore", "abort"]

    public func serviceFindings(_ name: String) -> [Finding] {
        guard read(name) != nil else {
            return [Finding(severity: "error", text: "\(name): cannot be read to be checked (unreadable, or larger than the lint reads)")]
        }
        let expansion = expand(name)
        let rules = expansion.rules
        let paths = StackPaths(rules)
        var findings = expansion.findings
        func error(_ rule: Rule, _ text: String) { findings.append(Finding(severity: "error", text: "\(rule.location): \(text)")) }
        for rule in rules where rule.isRefusedByTheModule {
            error(rule, "more than \(OptionParser.maxArguments) arguments: the module refuses this line (PAM_SYSTEM_ERR) and reads none of them")
        }
        // Tables over the rules, each built in one pass, so that a service
        // of thousands of rules is checked in time linear in its size.
        let count = rules.count
        var passwordModulesBefore = [Int](repeating: 0, count: count + 1)
        var authsuccFrom = [Bool](repeating: false, count: count + 1)
        for index in 0..<count {
            passwordModulesBefore[index + 1] = passwordModulesBefore[index]
                + (rules[index].kind == .module && StackLint.passwordModules.contains(rules[index].moduleName) ? 1 : 0)
        }
        for index in stride(from: count - 1, through: 0, by: -1) {
            authsuccFrom[index] = authsuccFrom[index + 1] || rules[index].isAuthsucc
        }
        func passwordModules(_ range: Range<Int>) -> Int { passwordModulesBefore[range.upperBound] - passwordModulesBefore[range.lowerBound] }
        func answer(_ code: String) -> Int { Control.answerNames.firstIndex(of: code)! }
        for rule in rules where rule.kind != .substack {
            if let problem = rule.control.problem {
                findings.append(Finding(severity: rule.isLocalAuth ? "error" : "warning", text: "\(rule.location): libpam cannot read "
                    + "this control (\(problem)) and takes every answer, success too, as a failure: nobody gets in through this line"))
            }
        }
        if paths.canReset {
            findings.append(Finding(severity: "warning", text: "\(name): a line can answer 'reset', which forgets the failures "
                + "recorded before it: the lint then asks every way on to meet a password check of its own"))
        }
        for (index, rule) in rules.enumerated() where rule.isLocalAuth && !rule.isAuthsucc {
            let biometrics = rule.isBiometrics
            // A scan-mode biometrics line with no password module after it is
            // a fingerprint-only conversation (GNOME's gdm-fingerprint): the
            // password is another conversation's, so a step-aside that fails
            // the stack is the point, and no password success follows to
            // reset after.
            let fingerprintOnly = biometrics && rule.options?.mode == .scan && passwordModules((index + 1)..<count) == 0
            if rule.answers.contains(where: { rule.control.action($0) == .done }) {
                error(rule, "'done' on the pam_localauth.so line ends the whole service when the file is included; jump with success=N")
            }
            // Every way past the module must check a credential or record a
            // failure before the stack ends: otherwise the lines before the
            // module decide, and they may all have succeeded.
            for (code, meaning) in StackLint.lineFailures where paths.isOpen(paths.outcome(index, answer(code))) {
                let action = rule.action(for: code)
                error(rule, "when the module \(meaning) it answers \(code), which this line turns into '\(action)', and from there "
                      + "the stack can reach its end with no password asked and no failure recorded (only optional modules, or a jump "
                      + "past the password line): it would succeed on the lines before it with no match and no password; "
                      + "add a mandatory password module or pam_deny.so after it")
                break
            }
            // Where the step-aside fails the stack, say what that costs.
            let onStepAside = rule.action(for: StackLint.stepAside)
            if (onStepAside == "bad" || onStepAside == "die") && !fingerprintOnly {
                findings.append(Finding(severity: "warning", text: "\(rule.location): when the module steps aside (out of scope: "
                    + "another service, a remote login, another user\(biometrics ? "; the fallback, no reader, a locked fingerprint" : "")) "
                    + "it answers \(StackLint.stepAside), which this line turns into '\(onStepAside)': nobody gets in here that way, "
                    + "not even with the right password; write \(StackLint.stepAside)=ignore (or a jump) to let the password module decide"))
            }
            let successNext = paths.next(paths.outcome(index, Control.success))
            if let landing = successNext, rules[landing].moduleName == "pam_deny.so" {
                error(rule, "success jumps onto pam_deny.so: every match and correct password would fail")
            }
            if !biometrics {
                // Every answer of the module but the step-aside must end the
                // stack (a wrong passcode, a refusal during the back-off, a
                // cancel, an internal error): going on to the password line
                // would give an uncounted guess and bypass the back-off (R3,
                // R9). The codes come from the result table, so a new one is
                // checked here too.
                for code in StackLint.answersThatMustEndTheStack {
                    let action = rule.control.action(named: code)
                    let next = paths.next(paths.outcome(index, answer(code)))
                    let landsOnDeny = next.map { rules[$0].moduleName == "pam_deny.so" } ?? false
                    if action != .die && !landsOnDeny {
                        error(rule, "policy owner: \(code) must end the stack (default=die); here it is '\(action.word)', which lets the password line give an uncounted guess")
                        break
                    }
                }
                let successLanding = successNext ?? count
                if successLanding > index, passwordModules((index + 1)..<successLanding) == 0, passwordModules(successLanding..<count) > 0 {
                    findings.append(Finding(severity: "warning", text: "\(rule.location): success does not jump past the password module, which will ask again"))
                }
            }
            if biometrics && !fingerprintOnly && !authsuccFrom[index + 1] {
                error(rule, "a policy=biometrics line needs a later 'pam_localauth.so authsucc' line reached through the password module's success (R11)")
            }
        }
        // A service from /usr/lib/pam.d is named by its path; the locker is its last part.
        let serviceName = String(name.split(separator: "/").last ?? Substring(name))
        if StackLint.lockersRunningAsTheUser.contains(serviceName) {
            findings += lockerFindings(serviceName, rules)
        } else {
            findings += scanLineFindings(rules)
        }
        // R11: an authsucc line must be reachable only through a password
        // module's success. Every way into a line is listed once, by where
        // it lands: a jump, the next line, the end of a substack a `done` or
        // `die` leaves, a failure recorded on the way (the line resets even
        // in a stack that then fails).
        func settled(_ index: Int) -> Int {
            var index = index
            while index < count, rules[index].kind == .substack, index + 1 >= count || rules[index + 1].level <= rules[index].level {
                index += 1   // an empty substack: nothing runs there
            }
            return index
        }
        var waysInto: [Int: [(source: Int, code: String)]] = [:]
        for (index, source) in rules.enumerated() where source.kind != .substack {
            for answer in source.answers {
                // An empty substack at the end settles past the last line.
                guard let landing = paths.next(paths.outcome(index, answer)).map(settled), landing < count,
                      rules[landing].isAuthsucc else { continue }
                waysInto[landing, default: []].append((index, Control.answerNames[answer]))
            }
        }
        for (target, rule) in rules.enumerated() where rule.isAuthsucc {
            if rule.action(for: StackLint.stepAside) != "ignore" {
                error(rule, "the authsucc line only records and always answers \(StackLint.stepAside), which this line turns into "
                      + "'\(rule.action(for: StackLint.stepAside))': every login that reaches it would fail; make it optional")
            }
            let previous = target > 0 ? rules[target - 1] : nil
            if previous == nil || previous!.kind != .module || previous!.moduleName != "pam_deny.so" || !previous!.failureDies {
                error(rule, "the authsucc line must follow 'auth requisite pam_deny.so', so that only a jump from the password module's success reaches it (R11)")
            }
            var reported = Set<Int>()
            for (index, code) in waysInto[target] ?? [] where !reported.contains(index) {
                let source = rules[index]
                let succeeded = code == "success" || code == "new_authtok_reqd"
                let allowed = succeeded && source.kind == .module
                    && (StackLint.passwordModules.contains(source.moduleName) || (source.isLocalAuth && !source.isAuthsucc))
                if !allowed {
                    reported.insert(index)
                    error(rule, "\(source.location) reaches the authsucc line on \(code); only the password module's success may (R11)")
                }
            }
        }
        findings += desktopFindings(name, rules)
        return findings
    }

    /// The passcode services the module's lines of a service use: the
    /// `passcode_service` in force on each (from its arguments, however
    /// spelled, or from the configuration file it reads).
    public func passcodeServicesNamed(_ name: String) -> [String] {
        var names: [String] = []
        for rule in authRules(name) {
            guard let service = rule.options?.passcodeService else { continue }
            let text = String(decoding: service, as: UTF8.self)
            if !names.contains(text) { names.append(text) }
        }
        return names
    }
}
