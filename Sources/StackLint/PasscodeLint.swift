// The passcode service: the PAM service the module runs to check the
// password it collected (`localauth-passcode`). Whatever it answers decides
// right or wrong, so only a password module's success may ever make it
// succeed. Two shapes pass:
//
// - every password module records its failure (required, requisite, or
//   [default=bad]/[default=die]); other lines may do what they like;
// - a password module's failure is ignored, so that the next one may
//   decide (local accounts by pam_unix, then the directory's module):
//   then no other line may record a success, and libpam's own rule (a
//   stack that recorded nothing fails) leaves a password module's success
//   as the only way to PAM_SUCCESS.
//
// In both, no line may jump (a jump records nothing, and lands past the
// lines that would fail) or reset (it forgets a failure), and only a
// password module's success may end the check (`sufficient`,
// [success=done]).

extension StackLint {
    /// Arguments that make a password module answer PAM_IGNORE for some
    /// users (pam_sss's ignore_unknown_user, ignore_authinfo_unavail;
    /// pam_krb5's minimum_uid; pam_winbind's unknown_ok), in any case.
    static func argumentsAllowIgnore(_ arguments: [String]) -> Bool {
        arguments.contains { argument in
            let lowered = argument.lowercased()
            return lowered.hasPrefix("ignore_") || lowered.hasPrefix("minimum_uid") || lowered.hasPrefix("unknown_ok")
        }
    }

    /// Arguments with which a password module takes something other than
    /// the password: a smartcard or a key (pam_sss's certificate login,
    /// pam_krb5's PKINIT), or another principal's ticket (pam_krb5's
    /// search_k5login, alt_auth_map: ~/.k5login is the user's to write).
    static let nonPasswordArguments = ["try_cert_auth", "require_cert_auth", "use_pkinit", "try_pkinit", "search_k5login",
                                       "alt_auth_map"]

    /// Whether a module named as a password module is the system's: a bare
    /// name (libpam looks in its own directory) or a path in a PAM module
    /// directory. A library of that name anywhere else is not pam_unix.
    static func isSystemModulePath(_ module: String) -> Bool {
        guard module.contains("/") else { return true }
        let parts = module.split(separator: "/", omittingEmptySubsequences: false)
        guard module.hasPrefix("/"), !parts.contains(".."), !parts.contains("."), parts.count >= 4,
              parts[parts.count - 2] == "security" else { return false }
        return parts[1] == "lib" || parts[1] == "lib64" || (parts[1] == "usr" && (parts[2] == "lib" || parts[2] == "lib64"))
    }

    /// Whether `rule` is a password module the passcode service may trust.
    func isTrustedPasswordModule(_ rule: Rule) -> Bool {
        guard rule.kind == .module, StackLint.passwordModules.contains(rule.moduleName), StackLint.isSystemModulePath(rule.module) else {
            return false
        }
        // pam_matrix (a test module) without passdb= reads the file the
        // caller's environment names.
        return rule.moduleName != "pam_matrix.so" || rule.arguments.contains { $0.hasPrefix("passdb=") }
    }

    public func passcodeServiceFindings(_ name: String) -> [Finding] {
        guard let (lines, complete) = read(name) else { return [Finding(severity: "error", text: "\(name): missing or unreadable")] }
        var findings: [Finding] = []
        func error(_ location: String, _ text: String) { findings.append(Finding(severity: "error", text: "\(location): \(text)")) }
        for number in memo.notUTF8[Array(name.utf8)] ?? [] {
            error("\(name):\(number)", "bytes that are not UTF-8: the lint cannot read this line as libpam does, so it cannot pass the stack")
        }
        if !complete {
            error(name, "libpam cannot read this file to its end (a line continued at the end of the file, or longer than "
                  + "\(PAMFile.bufferSize - 1) bytes): the passcode check always fails")
        }
        for (number, words) in lines {
            if let finding = StackLint.capitalKeywordFinding("\(name):\(number)", words) { findings.append(finding) }
            let type = (words[0].hasPrefix("-") ? String(words[0].dropFirst()) : words[0]).lowercased()
            let control = words.count > 1 ? words[1].lowercased() : ""
            if type == "@include" || control == "include" || control == "substack" {
                error("\(name):\(number)", "the passcode service must be an explicit list, not an include (it may bring in fingerprint or token modules)")
            }
        }
        // Every line as libpam loads it, lines of an unknown type included
        // (libpam keeps them as auth lines that fail, with their control).
        let rules = expand(name).rules.filter { $0.kind != .substack && $0.file == name }
        var passwordModules = 0
        var failureIgnored = false
        for rule in rules {
            if rule.kind == .module && (StackLint.forbiddenInPasscodeService.contains(rule.moduleName) || rule.isLocalAuth) {
                error(rule.location, "\(rule.moduleName) must not be in the passcode service: it could stand in for the password")
            }
            let trusted = isTrustedPasswordModule(rule)
            if rule.kind == .module && StackLint.passwordModules.contains(rule.moduleName) && !trusted {
                error(rule.location, "\(rule.module) is not the system's \(rule.moduleName) (name it bare, or by its path in the PAM "
                      + "module directory\(rule.moduleName == "pam_matrix.so" ? ", with passdb=" : ""))")
            }
            if trusted, let argument = rule.arguments.first(where: { StackLint.nonPasswordArguments.contains($0.lowercased()) }) {
                error(rule.location, "\(rule.moduleName) \(argument) takes something other than the password")
            }
            if trusted { passwordModules += 1 }
            // A password module may answer PAM_IGNORE when told to.
            var answers = rule.answers
            if trusted && StackLint.argumentsAllowIgnore(rule.arguments) && !answers.contains(Control.ignoreAnswer) {
                answers.append(Control.ignoreAnswer)
            }
            let skips = answers.contains { answer in
                switch rule.control.action(answer) {
                case .reset, .jump: return true
                case .done: return Control.isSuccess(answer) && !trusted
                default: return false
                }
            }
            if skips {
                error(rule.location, "no jumps or 'reset' in the passcode service, and 'sufficient' or 'done' only on a password "
                      + "module's success: every other line must be able to fail the check")
            }
            if trusted && answers.contains(where: { !Control.isSuccess($0) && rule.control.action($0) == .ignore }) {
                failureIgnored = true
            }
        }
        if failureIgnored {
            // A password module's failure may be ignored: nothing else may
            // record a success, or it would decide a wrong password.
            for rule in rules where !isTrustedPasswordModule(rule) {
                let records = rule.answers.contains { Control.isSuccess($0) && [.ok, .done].contains(rule.control.action($0)) }
                if records {
                    error(rule.location, "a password module's failure is ignored in this service, so \(rule.moduleName) must not "
                          + "be able to pass the check: give it [success=ignore new_authtok_reqd=ignore default=bad], "
                          + "[success=die default=ignore] (as pam_localuser.so before a directory's module), or remove it")
                }
            }
        }
        if passwordModules == 0 {
            error(name, "no password module (such as pam_unix.so) checks the passcode")
        }
        return findings
    }
}
