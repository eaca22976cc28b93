// Writing a small file whole, for the attempt store and the secrets' store
// alike: a temporary file written and synced, renamed over the name, the
// directory synced (a crash leaves the old file or the new one), with
// `RLIMIT_FSIZE` lifted for the write (a caller's `ulimit -f` must not kill
// a root write with SIGXFSZ or cut it short) and an odd entry at either
// name (a directory, a FIFO) repaired under the directory's lock.
import LocalAuth

public enum WholeFile {
    /// fsync (or fdatasync), the store's one durability step: compiled out
    /// only in the benchmark build that measures what the syncs cost
    /// (`make bench`, LOCALAUTH_BENCHMARK_WITHOUT_SYNC).
    public static func syncForDurability(_ fd: Int32, dataOnly: Bool = false) throws(Errno) {
        #if !LOCALAUTH_BENCHMARK_WITHOUT_SYNC
        if dataOnly { try Syscalls.syncData(fd) } else { try Syscalls.sync(fd) }
        #endif
    }

    /// Lifts `RLIMIT_FSIZE` so that a write may reach `end`, where the
    /// caller's limit would stop it; returns the limit to put back after
    /// the write, or nil when none was changed.
    public static func allowWrite(upTo end: Int) throws(StoreFailure) -> (soft: UInt64, hard: UInt64)? {
        let saved = Syscalls.fileSizeLimit()
        guard saved.soft < UInt64(end) else { return nil }
        if !Syscalls.setFileSizeLimit(soft: UInt64.max, hard: UInt64.max) {
            Syscalls.setFileSizeLimit(soft: saved.hard, hard: saved.hard)
        }
        if Syscalls.fileSizeLimit().soft < UInt64(end) {
            Syscalls.setFileSizeLimit(soft: saved.soft, hard: saved.hard)
            throw .fileSizeLimited
        }
        return saved
    }

    public static func restoreLimit(_ saved: (soft: UInt64, hard: UInt64)?) {
        if let saved { Syscalls.setFileSizeLimit(soft: saved.soft, hard: saved.hard) }
    }

    /// Writes `bytes` to `temporary`, fsyncs it, renames it over `name` and
    /// fsyncs the directory, with `RLIMIT_FSIZE` lifted for the write. Odd
    /// entries at either name are replaced first. The caller holds a lock
    /// that keeps every other write off both names.
    public static func write(_ bytes: [UInt8], directory: Int32, to name: [UInt8], through temporary: [UInt8],
                             directoryLocked: Bool = false) throws(StoreFailure) {
        let saved = try allowWrite(upTo: bytes.count)
        defer { restoreLimit(saved) }
        // A leftover temporary file (of a killed write) goes: the caller's
        // lock is held, so no other write uses this name. Only something
        // that is not a file (a directory) needs the repair.
        do throws(Errno) {
            try Syscalls.unlink(in: directory, temporary)
        } catch {
            guard error == .isDirectory || error == .notPermitted else { throw .writeFailed(error) }
            try replaceOddEntry(directory: directory, temporary, locked: directoryLocked) { _ in true }
        }
        do throws(Errno) {
            let fd = try Syscalls.open(at: directory, temporary, .newFile)
            do throws(Errno) {
                try Syscalls.writeAll(fd, bytes)
                try syncForDurability(fd)
            } catch {
                Syscalls.close(fd)
                try? Syscalls.unlink(in: directory, temporary)
                throw error
            }
            Syscalls.close(fd)
            do { try moveIntoPlace(directory: directory, from: temporary, to: name, locked: directoryLocked) } catch {
                try? Syscalls.unlink(in: directory, temporary)
                throw error
            }
            try syncForDurability(directory)
        } catch {
            throw .writeFailed(error)
        }
    }

    /// Renames `source` over `name`; a directory at the name, which cannot
    /// be renamed over, is moved away first.
    public static func moveIntoPlace(directory: Int32, from source: [UInt8], to name: [UInt8], locked: Bool = false) throws(Errno) {
        do {
            try Syscalls.rename(in: directory, from: source, to: name)
        } catch {
            guard error == .isDirectory || error == .notEmpty || error == .exists else { throw error }
            do throws(StoreFailure) {
                try replaceOddEntry(directory: directory, name, locked: locked) { $0.isDirectory }
            } catch {
                if case .writeFailed(let cause) = error { throw cause }
                throw Errno.isDirectory
            }
            try Syscalls.rename(in: directory, from: source, to: name)
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
    public static func replaceOddEntry(directory: Int32, _ name: [UInt8], locked: Bool = false,
                                       isOdd: (FileFacts) -> Bool) throws(StoreFailure) {
        do throws(Errno) {
            var tries = 0
            // A caller that holds the directory's lock already (the secrets'
            // store, through another descriptor of it) is not kept out by it.
            while !locked, !(try Syscalls.tryLockExclusive(directory)) {
                tries += 1
                guard tries < 100 else { throw Errno.tryAgain }
                Syscalls.sleep(milliseconds: 10)
            }
            defer { if !locked { Syscalls.unlock(directory) } }
            guard let current = try? Syscalls.facts(at: directory, name), isOdd(current) else { return }
            try Syscalls.removeEntry(in: directory, name, movingNonEmptyDirectoryTo: name + utf8Bytes(".odd-\(current.inode)"))
        } catch {
            throw .writeFailed(error)
        }
    }
}
