// logind's view of the caller's session, through sd-login: the only code
// that calls sd-login.
import CPAMAndBus
import LocalAuth
import LibcSystem

/// The caller's logind session, read once for a call: its name (empty
/// without one) and whether logind calls it remote (nil: no logind, no
/// session).
public struct CallerSession: Sendable {
    public var name: [UInt8]
    public var isRemote: Bool?

    /// No session.
    public static let none = CallerSession(name: [], isRemote: nil)
}

public enum LogindSession {
    /// The caller's session and its remoteness from one lookup of the
    /// process's cgroup.
    public static func caller() -> CallerSession {
        of(pid: 0)
    }

    /// The session of process `pid` (0: this one) and its remoteness, from
    /// one lookup of that process's cgroup.
    public static func of(pid: Int32) -> CallerSession {
        withSession(of: pid) { name in
            let remote = sd_session_is_remote(name)
            return CallerSession(name: Syscalls.bytes(ofCString: name, limit: 64), isRemote: remote < 0 ? nil : remote > 0)
        } ?? .none
    }

    /// True when logind calls the caller's session remote; nil when there is
    /// no logind or the caller has no session (R1).
    public static func callerIsRemote() -> Bool? { caller().isRemote }

    /// The logind session this process belongs to (by its cgroup, which a
    /// process cannot leave for another session's); empty without one.
    public static func callerSession() -> [UInt8] {
        withSession(of: 0) { Syscalls.bytes(ofCString: $0, limit: 64) } ?? []
    }

    /// Runs `body` on the name of the session of `pid` (0: this process);
    /// nil without one.
    private static func withSession<Result>(of pid: Int32, _ body: (UnsafeMutablePointer<CChar>) -> Result) -> Result? {
        var session: UnsafeMutablePointer<CChar>? = nil
        guard sd_pid_get_session(pid, &session) >= 0, let name = session else { return nil }
        defer { Syscalls.release(name) }
        return body(name)
    }
}
