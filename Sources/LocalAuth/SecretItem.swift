// A stored secret's bytes (docs/DESIGN.md, "Secrets"): a fixed header, the
// item's identifier, then the sealed secret. Building and checking only;
// the seal itself (an AEAD over the header) is the system layer's.

/// What releases an item's secret: Apple's `LAAuthenticationRequirement`
/// (and `LABiometryFallbackRequirement`), as stored.
public enum SecretRequirement: UInt8, Sendable, CaseIterable {
    /// A match or the password (Apple's `.default`).
    case matchOrPassword = 0
    /// A match only (`.biometry`, `.biometry(fallback: .default)`).
    case match = 1
    /// A match with the fingers enrolled when the item was stored
    /// (`.biometryCurrentSet`): the seal binds the enrollment's digest, so
    /// a changed enrollment cannot open it.
    case matchOfCurrentSet = 2
    /// A match, or the password once the finger cannot be used
    /// (`.biometry(fallback: .devicePasscode)`).
    case matchThenPassword = 3

    /// Whether the enrollment digest is part of what the seal
    /// authenticates.
    public var bindsEnrollment: Bool { self == .matchOfCurrentSet }

    /// Its name on the helper's wire, in `localauth secret store --access`
    /// and in `list`.
    public var name: StaticString {
        switch self {
        case .matchOrPassword: return "default"
        case .match: return "biometry"
        case .matchOfCurrentSet: return "biometry-current-set"
        case .matchThenPassword: return "biometry-then-password"
        }
    }

    public init?<C: Collection>(name: C) where C.Element == UInt8 {
        guard let found = SecretRequirement.allCases.first(where: { bytesEqual(name, $0.name) }) else { return nil }
        self = found
    }

    /// The policy a load evaluates: the finger alone where Apple's
    /// requirement is biometry without the passcode, else the finger or
    /// the password (the owner policy).
    public var policy: EvaluationPolicy {
        switch self {
        case .matchOrPassword, .matchThenPassword: return .owner
        case .match, .matchOfCurrentSet: return .biometrics
        }
    }

    /// Whether storing it needs an enrolled finger (Apple's biometry
    /// requirements fail without one).
    public var needsEnrolledFinger: Bool { self != .matchOrPassword }
}

/// An item as read back: its header's fields, where the authenticated part
/// ends, and the sealed bytes.
public struct SecretItem: Equatable, Sendable {
    public var requirement: SecretRequirement
    public var uid: UInt32
    public var createdWallSeconds: Int64
    public var nonce: [UInt8]
    public var identifier: [UInt8]
    /// The secret's length; the sealed bytes are this plus the tag.
    public var secretLength: Int
    /// The header and identifier: what the seal authenticates (with the
    /// enrollment digest for `matchOfCurrentSet`).
    public var authenticated: [UInt8]
    public var sealed: [UInt8]
}

/// Why stored bytes are not an item of this uid. A store that finds one
/// says so and never opens it.
public enum SecretItemDamage: Error, Equatable, Sendable {
    case tooShort
    case notAnItem
    case unknownVersion(UInt8)
    case unknownRequirement(UInt8)
    case reservedBitsSet
    case anotherUID(UInt32)
    case badIdentifier
    case badSecretLength(Int)
    case wrongSize(expected: Int, actual: Int)
}

public enum SecretItemFormat {
    static let magic: [UInt8] = [0x4C, 0x41, 0x53, 0x49]   // "LASI"
    static let version: UInt8 = 1
    /// Magic, version, requirement, reserved (2), uid (4), identifier
    /// length (2), secret length (2), creation (8), nonce (24).
    public static let headerSize = 48
    /// The AEAD's nonce (XChaCha20-Poly1305: 24 random bytes).
    public static let nonceSize = 24
    /// The AEAD's tag.
    public static let tagSize = 16
    /// The longest secret an item holds, in bytes.
    public static let maxSecretBytes = 4096
    /// The longest identifier, in bytes of UTF-8.
    public static let maxIdentifierBytes = 256
    /// How many items one user may keep.
    public static let maxItemsPerUser = 1000
    /// The largest item file.
    public static var maxItemSize: Int { headerSize + maxIdentifierBytes + maxSecretBytes + tagSize }

    /// Whether `identifier` may name an item: 1 to 256 bytes of UTF-8, no
    /// control characters (it is shown by `localauth secret list`).
    public static func isValidIdentifier(_ identifier: [UInt8]) -> Bool {
        guard (1...maxIdentifierBytes).contains(identifier.count), let text = String(validating: identifier, as: UTF8.self) else {
            return false
        }
        return !text.unicodeScalars.contains { $0.value < 0x20 || $0.value == 0x7F || (0x80..<0xA0).contains($0.value) }
    }

    /// The header and identifier of a new item: the bytes the seal
    /// authenticates. Nil for an identifier or a secret length the format
    /// does not take.
    public static func authenticatedPart(requirement: SecretRequirement, uid: UInt32, createdWallSeconds: Int64, nonce: [UInt8],
                                         identifier: [UInt8], secretLength: Int) -> [UInt8]? {
        guard isValidIdentifier(identifier), (0...maxSecretBytes).contains(secretLength), nonce.count == nonceSize else { return nil }
        var bytes = magic
        bytes.append(version)
        bytes.append(requirement.rawValue)
        bytes += [0, 0]
        bytes += littleEndian(UInt64(uid), count: 4)
        bytes += littleEndian(UInt64(identifier.count), count: 2)
        bytes += littleEndian(UInt64(secretLength), count: 2)
        bytes += littleEndian(UInt64(bitPattern: createdWallSeconds), count: 8)
        bytes += nonce
        bytes += identifier
        return bytes
    }

    /// What the seal authenticates for `item`: its header and identifier,
    /// and for `matchOfCurrentSet` the enrollment digest now (so a changed
    /// enrollment fails the seal, by construction).
    public static func additionalData(_ authenticated: [UInt8], requirement: SecretRequirement, enrollmentDigest: [UInt8]) -> [UInt8] {
        requirement.bindsEnrollment ? authenticated + enrollmentDigest : authenticated
    }

    /// Reads stored bytes as an item of `uid`, checking every field and
    /// the size before anything is opened.
    public static func parse(_ bytes: [UInt8], uid: UInt32) -> Result<SecretItem, SecretItemDamage> {
        guard bytes.count >= headerSize else { return .failure(.tooShort) }
        guard Array(bytes[0..<4]) == magic else { return .failure(.notAnItem) }
        guard bytes[4] == version else { return .failure(.unknownVersion(bytes[4])) }
        guard let requirement = SecretRequirement(rawValue: bytes[5]) else { return .failure(.unknownRequirement(bytes[5])) }
        guard bytes[6] == 0, bytes[7] == 0 else { return .failure(.reservedBitsSet) }
        let owner = UInt32(readLittleEndian(bytes, at: 8, count: 4))
        guard owner == uid else { return .failure(.anotherUID(owner)) }
        let identifierLength = Int(readLittleEndian(bytes, at: 12, count: 2))
        let secretLength = Int(readLittleEndian(bytes, at: 14, count: 2))
        guard (1...maxIdentifierBytes).contains(identifierLength) else { return .failure(.badIdentifier) }
        guard secretLength <= maxSecretBytes else { return .failure(.badSecretLength(secretLength)) }
        let expected = headerSize + identifierLength + secretLength + tagSize
        guard bytes.count == expected else { return .failure(.wrongSize(expected: expected, actual: bytes.count)) }
        let identifier = Array(bytes[headerSize..<(headerSize + identifierLength)])
        guard isValidIdentifier(identifier) else { return .failure(.badIdentifier) }
        let authenticatedEnd = headerSize + identifierLength
        return .success(SecretItem(requirement: requirement, uid: owner,
                                   createdWallSeconds: Int64(bitPattern: readLittleEndian(bytes, at: 16, count: 8)),
                                   nonce: Array(bytes[24..<48]), identifier: identifier, secretLength: secretLength,
                                   authenticated: Array(bytes[0..<authenticatedEnd]), sealed: Array(bytes[authenticatedEnd...])))
    }

    /// A uid as the formats write it (four bytes, little-endian).
    public static func littleEndianUID(_ uid: UInt32) -> [UInt8] { littleEndian(UInt64(uid), count: 4) }

    static func littleEndian(_ value: UInt64, count: Int) -> [UInt8] {
        (0..<count).map { UInt8(truncatingIfNeeded: value >> (8 * UInt64($0))) }
    }

    static func readLittleEndian(_ bytes: [UInt8], at offset: Int, count: Int) -> UInt64 {
        var value: UInt64 = 0
        for index in (0..<count).reversed() { value = value << 8 | UInt64(bytes[offset + index]) }
        return value
    }
}
