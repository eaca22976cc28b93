import XCTest
@testable import LocalAuth
@testable import Secrets

/// A user's secrets key at rest: each copy opens only with what wrapped it
/// (the machine key, or the password through Argon2id), its header is
/// authenticated, and a copy that is not a sound one of this uid is named
/// and never opened.
final class KeyWrappingTests: XCTestCase {
    func buffer(_ bytes: [UInt8]) -> SecretBuffer {
        let buffer = SecretBuffer()
        bytes.withUnsafeBufferPointer { buffer.assign(from: $0.baseAddress!, length: $0.count) }
        return buffer
    }

    func contents(_ buffer: SecretBuffer?) -> [UInt8]? { buffer?.withBytes { Array(UnsafeBufferPointer(start: $0, count: $1)) } }

    let salt = [UInt8](repeating: 5, count: SecretKeyFile.saltSize)

    func testTheMachinesCopyOpensOnlyWithTheMachineKey() throws {
        let key = try XCTUnwrap(KeyWrapping.newKey())
        let machine = try XCTUnwrap(KeyWrapping.newKey())
        let copy = try XCTUnwrap(KeyWrapping.wrap(key, by: machine, as: .machine, uid: 1001))
        XCTAssertEqual(copy.count, SecretKeyFile.fileSize)
        let parsed = try SecretKeyFile.parse(copy, uid: 1001).get()
        XCTAssertEqual(contents(KeyWrapping.unwrap(parsed, by: machine)), contents(key))
        XCTAssertNil(KeyWrapping.unwrap(parsed, by: try XCTUnwrap(KeyWrapping.newKey())), "another machine")
        for index in copy.indices {
            var changed = copy
            changed[index] ^= 0x80
            if case .success(let item) = SecretKeyFile.parse(changed, uid: 1001) {
                XCTAssertNil(KeyWrapping.unwrap(item, by: machine), "byte \(index)")
            }
        }
        XCTAssertNotEqual(contents(KeyWrapping.newKey()), contents(KeyWrapping.newKey()))
    }

    /// The password's copy: Argon2id of the right password with the copy's
    /// salt opens it; another password, or the right one with another salt,
    /// does not. (Tests use 8 MiB; the store writes the interactive cost.)
    func testThePasswordsCopyOpensOnlyWithThePassword() throws {
        let key = try XCTUnwrap(KeyWrapping.newKey())
        let derived = try XCTUnwrap(KeyWrapping.passwordKey(buffer(Array("alice-secret".utf8)), salt: salt, memoryBytes: 8 << 20))
        XCTAssertEqual(derived.count, SecretKeyFile.keySize)
        let copy = try XCTUnwrap(KeyWrapping.wrap(key, by: derived, as: .password, uid: 1001, salt: salt))
        let parsed = try SecretKeyFile.parse(copy, uid: 1001).get()
        XCTAssertEqual(parsed.salt, salt)
        XCTAssertEqual([parsed.passes, parsed.memoryBytes], [SecretKeyFile.passes, SecretKeyFile.memoryBytes])
        XCTAssertEqual(contents(KeyWrapping.unwrap(parsed, by: derived)), contents(key))
        let again = try XCTUnwrap(KeyWrapping.passwordKey(buffer(Array("alice-secret".utf8)), salt: salt, memoryBytes: 8 << 20))
        XCTAssertEqual(contents(again), contents(derived), "the same password and salt give the same key")
        let wrong = try XCTUnwrap(KeyWrapping.passwordKey(buffer(Array("alice-secreT".utf8)), salt: salt, memoryBytes: 8 << 20))
        XCTAssertNil(KeyWrapping.unwrap(parsed, by: wrong))
        let otherSalt = try XCTUnwrap(KeyWrapping.passwordKey(buffer(Array("alice-secret".utf8)), salt: [UInt8](repeating: 6, count: 16),
                                                              memoryBytes: 8 << 20))
        XCTAssertNil(KeyWrapping.unwrap(parsed, by: otherSalt))
        XCTAssertNotNil(KeyWrapping.passwordKey(buffer(Array("x".utf8)), salt: salt), "the written cost runs")
        XCTAssertNil(KeyWrapping.passwordKey(buffer(Array("x".utf8)), salt: [1]), "a salt of the wrong size")
    }

    func testACopyThatIsNotSoundIsNamed() throws {
        let machine = try XCTUnwrap(KeyWrapping.newKey())
        let copy = try XCTUnwrap(KeyWrapping.wrap(try XCTUnwrap(KeyWrapping.newKey()), by: machine, as: .machine, uid: 1001))
        let password = try XCTUnwrap(KeyWrapping.wrap(try XCTUnwrap(KeyWrapping.newKey()), by: machine, as: .password, uid: 1001, salt: salt))
        func patched(_ bytes: [UInt8], _ offset: Int, _ value: UInt8) -> [UInt8] {
            var changed = bytes
            changed[offset] = value
            return changed
        }
        let rows: [(String, [UInt8], WrappedSecretKeyDamage)] = [
            ("short", Array(copy.dropLast()), .wrongSize(SecretKeyFile.fileSize - 1)),
            ("another magic", patched(copy, 0, 0), .notAKeyFile),
            ("a later version", patched(copy, 4, 2), .unknownVersion(2)),
            ("an unknown wrapping", patched(copy, 5, 7), .unknownWrapping(7)),
            ("reserved bits", patched(copy, 6, 1), .reservedBitsSet),
            ("another uid's", patched(copy, 8, 0xEA), .anotherUID(1002)),
            ("a machine copy with a cost", patched(copy, 12, 1), .badCost),
            ("a machine copy with a salt", patched(copy, 20, 1), .badCost),
            ("no passes", patched(password, 12, 0), .badCost),
            ("eleven passes", patched(password, 12, 11), .badCost),
            ("2 GiB of memory", patched(password, 19, 0x80), .badCost),
        ]
        for (name, bytes, damage) in rows {
            XCTAssertEqual(SecretKeyFile.parse(bytes, uid: 1001), .failure(damage), name)
        }
        XCTAssertNil(SecretKeyFile.header(wrapping: .password, uid: 1, salt: [], nonce: [UInt8](repeating: 0, count: 24)))
        XCTAssertNil(SecretKeyFile.header(wrapping: .machine, uid: 1, salt: salt, nonce: [UInt8](repeating: 0, count: 24)))
    }
}
