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

    func replaceOddEntry(directory: Int32, _ name: [UInt8], isOdd: (FileFacts) -> Bool) throws(StoreFailure) {
        try WholeFile.replaceOddEntry(directory: directory, name, isOdd: isOdd)
    }

    /// A lock file as the store makes it: regular, the trusted owner's, not
    /// writable by group or others.
    func isSoundLock(_ facts: FileFacts) -> Bool {
        facts.isRegular && facts.owner == trustedOwner && facts.mode & 0o022 == 0
    }
}
