// When the state directory cannot be written for a reason no unprivileged
// user can cause (its filesystem went read-only, its disk fails), attempts
// cannot be counted, and refusing would lock everyone out, the owner
// included, at the moment the administrator most needs to get in. The module
// then takes no fingerprint (nothing could be charged before its verdict)
// and hands the decision to the password line, as the system decided before
// localauth: the password alone, uncounted. Whenever a user could have
// caused the failure, the refusal stands.

/// What the system layer finds, after a store failure, about the state
/// directory's filesystem and this process.
public struct StorageFacts: Equatable, Sendable {
    /// The filesystem holding the state directory is mounted read-only.
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

    /// Whether `failure` suspends counting: a write the filesystem refuses
    /// because it is mounted read-only, or any store call the device fails,
    /// met by a process no unprivileged user could have set up. No space,
    /// no inodes, quotas, odd files, permissions and shortages of memory or
    /// descriptors never do: a user can cause those.
    public static func applies(to failure: StoreFailure, facts: StorageFacts) -> Bool {
        guard facts.systemPrivileged, let errno = errno(of: failure) else { return false }
        switch errno {
        case readOnlyFilesystem: return facts.readOnlyFilesystem
        case deviceError: return true
        default: return false
        }
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
