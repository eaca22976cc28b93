import XCTest
import LocalAuth

/// Touch or type: the keys of a hidden password line, edited as a
/// terminal's canonical mode edits them.
final class PasswordLineTests: XCTestCase {
    func typed(_ keys: [UInt8], editing: LineEditingKeys = LineEditingKeys()) -> (line: [UInt8], result: LineKeyResult, overflowed: Bool) {
        let line = SecretBuffer()
        var editor = PasswordLine(keys: editing)
        var result = LineKeyResult.editing
        for key in keys {
            result = editor.apply(key, to: line)
            if result != .editing { break }
        }
        let bytes = line.withBytes { Array(UnsafeBufferPointer(start: $0, count: $1)) }
        return (bytes, result, line.overflowed)
    }

    func testTheTable() {
        let latin1 = LineEditingKeys(utf8: false)
        let backspaceIsControlH = LineEditingKeys(erase: 0x08)
        let rows: [(String, [UInt8], LineEditingKeys, [UInt8], LineKeyResult)] = [
            ("Enter ends the line", Array("pw\n".utf8), LineEditingKeys(), Array("pw".utf8), .entered),
            ("CR ends it too", Array("pw\r".utf8), LineEditingKeys(), Array("pw".utf8), .entered),
            ("Enter alone is an empty line", [0x0A], LineEditingKeys(), [], .entered),
            ("Backspace removes a byte", Array("pwx".utf8) + [0x7F], LineEditingKeys(), Array("pw".utf8), .editing),
            ("Backspace removes a whole UTF-8 character", Array("pé".utf8) + [0x7F], LineEditingKeys(), Array("p".utf8), .editing),
            ("without IUTF8 one byte", Array("pé".utf8) + [0x7F], latin1, Array("p".utf8) + [0xC3], .editing),
            ("Backspace on nothing", [0x7F, 0x41], LineEditingKeys(), [0x41], .editing),
            ("the terminal's own erase character", Array("ab".utf8) + [0x08], backspaceIsControlH, Array("a".utf8), .editing),
            ("DEL is typed where ^H erases", Array("a".utf8) + [0x7F], backspaceIsControlH, [0x61, 0x7F], .editing),
            ("Ctrl-U clears", Array("abc".utf8) + [0x15] + Array("d".utf8), LineEditingKeys(), Array("d".utf8), .editing),
            ("Ctrl-W clears", Array("abc".utf8) + [0x17], LineEditingKeys(), [], .editing),
            ("Ctrl-D on an empty line gives up", [0x04], LineEditingKeys(), [], .endOfFile),
            ("Ctrl-D after text is ignored", [0x61, 0x04, 0x0A], LineEditingKeys(), [0x61], .entered),
            ("NUL is dropped", [0x61, 0x00, 0x62], LineEditingKeys(), [0x61, 0x62], .editing),
            ("Ctrl-Z (off while keys are read) is dropped", [0x61, 0x1A, 0x62], LineEditingKeys(), [0x61, 0x62], .editing),
            ("TAB and other control bytes are typed, as canonical mode keeps them", [0x61, 0x09, 0x1B], LineEditingKeys(),
             [0x61, 0x09, 0x1B], .editing),
            ("a disabled editing character edits nothing", [0x61, 0x15], LineEditingKeys(kill: 0), [0x61, 0x15], .editing),
            ("Ctrl-V types the next key as it is", [0x16, 0x7F, 0x16, 0x0A, 0x62, 0x0A], LineEditingKeys(), [0x7F, 0x0A, 0x62],
             .entered),
            ("Ctrl-V then NUL types nothing", [0x16, 0x00, 0x61], LineEditingKeys(), [0x61], .editing),
        ]
        for (name, keys, editing, line, result) in rows {
            let got = typed(keys, editing: editing)
            XCTAssertEqual(got.line, line, name)
            XCTAssertEqual(got.result, result, name)
        }
    }

    /// Past the capacity the line is wiped and stays rejected as a whole.
    func testAnOverlongLineIsRejectedWhole() {
        let got = typed(Array(repeating: 0x61, count: SecretBuffer.capacity + 10) + [0x0A])
        XCTAssertEqual(got.line, [])
        XCTAssertTrue(got.overflowed)
        XCTAssertEqual(got.result, .entered)
    }

    func testMovingALineWipesIt() {
        let line = SecretBuffer()
        for byte in Array("secret".utf8) { line.append(byte) }
        let target = SecretBuffer()
        line.move(into: target)
        XCTAssertEqual(line.count, 0)
        XCTAssertEqual(target.withBytes { Array(UnsafeBufferPointer(start: $0, count: $1)) }, Array("secret".utf8))
    }
}
