import XCTest
@testable import LocalAuth

/// FIPS 180-4 example vectors.
final class SHA256Tests: XCTestCase {
    func hex(_ bytes: [UInt8]) -> String {
        bytes.map { String($0, radix: 16).count == 1 ? "0" + String($0, radix: 16) : String($0, radix: 16) }.joined()
    }

    func testVectors() {
        let vectors: [(String, String)] = [
            ("", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
            ("abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
            ("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
             "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"),
        ]
        for (input, expected) in vectors {
            XCTAssertEqual(hex(SHA256.hash(Array(input.utf8))), expected, input)
        }
        XCTAssertEqual(hex(SHA256.hash([UInt8](repeating: 0x61, count: 1_000_000))),
                       "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
    }

    func testIncrementalUpdatesMatchOneShot() {
        let data = (0..<300).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        var hasher = SHA256()
        hasher.update(data[0..<1]); hasher.update(data[1..<64]); hasher.update(data[64..<65]); hasher.update(data[65...])
        XCTAssertEqual(hasher.finish(), SHA256.hash(data))
    }
}
