// logind's view of the caller's session, through sd-login: the only code
// that calls sd-login.
import CSystemLibraries
import LocalAuth

/// The caller's logind session, read once for a call: its name (empty
/// without one) and whether logind calls it remote (nil: no logind, no
/// session).
public struct CallerSession {
    public var name: [UInt8]
    public var isRemote: Bool?
}

public enum LogindSession {
    /// The caller's session and its remoteness from one lookup of the
    /// process's cgroup.
    public static func caller() -> CallerSession {
        var session: UnsafeMutablePointer<CChar>? = nil
        guard sd_pid_get_session(0, &session) >= 0, let name = session else { return CallerSession(name: [], isRemote: nil) }
        defer { Syscalls.release(name) }
        let remote = sd_session_is_remote(name)
        return CallerSession(name: Syscalls.bytes(ofCString: name, limit: 64), isRemote: remote < 0 ? nil : remote > 0)
    }

    /// True when logind calls the caller's session remote; nil when there is
    /// no logind or the caller has no session (R1).
    public static func callerIsRemote() -> Bool? {
        var session: UnsafeMutablePointer<CChar>? = nil
        guard sd_pid_get_session(0, &session) >= 0, let name = session else { return nil }
        defer { Syscalls.release(name) }
        let remote = sd_session_is_remote(name)
        return remote < 0 ? nil : remote > 0
    }

    /// The logind session this process belongs to (by its cgroup, which a
    /// process cannot leave for another session's); empty without one.
    public static func callerSession() -> [UInt8] {
        var session: UnsafeMutablePointer<CChar>? = nil
        guard sd_pid_get_session(0, &session) >= 0, let name = session else { return [] }
        defer { Syscalls.release(name) }
        return Syscalls.bytes(ofCString: name, limit: 64)
    }
}
