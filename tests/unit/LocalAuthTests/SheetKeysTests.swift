// The sheet's keys on a terminal: one table for the library's terminal
// presenter and `localauth evaluate`.
import XCTest
import LocalAuth

final class SheetKeysTests: XCTestCase {
    func testWhatEachKeyDoes() {
        let rows: [(String, UInt8, Bool, ClientChoice?)] = [
            ("Ctrl-C cancels from the start", 0x03, false, .userCancel),
            ("Ctrl-C cancels after the offer", 0x03, true, .userCancel),
            ("Ctrl-D cancels", 0x04, false, .userCancel),
            ("Enter before the offer does nothing", 0x0D, false, nil),
            ("Enter (LF) before the offer does nothing", 0x0A, false, nil),
            ("Enter after the offer is the fallback", 0x0D, true, .userFallback),
            ("Enter (LF) after the offer is the fallback", 0x0A, true, .userFallback),
            ("a letter does nothing", 0x61, true, nil),
            ("Esc does nothing (arrow keys begin with it)", 0x1B, true, nil),
        ]
        for (label, byte, offered, expected) in rows {
            XCTAssertEqual(SheetKeys.choice(byte, fallbackOffered: offered), expected, label)
        }
    }

    func testTheScreenNamesTheKeys() {
        XCTAssertEqual(SheetKeys.cancelHint(nil), "[Ctrl-C: Cancel]")
        XCTAssertEqual(SheetKeys.cancelHint(""), "[Ctrl-C: Cancel]")
        XCTAssertEqual(SheetKeys.cancelHint("Cancel Payment"), "[Ctrl-C: Cancel Payment]")
        XCTAssertEqual(SheetKeys.fallbackHint("Use Password"), "[Enter: Use Password]")
    }
}
