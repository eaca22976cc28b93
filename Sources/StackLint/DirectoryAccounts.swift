// Accounts that come from a directory (sssd, LDAP, winbind) have no entry
// in /etc/shadow, so pam_unix cannot check their password: a passcode
// service of pam_unix alone fails every right password of theirs, and the
// person is counted wrong until locked out. The account sources are what
// nsswitch.conf's passwd line lists; the lint warns for each directory
// source whose password no module of the passcode service can check.

extension StackLint {
    /// The directory sources of nsswitch.conf, each with the password
    /// modules that can check its accounts.
    public static let directorySources: [(source: String, modules: Set<String>)] = [
        ("sss", ["pam_sss.so", "pam_krb5.so"]),
        ("ldap", ["pam_ldap.so", "pam_sss.so", "pam_krb5.so"]),
        ("winbind", ["pam_winbind.so", "pam_krb5.so"]),
    ]

    /// The sources of the `passwd:` line of an nsswitch.conf (its last one,
    /// as glibc reads it), without the `[STATUS=action]` items.
    public static func passwdSources(nsswitch: [UInt8]) -> [String] {
        var sources: [String] = []
        for line in String(decoding: nsswitch, as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: true) {
            let text = line.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
            let words = text.split(whereSeparator: { $0 == " " || $0 == "\t" })
            guard let first = words.first, first == "passwd:" || (first == "passwd" && words.dropFirst().first == ":") else { continue }
            sources = words.dropFirst(first == "passwd:" ? 1 : 2).map(String.init).filter { !$0.hasPrefix("[") }
        }
        return sources
    }

    /// A warning for each directory source in `sources` whose accounts no
    /// password module of `service` (a passcode service) can check.
    public func directoryAccountFindings(_ service: String, sources: [String]) -> [Finding] {
        let modules = Set(expand(service).rules.filter { $0.kind == .module }.map(\.moduleName))
        return StackLint.directorySources.compactMap { entry -> Finding? in
            guard sources.contains(entry.source), modules.isDisjoint(with: entry.modules) else { return nil }
            let named = entry.modules.sorted().joined(separator: " or ")
            return Finding(severity: "warning", text: "\(service): accounts from '\(entry.source)' (nsswitch.conf, passwd) cannot be "
                           + "checked here, so their right password always fails and counts as wrong: add \(named) after "
                           + "pam_unix.so (pam_localauth(8), DIRECTORY ACCOUNTS)")
        }
    }
}
