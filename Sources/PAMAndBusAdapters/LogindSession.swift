// logind's view of the caller's session, through sd-login: the only code
// that calls sd-login.
import CPAMAndBus
import LocalAuth
import LibcSystem

/// The caller's logind session, read once for a call: its name (empty
/// without one) and whether logind calls it remote (nil: no logind, no
/// session); without a session, the uid whose user manager the process runs
/// in, if it does (the seat rules may then take the account's own session:
/// BiometryRules.userManagerStandIn).
public struct CallerSession: Sendable {
    public var name: [UInt8]
    public var isRemote: Bool?
    public var userManagerOwner: UInt32? = nil

    /// No session.
    public static let none = CallerSession(name: [], isRemote: nil)
}

public enum LogindSession {
    /// The caller's session and its remoteness from one lookup of the
    /// process's cgroup. Its user manager is not read here: the seat rules
    /// read it where they need it (LogindSeat), for callers in no session.
    public static func caller() -> CallerSession {
        withSession(of: 0, named) ?? .none
    }

    /// The session of process `pid` and its remoteness, from one lookup of
    /// that process's cgroup; without a session, the uid of the user
    /// manager it runs in, read now (an agent's facts are all read before
    /// its pidfd is checked once more).
    public static func of(pid: Int32) -> CallerSession {
        withSession(of: pid, named) ?? CallerSession(name: [], isRemote: nil, userManagerOwner: userManagerOwner(of: pid))
    }

    /// The session `name` and whether logind calls it remote.
    private static func named(_ name: UnsafeMutablePointer<CChar>) -> CallerSession {
        let remote = sd_session_is_remote(name)
        return CallerSession(name: Syscalls.bytes(ofCString: name, limit: 64), isRemote: remote < 0 ? nil : remote > 0)
    }

    /// The uid whose user manager (user@UID.service) process `pid` (0: this
    /// one) runs in, by its cgroup: the uid is the slice's above the
    /// manager, which root makes and no process of the user can leave for
    /// another uid's; nil when it runs in no user manager.
    public static func userManagerOwner(of pid: Int32) -> UInt32? {
        var unit: UnsafeMutablePointer<CChar>? = nil
        guard sd_pid_get_user_unit(pid, &unit) >= 0, let unit else { return nil }
        Syscalls.release(unit)
        var owner = uid_t(0)
        return sd_pid_get_owner_uid(pid, &owner) >= 0 ? UInt32(owner) : nil
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
