// Spare record files made while there is room, so that a full filesystem
// still takes a first record.
import LocalAuth

extension FileStateStore {
    static func spareName(_ index: Int) -> [UInt8] { literalBytes("spare.") + utf8Bytes(String(index)) }
    static func spareLockName(_ index: Int) -> [UInt8] { literalBytes("spare-lock.") + utf8Bytes(String(index)) }
    static var spareTemporaryName: [UInt8] { literalBytes("spare.tmp") }

    /// Puts a spare lock file at `name`, which is missing and cannot be
    /// made for want of room: a known user's first lock file then needs
    /// no inode, like the look-alike lock that already exists. Never over
    /// a lock file another prompt made meanwhile (two prompts would then
    /// hold locks on two files).
    func placeSpareLock(directory: Int32, as name: [UInt8]) -> Bool {
        for index in 0..<FileStateStore.spareCount {
            let spare = FileStateStore.spareLockName(index)
            guard let facts = try? Syscalls.facts(at: directory, spare), isSoundLock(facts) else { continue }
            do {
                try Syscalls.renameWithoutReplacing(in: directory, from: spare, to: name)
                return true
            } catch {
                if error == .exists { return true }
            }
        }
        // Another prompt may have put the last spare at this very name.
        return (try? Syscalls.facts(at: directory, name)) != nil
    }

    /// A spare as the store makes it: a whole record's size, the trusted
    /// owner's, private, and with no other name.
    func isSoundSpare(_ facts: FileFacts) -> Bool {
        facts.isPrivateFile(of: trustedOwner, sizes: RecordFormat.fileSize...RecordFormat.fileSize)
    }

    /// Opens and locks a sound spare that still has its name, or nil when
    /// none is ready. The lock keeps two prompts from writing one spare;
    /// the name, looked at again under the lock, tells that no other
    /// prompt already renamed it into a record.
    func claimSpare(directory: Int32) -> (fd: Int32, name: [UInt8])? {
        for index in 0..<FileStateStore.spareCount {
            let name = FileStateStore.spareName(index)
            guard let fd = try? Syscalls.open(at: directory, name, .updateFile) else { continue }
            if (try? Syscalls.tryLockExclusive(fd)) == true, let facts = try? Syscalls.facts(fd), isSoundSpare(facts),
               isStillAtName(facts, directory: directory, name) {
                return (fd, name)
            }
            Syscalls.close(fd)
        }
        return nil
    }

    /// Makes the spares that are missing, and before them the look-alike
    /// file and key when either is missing. Called after a known user's
    /// whole-file write (a look-alike bucket is never written whole
    /// through a spare). At most one prompt refills at a time (under the
    /// directory's lock, never waited for); a full filesystem leaves the
    /// pool short, which fails nothing now.
    func refillSpares(directory: Int32) {
        prepareLookAlike(directory: directory)
        guard (try? Syscalls.tryLockExclusive(directory)) == true else { return }
        defer { Syscalls.unlock(directory) }
        let saved: (soft: UInt64, hard: UInt64)?
        do { saved = try allowWrite(upTo: RecordFormat.fileSize) } catch { return }
        defer { restoreLimit(saved) }
        let blank = [UInt8](repeating: 0, count: RecordFormat.fileSize)
        let temporary = FileStateStore.spareTemporaryName
        for index in 0..<FileStateStore.spareCount {
            let name = FileStateStore.spareLockName(index)
            if let facts = try? Syscalls.facts(at: directory, name) {
                if isSoundLock(facts) { continue }
                guard (try? Syscalls.removeEntry(in: directory, name, movingNonEmptyDirectoryTo: name + literalBytes(".odd"))) != nil
                else { return }
            }
            guard let fd = try? Syscalls.open(at: directory, name, .newFile) else { return }
            Syscalls.close(fd)
        }
        for index in 0..<FileStateStore.spareCount {
            let name = FileStateStore.spareName(index)
            if let facts = try? Syscalls.facts(at: directory, name), isSoundSpare(facts) { continue }
            do throws(Errno) {
                // The directory's lock is held: no other prompt uses the
                // temporary name, and only this one puts spares in place.
                try Syscalls.removeEntry(in: directory, temporary, movingNonEmptyDirectoryTo: temporary + literalBytes(".odd"))
                let fd = try Syscalls.open(at: directory, temporary, .newFile)
                do throws(Errno) {
                    try Syscalls.writeAll(fd, blank)
                    // On disk, so that its blocks are there to be written
                    // over when the filesystem is full.
                    try Syscalls.sync(fd)
                } catch {
                    Syscalls.close(fd)
                    throw error
                }
                Syscalls.close(fd)
                // Whatever else holds the name (a directory, a short file
                // a crash left) goes; a sound spare is never replaced.
                do { try Syscalls.rename(in: directory, from: temporary, to: name) } catch {
                    try Syscalls.removeEntry(in: directory, name, movingNonEmptyDirectoryTo: name + literalBytes(".odd"))
                    try Syscalls.rename(in: directory, from: temporary, to: name)
                }
            } catch {
                try? Syscalls.unlink(in: directory, temporary)
                return
            }
        }
    }
}
