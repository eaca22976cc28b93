// A password typed while the reader waits (touch or type, R16): the keys
// the module reads from the caller's terminal, edited as a terminal's own
// line discipline would edit them, straight into a SecretBuffer. Pure: the
// adapter reads the bytes and the terminal's editing characters.

/// The terminal's editing characters (termios `c_cc`), as the person set them.
public struct LineEditingKeys: Equatable {
    public var erase: UInt8
    public var kill: UInt8
    public var wordErase: UInt8
    public var endOfFile: UInt8

    public init(erase: UInt8 = 0x7F, kill: UInt8 = 0x15, wordErase: UInt8 = 0x17, endOfFile: UInt8 = 0x04) {
        self.erase = erase
        self.kill = kill
        self.wordErase = wordErase
        self.endOfFile = endOfFile
    }
}

/// What a key did to the line.
public enum LineKeyResult: Equatable {
    /// The line goes on.
    case editing
    /// Enter: the line is done (it may be empty).
    case entered
    /// End of file on an empty line (Ctrl-D): the person gave up.
    case endOfFile
}

public enum PasswordLine {
    /// Applies one byte to `line`. Enter (CR or LF) ends it; Backspace (the
    /// terminal's erase character, DEL or ^H) removes a character; the
    /// kill and word-erase characters (Ctrl-U, Ctrl-W) clear the line, as
    /// sudo's own prompt does; Ctrl-D on an empty line is the end of file;
    /// other control bytes are dropped; everything else is typed.
    public static func apply(_ byte: UInt8, to line: SecretBuffer, keys: LineEditingKeys) -> LineKeyResult {
        switch byte {
        case 0x0D, 0x0A:
            return .entered
        case keys.erase, 0x7F, 0x08:
            line.removeLastCharacter()
        case keys.kill, keys.wordErase:
            line.wipe()
        case keys.endOfFile:
            if line.isEmpty { return .endOfFile }
        case 0x00..<0x20:
            break
        default:
            line.append(byte)
        }
        return .editing
    }
}
