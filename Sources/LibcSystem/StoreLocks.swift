// The record locks, waited for within a bound, and the repair of entries
// that are not what they must be (a FIFO, a link, a file of another owner).
import LocalAuth

extension FileStateStore {
    /// Opens and locks a lock file. Anything else at its name (a symlink,
    /// FIFO, directory, or a file not the store's) is replaced, and reported
    /// so the record is treated as damaged (R12): such a file must not
    /// refuse every prompt. After the lock is taken the name must still lead
    /// to the locked file, or the lock is taken again. The wait is bounded
    /// (`waitForLock`).
    func takeLock(directory: Int32, name: [UInt8]) throws(StoreFailure) -> (fd: Int32, wasOdd: Bool) {
        var wasOdd = false
        var lastError = Errno.tryAgain
        for _ in 0..<4 {
            let fd: Int32
            do {
                fd = try Syscalls.open(at: directory, name, .lockFile)
            } catch {
                lastError = error
                // A first lock file on a full filesystem: a spare one.
                if error.isNoRoom, placeSpareLock(directory: directory, as: name) { continue }
                guard error == .symlinkLoop || error == .isDirectory || error == .noDeviceOrAddress || error == .accessDenied else {
                    throw .lockFailed(error)
                }
                wasOdd = true
                try replaceOddEntry(directory: directory, name) { !isSoundLock($0) }
                continue
            }
            guard let facts = try? Syscalls.facts(fd), isSoundLock(facts) else {
                Syscalls.close(fd)
                wasOdd = true
                try replaceOddEntry(directory: directory, name) { !isSoundLock($0) }
                continue
            }
            do throws(StoreFailure) {
                try waitForLock { () throws(Errno) -> Bool in try Syscalls.tryLockExclusive(fd) }
                if isStillAtName(facts, directory: directory, name) {
                    return (fd, wasOdd)
                }
                lastError = .stale
            } catch {
                Syscalls.close(fd)
                throw error
            }
            Syscalls.close(fd)
        }
        throw .lockFailed(lastError)
    }

    /// Tries `attempt` (true: the lock is taken) until it succeeds or
    /// `lockWaitMilliseconds` have passed on the boot clock, pausing a
    /// little longer each time. A write under a lock takes milliseconds; a
    /// lock held longer is held by a prompt its user stopped (SIGSTOP, a
    /// frozen cgroup), and a prompt that waited on would hang for as long
    /// as that user liked. Past the bound this attempt is refused
    /// uncounted (`lockHeld`), never checked.
    func waitForLock(_ attempt: () throws(Errno) -> Bool) throws(StoreFailure) {
        let start = Syscalls.bootTimeNanoseconds()
        var pause = 1
        while true {
            do throws(Errno) {
                if try attempt() { return }
            } catch {
                throw .lockFailed(error)
            }
            let waited = Int((Syscalls.bootTimeNanoseconds() - start) / 1_000_000)
            guard waited < lockWaitMilliseconds else { throw .lockHeld(milliseconds: lockWaitMilliseconds) }
            Syscalls.sleep(milliseconds: min(pause, lockWaitMilliseconds - waited))
            pause = min(pause * 2, 10)
        }
    }

    /// Removes the entry at `name` (a file, a symlink never followed, a
    /// FIFO, or a directory; a non-empty directory is moved aside under a
    /// name of its own) if it still is odd by `isOdd` when looked at under a
    /// lock on the directory: repairs are serialized, so a prompt never
    /// removes the sound file another prompt has just put there (an inode
    /// number alone could have been reused).
    ///
    /// Only repairs take this lock, and never wait for it long: a prompt
    /// stopped by its user while it holds the lock must not hold up
    /// everyone else's writes. After about a second the repair fails, and
    /// with it this one attempt (the next prompt tries again).
    func replaceOddEntry(directory: Int32, _ name: [UInt8], isOdd: (FileFacts) -> Bool) throws(StoreFailure) {
        do throws(Errno) {
            var tries = 0
            while !(try Syscalls.tryLockExclusive(directory)) {
                tries += 1
                guard tries < 100 else { throw Errno.tryAgain }
                Syscalls.sleep(milliseconds: 10)
            }
            defer { Syscalls.unlock(directory) }
            guard let current = try? Syscalls.facts(at: directory, name), isOdd(current) else { return }
            try Syscalls.removeEntry(in: directory, name, movingNonEmptyDirectoryTo: name + utf8Bytes(".odd-\(current.inode)"))
        } catch {
            throw .writeFailed(error)
        }
    }

    /// A lock file as the store makes it: regular, the trusted owner's, not
    /// writable by group or others.
    func isSoundLock(_ facts: FileFacts) -> Bool {
        facts.isRegular && facts.owner == trustedOwner && facts.mode & 0o022 == 0
    }
}
