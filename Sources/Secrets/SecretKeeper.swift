// What the helper does with a user's secrets once a request's verdict
// allows it (docs/DESIGN.md, "Secrets"): the user's key from its copies,
// items sealed and stored, opened, and an enrollment-bound item that no
// longer opens deleted. It decides nothing about who may: that is the
// evaluation's, before any of this runs.
import LocalAuth

public struct SecretKeeper {
    public let items: ItemStore

    public init(items: ItemStore) { self.items = items }

    /// How a load ended.
    public enum Loaded: Equatable {
        /// The secret is in the buffer.
        case opened
        /// There is no item under that identifier.
        case absent
        /// An item bound to the enrolled fingers that no longer opens: the
        /// enrollment changed (Apple's `invalidated`). It is deleted.
        case invalidated
        /// The user's key cannot be had (its machine copy no longer opens
        /// and no password came with the request), or the item does not
        /// open: it is kept for a request that brings the password.
        case unopenable
    }

    /// Seals `secret` under the user's key (made on the user's first item)
    /// and stores it under `identifier`, replacing an item there.
    public func store(_ secret: SecretBuffer, identifier: [UInt8], requirement: SecretRequirement, enrollmentDigest: [UInt8],
                      wallSeconds: Int64, password: SecretBuffer? = nil) throws(ItemStore.Failure) {
        guard let key = try userKey(password: password, create: true) else { throw .keyUnavailable }
        guard let bytes = Sealing.seal(secret, identifier: identifier, requirement: requirement, uid: items.uid, createdWallSeconds: wallSeconds,
                                       enrollmentDigest: enrollmentDigest, key: key) else { throw .notAnItem }
        try items.save(bytes)
    }

    /// Opens the item under `identifier` into `secret`.
    public func load(_ identifier: [UInt8], enrollmentDigest: [UInt8], password: SecretBuffer? = nil,
                     into secret: SecretBuffer) throws(ItemStore.Failure) -> Loaded {
        secret.wipe()
        guard let item = try items.load(identifier) else { return .absent }
        guard let key = try userKey(password: password, create: false) else { return .unopenable }
        if Sealing.open(item, enrollmentDigest: enrollmentDigest, key: key, into: secret) { return .opened }
        guard item.requirement.bindsEnrollment else { return .unopenable }
        // The key opens the user's other items: the enrollment is what
        // changed (or the item was changed, which loses it the same way).
        try items.remove(identifier)
        return .invalidated
    }

    /// Keeps a copy of the user's key wrapped by `password` (Argon2id),
    /// when the one kept is missing or was made with another password: so
    /// that a machine key made anew (a cleared TPM, a restored system) loses
    /// nothing. Run after a verdict has been sent, never before. Nothing is
    /// written for a user without a key.
    public func rememberPassword(_ password: SecretBuffer) throws(ItemStore.Failure) {
        if let copy = try items.keyCopy(.password), let derived = KeyWrapping.passwordKey(password, salt: copy.salt, passes: copy.passes,
                                                                                          memoryBytes: copy.memoryBytes),
           KeyWrapping.unwrap(copy, by: derived) != nil { return }
        guard let key = try userKey(password: nil, create: false) else { return }
        try savePasswordCopy(of: key, password: password)
    }

    /// The user's key: its machine copy opened with the machine key; else
    /// its password copy opened with `password`, the machine copy then
    /// made again; else, with `create` and no copy at all, a new key.
    func userKey(password: SecretBuffer?, create: Bool) throws(ItemStore.Failure) -> SecretBuffer? {
        let machine = try items.machineKey()
        let machineCopy = try items.keyCopy(.machine)
        if let machineCopy, let key = KeyWrapping.unwrap(machineCopy, by: machine) { return key }
        let passwordCopy = try items.keyCopy(.password)
        if let passwordCopy, let password,
           let derived = KeyWrapping.passwordKey(password, salt: passwordCopy.salt, passes: passwordCopy.passes,
                                                  memoryBytes: passwordCopy.memoryBytes),
           let key = KeyWrapping.unwrap(passwordCopy, by: derived) {
            if let copy = KeyWrapping.wrap(key, by: machine, as: .machine, uid: items.uid) { try items.saveKeyCopy(copy) }
            return key
        }
        // A copy that does not open is never replaced by a new key: the
        // items it seals would be lost for good.
        guard create, machineCopy == nil, passwordCopy == nil, let key = KeyWrapping.newKey(),
              let copy = KeyWrapping.wrap(key, by: machine, as: .machine, uid: items.uid) else { return nil }
        try items.saveKeyCopy(copy)
        if let password { try savePasswordCopy(of: key, password: password) }
        return key
    }

    func savePasswordCopy(of key: SecretBuffer, password: SecretBuffer) throws(ItemStore.Failure) {
        let salt = Sealing.randomBytes(SecretKeyFile.saltSize)
        guard let derived = KeyWrapping.passwordKey(password, salt: salt),
              let copy = KeyWrapping.wrap(key, by: derived, as: .password, uid: items.uid, salt: salt) else { throw .io(.tryAgain) }
        try items.saveKeyCopy(copy)
    }
}
