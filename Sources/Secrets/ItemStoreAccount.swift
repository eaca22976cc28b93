// Whose a user's secrets directory is: the account named in its `account`
// file (docs/DESIGN.md, "Secrets"). A uid that a new account reuses finds
// the former account's directory moved aside, and starts with none.
import LocalAuth
import LibcSystem

extension ItemStore {
    static var accountFileName: [UInt8] { Array("account".utf8) }

    /// The account the user's directory was made for: the name in its
    /// `account` file, which must be `name` (the caller's own, as getpwuid
    /// gives it) byte for byte. A directory of any other name is moved
    /// aside as `<uid>.former-<seconds>-<inode>`, root's, so that a reused
    /// uid starts with no secrets and never opens a former account's key;
    /// no lookup of the stored name decides it (a stale or failing name
    /// service would then adopt a former account's directory, or move the
    /// user's own aside). A directory without the file is given it when
    /// it holds nothing but temporaries (a request ended between making and
    /// naming it), and moved aside when it holds anything else, since whose
    /// it is cannot be told. Returns the former account's name (or a
    /// placeholder) when it moved one. Every secret request calls this
    /// first; `exclusively` names a directory it makes before writing into it.
    @discardableResult
    public func settleOwner(_ name: [UInt8]) throws(Failure) -> [UInt8]? {
        guard !name.isEmpty else { throw .unsafeDirectory }
        guard let parts = TrustedPath.parts(stateDirectory) else { throw .unsafeDirectory }
        let state: Int32
        do { state = try openTrustedPath(parts) } catch {
            if error == .io(.noEntry) { return nil }
            throw error
        }
        let secrets: Int32
        do { secrets = try privateDirectory(in: state, Array("secrets".utf8), create: false) } catch {
            Syscalls.close(state)
            if error == .io(.noEntry) { return nil }
            throw error
        }
        Syscalls.close(state)
        defer { Syscalls.close(secrets) }
        let own = Array(String(uid).utf8)
        let directory: Int32
        do { directory = try privateDirectory(in: secrets, own, create: false) } catch {
            if error == .io(.noEntry) { return nil }
            throw error
        }
        defer { Syscalls.close(directory) }
        try lock(directory)
        // Moved aside by another request meanwhile: its own is settled.
        guard try isAtUsersName(directory) else {
            Syscalls.unlock(directory)
            return nil
        }
        let stored = try readAccountName(directory)
        if stored == nil {
            // No name: an empty directory (a request killed between making
            // it and naming it) is this account's; one that holds a key or
            // an item is nobody's it can tell, and is moved aside.
            // (A temporary a killed write left is not a secret.)
            let entries = Syscalls.directoryEntries(at: directory, Array(".".utf8), limit: 8) ?? [(name: [0x3F], isDirectory: false)]
            if entries.allSatisfy({ $0.name.starts(with: ItemStore.temporaryPrefix) }) {
                defer { Syscalls.unlock(directory) }
                try ItemStore.writeWhole(name, in: directory, as: ItemStore.accountFileName)
                return nil
            }
        }
        if let stored, stored == name {
            Syscalls.unlock(directory)
            return nil
        }
        do throws(Errno) {
            // Named by the time and the directory's inode: two moved aside
            // in the same second never meet at one name.
            let inode = (try? Syscalls.facts(directory).inode) ?? 0
            try Syscalls.renameWithoutReplacing(in: secrets, from: own, to: own + Array(".former-\(Syscalls.wallSeconds())-\(inode)".utf8))
            try Syscalls.sync(secrets)
        } catch {
            Syscalls.unlock(directory)
            throw .io(error)
        }
        Syscalls.unlock(directory)
        return stored ?? Array("(an unnamed account)".utf8)
    }

    /// The name in the user directory's `account` file; nil when there is
    /// none. An odd one is `oddFile`.
    func readAccountName(_ directory: Int32) throws(Failure) -> [UInt8]? {
        let name = ItemStore.accountFileName
        let fd: Int32
        do { fd = try Syscalls.open(at: directory, name, .readFile) } catch {
            if error == .noEntry { return nil }
            throw .oddFile(name)
        }
        defer { Syscalls.close(fd) }
        let facts: FileFacts
        do throws(Errno) { facts = try Syscalls.facts(fd) } catch { throw .io(error) }
        guard facts.isPrivateFile(of: trustedOwner, sizes: 0...4096) else {
            throw .oddFile(name)
        }
        let bytes: [UInt8]
        do throws(Errno) { bytes = try Syscalls.readAll(fd, limit: 4096) } catch { throw .io(error) }
        guard !bytes.isEmpty else { throw .oddFile(name) }
        return bytes
    }

    /// Whether `directory` is still the one at `<state_dir>/secrets/<uid>`.
    func isAtUsersName(_ directory: Int32) throws(Failure) -> Bool {
        guard let parts = TrustedPath.parts(stateDirectory) else { throw .unsafeDirectory }
        let state = try openTrustedPath(parts)
        defer { Syscalls.close(state) }
        let secrets = try privateDirectory(in: state, Array("secrets".utf8), create: false)
        defer { Syscalls.close(secrets) }
        guard let here = try? Syscalls.facts(directory), let named = try? Syscalls.facts(at: secrets, Array(String(uid).utf8)) else {
            return false
        }
        return here.device == named.device && here.inode == named.inode
    }
}
