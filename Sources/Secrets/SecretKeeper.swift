// What the helper does with a user's secrets once a request's verdict
// allows it (docs/DESIGN.md, "Secrets"): the user's key from its copies,
// items sealed and stored, opened, and an enrollment-bound item that no
// longer opens deleted. It decides nothing about who may: that is the
// evaluation's, before any of this runs (SecretPolicy says when).
import LocalAuth
import LibcSystem

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

    /// Whether the user's key opens without the password, needs it, or
    /// does not exist yet. Writes nothing.
    public func keyState() throws(ItemStore.Failure) -> SecretKeyState {
        let machineCopy = try items.keyCopy(.machine)
        let passwordCopy = try items.keyCopy(.password)
        if machineCopy == nil && passwordCopy == nil { return .none }
        if let machineCopy, KeyWrapping.unwrap(machineCopy, by: try items.machineKey()) != nil { return .opens }
        return passwordCopy == nil ? .lost : .needsPassword
    }

    /// Whether the user has a key at all (a copy of either kind): reads two
    /// small files, makes nothing.
    public func hasKey() throws(ItemStore.Failure) -> Bool {
        if try items.keyCopy(.machine) != nil { return true }
        return try items.keyCopy(.password) != nil
    }

    /// Seals `secret` under the user's key (made on the user's first item,
    /// with both its copies when the password came) and stores it under
    /// `identifier`, replacing an item there. Under the user's lock.
    public func store(_ secret: SecretBuffer, identifier: [UInt8], requirement: SecretRequirement, enrollmentDigest: [UInt8],
                      wallSeconds: Int64, password: SecretBuffer? = nil) throws(ItemStore.Failure) {
        try items.exclusively { () throws(ItemStore.Failure) in
            guard let key = try userKey(password: password, create: true) else { throw .keyUnavailable }
            guard let bytes = Sealing.seal(secret, identifier: identifier, requirement: requirement, uid: items.uid,
                                           createdWallSeconds: wallSeconds, enrollmentDigest: enrollmentDigest, key: key) else {
                throw .notAnItem
            }
            try items.save(bytes)
        }
    }

    /// Opens the item under `identifier` into `secret`; an enrollment-bound
    /// one that no longer opens is deleted. Under the user's lock when
    /// there is something to lock.
    public func load(_ identifier: [UInt8], enrollmentDigest: [UInt8], password: SecretBuffer? = nil,
                     into secret: SecretBuffer) throws(ItemStore.Failure) -> Loaded {
        secret.wipe()
        guard try items.load(identifier) != nil else { return .absent }
        return try items.exclusively { () throws(ItemStore.Failure) -> Loaded in
            guard let item = try items.load(identifier) else { return .absent }
            guard let key = try userKey(password: password, create: false) else { return .unopenable }
            if Sealing.open(item, enrollmentDigest: enrollmentDigest, key: key, into: secret) { return .opened }
            guard item.requirement.bindsEnrollment else { return .unopenable }
            // The key opens the user's other items: the enrollment is what
            // changed (or the item was changed, which loses it the same way).
            try items.remove(identifier)
            return .invalidated
        }
    }

    /// Removes the item under `identifier`; false when there was none.
    public func delete(_ identifier: [UInt8]) throws(ItemStore.Failure) -> Bool {
        guard try items.hasFile(for: identifier) else { return false }
        return try items.exclusively { () throws(ItemStore.Failure) -> Bool in try items.remove(identifier) }
    }

    /// After a right password passed through the helper, and after its
    /// verdict was sent: the machine copy made again where it no longer
    /// opens (a machine key made anew), and the password copy rewritten
    /// where it is missing or was made with another password (`passwd`).
    /// Nothing is done for a user without a key, and a key neither copy
    /// opens stays lost. Whether anything is stale is told without
    /// Argon2id where the account's password hash is known (`accountHash`,
    /// the shadow entry's) and the marker made with it matches: then
    /// nothing runs. Otherwise Argon2id runs once, and the marker is
    /// written. True when it ran.
    @discardableResult
    public func rememberPassword(_ password: SecretBuffer, accountHash: [UInt8]? = nil) throws(ItemStore.Failure) -> Bool {
        guard try hasKey() else { return false }
        if let accountHash, try isCurrent(accountHash) { return false }
        try items.exclusively { () throws(ItemStore.Failure) in
            let machine = try items.machineKey()
            var key = try items.keyCopy(.machine).flatMap { KeyWrapping.unwrap($0, by: machine) }
            var passwordCopyCurrent = false
            if let copy = try items.keyCopy(.password),
               let derived = KeyWrapping.passwordKey(password, salt: copy.salt, passes: copy.passes, memoryBytes: copy.memoryBytes),
               let fromPassword = KeyWrapping.unwrap(copy, by: derived) {
                passwordCopyCurrent = true
                if key == nil {
                    key = fromPassword
                    if let copy = KeyWrapping.wrap(fromPassword, by: machine, as: .machine, uid: items.uid) { try items.saveKeyCopy(copy) }
                }
            }
            guard let key else { return }
            if !passwordCopyCurrent { try savePasswordCopy(of: key, password: password) }
            if let accountHash, let marker = KeyWrapping.passwordMarker(machineKey: machine, uid: items.uid, accountHash: accountHash) {
                try items.savePasswordMarker(marker)
            }
        }
        return true
    }

    /// Whether both copies are known current without Argon2id: the
    /// machine's opens, and the marker says the password's was made with
    /// the password whose hash the account holds now.
    func isCurrent(_ accountHash: [UInt8]) throws(ItemStore.Failure) -> Bool {
        let machine = try items.machineKey()
        guard let copy = try items.keyCopy(.machine), KeyWrapping.unwrap(copy, by: machine) != nil,
              try items.keyCopy(.password) != nil, let stored = try items.passwordMarker(),
              let marker = KeyWrapping.passwordMarker(machineKey: machine, uid: items.uid, accountHash: accountHash) else { return false }
        return stored == marker
    }

    /// The user's key: its machine copy opened with the machine key; else
    /// its password copy opened with `password`, the machine copy then
    /// made again; else, with `create` and no copy at all, a new key. The
    /// caller holds the user's lock.
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
