// When the state directory cannot be written because its filesystem has
// gone read-only (mounted so, or set so by the kernel after a disk error,
// as ext4's default errors=remount-ro does), the counting goes on in a
// root-only tmpfs, /run/localauth: the back-off and the lockout hold as on
// a writable disk, and no one is locked out. The records there start from
// what the read-only disk still holds, raised to one short of each limit
// (a restart loses /run), and are folded back into it, the
// larger count winning, once it is writable again. Failures a user can
// cause (no space, a read-only view, a disk error the filesystem shrugged
// off) keep the refusal, and so does a /run that cannot be written: an
// attempt that cannot be counted anywhere is never checked.

/// What the system layer finds, after a store failure, about the state
/// directory's filesystem and this process.
public struct StorageFacts: Equatable, Sendable {
    /// The filesystem holding the state directory has itself gone
    /// read-only (its superblock: mounted `ro`, or `emergency_ro` after an
    /// error); one mount's read-only view of it does not count.
    public var readOnlyFilesystem: Bool
    /// This process holds root's privilege in the initial user namespace,
    /// runs in the initial pid namespace, and its mount namespace belongs to
    /// the initial user namespace: no unprivileged user made the mounts it
    /// sees (a user's own namespaces, a setuid sandbox's pid namespace, and
    /// a setuid program that lost its privilege all fail this).
    public var systemPrivileged: Bool

    public init(readOnlyFilesystem: Bool, systemPrivileged: Bool) {
        self.readOnlyFilesystem = readOnlyFilesystem
        self.systemPrivileged = systemPrivileged
    }

    /// Nothing known: never a suspension.
    public static let unknown = StorageFacts(readOnlyFilesystem: false, systemPrivileged: false)
}

public enum RuntimeCounting {
    /// Where the counting goes on while the state directory is read-only:
    /// a directory of the root-only tmpfs /run (made 0700 at boot by the
    /// package, and by the store when missing).
    public static let directory: StaticString = "/run/localauth"

    /// EROFS: the filesystem is mounted read-only (Linux's number; a unit
    /// test compares it with the C constant).
    public static let readOnlyFilesystem = Errno(30)
    /// EIO: the device failed.
    public static let deviceError = Errno(5)

    /// Whether `failure` moves the counting to /run: a store call refused
    /// because the filesystem is read-only (EROFS), or failed by the disk
    /// (EIO), while the filesystem itself has gone read-only, met by a
    /// process no unprivileged user could have set up (a user's own
    /// namespaces could show a read-only disk and a /run of their making). A disk error the filesystem did
    /// not answer by going read-only, no space, no inodes, quotas, odd
    /// files, permissions and shortages never do: a user can cause those.
    public static func applies(to failure: StoreFailure, facts: StorageFacts) -> Bool {
        guard facts.systemPrivileged, facts.readOnlyFilesystem, let errno = errno(of: failure) else { return false }
        return isMediumFailure(errno)
    }

    /// The errnos of a medium that refuses or fails the write (EROFS, EIO),
    /// as opposed to the state directory or the process.
    public static func isMediumFailure(_ errno: Errno) -> Bool {
        errno == readOnlyFilesystem || errno == deviceError
    }

    /// The errno a store failure carries, if any.
    static func errno(of failure: StoreFailure) -> Errno? {
        switch failure {
        case .lockFailed(let errno), .writeFailed(let errno), .readFailed(let errno): return errno
        case .directoryUnusable(.cannotOpen(let errno)): return errno
        case .directoryUnusable, .fileSizeLimited, .runtimeUnusable, .lockHeld: return nil
        }
    }

    /// The record counting in /run starts from for a name it holds none
    /// for: the disk's as it still reads (a fresh one where the disk holds
    /// none), with F at least one short of the lockout and P one short of
    /// the first wait. /run is lost at a restart, and the disk cannot say
    /// what /run held before one: a user who can make the disk read-only
    /// and restart the machine would otherwise get every guess before the
    /// first wait again after each restart. From one short, each restart
    /// gives one password guess and one finger, the first wrong one starts
    /// the wait, and the owner's first match or right password (counted
    /// here as anywhere) puts the counts back to zero.
    public static func seed(_ disk: StateRecord, options: Options) -> StateRecord {
        var seed = disk
        seed.fingerprintFailures = max(seed.fingerprintFailures, options.lockout - 1)
        seed.passcodeFailures = max(seed.passcodeFailures, options.firstBackoffThreshold - 1)
        return seed
    }

    /// The record once a record kept in /run is folded back into the
    /// disk's: the larger of the two wins, so that nothing counted in
    /// either is lost. F and P are the larger; the wait is the one with
    /// more still to run at `moment`; each success (password, match,
    /// unlock) is the later one; the recent failures are both lists'; the
    /// next attempt number the larger. The disk's identity (uid, name,
    /// creation) stays. With no record on disk (absent or damaged), the
    /// one kept in /run is taken whole: it began as the disk's, or as R12's
    /// replacement of a damaged one.
    public static func fold(disk: StateRecord?, runtime: StateRecord, options: Options, backoffApplies: Bool,
                            moment: Moment) -> StateRecord {
        guard var merged = disk else { return runtime }
        let rules = RecordRules(options: options, backoffApplies: backoffApplies)
        merged.fingerprintFailures = max(merged.fingerprintFailures, runtime.fingerprintFailures)
        merged.passcodeFailures = max(merged.passcodeFailures, runtime.passcodeFailures)
        if rules.remainingBackoff(runtime, moment: moment) > rules.remainingBackoff(merged, moment: moment) {
            merged.backoffRemainingMilliseconds = runtime.backoffRemainingMilliseconds
            merged.backoffAnchorBootNanoseconds = runtime.backoffAnchorBootNanoseconds
            merged.backoffBootID = runtime.backoffBootID
        }
        if isLater((runtime.lastPasscodeSuccessBootID, runtime.lastPasscodeSuccessBootNanoseconds, runtime.lastPasscodeSuccessWallSeconds),
                   than: (merged.lastPasscodeSuccessBootID, merged.lastPasscodeSuccessBootNanoseconds, merged.lastPasscodeSuccessWallSeconds)) {
            merged.lastPasscodeSuccessWallSeconds = runtime.lastPasscodeSuccessWallSeconds
            merged.lastPasscodeSuccessBootID = runtime.lastPasscodeSuccessBootID
            merged.lastPasscodeSuccessBootNanoseconds = runtime.lastPasscodeSuccessBootNanoseconds
            merged.lastPasscodeSuccessDigest = runtime.lastPasscodeSuccessDigest
        }
        if isLater((runtime.lastFingerprintSuccessBootID, runtime.lastFingerprintSuccessBootNanoseconds,
                    runtime.lastFingerprintSuccessWallSeconds),
                   than: (merged.lastFingerprintSuccessBootID, merged.lastFingerprintSuccessBootNanoseconds,
                          merged.lastFingerprintSuccessWallSeconds)) {
            merged.lastFingerprintSuccessWallSeconds = runtime.lastFingerprintSuccessWallSeconds
            merged.lastFingerprintSuccessBootID = runtime.lastFingerprintSuccessBootID
            merged.lastFingerprintSuccessBootNanoseconds = runtime.lastFingerprintSuccessBootNanoseconds
        }
        if isLater((runtime.lastUnlockBootID, runtime.lastUnlockBootNanoseconds, 0),
                   than: (merged.lastUnlockBootID, merged.lastUnlockBootNanoseconds, 0), now: moment.bootID) {
            merged.lastUnlockBootNanoseconds = runtime.lastUnlockBootNanoseconds
            merged.lastUnlockBootID = runtime.lastUnlockBootID
            merged.lastUnlockMethod = runtime.lastUnlockMethod
            merged.lastUnlockSession = runtime.lastUnlockSession
        }
        var failures = merged.recentFailures
        for entry in runtime.recentFailures where !failures.contains(where: { $0.sequence == entry.sequence }) {
            failures.append(entry)
        }
        failures.sort { ($0.wallSeconds, $0.sequence) < ($1.wallSeconds, $1.sequence) }
        merged.recentFailures = Array(failures.suffix(RecordFormat.maxFailures))
        merged.nextSequence = max(merged.nextSequence, runtime.nextSequence)
        return merged
    }

    /// Whether the event `a` (boot id, boot-clock time, wall time; a zero
    /// boot id: never) came after `b`: on the boot clock within one boot,
    /// else by the wall clock, or, with no wall time, the one in the boot
    /// `now` (the current one).
    static func isLater(_ a: ([UInt8], Int64, Int64), than b: ([UInt8], Int64, Int64), now: [UInt8] = []) -> Bool {
        let zero = RecordFormat.zeroID
        if a.0 == zero { return false }
        if b.0 == zero { return true }
        if a.0 == b.0 { return a.1 > b.1 }
        if a.2 != 0 || b.2 != 0 { return a.2 > b.2 }
        return a.0 == now
    }
}
