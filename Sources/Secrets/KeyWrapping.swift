// A user's secrets key, and the copies of it kept at rest (LocalAuth's
// SecretKeyFile): wrapped by the machine key or by a key Argon2id derives
// from the account's password, each with libsodium's AEAD over the copy's
// header. The key and every key that wraps it live in SecretBuffers.
import CSodium
import LocalAuth

public enum KeyWrapping {
    /// A new key: 32 random bytes from libsodium's source.
    public static func newKey() -> SecretBuffer? {
        guard Sealing.ready() else { return nil }
        let key = SecretBuffer(limit: SecretKeyFile.keySize)
        guard key.fill(length: SecretKeyFile.keySize, { bytes in randombytes_buf(bytes, SecretKeyFile.keySize); return true }) else {
            return nil
        }
        return key
    }

    /// A copy of `key` wrapped by `wrappingKey`; `salt` is the password
    /// copy's Argon2id salt (empty for the machine's).
    public static func wrap(_ key: SecretBuffer, by wrappingKey: SecretBuffer, as wrapping: SecretKeyWrapping, uid: UInt32,
                            salt: [UInt8] = []) -> [UInt8]? {
        guard Sealing.ready(), key.count == SecretKeyFile.keySize else { return nil }
        let nonce = Sealing.randomBytes(SecretItemFormat.nonceSize)
        guard let header = SecretKeyFile.header(wrapping: wrapping, uid: uid, salt: salt, nonce: nonce),
              let sealed = Sealing.sealBytes(key, additional: header, nonce: nonce, key: wrappingKey) else { return nil }
        return header + sealed
    }

    /// The key a copy holds, or nil when `wrappingKey` is not the one that
    /// wrapped it (or the copy was changed).
    public static func unwrap(_ copy: WrappedSecretKey, by wrappingKey: SecretBuffer) -> SecretBuffer? {
        let key = SecretBuffer(limit: SecretKeyFile.keySize)
        guard Sealing.openBytes(copy.sealed, additional: copy.authenticated, nonce: copy.nonce, key: wrappingKey, into: key),
              key.count == SecretKeyFile.keySize else { return nil }
        return key
    }

    /// The key Argon2id derives from `password` with a copy's salt and cost
    /// (the store writes `SecretKeyFile.passes` and `memoryBytes`); nil when
    /// the system will not give the memory.
    public static func passwordKey(_ password: SecretBuffer, salt: [UInt8], passes: UInt32 = SecretKeyFile.passes,
                                   memoryBytes: UInt32 = SecretKeyFile.memoryBytes) -> SecretBuffer? {
        guard Sealing.ready(), salt.count == SecretKeyFile.saltSize, !password.overflowed else { return nil }
        let key = SecretBuffer(limit: SecretKeyFile.keySize)
        // What the password check saw: PAM takes the password as a C
        // string, so bytes after a NUL were never checked and must not
        // make another key (the copy would then open only with them).
        let checked = password.withBytes { bytes, count in (0..<count).first { bytes[$0] == 0 } ?? count }
        let derived = key.fill(length: SecretKeyFile.keySize) { out in
            password.withCString { text in
                la_argon2id(out, UInt64(SecretKeyFile.keySize), text, UInt64(checked), salt, UInt64(passes), Int(memoryBytes)) == 0
            }
        }
        return derived ? key : nil
    }

    /// What says, without Argon2id, that the password's copy was made with
    /// the account's current password: a keyed BLAKE2b (libsodium's
    /// generic hash, under the machine key) of the uid and the account's
    /// password hash as the system keeps it (the shadow entry). Stored
    /// beside the copy, it tells nothing without the machine key, and
    /// never more than the shadow hash it is made from.
    public static func passwordMarker(machineKey: SecretBuffer, uid: UInt32, accountHash: [UInt8]) -> [UInt8]? {
        guard Sealing.ready(), machineKey.count == SecretKeyFile.keySize else { return nil }
        var input = Array("localauth-password-copy-1".utf8) + SecretItemFormat.littleEndianUID(uid) + accountHash
        defer { input.withUnsafeMutableBufferPointer { sodium_memzero($0.baseAddress!, $0.count) } }
        var out = [UInt8](repeating: 0, count: markerSize)
        let done = machineKey.withBytes { key, keyLength in
            crypto_generichash(&out, markerSize, input, UInt64(input.count), key, keyLength) == 0
        }
        return done ? out : nil
    }

    public static let markerSize = 32
}
