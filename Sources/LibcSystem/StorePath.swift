// The state directory's trusted path: every directory on the way root's
// and not writable by others, the directory itself root's and 0700.
import LocalAuth

extension FileStateStore {
    /// Whether `name` in `directory` is still the file `facts` describes
    /// (the same device and inode): another prompt's rename or repair may
    /// have put another file there since this one was opened and locked.
    func isStillAtName(_ facts: FileFacts, directory: Int32, _ name: [UInt8]) -> Bool {
        guard let current = try? Syscalls.facts(at: directory, name) else { return false }
        return current.device == facts.device && current.inode == facts.inode
    }

    /// Opens the state directory, walking from `/` without following
    /// symlinks. Every directory on the way must be owned by root (or the
    /// trusted owner) and not writable by group or others, unless sticky:
    /// otherwise its owner could move the state directory away and have a
    /// fresh, empty one made. The state directory itself must be the trusted
    /// owner's and 0700 (others may not even list which uids have records).
    /// A missing one is made only in a parent nobody else can write: in a
    /// sticky /tmp another user could have made it first; with `create`
    /// false it is not made, and reads as missing.
    func openDirectory(create: Bool = true) throws(StoreFailure) -> Int32 {
        guard let parts = TrustedPath.parts(directoryPath), let last = parts.last else { throw .directoryUnusable(.notAbsolute) }
        let parent: Int32
        switch TrustedPath.openDirectory(Array(parts.dropLast()), trusted: { isTrustedAncestor($0, allowSticky: true) }) {
        case .success(let fd): parent = fd
        case .failure(.missingDirectory): throw .directoryUnusable(.missingAncestor)
        case .failure: throw .directoryUnusable(.unsafeAncestor)
        }
        defer { Syscalls.close(parent) }
        let fd: Int32
        do {
            fd = try Syscalls.open(at: parent, last, .directory)
        } catch {
            guard error == .noEntry, create else {
                // A symlink or a file in its place is unsafe; anything else
                // is a failure of the system, said as such.
                let unsafe = error == .symlinkLoop || error == .notDirectory
                throw .directoryUnusable(unsafe ? .unsafeDirectory : .cannotOpen(error))
            }
            guard let facts = try? Syscalls.facts(parent), isTrustedAncestor(facts, allowSticky: false) else {
                throw .directoryUnusable(.missingInWritableParent)
            }
            do throws(Errno) {
                // Another prompt may make it at the same moment: then use its.
                do { try Syscalls.makeDirectory(at: parent, last, mode: 0o700) } catch { if error != .exists { throw error } }
                fd = try Syscalls.open(at: parent, last, .directory)
            } catch {
                // A filesystem that is read-only or failing is said as
                // such (it may suspend counting); anything else is unsafe.
                throw .directoryUnusable(RuntimeCounting.isMediumFailure(error) ? .cannotOpen(error) : .unsafeDirectory)
            }
        }
        guard let facts = try? Syscalls.facts(fd), facts.isDirectory, facts.owner == trustedOwner, facts.mode & 0o077 == 0 else {
            Syscalls.close(fd)
            throw .directoryUnusable(.unsafeDirectory)
        }
        return fd
    }

    /// A directory on the way to the state directory: owned by root or the
    /// trusted owner, and not writable by group or others (or, when allowed,
    /// sticky, so that others cannot move its entries).
    func isTrustedAncestor(_ facts: FileFacts, allowSticky: Bool) -> Bool {
        guard facts.isDirectory, facts.owner == 0 || facts.owner == trustedOwner else { return false }
        return facts.mode & 0o022 == 0 || (allowSticky && facts.mode & 0o1000 != 0)
    }
}
