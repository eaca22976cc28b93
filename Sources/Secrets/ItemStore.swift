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
    /// How long a request waits for another's hold on the user's secrets.
    public var lockWaitMilliseconds = ItemStore.defaultLockWaitMilliseconds
    /// The account the helper acts for: written into a user directory
    /// before anything else is (`exclusively`), so that no directory with
    /// secrets in it is ever without the name of its account.
    public var accountName: [UInt8]? = nil
    /// What seals the machine key: the administrator's `tpm` option.
    public let tpm: TPMChoice
    /// The machine key once this store found it (one request's).
    let found = MachineKeyFound()

    public init(stateDirectory: [UInt8], uid: UInt32, trustedOwner: UInt32 = 0, accountName: [UInt8]? = nil,
                tpm: TPMChoice = .auto) {
        self.stateDirectory = stateDirectory
        self.uid = uid
        self.trustedOwner = trustedOwner
        self.accountName = accountName
        self.tpm = tpm
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
        /// A key file that is there but not as the store makes it (another
        /// owner, mode, size, a second link, not a regular file): never
        /// read, and never replaced (that would lose what it keeps).
        case oddFile([UInt8])
        /// The TPM that seals the machine key cannot be reached (the key is
        /// not replaced: it is there, sealed).
        case tpmUnreachable
        /// The TPM refused for a reason that may pass (busy, locked out),
        /// or one the administrator named cannot seal.
        case tpmFailed
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

    /// Writes `bytes` as the file `name` below `directory`, whole
    /// (`WholeFile.write`): a crash leaves the old file or the new one. The
    /// caller holds the user's lock (`exclusively`), or the secrets
    /// directory's for the machine key.
    static func writeWhole(_ bytes: [UInt8], in directory: Int32, as name: [UInt8], directoryLocked: Bool = true) throws(Failure) {
        do throws(StoreFailure) {
            try WholeFile.write(bytes, directory: directory, to: name, through: temporaryPrefix + name, directoryLocked: directoryLocked)
        } catch {
            if case .writeFailed(let cause) = error { throw .io(cause) }
            throw .io(.fileTooLarge)
        }
    }

    static func wipe(_ bytes: inout [UInt8]) {
        bytes.withUnsafeMutableBufferPointer { Syscalls.wipe($0.baseAddress!, count: $0.count) }
    }

    /// How long a request waits for another's hold on the user's secrets
    /// (`lockWaitMilliseconds`, which the tests shorten).
    public static let defaultLockWaitMilliseconds = 3000

    /// Runs `body` holding the user's lock (the user's directory, made
    /// when missing, flock'd): every write of a user's items and key copies
    /// happens under it, so two requests never make two keys or interleave
    /// one file's temporary. Another request holds it only for its own
    /// reads and writes, never across a prompt; past
    /// `lockWaitMilliseconds` this one gives up (EAGAIN).
    public func exclusively<Value>(_ body: () throws(Failure) -> Value) throws(Failure) -> Value {
        // The directory locked must still be the one at the uid's name (a
        // former account's may have been moved aside meanwhile): the
        // writes below reach it by that name.
        for _ in 0..<3 {
            let directory = try openUserDirectory(create: true)
            defer { Syscalls.close(directory) }
            try lock(directory)
            defer { Syscalls.unlock(directory) }
            guard try isAtUsersName(directory) else { continue }
            if let accountName, !accountName.isEmpty, try readAccountName(directory) == nil {
                try ItemStore.writeWhole(accountName, in: directory, as: ItemStore.accountFileName)
            }
            return try body()
        }
        throw .io(.tryAgain)
    }

    /// flock on `fd`, tried every few milliseconds up to the bound.
    func lock(_ fd: Int32) throws(Failure) {
        let deadline = Syscalls.bootTimeNanoseconds() + Int64(lockWaitMilliseconds) * 1_000_000
        do throws(Errno) {
            while !(try Syscalls.tryLockExclusive(fd)) {
                guard Syscalls.bootTimeNanoseconds() < deadline else { throw Errno.tryAgain }
                Syscalls.sleep(milliseconds: 5)
            }
        } catch {
            throw .io(error)
        }
    }

    /// A small file of the store's own below `directory` (regular, the
    /// trusted owner's, private, one name) of exactly `size` bytes; nil
    /// when there is none. One that is there but not such a file is
    /// `oddFile`: a key is never taken for missing, and made anew over it.
    /// A read the disk fails (EIO) is tried once more, then thrown, for the
    /// same reason.
    func readOwnFile(_ directory: Int32, _ name: [UInt8], size: Int) throws(Failure) -> [UInt8]? {
        try readOwnFile(directory, name, sizes: size...size)
    }

    /// The same, for a file of any size in `sizes`.
    func readOwnFile(_ directory: Int32, _ name: [UInt8], sizes: ClosedRange<Int>) throws(Failure) -> [UInt8]? {
        var failures = 0
        while true {
            let read: [UInt8]??
            do throws(Errno) { read = try readOwnFileOnce(directory, name, sizes: sizes) } catch {
                failures += 1
                if failures == 2 { throw .io(error) }
                continue
            }
            guard let read else { return nil }
            guard let bytes = read else { throw .oddFile(name) }
            return bytes
        }
    }

    /// nil: no file; .some(nil): a file that is not the store's own.
    func readOwnFileOnce(_ directory: Int32, _ name: [UInt8], sizes: ClosedRange<Int>) throws(Errno) -> [UInt8]?? {
        let fd: Int32
        do { fd = try Syscalls.open(at: directory, name, .readFile) } catch {
            if error == .noEntry { return nil }
            if error == .symlinkLoop || error == .notDirectory { return .some(nil) }
            throw error
        }
        defer { Syscalls.close(fd) }
        let facts = try Syscalls.facts(fd)
        guard facts.isPrivateFile(of: trustedOwner, sizes: sizes) else {
            return .some(nil)
        }
        let bytes = try Syscalls.readAll(fd, limit: facts.size)
        return bytes.count == facts.size ? .some(bytes) : .some(nil)
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
        let name = ItemStore.keyCopyName(wrapping)
        guard let bytes = try readOwnFile(directory, name, size: SecretKeyFile.fileSize) else { return nil }
        // There but not a sound copy of this uid's (a damaged header, a
        // version this build does not read): never taken for missing, so
        // never replaced by a new key.
        guard case .success(let copy) = SecretKeyFile.parse(bytes, uid: uid), copy.wrapping == wrapping else { throw .oddFile(name) }
        return copy
    }

    static var passwordMarkerName: [UInt8] { Array("key.password.for".utf8) }

    /// The marker of the account password the password's copy was made
    /// with (`KeyWrapping.passwordMarker`); nil when there is none.
    public func passwordMarker() throws(Failure) -> [UInt8]? {
        guard let directory = try openUserDirectoryIfPresent() else { return nil }
        defer { Syscalls.close(directory) }
        return try readOwnFile(directory, ItemStore.passwordMarkerName, size: KeyWrapping.markerSize)
    }

    /// Saves the marker (the caller holds the user's lock).
    public func savePasswordMarker(_ marker: [UInt8]) throws(Failure) {
        guard marker.count == KeyWrapping.markerSize else { throw .notAnItem }
        let directory = try openUserDirectory(create: true)
        defer { Syscalls.close(directory) }
        try ItemStore.writeWhole(marker, in: directory, as: ItemStore.passwordMarkerName)
    }

    /// Saves a copy of the user's key (replacing the one of its wrapping).
    public func saveKeyCopy(_ bytes: [UInt8]) throws(Failure) {
        guard case .success(let copy) = SecretKeyFile.parse(bytes, uid: uid) else { throw .notAnItem }
        let directory = try openUserDirectory(create: true)
        defer { Syscalls.close(directory) }
        try ItemStore.writeWhole(bytes, in: directory, as: ItemStore.keyCopyName(copy.wrapping))
    }

    /// The item stored under `identifier`: nil when there is none, or when
    /// what is there is not an item of this uid.
    public func load(_ identifier: [UInt8]) throws(Failure) -> SecretItem? {
        guard let directory = try openUserDirectoryIfPresent() else { return nil }
        defer { Syscalls.close(directory) }
        return read(directory, ItemStore.fileName(identifier)).flatMap { $0.identifier == identifier ? $0 : nil }
    }

    /// Whether a file is stored under `identifier`'s name, an item or not.
    public func hasFile(for identifier: [UInt8]) throws(Failure) -> Bool {
        guard let directory = try openUserDirectoryIfPresent() else { return false }
        defer { Syscalls.close(directory) }
        return (try? Syscalls.facts(at: directory, ItemStore.fileName(identifier))) != nil
    }

    /// Removes the item under `identifier`; false when there was none. The
    /// caller holds the user's lock.
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
        return entries.filter { !$0.isDirectory && $0.name.count == 64 + 5 && $0.name.suffix(5) == Array(".item".utf8) }.map { $0.name }
    }

    /// An item file read whole: the store's own regular file, one name, of
    /// an item's size, parsed as this uid's.
    func read(_ directory: Int32, _ name: [UInt8]) -> SecretItem? {
        guard let fd = try? Syscalls.open(at: directory, name, .readFile) else { return nil }
        defer { Syscalls.close(fd) }
        guard let facts = try? Syscalls.facts(fd), facts.isPrivateFile(of: trustedOwner, sizes: 0...SecretItemFormat.maxItemSize),
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
