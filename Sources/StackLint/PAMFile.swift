// How libpam 1.5 reads a PAM file into lines and a line into fields. The
// lint must see the stack libpam will run, not a tidier one: a line joined
// to the next by a backslash, a field cut at 1023 bytes or a control word
// libpam rejects all change which modules run and what their answers mean.

/// The logical lines of a PAM file, assembled as libpam's line reader does.
enum PAMFile {
    /// libpam reads into a buffer of this many bytes (one for the NUL).
    static let bufferSize = 1024

    struct Line: Equatable {
        /// The physical line the logical line's first text is on.
        let number: Int
        let text: [UInt8]
    }

    /// The lines libpam takes from `bytes`, and whether it reads the file to
    /// its end. It reads 1023 bytes at a time at most, so a longer physical
    /// line is taken as several; a piece that is blank or starts with `#`
    /// after spaces is passed over, even inside a continued line; `#`
    /// elsewhere ends the line; a `\` followed only by spaces and tabs joins
    /// the next piece. A line still continued at the end of the file, or
    /// longer than the buffer once joined, makes libpam give up on the file
    /// (`complete` false): every login through it then fails.
    static func lines(_ bytes: [UInt8]) -> (lines: [Line], complete: Bool) {
        var lines: [Line] = []
        var position = 0
        var physicalLine = 1
        while true {
            var held: [UInt8] = []      // the joined text so far (libpam's buffer up to p)
            var first: Int? = nil       // where the logical line's first text is
            while true {
                let room = bufferSize - held.count
                // room 1: fgets would read nothing, again and again; libpam
                // never gets past it. Taken as a file it cannot read.
                if room <= 1 { return (lines, false) }
                if position >= bytes.count { return (lines, first == nil) }
                // fgets: up to room - 1 bytes, through the first newline.
                let start = position
                var end = start
                while end < bytes.count && end - start < room - 1 {
                    end += 1
                    if bytes[end - 1] == 0x0A { break }
                }
                position = end
                let lineOfPiece = physicalLine
                if bytes[end - 1] == 0x0A { physicalLine += 1 }
                // Text after a NUL is not seen (libpam goes by C strings).
                var piece = Array(bytes[start..<end])
                if let nul = piece.firstIndex(of: 0) { piece.removeSubrange(nul...) }
                let lead = piece.prefix { $0 == 0x20 || $0 == 0x0A || $0 == 0x09 }.count
                guard lead < piece.count, piece[lead] != 0x23 else { continue }   // nothing in this piece
                if first == nil { first = lineOfPiece }
                if let hash = piece[lead...].firstIndex(of: 0x23) {
                    lines.append(Line(number: first!, text: held + piece[..<hash]))
                    break
                }
                var last = piece.count - 1
                while last > lead && (piece[last] == 0x20 || piece[last] == 0x09 || piece[last] == 0x0A) { last -= 1 }
                if piece[last] == 0x5C {
                    held += piece[..<last] + [0x20]
                    continue
                }
                lines.append(Line(number: first!, text: held + piece))
                break
            }
        }
    }

    /// libpam's field reader: skips spaces, tabs and newlines, then takes a
    /// `[...]` up to the first `]` (with `\]` standing for `]`), without
    /// its brackets, or a word. Any field may be bracketed: `[sufficient]`
    /// is `sufficient`, `[/path/module.so]` the module.
    /// `index` moves past the field; nil when no field is left.
    static func field(_ text: [UInt8], _ index: inout Int) -> [UInt8]? {
        func isBlank(_ byte: UInt8) -> Bool { byte == 0x20 || byte == 0x09 || byte == 0x0A }
        while index < text.count && isBlank(text[index]) { index += 1 }
        guard index < text.count else { return nil }
        var field: [UInt8] = []
        if text[index] == 0x5B {
            index += 1
            while index < text.count && text[index] != 0x5D {
                if text[index] == 0x5C && index + 1 < text.count && text[index + 1] == 0x5D { index += 1 }
                field.append(text[index])
                index += 1
            }
            if index < text.count { index += 1 }   // the `]`
            return field
        }
        while index < text.count && !isBlank(text[index]) {
            field.append(text[index])
            index += 1
        }
        if index < text.count { index += 1 }
        return field
    }

    /// The fields of a line as libpam reads them: the type, the control,
    /// the module and then each argument, all with the same reader (so an
    /// argument written `[...]` loses its brackets, `\]` stands for `]`,
    /// and the next argument starts right after the closing `]`).
    static func fields(_ text: [UInt8]) -> [String] {
        var index = 0
        var fields: [String] = []
        while let next = field(text, &index) {
            fields.append(String(decoding: next, as: UTF8.self))
        }
        return fields
    }}
