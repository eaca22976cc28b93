// What the state store tells the engine after a failure, so that it can
// decide whether the counting moves to /run (LocalAuth's RuntimeCounting):
// has the state directory's filesystem itself gone read-only, and is this
// process one that no unprivileged user could have set up. The decision is
// the core's; this file only looks.
import LocalAuth

extension FileStateStore {
    /// The privilege is asked only of a filesystem gone read-only, the one
    /// case where it matters: its probe (syslog(2)) is outside the system
    /// calls a sandboxed service may make (polkit 127's agent helper, whose
    /// filter would kill the process for it), and a sandbox's read-only
    /// view of a writable filesystem is no such case.
    public func storageFacts() -> StorageFacts {
        let readOnly = SystemPrivilege.readOnlyFilesystem(holding: directoryPath)
        return StorageFacts(readOnlyFilesystem: readOnly, systemPrivileged: readOnly && SystemPrivilege.isSystemPrivileged())
    }
}

/// Whether this process is the system's: root in the initial user
/// namespace (asked of the kernel, not of files: see
/// `Syscalls.privilegedInInitialUserNamespace`), in the initial pid
/// namespace (a setuid sandbox such as firejail gives its users one of their
/// own, and mounts of its choosing), with a mount namespace the initial user
/// namespace owns (an unprivileged user's mount namespace always belongs to
/// a user namespace of theirs). Any doubt answers no.
public enum SystemPrivilege {
    /// statfs f_type of procfs and of the namespace filesystem (linux/magic.h).
    static let procfsType: Int64 = 0x9fa0
    static let namespaceFilesystemType: Int64 = 0x6e73_6673
    /// The inode numbers Linux gives the initial user and pid namespaces
    /// (PROC_USER_INIT_INO, PROC_PID_INIT_INO; fixed since Linux 3.8).
    static let initialUserNamespace: UInt64 = 0xEFFF_FFFD
    static let initialPIDNamespace: UInt64 = 0xEFFF_FFFC

    public static func isSystemPrivileged() -> Bool {
        guard Syscalls.effectiveUserID() == 0, Syscalls.privilegedInInitialUserNamespace() else { return false }
        // Being privileged in the initial user namespace, this process's
        // mounts (and so /proc) were made by root, not by a user.
        guard let proc = try? Syscalls.open(at: nil, utf8Bytes("/proc"), .directory) else { return false }
        defer { Syscalls.close(proc) }
        guard (try? Syscalls.filesystemType(proc)) == procfsType,
              isNamespace(at: proc, "self/ns/pid", inode: initialPIDNamespace),
              let mounts = try? Syscalls.openNamespace(at: proc, utf8Bytes("self/ns/mnt")) else { return false }
        defer { Syscalls.close(mounts) }
        guard Syscalls.isMountNamespace(mounts), let owner = try? Syscalls.namespaceOwner(mounts) else { return false }
        defer { Syscalls.close(owner) }
        return isNamespace(owner, inode: initialUserNamespace)
    }

    /// Whether the filesystem holding `path` (or, while it is missing, its
    /// nearest existing parent) has itself gone read-only: its superblock
    /// mounted `ro`, or set `emergency_ro` by the kernel after an error
    /// (ext4's errors=remount-ro on recent kernels, where statvfs still
    /// says read-write). One mount's read-only view of a writable
    /// filesystem (a bind, a service's ReadOnlyPaths) is no failure of the
    /// disk, and does not count.
    public static func readOnlyFilesystem(holding path: [UInt8]) -> Bool {
        var candidate = path
        while true {
            if let id = try? Syscalls.mountID(candidate) {
                guard let line = MountTable.line(of: id) else { return false }
                return MountTable.superblockIsReadOnly(line)
            }
            guard let slash = candidate.lastIndex(of: 0x2F), candidate.count > 1 else { return false }
            candidate = slash == 0 ? [0x2F] : Array(candidate[..<slash])
        }
    }

    static func isNamespace(at proc: Int32, _ path: String, inode: UInt64) -> Bool {
        guard let fd = try? Syscalls.openNamespace(at: proc, utf8Bytes(path)) else { return false }
        defer { Syscalls.close(fd) }
        return isNamespace(fd, inode: inode)
    }

    static func isNamespace(_ fd: Int32, inode: UInt64) -> Bool {
        guard (try? Syscalls.filesystemType(fd)) == namespaceFilesystemType, let facts = try? Syscalls.facts(fd) else { return false }
        return facts.inode == inode
    }
}

/// /proc/self/mountinfo, read for one mount's superblock options.
public enum MountTable {
    /// The line of mount `mountID` in /proc/self/mountinfo, read as a
    /// stream up to it: the table as a whole has no size a user cannot
    /// exceed (their FUSE mounts with long names), one line has. Nil when
    /// it cannot be read or the mount is not listed.
    static func line(of mountID: UInt64) -> [UInt8]? {
        guard let fd = try? Syscalls.open(at: nil, utf8Bytes("/proc/self/mountinfo"), .readFile) else { return nil }
        defer { Syscalls.close(fd) }
        return line(startingWith: utf8Bytes(String(mountID) + " ")) { try? Syscalls.readChunk(fd, count: 65536) }
    }

    /// The first line that starts with `prefix` in the text `nextChunk`
    /// hands out (an empty chunk: the end; nil: a read error). A line that
    /// grows past `maxLine` without its newline in sight is skipped whole,
    /// to its newline: no part of it is ever read as a line of its own.
    public static func line(startingWith prefix: [UInt8], _ nextChunk: () -> [UInt8]?) -> [UInt8]? {
        var pending: [UInt8] = []
        var skipping = false
        while let chunk = nextChunk() {
            var rest = chunk[...]
            if chunk.isEmpty {
                return !skipping && pending.starts(with: prefix) ? pending : nil
            }
            while let end = rest.firstIndex(of: 0x0A) {
                if !skipping {
                    pending += rest[..<end]
                    if pending.starts(with: prefix) { return pending }
                }
                pending = []
                skipping = false
                rest = rest[(end + 1)...]
            }
            if !skipping {
                pending += rest
                if pending.count > maxLine {
                    pending = []
                    skipping = true
                }
            }
        }
        return nil
    }

    /// Longer than any line of the state directory's mount can be.
    static let maxLine = 1 << 20

    /// Whether a mount's line (found by `line(of:)`) gives its superblock
    /// (the options after the " - fstype source" separator) `ro` or
    /// `emergency_ro`.
    public static func superblockIsReadOnly(_ line: [UInt8]) -> Bool {
        // Bytes throughout: no String comparison (the Embedded build has no
        // Unicode tables). Empty fields kept: a mount with an empty source
        // has two spaces in a row, and the options must still be found.
        let fields = line.split(separator: 0x20, omittingEmptySubsequences: false)
        guard let separator = fields.firstIndex(where: { $0.elementsEqual([0x2D]) }), fields.count > separator + 3 else { return false }
        return fields[separator + 3].split(separator: 0x2C).contains { option in
            option.elementsEqual(utf8Bytes("ro")) || option.elementsEqual(utf8Bytes("emergency_ro"))
        }
    }
}
