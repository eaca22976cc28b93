// The process on the other end of standard input, when that is a connected
// AF_UNIX socket: polkit 127 and later start their agent helper as root,
// one instance per connection, with the agent's connection as its standard
// input. What the module may believe about the agent (its real uid, its
// logind session, its program) is read by pid, and a pid names the agent
// only while the agent lives: so the process is held by a pidfd (from the
// kernel, SO_PEERPIDFD), and every fact read by pid counts only if that
// pidfd still shows it running after the last read.
import CLibc
import LocalAuth

/// The peer process of the socket on standard input, held by a pidfd.
public struct SocketPeer: ~Copyable {
    public let pid: Int32
    let pidfd: Int32

    /// AF_UNIX (sys/socket.h; Swift cannot import the macro's enum here).
    static let unixDomain: Int32 = 1

    /// The agent's process, or nil when standard input is no connected
    /// AF_UNIX socket or its peer cannot be held. SO_PEERPIDFD (Linux 6.5
    /// and later) gives the connecting process itself, while it lives.
    /// Nothing else is tried: the pid the kernel recorded at connect time
    /// may name another process by the time it is opened (a peer that
    /// connected and exited makes SO_PEERPIDFD fail on purpose), and polkit
    /// 127 and later run on kernels that have the option. No pidfd: out of
    /// scope, the password line decides.
    public static func onStandardInput() -> SocketPeer? {
        guard la_socket_domain(0) == unixDomain else { return nil }
        var pid: Int32 = 0
        var effectiveUID: UInt32 = 0
        guard la_peer_credentials(0, &pid, &effectiveUID) == 0, pid > 0 else { return nil }
        let pidfd = la_peer_pidfd(0)
        guard pidfd >= 0 else { return nil }
        return SocketPeer(pid: pid, pidfd: pidfd)
    }

    /// The peer's real uid (the first of /proc/PID/status's `Uid:` fields):
    /// pkexec's own text agent is setuid root, so the effective uid the
    /// socket recorded would say root for a person's agent.
    public func realUID() -> UInt32? {
        guard let fd = try? Syscalls.open(at: nil, Array("/proc/\(pid)/status".utf8), flags: O_RDONLY) else { return nil }
        defer { Syscalls.close(fd) }
        guard let text = try? Syscalls.readAll(fd, limit: 16384) else { return nil }
        for line in splitBytes(text[...], on: 0x0A) where line.starts(with: literalBytes("Uid:")) {
            let fields = splitBytes(line.dropFirst(4), on: 0x09).filter { !$0.isEmpty }
            guard let first = fields.first, let uid = parseDecimal(trimmedSpaces(first), limit: Int(UInt32.max) - 1) else { return nil }
            return UInt32(uid)
        }
        return nil
    }

    /// The peer's executable, as /proc/PID/exe names it; empty when unknown.
    public func program() -> [UInt8] {
        Syscalls.programLink(Array("/proc/\(pid)/exe".utf8))
    }

    /// Whether the process held still runs (not exited, not a zombie), so
    /// that what was read by its pid was read of it. Call after the last
    /// read.
    public func stillAlive() -> Bool {
        la_pidfd_running(pidfd) != 0
    }

    deinit {
        Syscalls.close(pidfd)
    }
}
