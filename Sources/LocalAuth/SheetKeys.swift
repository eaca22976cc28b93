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
