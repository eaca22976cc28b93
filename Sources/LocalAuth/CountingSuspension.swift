// When the state directory cannot be written because its filesystem has
// gone read-only (mounted so, or set so by the kernel after a disk error,
// as ext4's default errors=remount-ro does), attempts cannot be counted,
// and refusing would lock everyone out, the owner included, at the moment
// the administrator most needs to get in. The module then takes no
// fingerprint (nothing could be charged before its verdict) and hands the
// decision to the password line, as the system decided before localauth:
// the password alone, uncounted. Failures a user can cause (no space, a
// read-only view, a disk error the filesystem shrugged off) keep the
// refusal; storage a user can exhaust under the state filesystem is the
// documented limit (docs/DESIGN.md, R12).

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

public enum CountingSuspension {
    /// EROFS: the filesystem is mounted read-only (Linux's number; a unit
    /// test compares it with the C constant).
    public static let readOnlyFilesystem = Errno(30)
    /// EIO: the device failed.
    public static let deviceError = Errno(5)

    /// Whether `failure` suspends counting: a store call refused because
    /// the filesystem is read-only (EROFS), or failed by the disk (EIO),
    /// while the filesystem itself has gone read-only, met by a process no
    /// unprivileged user could have set up. A disk error the filesystem did
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
        case .directoryUnusable, .fileSizeLimited: return nil
        }
    }
}
