// A user's secrets key as kept at rest (docs/DESIGN.md, "Secrets"): the 32
// random bytes that seal the user's items, wrapped by another key, each
// wrapping in a file of its own, so that losing one (a cleared TPM, a
// changed password) loses nothing while another still opens. Building and
// checking only; the wrapping is the system layer's (libsodium).

/// What wraps a copy of the key.
public enum SecretKeyWrapping: UInt8, Sendable, CaseIterable {
    /// The machine key: a root-only file (where there is no TPM).
    case machine = 1
    /// The account's password, through Argon2id.
    case password = 2
}

/// A wrapped copy as read back.
public struct WrappedSecretKey: Equatable, Sendable {
    public var wrapping: SecretKeyWrapping
    public var uid: UInt32
    /// Argon2id's cost for `password` (0 otherwise): passes and bytes.
    public var passes: UInt32
    public var memoryBytes: UInt32
    public var salt: [UInt8]
    public var nonce: [UInt8]
    /// What the wrap authenticates: every byte before the sealed key.
    public var authenticated: [UInt8]
    public var sealed: [UInt8]
}

public enum WrappedSecretKeyDamage: Error, Equatable, Sendable {
    case wrongSize(Int)
    case notAKeyFile
    case unknownVersion(UInt8)
    case unknownWrapping(UInt8)
    case reservedBitsSet
    case anotherUID(UInt32)
    /// An Argon2id cost outside what the store writes (a file that would
    /// make every unwrap take minutes or gigabytes is refused).
    case badCost
}

public enum SecretKeyFile {
    static let magic: [UInt8] = [0x4C, 0x41, 0x4D, 0x4B]   // "LAMK"
    static let version: UInt8 = 1
    /// The key's size.
    public static let keySize = 32
    public static let saltSize = 16
    /// Magic, version, wrapping, reserved (2), uid (4), passes (4),
    /// memory (4), salt (16), nonce (24).
    public static let headerSize = 60
    public static var fileSize: Int { headerSize + keySize + SecretItemFormat.tagSize }
    /// The Argon2id cost written: libsodium's interactive one (2 passes,
    /// 64 MiB), run only after a verdict is sent.
    public static let passes: UInt32 = 2
    public static let memoryBytes: UInt32 = 64 << 20
    /// The costs read back: no fewer than 1 pass and 8 MiB, no more than 10
    /// passes and 1 GiB.
    static let passRange: ClosedRange<UInt32> = 1...10
    static let memoryRange: ClosedRange<UInt32> = (8 << 20)...(1 << 30)

    /// The header of a new copy: what the wrap authenticates. Nil for a
    /// salt or nonce of the wrong size.
    public static func header(wrapping: SecretKeyWrapping, uid: UInt32, salt: [UInt8], nonce: [UInt8]) -> [UInt8]? {
        let isPassword = wrapping == .password
        guard nonce.count == SecretItemFormat.nonceSize, salt.count == (isPassword ? saltSize : 0) else { return nil }
        var bytes = magic
        bytes.append(version)
        bytes.append(wrapping.rawValue)
        bytes += [0, 0]
        bytes += SecretItemFormat.littleEndian(UInt64(uid), count: 4)
        bytes += SecretItemFormat.littleEndian(UInt64(isPassword ? passes : 0), count: 4)
        bytes += SecretItemFormat.littleEndian(UInt64(isPassword ? memoryBytes : 0), count: 4)
        bytes += isPassword ? salt : [UInt8](repeating: 0, count: saltSize)
        bytes += nonce
        return bytes
    }

    /// Reads a copy of `uid`'s key, checking every field and the size.
    public static func parse(_ bytes: [UInt8], uid: UInt32) -> Result<WrappedSecretKey, WrappedSecretKeyDamage> {
        guard bytes.count == fileSize else { return .failure(.wrongSize(bytes.count)) }
        guard Array(bytes[0..<4]) == magic else { return .failure(.notAKeyFile) }
        guard bytes[4] == version else { return .failure(.unknownVersion(bytes[4])) }
        guard let wrapping = SecretKeyWrapping(rawValue: bytes[5]) else { return .failure(.unknownWrapping(bytes[5])) }
        guard bytes[6] == 0, bytes[7] == 0 else { return .failure(.reservedBitsSet) }
        let owner = UInt32(SecretItemFormat.readLittleEndian(bytes, at: 8, count: 4))
        guard owner == uid else { return .failure(.anotherUID(owner)) }
        let passes = UInt32(SecretItemFormat.readLittleEndian(bytes, at: 12, count: 4))
        let memory = UInt32(SecretItemFormat.readLittleEndian(bytes, at: 16, count: 4))
        let salt = Array(bytes[20..<36])
        switch wrapping {
        case .password:
            guard passRange.contains(passes), memoryRange.contains(memory) else { return .failure(.badCost) }
        case .machine:
            guard passes == 0, memory == 0, salt.allSatisfy({ $0 == 0 }) else { return .failure(.badCost) }
        }
        return .success(WrappedSecretKey(wrapping: wrapping, uid: owner, passes: passes, memoryBytes: memory,
                                         salt: wrapping == .password ? salt : [], nonce: Array(bytes[36..<60]),
                                         authenticated: Array(bytes[0..<headerSize]), sealed: Array(bytes[headerSize...])))
    }
}
