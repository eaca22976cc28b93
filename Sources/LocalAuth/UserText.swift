// Every sentence the person at the prompt reads, in one place (for review
// now, for translation one day). Log lines for the administrator stay next
// to the code that writes them.

public enum UserText {
    public static var firstPrompt: String { "Password, or press Enter to use your fingerprint: " }

    /// The first prompt of prompt mode; with `instruction_in_prompt`, the
    /// reason comes first (the prompt is then the only instruction).
    public static func firstPrompt(_ request: Request, options: Options) -> String {
        guard options.wantsInstructionInPrompt(service: request.service) else { return firstPrompt }
        var text = reason(request, options: options)
        if let last = text.utf8.last, last != 0x2E, last != 0x21, last != 0x3F, last != 0x3A { text += "." }
        return text + " " + firstPrompt
    }

    /// The password prompt: the fallback title, or "Password" when it is hidden.
    public static func passcodePrompt(_ options: Options) -> String {
        options.fallbackTitle.isEmpty ? "Password: " : printableText(options.fallbackTitle) + ": "
    }

    public static var locked: String {
        "Too many failed fingerprint attempts. Fingerprint is locked until you enter your password."
    }

    /// Why the fingerprint is not used in this prompt although it works.
    public static func blocked(_ block: BiometryBlock, _ request: Request) -> String {
        switch block {
        case .passcodeRequired(.afterRestart):
            return "Your password is required after a restart."
        case .passcodeRequired(.noUnlockFor(let seconds)):
            return "Your password is required: you have not unlocked for \(hoursText(seconds))."
        case .passcodeRequired(.passcodeUnusedFor(let seconds)):
            return "Your password is required: it has not been used for \(hoursText(seconds))."
        case .passcodeRequired(.enrollmentChanged):
            return "Your password is required: the enrolled fingerprints changed."
        case .touch(.lidClosed):
            return "The lid is closed: the fingerprint reader is not used."
        case .touch(.screenLocked):
            return "The screen is locked: the fingerprint reader is kept for unlocking it; "
                + printableText(request.service, limit: 32) + " needs your password."
        case .touch(.notActiveSession):
            return "The fingerprint reader is used only from your active session at this computer."
        case .touch(.logindUnanswered):
            return "The fingerprint reader is not used: the session manager did not answer."
        }
    }

    /// `localauth test` run as root through sudo: whose prompt it tries.
    public static func testingInvoker(_ name: String) -> String {
        "Testing the prompt of \(name), who ran sudo (--user NAME tests another account)."
    }
    /// `localauth test` run as root itself.
    public static var testingRoot: String {
        "Testing root's own prompt. To try yours: `sudo localauth test` from your account, or `localauth test --user NAME`."
    }

    public static var readerBusy: String { "The fingerprint reader is in use by another prompt." }
    /// fprintd answered with an error (it refuses everyone while polkit is down).
    public static var readerFailing: String { "The fingerprint reader is not available now." }
    public static var notRecognized: String { "Fingerprint not recognized." }
    public static var timedOut: String { "Timed out waiting for a fingerprint." }
    public static var disconnected: String { "The fingerprint reader was disconnected." }
    public static var stopped: String { "The fingerprint reader stopped working." }

    /// The reason: `reason=` with `%u` (user), `%s` (service) and `%%` (a
    /// percent sign) expanded, or a sentence naming the service and the user.
    public static func reason(_ request: Request, options: Options) -> String {
        guard let reason = options.reason else {
            return "\(printableText(KnownServices.shownName(request.service), limit: 32)) needs to confirm your identity (\(printableText(request.userName, limit: 64)))."
        }
        var expanded: [UInt8] = []
        var index = 0
        while index < reason.count {
            if reason[index] == 0x25, index + 1 < reason.count {
                let code = reason[index + 1]
                if code == 0x25 { expanded.append(0x25); index += 2; continue }
                if code == 0x75 { expanded.append(contentsOf: request.userName.prefix(64)); index += 2; continue }
                if code == 0x73 { expanded.append(contentsOf: request.service.prefix(32)); index += 2; continue }
            }
            expanded.append(reason[index])
            index += 1
        }
        return printableText(expanded, limit: 400)
    }

    /// The reason of a secret's load: the secret it opens, named by the
    /// helper first (so that no text of the caller's, however long, can
    /// push it out of the shown sentence), then the caller's words. A `%` of
    /// the name is written `%%`, so that it shows as it is.
    public static func secretReason(_ callerReason: [UInt8]?, item: [UInt8]) -> [UInt8] {
        var name: [UInt8] = []
        for byte in utf8Bytes(printableText(item, limit: 256)) {
            name.append(byte)
            if byte == 0x25 { name.append(0x25) }
        }
        let named = utf8Bytes("Your secret \"") + name + utf8Bytes("\"")
        guard let callerReason, !callerReason.isEmpty else { return named + utf8Bytes(" is asked for.") }
        return named + utf8Bytes(": ") + callerReason
    }

    /// The reason and where to put the finger, with the fallback hint in
    /// terminal mode when it is offered from the start.
    public static func instruction(_ request: Request, options: Options, scanType: ScanType, fallbackOffered: Bool) -> String {
        let action = scanType == .swipe ? "Swipe your finger across" : "Place your finger on"
        var text = reason(request, options: options)
        if let last = text.utf8.last, last != 0x2E, last != 0x21, last != 0x3F, last != 0x3A { text += "." }
        text += " " + action + " the fingerprint reader."
        if fallbackOffered && request.mode == .terminal {
            text += " Press Ctrl-C to " + printableText(options.fallbackTitle) + "."
        }
        return text
    }

    /// Touch or type: the reason, and both ways on one line, while the
    /// module reads the keys itself (terminal mode, policy owner).
    public static func touchOrType(_ request: Request, options: Options, scanType: ScanType) -> String {
        let action = scanType == .swipe ? "Swipe your finger across" : "Touch"
        var text = reason(request, options: options)
        if let last = text.utf8.last, last != 0x2E, last != 0x21, last != 0x3F, last != 0x3A { text += "." }
        return text + " " + action + " the fingerprint reader or type your password:"
    }

    /// Touch or type in an administrator dialog: the prompt itself, short
    /// (GNOME Shell shows it inside the entry; Plasma's agent translates
    /// the words "Password or swipe finger:").
    public static func dialogTouchOrType(scanType: ScanType) -> String {
        scanType == .swipe ? "Password or swipe finger:" : "Password or touch the fingerprint reader:"
    }

    public static var noMatchTouchOrType: String { "Fingerprint not recognized. Try again, or type your password." }

    public static func noMatch(_ options: Options, fallbackOffered: Bool) -> String {
        var text = "Fingerprint not recognized. Try again."
        if fallbackOffered { text += " Press Ctrl-C to " + printableText(options.fallbackTitle) + "." }
        return text
    }

    public static func hint(_ hint: RetryHint) -> String {
        switch hint {
        case .retryScan: return "Scan failed. Try again."
        case .swipeTooShort: return "Swipe was too short. Try again."
        case .fingerNotCentered: return "Finger was not centered. Try again."
        case .removeAndRetry: return "Remove your finger and try again."
        }
    }

    /// The attempt could not be written down first, so nothing was checked
    /// (the administrator's log says why).
    public static let notRecorded = "Authentication is unavailable: the attempt could not be recorded. Nothing was checked."

    public static func wait(_ milliseconds: Int64) -> String {
        "Too many wrong passwords. Try again in " + durationText(milliseconds) + "."
    }
}

/// A wait in words, rounded up: "45 seconds", "1 minute", "2 hours".
public func durationText(_ milliseconds: Int64) -> String {
    let seconds = (milliseconds + 999) / 1000
    func unit(_ count: Int64, _ name: String) -> String { count == 1 ? "1 \(name)" : "\(count) \(name)s" }
    if seconds < 60 { return unit(max(seconds, 1), "second") }
    if seconds < 3600 { return unit((seconds + 59) / 60, "minute") }
    return unit((seconds + 3599) / 3600, "hour")
}
