// Sealing a stored secret (docs/DESIGN.md, "Secrets"): libsodium's
// XChaCha20-Poly1305 over the secret, authenticating the item's header
// (and, for the current-set requirement, the enrollment digest now), under
// a 32-byte key. No cryptography is written here: this file builds the
// item's bytes around libsodium's two calls and keeps the secret in
// memory it wipes.
import CSodium
import LocalAuth

public enum Sealing {
    /// The key's size: XChaCha20-Poly1305's.
    public static var keySize: Int { la_aead_key_bytes() }

    /// Whether libsodium is ready (its one-time setup; it fails only when
    /// the system's random source does).
    public static func ready() -> Bool { sodium_init() >= 0 }

    /// Whether two keys are the same, in constant time.
    static func sameBytes(_ first: SecretBuffer, _ second: SecretBuffer) -> Bool {
        guard first.count == second.count else { return false }
        return first.withBytes { a, count in second.withBytes { b, _ in sodium_memcmp(a, b, count) == 0 } }
    }

    /// Random bytes from libsodium's source (getrandom).
    public static func randomBytes(_ count: Int) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        bytes.withUnsafeMutableBytes { buffer in
            if let start = buffer.baseAddress { randombytes_buf(start, count) }
        }
        return bytes
    }

    /// The bytes of a new item holding `secret` under `key`, with a fresh
    /// random nonce; nil when the identifier or the secret's length is one
    /// the format does not take, the key is not a key, or libsodium is not
    /// ready.
    public static func seal(_ secret: SecretBuffer, identifier: [UInt8], requirement: SecretRequirement, uid: UInt32,
                            createdWallSeconds: Int64, enrollmentDigest: [UInt8], key: SecretBuffer) -> [UInt8]? {
        guard ready(), key.count == keySize, !secret.overflowed else { return nil }
        let nonce = randomBytes(SecretItemFormat.nonceSize)
        guard let authenticated = SecretItemFormat.authenticatedPart(requirement: requirement, uid: uid, createdWallSeconds: createdWallSeconds,
                                                                     nonce: nonce, identifier: identifier, secretLength: secret.count)
        else { return nil }
        let additional = SecretItemFormat.additionalData(authenticated, requirement: requirement, enrollmentDigest: enrollmentDigest)
        guard let sealed = sealBytes(secret, additional: additional, nonce: nonce, key: key) else { return nil }
        return authenticated + sealed
    }

    /// libsodium's encryption of `plain`, authenticating `additional`: the
    /// ciphertext and its tag.
    static func sealBytes(_ plain: SecretBuffer, additional: [UInt8], nonce: [UInt8], key: SecretBuffer) -> [UInt8]? {
        guard key.count == keySize, nonce.count == SecretItemFormat.nonceSize else { return nil }
        var sealed = [UInt8](repeating: 0, count: plain.count + SecretItemFormat.tagSize)
        var sealedLength: UInt64 = 0
        let status = plain.withBytes { plainBytes, plainLength in
            key.withBytes { keyBytes, _ in
                sealed.withUnsafeMutableBufferPointer { out in
                    // Never empty: the tag is there whatever the plain's length.
                    crypto_aead_xchacha20poly1305_ietf_encrypt(out.baseAddress!, &sealedLength, plainBytes, UInt64(plainLength),
                                                               additional, UInt64(additional.count), nil, nonce, keyBytes)
                }
            }
        }
        return status == 0 && Int(sealedLength) == sealed.count ? sealed : nil
    }

    /// libsodium's decryption of `sealed` into `plain` (wiped, and left
    /// empty when the tag does not hold).
    static func openBytes(_ sealed: [UInt8], additional: [UInt8], nonce: [UInt8], key: SecretBuffer, into plain: SecretBuffer) -> Bool {
        plain.wipe()
        let length = sealed.count - SecretItemFormat.tagSize
        guard ready(), key.count == keySize, nonce.count == SecretItemFormat.nonceSize, length >= 0, length <= plain.limit else { return false }
        return plain.fill(length: length) { out in
            var openedLength: UInt64 = 0
            let status = key.withBytes { keyBytes, _ in
                crypto_aead_xchacha20poly1305_ietf_decrypt(out, &openedLength, nil, sealed, UInt64(sealed.count),
                                                           additional, UInt64(additional.count), nonce, keyBytes)
            }
            return status == 0 && Int(openedLength) == length
        }
    }

    /// Opens `item` into `secret` (wiped first; a buffer of at least the
    /// format's largest secret): false when the key, the header, the
    /// sealed bytes or, for the current-set requirement, the enrollment
    /// digest are not what the item was sealed with. Nothing of a secret
    /// that failed to open is left in `secret`.
    public static func open(_ item: SecretItem, enrollmentDigest: [UInt8], key: SecretBuffer, into secret: SecretBuffer) -> Bool {
        guard item.sealed.count == item.secretLength + SecretItemFormat.tagSize else {
            secret.wipe()
            return false
        }
        let additional = SecretItemFormat.additionalData(item.authenticated, requirement: item.requirement, enrollmentDigest: enrollmentDigest)
        return openBytes(item.sealed, additional: additional, nonce: item.nonce, key: key, into: secret)
    }
}
