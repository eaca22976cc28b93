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
        let derived = key.fill(length: SecretKeyFile.keySize) { out in
            password.withCString { text in
                la_argon2id(out, UInt64(SecretKeyFile.keySize), text, UInt64(password.count), salt, UInt64(passes), Int(memoryBytes)) == 0
            }
        }
        return derived ? key : nil
    }
}
