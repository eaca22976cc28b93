// A small JSON writer for the stable `--json` output (localauth(1)).

final class JSONWriter {
    private(set) var text = ""
    private var needsComma = [false]

    private func separator() {
        if needsComma[needsComma.count - 1] { text += "," }
        needsComma[needsComma.count - 1] = true
    }

    func object(_ body: () -> Void) { container("{", "}", body) }

    func array(_ body: () -> Void) { container("[", "]", body) }

    private func container(_ open: String, _ close: String, _ body: () -> Void) {
        separator()
        text += open
        needsComma.append(false)
        body()
        needsComma.removeLast()
        text += close
    }

    /// A key inside an object; the next value or container belongs to it.
    func key(_ name: String) {
        separator()
        text += quoted(name) + ":"
        needsComma[needsComma.count - 1] = false
    }

    func value(_ string: String?) {
        separator()
        text += string.map(quoted) ?? "null"
    }

    func field(_ name: String, _ string: String?) { key(name); value(string) }

    func field(_ name: String, _ number: Int64?) {
        key(name)
        separator()
        text += number.map { "\($0)" } ?? "null"
    }

    func field(_ name: String, _ flag: Bool?) {
        key(name)
        separator()
        text += flag.map { $0 ? "true" : "false" } ?? "null"
    }

    private func quoted(_ string: String) -> String {
        var result = "\""
        for scalar in string.unicodeScalars {
            switch scalar {
            case "\"": result += "\\\""
            case "\\": result += "\\\\"
            case "\n": result += "\\n"
            case "\r": result += "\\r"
            case "\t": result += "\\t"
            default:
                if scalar.value < 0x20 {
                    let digits = Array("0123456789abcdef")
                    result += "\\u00" + String(digits[Int(scalar.value >> 4)]) + String(digits[Int(scalar.value & 0xF)])
                } else {
                    result.unicodeScalars.append(scalar)
                }
            }
        }
        return result + "\""
    }
}
