import XCTest
@testable import LocalAuth

/// A stored secret's bytes: what is built reads back field for field, and
/// every kind of bad input is named, never read as an item.
final class SecretItemTests: XCTestCase {
    let nonce = [UInt8](repeating: 7, count: SecretItemFormat.nonceSize)

    func item(identifier: String = "mail/alice", secretLength: Int = 5, requirement: SecretRequirement = .matchOfCurrentSet,
              uid: UInt32 = 1001) -> [UInt8] {
        let header = SecretItemFormat.authenticatedPart(requirement: requirement, uid: uid, createdWallSeconds: -2, nonce: nonce,
                                                        identifier: Array(identifier.utf8), secretLength: secretLength)
        return header! + [UInt8](repeating: 0xAA, count: secretLength + SecretItemFormat.tagSize)
    }

    func testWhatIsBuiltReadsBack() throws {
        for requirement in SecretRequirement.allCases {
            let bytes = item(requirement: requirement)
            let parsed = try SecretItemFormat.parse(bytes, uid: 1001).get()
            XCTAssertEqual(parsed.requirement, requirement)
            XCTAssertEqual(parsed.uid, 1001)
            XCTAssertEqual(parsed.createdWallSeconds, -2)
            XCTAssertEqual(parsed.nonce, nonce)
            XCTAssertEqual(parsed.identifier, Array("mail/alice".utf8))
            XCTAssertEqual(parsed.secretLength, 5)
            XCTAssertEqual(parsed.authenticated, Array(bytes.prefix(SecretItemFormat.headerSize + 10)))
            XCTAssertEqual(parsed.sealed.count, 5 + SecretItemFormat.tagSize)
        }
        let largest = item(identifier: String(repeating: "é", count: 128), secretLength: SecretItemFormat.maxSecretBytes)
        XCTAssertEqual(largest.count, SecretItemFormat.maxItemSize)
        XCTAssertNoThrow(try SecretItemFormat.parse(largest, uid: 1001).get())
        XCTAssertNoThrow(try SecretItemFormat.parse(item(secretLength: 0), uid: 1001).get(), "an empty secret is a secret")
    }

    /// Only the enrollment-bound requirement puts the digest into what the
    /// seal authenticates.
    func testTheEnrollmentIsAuthenticatedOnlyForTheCurrentSet() {
        let digest = [UInt8](repeating: 3, count: 32)
        for requirement in SecretRequirement.allCases {
            let data = SecretItemFormat.additionalData([1, 2], requirement: requirement, enrollmentDigest: digest)
            XCTAssertEqual(data, requirement == .matchOfCurrentSet ? [1, 2] + digest : [1, 2], "\(requirement)")
        }
    }

    func testBadInputIsNamedAndNeverAnItem() {
        func patched(_ offset: Int, _ value: UInt8) -> [UInt8] {
            var bytes = item()
            bytes[offset] = value
            return bytes
        }
        var longSecret = item()
        longSecret[14] = 0x01
        longSecret[15] = 0x10   // 4097
        var badUTF8 = item(identifier: "ab")
        badUTF8[SecretItemFormat.headerSize] = 0xFF
        var control = item(identifier: "ab")
        control[SecretItemFormat.headerSize + 1] = 0x0A
        var noIdentifier = item()
        noIdentifier[12] = 0
        let rows: [(String, [UInt8], UInt32, SecretItemDamage)] = [
            ("empty", [], 1001, .tooShort),
            ("one byte short of a header", Array(item().prefix(47)), 1001, .tooShort),
            ("another magic", patched(0, 0x4D), 1001, .notAnItem),
            ("a later version", patched(4, 2), 1001, .unknownVersion(2)),
            ("an unknown requirement", patched(5, 9), 1001, .unknownRequirement(9)),
            ("reserved bits", patched(7, 1), 1001, .reservedBitsSet),
            ("another uid's", item(), 1002, .anotherUID(1001)),
            ("no identifier", noIdentifier, 1001, .badIdentifier),
            ("an identifier that is not UTF-8", badUTF8, 1001, .badIdentifier),
            ("a control character in the identifier", control, 1001, .badIdentifier),
            ("a secret over 4 KiB", longSecret, 1001, .badSecretLength(4097)),
            ("a byte short", Array(item().dropLast()), 1001, .wrongSize(expected: 79, actual: 78)),
            ("a byte over", item() + [0], 1001, .wrongSize(expected: 79, actual: 80)),
        ]
        for (name, bytes, uid, damage) in rows {
            XCTAssertEqual(SecretItemFormat.parse(bytes, uid: uid), .failure(damage), name)
        }
    }

    func testIdentifiersAndLengthsTheFormatRefusesAreNeverBuilt() {
        for identifier in ["", String(repeating: "a", count: 257), "tab\there", "\u{85}"] {
            XCTAssertNil(SecretItemFormat.authenticatedPart(requirement: .match, uid: 1, createdWallSeconds: 0, nonce: nonce,
                                                            identifier: Array(identifier.utf8), secretLength: 1), identifier)
        }
        XCTAssertNil(SecretItemFormat.authenticatedPart(requirement: .match, uid: 1, createdWallSeconds: 0, nonce: nonce,
                                                        identifier: [0x61], secretLength: 4097))
        XCTAssertNil(SecretItemFormat.authenticatedPart(requirement: .match, uid: 1, createdWallSeconds: 0, nonce: [1],
                                                        identifier: [0x61], secretLength: 1))
    }
}
