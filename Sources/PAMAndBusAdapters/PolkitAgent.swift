// polkit 127 and later: the agent that polkit's socket-activated helper
// serves. The helper runs as root, one instance per connection to
// /run/polkit/agent-helper.socket, with the agent's connection as its
// standard input, no PAM_TTY and no PAM_RHOST, in a cgroup of its own (so
// it is in no logind session). The agent on the other end is the person's
// dialog (GNOME Shell, Plasma's, pkttyagent): its real uid and its logind
// session say who asks and from where, as the caller's own would under the
// setuid helper of polkit 126 and earlier.
import LocalAuth
import LibcSystem

/// The agent on the other end of polkit's helper's standard input, as read
/// while it was alive.
public struct PolkitAgent {
    /// Its real uid.
    public var uid: UInt32
    /// Its logind session (empty name and nil remoteness: none).
    public var session: CallerSession
    /// Its executable (what the dialog agents' table matches).
    public var program: [UInt8]

    /// The agent, or nil when standard input is no socket whose peer the
    /// kernel hands over as a pidfd, or the peer was gone before everything
    /// about it was read (its pid may then name another process). One
    /// package serves systems with and without `sd_pidfd_get_session`
    /// (systemd 253): the session is looked up by pid and counts because
    /// the pidfd shows the same process running after the lookup.
    public static func onStandardInput() -> PolkitAgent? {
        guard let peer = SocketPeer.onStandardInput(), let uid = peer.realUID() else { return nil }
        let session = LogindSession.of(pid: peer.pid)
        let program = peer.program()
        guard peer.stillAlive() else { return nil }
        return PolkitAgent(uid: uid, session: session, program: program)
    }
}
