// System calls only the setuid helper makes: its start as root (limits,
// signals, descriptors, environment, session) and the system log.
import CLibc
import LocalAuth
import LibcSystem

// MARK: - The helper's start as root

extension Syscalls {
    /// Makes every uid and gid root and drops supplementary groups; true only
    /// when the process then really is root (a nosuid mount, no_new_privs or
    /// a container can leave the setuid bit without effect).
    public static func becomeRoot() -> Bool {
        guard la_setresuid(0, 0, 0) == 0, la_setresgid(0, 0, 0) == 0, setgroups(0, nil) == 0 else { return false }
        var real: UInt32 = 1, effective: UInt32 = 1, saved: UInt32 = 1
        var realGroup: UInt32 = 1, effectiveGroup: UInt32 = 1, savedGroup: UInt32 = 1
        guard la_getresuid(&real, &effective, &saved) == 0, la_getresgid(&realGroup, &effectiveGroup, &savedGroup) == 0 else {
            return false
        }
        return real == 0 && effective == 0 && saved == 0 && realGroup == 0 && effectiveGroup == 0 && savedGroup == 0
    }

    /// Replaces whatever limits the caller set: no core dumps (a passcode
    /// may be in memory), enough descriptors, no file-size or CPU limit,
    /// normal priority.
    public static func resetLimits() {
        let unlimited = rlim_t.max  // RLIM_INFINITY
        for resource in 0..<Int32(16) {  // RLIMIT_NLIMITS on Linux
            var limit = rlimit(rlim_cur: unlimited, rlim_max: unlimited)
            switch resource {
            case Int32(RLIMIT_CORE.rawValue), 13, 14:  // RLIMIT_NICE, RLIMIT_RTPRIO
                limit = rlimit(rlim_cur: 0, rlim_max: 0)
            case Int32(RLIMIT_NOFILE.rawValue):
                limit = rlimit(rlim_cur: 1024, rlim_max: 1024)
            case Int32(RLIMIT_STACK.rawValue):
                limit = rlimit(rlim_cur: 8 << 20, rlim_max: unlimited)
            default: break
            }
            let kind = __rlimit_resource_t(UInt32(resource))
            if setrlimit(kind, &limit) != 0 {
                // Without CAP_SYS_RESOURCE a lowered hard limit stays: take
                // as much as it allows (a write it then forbids fails, and
                // an attempt whose charge cannot be written is refused).
                var current = rlimit()
                guard getrlimit(kind, &current) == 0 else { continue }
                limit.rlim_cur = min(limit.rlim_cur, current.rlim_max)
                limit.rlim_max = min(limit.rlim_max, current.rlim_max)
                _ = setrlimit(kind, &limit)
            }
        }
        _ = setpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0, 0)
        _ = la_normal_scheduling()
    }

    /// Every signal back to its default action, none blocked; SIGPIPE and
    /// SIGXFSZ ignored (a closed socket or a file-size limit is an error to
    /// handle, not a death half-way through a write).
    public static func resetSignals() {
        for signal in 1..<Int32(65) where signal != SIGKILL && signal != SIGSTOP {
            _ = la_default_signal(signal)
        }
        _ = la_ignore_signal(SIGPIPE)
        _ = la_ignore_signal(SIGXFSZ)
        // Job control cannot stop a program that holds the reader.
        _ = la_ignore_signal(SIGTSTP)
        _ = la_ignore_signal(SIGTTIN)
        _ = la_ignore_signal(SIGTTOU)
        var none = sigset_t()
        sigemptyset(&none)
        _ = sigprocmask(SIG_SETMASK, &none, nil)
    }

    public static func setFileCreationMask(_ mask: UInt32) {
        _ = umask(mode_t(mask))
    }

    /// True when `fd` is an open socket.
    public static func isSocket(_ fd: Int32) -> Bool {
        var facts = stat()
        return fstat(fd, &facts) == 0 && la_s_issock(facts.st_mode) != 0
    }

    /// True when `fd` is open.
    public static func isOpen(_ fd: Int32) -> Bool {
        la_fd_flags(fd) >= 0
    }

    /// Closes every descriptor from `first` on, however high.
    public static func closeDescriptors(from first: Int32) {
        if la_close_range(UInt32(first)) == 0 { return }
        // Without close_range: every descriptor the limit allowed the caller.
        var limit = rlimit()
        let highest = getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit) == 0 ? min(limit.rlim_max, 1 << 20) : 1 << 20
        var fd = first
        while rlim_t(fd) < highest {
            _ = CLibc.close(fd)
            fd += 1
        }
    }

    /// Points `fd` at /dev/null.
    public static func pointAtNull(_ fd: Int32) {
        let null = la_openat(AT_FDCWD, "/dev/null", O_RDWR | O_CLOEXEC, 0)
        guard null >= 0 else { return }
        if null != fd {
            _ = dup2(null, fd)
            _ = CLibc.close(null)
        } else {
            _ = la_set_fd_flags(fd, 0)
        }
    }

    /// Empties the environment and sets a fixed PATH.
    public static func clearEnvironment() {
        _ = clearenv()
        _ = setenv("PATH", "/usr/sbin:/usr/bin:/sbin:/bin", 1)
    }

    /// Leaves the caller's session and process group: the terminal's
    /// signals (Ctrl-C, hang-up) no longer reach this process. False when
    /// it cannot (a process-group leader stays in its session).
    public static func leaveSession() -> Bool {
        setsid() >= 0
    }

    public static func changeToRootDirectory() {
        _ = chdir("/")
    }

    /// The account's password hash as the shadow file keeps it; nil where
    /// there is no shadow entry (a directory's account) or none readable.
    /// What the secrets' marker is made from (never logged or sent).
    public static func accountPasswordHash(_ name: [UInt8]) -> [UInt8]? {
        var entry = spwd()
        var result: UnsafeMutablePointer<spwd>? = nil
        var buffer = [CChar](repeating: 0, count: 4096)
        defer { buffer.withUnsafeMutableBytes { Syscalls.wipe($0.baseAddress!.assumingMemoryBound(to: UInt8.self), count: $0.count) } }
        let status = withCString(name) { pointer in getspnam_r(pointer, &entry, &buffer, buffer.count, &result) }
        guard status == 0, result != nil, let hash = entry.sp_pwdp else { return nil }
        let bytes = Syscalls.bytes(ofCString: hash, limit: 1024)
        return bytes.isEmpty ? nil : bytes
    }

    /// SIGALRM (default action: the process ends) after `seconds`.
    public static func setAlarm(seconds: UInt32) {
        _ = alarm(seconds)
    }

    /// The end of every run: every descriptor closed (so that it holds
    /// nothing while the caller may signal it), the name that marks an
    /// ended helper, and the caller's uid and gid (no groups) taken back. A
    /// helper its caller never reaps is then one of the caller's own
    /// processes, counted by the caller's process limit like any other,
    /// not root's. `endAtDeadline` makes SIGALRM (the backstop deadline)
    /// end the same way.
    public static func returnToCaller() { la_end_as_caller() }

    public static func endAtDeadline(asCaller uid: UInt32, gid: UInt32) { _ = la_end_as_caller_at_alarm(uid, gid) }

    /// Writes a line to standard error, for a person who ran a program by hand.
    public static func writeError(_ text: String) {
        var bytes = utf8Bytes(text)
        bytes.append(0x0A)
        _ = try? writeAll(2, bytes)
    }
}

// MARK: - The system log (the helper)
extension Syscalls {
    /// Names this program in later `systemLog` lines (facility authpriv).
    public static func openSystemLog(_ identity: StaticString) {
        la_openlog(UnsafeRawPointer(identity.utf8Start).assumingMemoryBound(to: CChar.self))
    }

    public static func systemLog(_ level: LogLevel, _ message: String) {
        withCString(utf8Bytes(message)) { la_syslog(syslogPriority(level), $0) }
    }
}
