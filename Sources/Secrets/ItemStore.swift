// Where the helper keeps a user's sealed secrets (docs/DESIGN.md,
// "Secrets"): `<state_dir>/secrets/<uid>/`, root's and private at every
// level, one file per item named by the SHA-256 of its identifier, each
// written whole (a temporary file, fsync, rename, the directory's fsync):
// a crash leaves the old item or the new one, never a torn one. Only the
// helper, for its caller's uid, calls this; nothing here opens a secret.
import LocalAuth
import LibcSystem

public struct ItemStore {
    /// The state directory the `secrets` directory is made in.
    public let stateDirectory: [UInt8]
    /// Whose items these are.
    public let uid: UInt32
    /// Owner every directory and file must have (root; the tests' own uid).
    public let trustedOwner: UInt32

    public init(stateDirectory: [UInt8], uid: UInt32, trustedOwner: UInt32 = 0) {
        self.stateDirectory = stateDirectory
        self.uid = uid
        self.trustedOwner = trustedOwner
    }

    public enum Failure: Error, Equatable {
        /// A directory on the way is missing where it cannot be made, not
        /// the trusted owner's, or open to others.
        case unsafeDirectory
        /// The user already keeps `SecretItemFormat.maxItemsPerUser` items.
        case quotaReached
        /// Bytes that are not an item of this uid, or too large for one.
        case notAnItem
        /// The user's key cannot be had: its machine copy no longer opens
        /// and no password came to open its password copy.
        case keyUnavailable
        case io(Errno)
    }

    /// The item file's name: its identifier's SHA-256 in hex, so that no
    /// identifier chooses a path.
    public static func fileName(_ identifier: [UInt8]) -> [UInt8] {
        let digits = Array("0123456789abcdef".utf8)
        var name: [UInt8] = []
        for byte in SHA256.hash(identifier) {
            name.append(digits[Int(byte >> 4)])
            name.append(digits[Int(byte & 0x0F)])
        }
        return name + Array(".item".utf8)
    }

    static let temporaryPrefix = Array(".new-".utf8)

    /// Saves `bytes` (a sealed item of this uid) under its identifier,
    /// replacing an item of the same identifier; a new one past the quota
    /// is refused.
    public func save(_ bytes: [UInt8]) throws(Failure) {
        guard case .success(let item) = SecretItemFormat.parse(bytes, uid: uid) else { throw .notAnItem }
        let directory = try openUserDirectory(create: true)
        defer { Syscalls.close(directory) }
        let name = ItemStore.fileName(item.identifier)
        let exists = (try? Syscalls.facts(at: directory, name)) != nil
        if !exists, try itemNames(directory).count >= SecretItemFormat.maxItemsPerUser { throw .quotaReached }
        try ItemStore.writeWhole(bytes, in: directory, as: name)
    }

    /// Writes `bytes` as the file `name` below `directory`: a temporary
    /// file written and synced, renamed over the name, the directory
    /// synced. A crash leaves the old file or the new one.
    static func writeWhole(_ bytes: [UInt8], in directory: Int32, as name: [UInt8]) throws(Failure) {
        let temporary = temporaryPrefix + name
        do throws(Errno) {
            try? Syscalls.unlink(in: directory, temporary)
            let fd = try Syscalls.open(at: directory, temporary, .newFile)
            do throws(Errno) {
                try Syscalls.writeAll(fd, bytes)
                try Syscalls.sync(fd)
            } catch {
                Syscalls.close(fd)
                try? Syscalls.unlink(in: directory, temporary)
                throw error
            }
            Syscalls.close(fd)
            try Syscalls.rename(in: directory, from: temporary, to: name)
            try Syscalls.sync(directory)
        } catch {
            throw .io(error)
        }
    }

    /// A small file of the store's own below `directory` (regular, the
    /// trusted owner's, private, one name) of exactly `size` bytes; nil
    /// otherwise.
    func readOwnFile(_ directory: Int32, _ name: [UInt8], size: Int) -> [UInt8]? {
        guard let fd = try? Syscalls.open(at: directory, name, .readFile) else { return nil }
        defer { Syscalls.close(fd) }
        guard let facts = try? Syscalls.facts(fd), facts.isRegular, facts.owner == trustedOwner, facts.mode & 0o077 == 0,
              facts.links == 1, facts.size == size, let bytes = try? Syscalls.readAll(fd, limit: size), bytes.count == size
        else { return nil }
        return bytes
    }

    static func keyCopyName(_ wrapping: SecretKeyWrapping) -> [UInt8] {
        switch wrapping {
        case .machine: return Array("key.machine".utf8)
        case .password: return Array("key.password".utf8)
        }
    }

    /// The user's key's copy wrapped by `wrapping`, as stored; nil when
    /// there is none (or none that is a sound copy of this uid's).
    public func keyCopy(_ wrapping: SecretKeyWrapping) throws(Failure) -> WrappedSecretKey? {
        guard let directory = try openUserDirectoryIfPresent() else { return nil }
        defer { Syscalls.close(directory) }
        guard let bytes = readOwnFile(directory, ItemStore.keyCopyName(wrapping), size: SecretKeyFile.fileSize),
              case .success(let copy) = SecretKeyFile.parse(bytes, uid: uid), copy.wrapping == wrapping else { return nil }
        return copy
    }

    /// Saves a copy of the user's key (replacing the one of its wrapping).
    public func saveKeyCopy(_ bytes: [UInt8]) throws(Failure) {
        guard case .success(let copy) = SecretKeyFile.parse(bytes, uid: uid) else { throw .notAnItem }
        let directory = try openUserDirectory(create: true)
        defer { Syscalls.close(directory) }
        try ItemStore.writeWhole(bytes, in: directory, as: ItemStore.keyCopyName(copy.wrapping))
    }

    /// The machine key: 32 random bytes in `<state_dir>/secrets/machine.key`,
    /// made at the first use. It wraps every user's key where there is no
    /// TPM, so it stops other users (and a disk without the root
    /// filesystem), not root.
    public func machineKey() throws(Failure) -> SecretBuffer {
        guard let parts = TrustedPath.parts(stateDirectory) else { throw .unsafeDirectory }
        let state = try openTrustedPath(parts)
        let secrets: Int32
        do { secrets = try privateDirectory(in: state, Array("secrets".utf8), create: true) } catch {
            Syscalls.close(state)
            throw error
        }
        Syscalls.close(state)
        defer { Syscalls.close(secrets) }
        let name = Array("machine.key".utf8)
        if let bytes = readOwnFile(secrets, name, size: SecretKeyFile.keySize) {
            let key = SecretBuffer(limit: SecretKeyFile.keySize)
            bytes.withUnsafeBufferPointer { key.assign(from: $0.baseAddress!, length: $0.count) }
            return key
        }
        // Missing, or not a sound one: made anew (the users' machine copies
        // then open no more; their password copies still do).
        guard let key = KeyWrapping.newKey() else { throw .io(.tryAgain) }
        let bytes = key.withBytes { Array(UnsafeBufferPointer(start: $0, count: $1)) }
        try ItemStore.writeWhole(bytes, in: secrets, as: name)
        return key
    }

    /// The item stored under `identifier`: nil when there is none, or when
    /// what is there is not an item of this uid.
    public func load(_ identifier: [UInt8]) throws(Failure) -> SecretItem? {
        guard let directory = try openUserDirectoryIfPresent() else { return nil }
        defer { Syscalls.close(directory) }
        return read(directory, ItemStore.fileName(identifier)).flatMap { $0.identifier == identifier ? $0 : nil }
    }

    /// Removes the item under `identifier`; false when there was none.
    @discardableResult
    public func remove(_ identifier: [UInt8]) throws(Failure) -> Bool {
        guard let directory = try openUserDirectoryIfPresent() else { return false }
        defer { Syscalls.close(directory) }
        let name = ItemStore.fileName(identifier)
        guard (try? Syscalls.facts(at: directory, name)) != nil else { return false }
        do throws(Errno) {
            try Syscalls.unlink(in: directory, name)
            try Syscalls.sync(directory)
            return true
        } catch {
            throw .io(error)
        }
    }

    /// The identifiers of the user's items, sorted bytewise (a file that is
    /// not an item of this uid is left out).
    public func identifiers() throws(Failure) -> [[UInt8]] {
        guard let directory = try openUserDirectoryIfPresent() else { return [] }
        defer { Syscalls.close(directory) }
        return try itemNames(directory).compactMap { read(directory, $0)?.identifier }.sorted { $0.lexicographicallyPrecedes($1) }
    }

    /// The item files in the user's directory (temporary files left by a
    /// crash are not items).
    func itemNames(_ directory: Int32) throws(Failure) -> [[UInt8]] {
        guard let entries = Syscalls.directoryEntries(at: directory, Array(".".utf8), limit: 2 * SecretItemFormat.maxItemsPerUser + 16)
        else { throw .io(.tryAgain) }
        return entries.filter { !$0.isDirectory && $0.name.count == 64 + 5 && $0.name.suffix(5) == Array(".item".utf8) }.map(\.name)
    }

    /// An item file read whole: the store's own regular file, one name, of
    /// an item's size, parsed as this uid's.
    func read(_ directory: Int32, _ name: [UInt8]) -> SecretItem? {
        guard let fd = try? Syscalls.open(at: directory, name, .readFile) else { return nil }
        defer { Syscalls.close(fd) }
        guard let facts = try? Syscalls.facts(fd), facts.isRegular, facts.owner == trustedOwner, facts.mode & 0o077 == 0,
              facts.links == 1, facts.size <= SecretItemFormat.maxItemSize,
              let bytes = try? Syscalls.readAll(fd, limit: SecretItemFormat.maxItemSize),
              case .success(let item) = SecretItemFormat.parse(bytes, uid: uid),
              ItemStore.fileName(item.identifier) == name else { return nil }
        return item
    }

    func openUserDirectoryIfPresent() throws(Failure) -> Int32? {
        do { return try openUserDirectory(create: false) } catch {
            if error == .io(.noEntry) { return nil }
            throw error
        }
    }

    /// `<state_dir>/secrets/<uid>`: the state directory reached through
    /// directories only the trusted owner (or root) can change (or sticky
    /// ones), then each of the two made 0700 when missing (with `create`)
    /// and checked: the trusted owner's, open to nobody else, a real
    /// directory.
    func openUserDirectory(create: Bool) throws(Failure) -> Int32 {
        guard let parts = TrustedPath.parts(stateDirectory) else { throw .unsafeDirectory }
        var current = try openTrustedPath(parts)
        for name in [Array("secrets".utf8), Array(String(uid).utf8)] {
            let next: Int32
            do { next = try privateDirectory(in: current, name, create: create) } catch {
                Syscalls.close(current)
                throw error
            }
            Syscalls.close(current)
            current = next
        }
        return current
    }

    /// The state directory, through directories only the trusted owner (or
    /// root) can change: as the state directory's own walk, a sticky one on
    /// the way (/tmp) lets nobody move its entries; what is made below it
    /// is checked as private.
    func openTrustedPath(_ parts: [[UInt8]]) throws(Failure) -> Int32 {
        let owner = trustedOwner
        switch TrustedPath.openDirectory(parts, trusted: { ($0.owner == 0 || $0.owner == owner) && ($0.mode & 0o022 == 0 || $0.mode & 0o1000 != 0) }) {
        case .success(let fd): return fd
        case .failure(.missingDirectory): throw .io(.noEntry)
        case .failure: throw .unsafeDirectory
        }
    }

    /// One private directory below `parent`, made when missing (with
    /// `create`), checked once open.
    func privateDirectory(in parent: Int32, _ name: [UInt8], create: Bool) throws(Failure) -> Int32 {
        if create {
            do throws(Errno) { try Syscalls.makeDirectory(at: parent, name, mode: 0o700) } catch {
                if error != .exists { throw .io(error) }
            }
        }
        let fd: Int32
        do { fd = try Syscalls.open(at: parent, name, .directory) } catch {
            throw error == .symlinkLoop || error == .notDirectory ? .unsafeDirectory : .io(error)
        }
        guard let facts = try? Syscalls.facts(fd), facts.isDirectory, facts.owner == trustedOwner, facts.mode & 0o077 == 0 else {
            Syscalls.close(fd)
            throw .unsafeDirectory
        }
        return fd
    }
}
