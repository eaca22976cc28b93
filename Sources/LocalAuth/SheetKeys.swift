// Apple's sheet on a terminal: which key does what while the reader waits,
// and what the screen says about each key when it starts to work. The app
// library's terminal presenter and `localauth evaluate` both use it.

public enum SheetKeys {
    /// Ctrl-C and Ctrl-D cancel; Enter is the fallback once it is offered
    /// (after the first finger not recognized); before that, and any other
    /// key at any time, nothing happens.
    public static func choice(_ byte: UInt8, fallbackOffered: Bool) -> ClientChoice? {
        switch byte {
        case 0x03, 0x04: return .userCancel
        case 0x0A, 0x0D: return fallbackOffered ? .userFallback : nil
        default: return nil
        }
    }

    /// Shown when the sheet opens: the cancel key, with the app's title.
    public static func cancelHint(_ title: String?) -> String {
        let shown = title.map { $0.isEmpty ? "Cancel" : $0 } ?? "Cancel"
        return "[Ctrl-C: " + shown + "]"
    }

    /// Shown when the fallback is offered: its key and title.
    public static func fallbackHint(_ title: String) -> String {
        "[Enter: " + title + "]"
    }
}

/// `localauth evaluate`'s touch or type (policy owner, a person at the
/// terminal): while the reader waits, the keys edit a password line that
/// nothing shows, as sudo's prompt does; Enter sends PASSWORD_TYPED (the
/// helper then asks the password, answered with this line; an empty line
/// gets the prompt), Ctrl-C, and Ctrl-D on an empty line, cancel.
public final class TypedWhileWaiting {
    private var editor: PasswordLine
    /// The line typed so far; wiped when taken, on a cancel and on deinit.
    public let line = SecretBuffer()
    /// Enter was pressed: the line waits for the helper's password prompt.
    public private(set) var entered = false

    public init(keys: LineEditingKeys = LineEditingKeys()) {
        editor = PasswordLine(keys: keys)
    }

    /// Keys were typed and Enter not yet pressed.
    public var midLine: Bool { !entered && !line.isEmpty }

    /// One key; the choice it makes, if any. Keys after Enter wait for the
    /// prompt and are dropped.
    public func key(_ byte: UInt8) -> ClientChoice? {
        if entered { return nil }
        if byte == 0x03 {
            line.wipe()
            return .userCancel
        }
        switch editor.apply(byte, to: line) {
        case .editing: return nil
        case .entered:
            entered = true
            return .passwordTyped
        case .endOfFile:
            line.wipe()
            return .userCancel
        }
    }

    /// Drops the line (a cancel, a timeout): wiped, typing starts over.
    public func discard() {
        line.wipe()
        entered = false
    }

    /// Moves an entered line into `secret`; false (and nothing moved) when
    /// none was entered or it is empty. Either way typing starts over.
    public func take(into secret: SecretBuffer) -> Bool {
        defer { entered = false }
        guard entered, !line.isEmpty else {
            line.wipe()
            return false
        }
        line.move(into: secret)
        return true
    }
}
