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
    /// The suspend character (Ctrl-Z): turned off while keys are read, so
    /// it arrives as a byte, which is dropped (it is no part of a password).
    public var suspend: UInt8
    /// The literal-next character (Ctrl-V): the next byte is typed as it is.
    public var literalNext: UInt8
    /// IUTF8: Backspace removes a whole UTF-8 character.
    public var utf8: Bool

    public init(erase: UInt8 = 0x7F, kill: UInt8 = 0x15, wordErase: UInt8 = 0x17, endOfFile: UInt8 = 0x04,
                suspend: UInt8 = 0x1A, literalNext: UInt8 = 0x16, utf8: Bool = true) {
        self.literalNext = literalNext
        self.erase = erase
        self.kill = kill
        self.wordErase = wordErase
        self.endOfFile = endOfFile
        self.suspend = suspend
        self.utf8 = utf8
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

/// A line being typed: the keys, and whether the last one was Ctrl-V.
public struct PasswordLine {
    public var keys: LineEditingKeys
    private var literal = false

    public init(keys: LineEditingKeys) { self.keys = keys }

    /// Applies one byte to `line`, as a terminal's canonical mode would:
    /// Enter (CR or LF) ends it; the erase character (Backspace) removes a
    /// character; the kill and word-erase characters (Ctrl-U, Ctrl-W)
    /// clear the line, as sudo's own prompt does; the end-of-file character
    /// (Ctrl-D) on an empty line gives up and is otherwise ignored; the
    /// literal-next character (Ctrl-V) types the next byte as it is; NUL
    /// and the suspend character are dropped; every other byte is typed. A
    /// disabled character (0) edits nothing.
    public mutating func apply(_ byte: UInt8, to line: SecretBuffer) -> LineKeyResult {
        if literal {
            literal = false
            if byte != 0 { line.append(byte) }
            return .editing
        }
        if byte == 0x0D || byte == 0x0A { return .entered }
        if byte == 0 || byte == keys.suspend { return .editing }
        if byte == keys.literalNext {
            literal = true
        } else if byte == keys.erase {
            line.removeLastCharacter(utf8: keys.utf8)
        } else if byte == keys.kill || byte == keys.wordErase {
            line.wipe()
        } else if byte == keys.endOfFile {
            if line.isEmpty { return .endOfFile }
        } else {
            line.append(byte)
        }
        return .editing
    }
}
