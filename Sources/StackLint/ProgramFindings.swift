// What the programs behind the services need of their stacks: a desktop's
// other fingerprint modules and services outside `services`, the lines of
// a scan-mode conversation, and the screen lockers' lines.
import LocalAuth

extension StackLint {
    /// Services that a desktop runs as a fingerprint-only conversation,
    /// answering none of its prompts, each with the password conversation it
    /// runs beside (GNOME's, and Plasma 6's lock screen).
    static var fingerprintConversations: [String: String] {
        var pairs: [String: String] = [:]
        for known in KnownServices.table {
            if let partner = known.passwordConversation { pairs["\(known.name)"] = "\(partner)" }
        }
        return pairs
    }

    /// Fingerprint modules other than this one: their matches and misses
    /// never reach the counts.
    static let otherFingerprintModules: Set<String> = ["pam_fprintd.so", "pam_fprintd_grosshack.so", "pam_howdy.so"]

    /// What a desktop gets wrong: another module that takes the finger (a
    /// finger works there while localauth has it locked, and misses are not
    /// counted), and a service that reaches the module without being in
    /// `services` (the module steps aside there: the password only).
    func desktopFindings(_ name: String, _ rules: [Rule]) -> [Finding] {
        var findings: [Finding] = []
        for rule in rules where rule.kind == .module && StackLint.otherFingerprintModules.contains(rule.moduleName) {
            findings.append(Finding(severity: "warning", text: "\(rule.location): \(rule.moduleName) checks fingerprints outside "
                + "localauth's counts: a finger gets in here while localauth has the fingerprint locked, and misses here are not counted"))
        }
        let service = String(name.split(separator: "/").last ?? Substring(name))
        if let partner = StackLint.fingerprintConversations[service] {
            for rule in rules where rule.isLocalAuth && !rule.isAuthsucc {
                guard let options = rule.options, rule.isBiometrics && options.mode == .scan else {
                    findings.append(Finding(severity: "warning", text: "\(rule.location): \(service) is a conversation nobody "
                        + "answers while the reader waits: write policy=biometrics mode=scan (a prompt here would wait until the "
                        + "program kills it)"))
                    continue
                }
                let partnerBytes = Array(partner.utf8)
                if options.covers(service: partnerBytes) && !options.passwordServices.contains(partnerBytes) {
                    findings.append(Finding(severity: "warning", text: "\(rule.location): \(partner) runs beside \(service) but is "
                        + "not in password_services: both conversations would ask for the reader (set password_services to include "
                        + "\(partner))"))
                }
            }
        }
        // `other` and Debian's common-* files are included by services, never
        // services of their own: no program starts PAM with their names.
        guard service != "other", !service.hasPrefix("common-"),
              let rule = rules.first(where: { $0.isLocalAuth && !$0.isAuthsucc && $0.options.map { !$0.covers(service: Array(service.utf8)) } ?? false })
        else { return findings }
        findings.append(Finding(severity: "warning", text: "\(name): reaches pam_localauth.so (\(rule.location)) but '\(service)' is "
            + "not in services: the module steps aside there, so it asks for the password only and counts nothing (name it in "
            + "services if a person at this computer uses it)"))
        return findings
    }

    /// Screen lockers that run PAM as the user: the module reaches the policy
    /// through the setuid helper, which takes only presentation from the
    /// stack line. (vlock is setuid root: the module runs in-process there.)
    static var lockersRunningAsTheUser: Set<String> {
        Set(KnownServices.table.filter(\.runsAsTheUser).map { "\($0.name)" })
    }

    /// A scan-mode line runs through the helper even for a root caller, and
    /// the helper takes from the line only what changes how the prompt
    /// looks: every other key there is ignored.
    func scanLineFindings(_ rules: [Rule]) -> [Finding] {
        var findings: [Finding] = []
        for rule in rules where rule.isLocalAuth && !rule.isAuthsucc && rule.options?.mode == .scan {
            for argument in rule.arguments {
                let key = String(argument.split(separator: "=", maxSplits: 1).first ?? "")
                guard let option = OptionKey(name: key.utf8), option.isIgnoredThroughTheHelper else { continue }
                let instead = option.setters.contains(.configFile) ? "set it in /etc/security/localauth.conf"
                                                                   : "the helper reads only /etc/security/localauth.conf"
                findings.append(Finding(severity: "warning", text: "\(rule.location): \(key) is ignored on a mode=scan line, "
                    + "which runs through localauth-helper: \(instead)"))
            }
        }
        return findings
    }

    func lockerFindings(_ name: String, _ rules: [Rule]) -> [Finding] {
        var findings: [Finding] = []
        for rule in rules where rule.isLocalAuth && !rule.isAuthsucc {
            // (A desktop's fingerprint-only conversation has no password
            // after it to reset anything: its password conversation does.)
            if rule.isBiometrics && !(rule.options?.mode == .scan && StackLint.fingerprintConversations[name] != nil) {
                findings.append(Finding(severity: "error", text: "\(rule.location): \(name) runs as the user: a password accepted by a later module cannot reset the fingerprint count there (only root can write it); use policy owner"))
            }
            for argument in rule.arguments {
                let key = String(argument.split(separator: "=", maxSplits: 1).first ?? "")
                guard let option = OptionKey(name: key.utf8), option.isIgnoredThroughTheHelper else { continue }
                let instead = option.setters.contains(.configFile) ? "set it in /etc/security/localauth.conf"
                                                                   : "the helper reads only /etc/security/localauth.conf"
                findings.append(Finding(severity: "warning", text: "\(rule.location): \(key) is ignored for \(name), which runs as the user: \(instead)"))
            }
            if name == "xscreensaver" && rule.options?.instructionInPrompt == false {
                findings.append(Finding(severity: "warning", text: "\(rule.location): xscreensaver holds every message until a key is pressed: without instruction_in_prompt a message stands between Enter and the fingerprint reader"))
            }
        }
        return findings
    }
}
