import XCTest
@testable import LocalAuth
import Secrets

/// The seal of a stored secret (libsodium's XChaCha20-Poly1305): a secret
/// comes back only with the key, the header and, for the current-set
/// requirement, the enrollment it was sealed with; any other byte fails it,
/// and a secret that failed to open leaves nothing behind.
final class SealingTests: XCTestCase {
    let digest = [UInt8](repeating: 0x11, count: 32)

    func buffer(_ bytes: [UInt8], limit: Int = SecretItemFormat.maxSecretBytes) -> SecretBuffer {
        let buffer = SecretBuffer(limit: limit)
        bytes.withUnsafeBufferPointer { buffer.assign(from: $0.baseAddress!, length: $0.count) }
        return buffer
    }

    func key(_ byte: UInt8 = 0x42) -> SecretBuffer { buffer([UInt8](repeating: byte, count: Sealing.keySize)) }

    func sealed(_ secret: [UInt8] = Array("hunter2".utf8), requirement: SecretRequirement = .matchOfCurrentSet) throws -> [UInt8] {
        try XCTUnwrap(Sealing.seal(buffer(secret), identifier: Array("git/example.org".utf8), requirement: requirement, uid: 1001,
                                   createdWallSeconds: 1_800_000_000, enrollmentDigest: digest, key: key()))
    }

    func opened(_ bytes: [UInt8], digest: [UInt8]? = nil, key: SecretBuffer? = nil) -> [UInt8]? {
        guard case .success(let item) = SecretItemFormat.parse(bytes, uid: 1001) else { return nil }
        let out = SecretBuffer(limit: SecretItemFormat.maxSecretBytes)
        guard Sealing.open(item, enrollmentDigest: digest ?? self.digest, key: key ?? self.key(), into: out) else {
            XCTAssertEqual(out.count, 0, "nothing of a failed open is left")
            return nil
        }
        return out.withBytes { Array(UnsafeBufferPointer(start: $0, count: $1)) }
    }

    func testASecretComesBackWithItsKeyAndEnrollment() throws {
        for requirement in SecretRequirement.allCases {
            XCTAssertEqual(opened(try sealed(requirement: requirement)), Array("hunter2".utf8), "\(requirement)")
        }
        let largest = [UInt8](repeating: 0x5A, count: SecretItemFormat.maxSecretBytes)
        XCTAssertEqual(opened(try sealed(largest)), largest)
        XCTAssertEqual(opened(try sealed([])), [], "an empty secret")
    }

    func testEachSealHasItsOwnNonce() throws {
        let first = try sealed(), second = try sealed()
        XCTAssertNotEqual(first, second)
        XCTAssertNotEqual(Array(first[24..<48]), Array(second[24..<48]))
    }

    /// Every byte of the item, flipped, fails the seal (the header's bytes
    /// are authenticated, the sealed ones are the ciphertext and tag), or
    /// is refused by the format before the seal is tried.
    func testAnyChangedByteFailsTheSeal() throws {
        let bytes = try sealed()
        for index in bytes.indices {
            var changed = bytes
            changed[index] ^= 0x01
            XCTAssertNil(opened(changed), "byte \(index)")
        }
    }

    func testAnotherKeyOrAnotherEnrollmentOpensNothing() throws {
        XCTAssertNil(opened(try sealed(), key: key(0x43)))
        XCTAssertNil(opened(try sealed(), digest: [UInt8](repeating: 0x12, count: 32)), "the enrollment changed")
        XCTAssertNil(opened(try sealed(), digest: []), "no enrollment known")
        // Only the current-set requirement binds the enrollment.
        XCTAssertEqual(opened(try sealed(requirement: .match), digest: [UInt8](repeating: 0x12, count: 32)), Array("hunter2".utf8))
    }

    func testWhatCannotBeSealedIsNotSealed() {
        XCTAssertNil(Sealing.seal(buffer([1]), identifier: Array("x".utf8), requirement: .match, uid: 1, createdWallSeconds: 0,
                                  enrollmentDigest: digest, key: buffer([1, 2, 3])), "a short key")
        XCTAssertNil(Sealing.seal(buffer([1]), identifier: [], requirement: .match, uid: 1, createdWallSeconds: 0,
                                  enrollmentDigest: digest, key: key()), "no identifier")
        let overflowed = buffer([UInt8](repeating: 1, count: 5000))
        XCTAssertTrue(overflowed.overflowed)
        XCTAssertNil(Sealing.seal(overflowed, identifier: Array("x".utf8), requirement: .match, uid: 1, createdWallSeconds: 0,
                                  enrollmentDigest: digest, key: key()), "a secret over 4 KiB")
    }

    /// A buffer too small for the item's secret is never written past.
    func testASecretIsOpenedOnlyIntoABufferThatHoldsIt() throws {
        guard case .success(let item) = SecretItemFormat.parse(try sealed([UInt8](repeating: 1, count: 100)), uid: 1001) else {
            return XCTFail("not an item")
        }
        XCTAssertFalse(Sealing.open(item, enrollmentDigest: digest, key: key(), into: SecretBuffer(limit: 99)))
    }
}
