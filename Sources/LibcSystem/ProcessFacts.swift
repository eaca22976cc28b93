// The process and its place: users by uid, pipes, scheduling, and what the
// process is and where its state lies (for the command-line tool, the
// helper and the app library, and for deciding whether a store failure is
// one no unprivileged user caused).
import CLibc
import LocalAuth

extension Syscalls {
    /// The name of the user with `uid`, nil when there is none.
    public static func userName(uid: UInt32) -> [UInt8]? {
        var entry = passwd()
        var result: UnsafeMutablePointer<passwd>? = nil
        var scratch = [CChar](repeating: 0, count: 16384)
        let status = scratch.withUnsafeMutableBufferPointer { getpwuid_r(uid, &entry, $0.baseAddress!, $0.count, &result) }
        guard status == 0, let found = result, let name = found.pointee.pw_name else { return nil }
        return bytes(ofCString: name)
    }

    /// A variable of this process's environment (nil when unset). For the
    /// command-line tool's defaults only: nothing that decides access reads
    /// the environment, and the module and the helper never call this.
    public static func environmentValue(_ name: StaticString) -> [UInt8]? {
        guard let value = getenv(UnsafeRawPointer(name.utf8Start).assumingMemoryBound(to: CChar.self)) else { return nil }
        return bytes(ofCString: value)
    }

    /// Makes writes (and reads) on `fd` return at once instead of waiting.
    public static func setNonBlocking(_ fd: Int32) {
        let flags = la_fcntl_getfl(fd)
        if flags >= 0 { _ = la_fcntl_setfl(fd, flags | O_NONBLOCK) }
    }

    /// Runs `body` with this thread at the lowest real-time priority where
    /// the process may (root), so that no ordinary process — the bus daemon
    /// that the first of two sends wakes, or a busy machine's load — takes
    /// the processor between two sends that must leave close together.
    /// `body` must be short and never wait. The former scheduling is
    /// restored before returning; without the privilege `body` simply runs.
    public static func withUrgentScheduling<R>(_ body: () -> R) -> R {
        var former = sched_param()
        let policy = la_urgent_scheduling(&former)
        let result = body()
        la_restore_scheduling(policy, &former)
        return result
    }

    /// A pipe (read end, write end), both close-on-exec.
    public static func pipe() -> (read: Int32, write: Int32)? {
        var fds: [Int32] = [-1, -1]
        guard fds.withUnsafeMutableBufferPointer({ la_pipe_cloexec($0.baseAddress!) }) == 0 else { return nil }
        return (fds[0], fds[1])
    }

    /// One byte from `fd`; nil at end of input or on an error other than EINTR.
    public static func readByte(_ fd: Int32) -> UInt8? {
        var byte: UInt8 = 0
        return retryingInterrupted { CLibc.read(fd, &byte, 1) } == 1 ? byte : nil
    }

    /// Flushes stdio and ends the process (the command-line tool and the helper).
    public static func exitProcess(_ code: Int32) -> Never {
        exit(code)
    }

    // MARK: - What the process is, where its state lies

    /// The mount id of `path` (statx STATX_MNT_ID): the first field of its
    /// line in /proc/self/mountinfo.
    public static func mountID(_ path: [UInt8]) throws(Errno) -> UInt64 {
        var id: UInt64 = 0
        let result = withCString(path) { pointer in withUnsafeMutablePointer(to: &id) { la_mount_id(pointer, $0) } }
        if result != 0 { throw Errno.current }
        return id
    }

    /// Whether `fd` names a mount namespace (ioctl NS_GET_NSTYPE).
    public static func isMountNamespace(_ fd: Int32) -> Bool {
        la_is_mount_namespace(fd) != 0
    }

    /// The filesystem type (statfs f_type) of an open file.
    public static func filesystemType(_ fd: Int32) throws(Errno) -> Int64 {
        let type = la_filesystem_type(fd)
        if type < 0 { throw Errno.current }
        return type
    }

    /// Opens a namespace file of /proc (`self/ns/mnt`): its last name is a
    /// link the kernel resolves itself, so links are followed here.
    public static func openNamespace(at proc: Int32, _ path: [UInt8]) throws(Errno) -> Int32 {
        try open(at: proc, path, flags: O_RDONLY, followLinks: true)
    }

    /// A descriptor of the user namespace owning the namespace `fd` names
    /// (ioctl NS_GET_USERNS); the caller closes it.
    public static func namespaceOwner(_ fd: Int32) throws(Errno) -> Int32 {
        let owner = la_namespace_owner(fd)
        if owner < 0 { throw Errno.current }
        return owner
    }

    /// Whether the kernel grants this process a privilege it checks in the
    /// initial user namespace only (reading the kernel log's unread size,
    /// which changes nothing). No process in another user namespace has it,
    /// and no file a user can mount changes the answer.
    public static func privilegedInInitialUserNamespace() -> Bool {
        la_kernel_log_size_unread() >= 0
    }

    /// The current working directory (the command-line tool only).
    public static func currentDirectory() -> [UInt8]? {
        var buffer = [CChar](repeating: 0, count: 4096)
        return buffer.withUnsafeMutableBufferPointer { pointer -> [UInt8]? in
            guard getcwd(pointer.baseAddress!, pointer.count) != nil else { return nil }
            return bytes(ofCString: pointer.baseAddress!, limit: 4096)
        }
    }
}

extension Syscalls {
    /// The syslog priority of a log level (for syslog and pam_syslog alike).
    public static func syslogPriority(_ level: LogLevel) -> Int32 {
        switch level {
        case .debug: return LOG_DEBUG
        case .notice: return LOG_NOTICE
        case .warning: return LOG_WARNING
        case .error: return LOG_ERR
        }
    }

    /// How many processes of `uid` have exited unreaped under the command
    /// name `command`, counting up to `limit`: the helpers a caller left
    /// unreaped (each takes the ended helper's name and its caller's uid
    /// as it ends). Only processes `uid` owns are read; whatever cannot be
    /// read is not counted.
    public static func unreapedProcesses(of uid: UInt32, named command: [UInt8], limit: Int) -> Int {
        guard let proc = try? open(at: nil, literalBytes("/proc"), flags: O_RDONLY | O_DIRECTORY) else { return 0 }
        guard let stream = fdopendir(proc) else {
            close(proc)
            return 0
        }
        defer { closedir(stream) }
        var count = 0
        while count < limit, let entry = readdir(stream) {
            let name = entryName(entry)
            guard !name.isEmpty, name.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
                  let facts = try? facts(at: proc, name), facts.owner == uid,
                  let stat = readRegularFile(at: proc, name + literalBytes("/stat"), limit: 4096),
                  HelperBounds.isUnreaped(stat: stat, command: command) else { continue }
            count += 1
        }
        return count
    }
}
