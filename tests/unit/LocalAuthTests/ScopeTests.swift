import XCTest
import LocalAuth

/// R1: the module acts only for the target user, asking locally, in a
/// covered service; R14: the unknown-user look-alike only where a known user
/// would be in scope.
final class ScopeTests: XCTestCase {
    func facts(service: String = "sudo", caller: UInt32 = 1000, target: UInt32? = 1000, name: String = "alice",
               ruser: String = "", rhost: String = "", hostName: String = "workstation", remote: Bool? = nil,
               agent: UInt32? = nil) -> ScopeFacts {
        ScopeFacts(service: bytes(service), callerUID: caller, targetUID: target, targetName: bytes(name), requestingUser: bytes(ruser),
                   remoteHost: bytes(rhost), localHostName: bytes(hostName), sessionIsRemote: remote, polkitAgentUID: agent)
    }

    func decide(_ facts: ScopeFacts, _ options: Options = Options()) -> ScopeDecision { Scope.decide(facts, options: options) }

    func testDefaultServicesAreCovered() {
        for service in ["sudo", "su", "login", "swaylock", "i3lock", "xscreensaver", "hyprlock"] {
            XCTAssertEqual(decide(facts(service: service)), .inScope, service)
        }
    }

    /// The helper's widening: a row per (apps listed, service, preflight)
    /// and whether the requested service is then in scope.
    func testTheHelpersServicesFollowTheAppsSwitch() {
        let rows: [(apps: Bool, service: String, preflight: Bool, inScope: Bool)] = [
            (true, "localauth-test", false, true),
            (false, "localauth-test", false, false),   // turning apps off turns off apps that name the test service
            (false, "localauth-test", true, true),     // a preflight never prompts
            (true, "localauth-app", false, true),
            (false, "localauth-app", false, false),
            (false, "localauth-app", true, false),     // apps' canEvaluatePolicy follows the list
            (false, "sshd", true, true),
            (false, "sshd", false, false),
            (true, "i3lock", false, true),             // listed by default
        ]
        for row in rows {
            var configured = Options()
            if !row.apps { configured.services.removeAll { $0 == bytes("localauth-app") } }
            XCTAssertEqual(configured.covers(service: bytes("localauth-app")), row.apps)
            let options = Scope.helperOptions(configured, service: bytes(row.service), preflight: row.preflight)
            XCTAssertEqual(decide(facts(service: row.service), options) == .inScope, row.inScope, "\(row)")
        }
    }

    /// polkit: the setuid helper (up to polkit 126) runs with the person's
    /// real uid, in scope for their own account; a root caller of polkit-1
    /// (polkit 127's helper, root for any client of its socket) stands for
    /// nobody in particular, whatever name and PAM_RUSER it sets.
    func testPolkitsRootHelperIsOutOfScope() {
        XCTAssertEqual(decide(facts(service: "polkit-1")), .inScope)
        XCTAssertEqual(decide(facts(service: "polkit-1", caller: 1000, target: 1001, name: "bob")), .outOfScope(.requester))
        XCTAssertEqual(decide(facts(service: "polkit-1", caller: 0, target: 1000, ruser: "alice")), .outOfScope(.requester))
        XCTAssertEqual(decide(facts(service: "polkit-1", caller: 0, target: nil, name: "nosuch")), .outOfScope(.requester))
        XCTAssertEqual(decide(facts(service: "login", caller: 0, target: 1000)), .inScope)
    }

    /// polkit 127 and later: the root helper stands for the agent on its
    /// socket, and only when that agent's real uid is the account's; its
    /// session's remoteness is the caller's. A row per (agent uid, target,
    /// PAM_RUSER, the agent's session remote) and the decision.
    func testPolkitsSocketHelperStandsForAnAgentOfTheAccount() {
        let rows: [(agent: UInt32?, target: UInt32?, ruser: String, remote: Bool?, decision: ScopeDecision)] = [
            (1000, 1000, "alice", false, .inScope),            // the person at this seat, for their own account
            (1000, 1000, "alice", nil, .inScope),              // no logind: the seat rules do not apply, as elsewhere
            (1000, 1000, "", false, .inScope),
            (1000, 1000, "alice", true, .outOfScope(.remote)), // an agent in an ssh session (pkttyagent over ssh)
            (1001, 1000, "alice", false, .outOfScope(.requester)),  // bob's agent asking for alice's account
            (nil, 1000, "alice", false, .outOfScope(.requester)),   // the agent could not be told
            (0, 1000, "alice", false, .outOfScope(.requester)),     // a root agent stands for nobody in particular
            (0, 0, "root", false, .outOfScope(.requester)),
            (1000, nil, "nosuch", false, .outOfScope(.requester)),  // no such account: as any other refusal (R14)
            (1000, 1000, "bob", false, .outOfScope(.requester)),    // PAM_RUSER naming someone else
        ]
        for row in rows {
            let asked = facts(service: "polkit-1", caller: 0, target: row.target, name: row.target == nil ? "nosuch" : "alice",
                              ruser: row.ruser, remote: row.remote, agent: row.agent)
            XCTAssertEqual(decide(asked), row.decision, "\(row)")
        }
        // The agent's uid matters only to polkit's root helper.
        XCTAssertEqual(decide(facts(service: "polkit-1", caller: 1000, target: 1000, agent: 1001)), .inScope)
        XCTAssertEqual(decide(facts(service: "sudo", caller: 0, target: 1000, agent: 1001)), .inScope)
        var options = Options()
        options.services.removeAll { $0 == bytes("polkit-1") }
        XCTAssertEqual(decide(facts(service: "polkit-1", caller: 0, target: 1000, agent: 1000), options), .outOfScope(.service))
    }

    func testOtherServicesAreNot() {
        for service in ["sshd", "passwd", "SUDO", "sudo ", "sud", "sudo-l", "su-i", "", "localauth-passcode"] {
            XCTAssertEqual(decide(facts(service: service)), .outOfScope(.service), service)
        }
        var options = Options()
        options.services = [bytes("gdm-password")]
        XCTAssertEqual(decide(facts(service: "gdm-password"), options), .inScope)
        XCTAssertEqual(decide(facts(service: "sudo"), options), .outOfScope(.service))
    }

    func testServiceNamesAreComparedAsBytes() {
        var options = Options()
        options.services = [[0x73, 0x75, 0xFF]]
        let lenient = ScopeFacts(service: [0x73, 0x75, 0xFE], callerUID: 1000, targetUID: 1000, targetName: bytes("alice"),
                                 requestingUser: [], remoteHost: [], localHostName: [], sessionIsRemote: nil)
        XCTAssertEqual(Scope.decide(lenient, options: options), .outOfScope(.service))
    }

    func testRemoteHostIsOutOfScope() {
        // Names come from reverse lookups a remote attacker may control.
        for host in ["192.0.2.7", "attacker.example", "10.0.0.1", "localhost.evil.example", "workstation2", "::2",
                     "localhost", "128.0.0.1", "127.0.0", "127.0.0.256"] {
            XCTAssertEqual(decide(facts(rhost: host)), .outOfScope(.remote), host)
            XCTAssertEqual(decide(facts(caller: 0, rhost: host)), .outOfScope(.remote), host)
        }
        // This host's own name counts only for sudo, which sets it itself.
        XCTAssertEqual(decide(facts(service: "login", rhost: "workstation")), .outOfScope(.remote))
        XCTAssertEqual(decide(facts(service: "login", rhost: "workstation.example.org")), .outOfScope(.remote))
        XCTAssertEqual(decide(facts(rhost: "workstationx.example.org")), .outOfScope(.remote))
    }

    func testLoopbackAndOwnHostNameAreLocal() {
        for host in ["", "127.0.0.1", "127.1.2.3", "::1", "workstation", "workstation.example.org"] {
            XCTAssertEqual(decide(facts(rhost: host)), .inScope, host)
        }
        XCTAssertTrue(Scope.isLocal([], localHostName: [], service: bytes("login")))
        XCTAssertFalse(Scope.isLocal(bytes("workstation"), localHostName: [], service: bytes("sudo")),
                       "an unknown own name matches nothing")
    }

    /// `sudo -i` (service sudo-i) and `su -` (su-l) are sudo and su: in
    /// scope by default, with the same rules; sudo -i names this host too.
    func testLoginShellsOfSudoAndSuAreInScope() {
        for service in ["sudo-i", "su-l"] {
            XCTAssertEqual(decide(facts(service: service)), .inScope, service)
            XCTAssertEqual(decide(facts(service: service, caller: 0, target: 1000, ruser: "bob")), .outOfScope(.requester), service)
        }
        XCTAssertEqual(decide(facts(service: "sudo-i", rhost: "workstation")), .inScope)
        XCTAssertEqual(decide(facts(service: "su-l", rhost: "workstation")), .outOfScope(.remote))
    }

    func testXsecurelocksLocalhostIsLocalForItAlone() {
        XCTAssertTrue(Scope.isLocal(bytes("localhost"), localHostName: bytes("box"), service: bytes("xsecurelock")))
        XCTAssertFalse(Scope.isLocal(bytes("localhost"), localHostName: bytes("box"), service: bytes("sshd")))
        XCTAssertFalse(Scope.isLocal(bytes("localhost"), localHostName: bytes("box"), service: bytes("login")))
        XCTAssertFalse(Scope.isLocal(bytes("evil.example"), localHostName: bytes("box"), service: bytes("xsecurelock")))
    }

    func testLogindRemoteSessionIsOutOfScope() {
        XCTAssertEqual(decide(facts(remote: true)), .outOfScope(.remote))
        XCTAssertEqual(decide(facts(remote: false)), .inScope)
        XCTAssertEqual(decide(facts(remote: nil)), .inScope)
        XCTAssertEqual(decide(facts(caller: 0, remote: true)), .outOfScope(.remote))
    }

    func testRequesterChecks() {
        // The caller is the target (sudo authenticates the invoking user).
        XCTAssertEqual(decide(facts(caller: 1000, target: 1000)), .inScope)
        XCTAssertEqual(decide(facts(caller: 1000, target: 1000, ruser: "alice")), .inScope)
        // Root callers (login, display managers) with PAM_RUSER unset or naming the target.
        XCTAssertEqual(decide(facts(caller: 0, target: 1000)), .inScope)
        XCTAssertEqual(decide(facts(caller: 0, target: 1000, ruser: "alice")), .inScope)
        // su alice run by bob: out.
        XCTAssertEqual(decide(facts(caller: 0, target: 1000, ruser: "bob")), .outOfScope(.requester))
        XCTAssertEqual(decide(facts(caller: 1001, target: 1000, ruser: "bob")), .outOfScope(.requester))
        // Another unprivileged caller: out, whatever PAM_RUSER says.
        XCTAssertEqual(decide(facts(caller: 1001, target: 1000)), .outOfScope(.requester))
        XCTAssertEqual(decide(facts(caller: 1001, target: 1000, ruser: "alice")), .outOfScope(.requester))
        // Root as the target, asked by root.
        XCTAssertEqual(decide(facts(caller: 0, target: 0, name: "root")), .inScope)
        XCTAssertEqual(decide(facts(caller: 0, target: 0, name: "root", ruser: "root")), .inScope)
        // PAM_RUSER is compared as bytes, exactly.
        XCTAssertEqual(decide(facts(caller: 0, target: 1000, ruser: "alice ")), .outOfScope(.requester))
        XCTAssertEqual(decide(facts(caller: 0, target: 1000, ruser: "Alice")), .outOfScope(.requester))
    }

    func testUnknownUser() {
        XCTAssertEqual(decide(facts(caller: 0, target: nil, name: "mallory")), .unknownUser)
        XCTAssertEqual(decide(facts(caller: 0, target: nil, name: "mallory", ruser: "mallory")), .unknownUser)
        XCTAssertEqual(decide(facts(caller: 0, target: nil, name: "mallory", ruser: "bob")), .outOfScope(.requester))
        XCTAssertEqual(decide(facts(caller: 1000, target: nil, name: "mallory")), .outOfScope(.requester))
        XCTAssertEqual(decide(facts(service: "sshd", caller: 0, target: nil, name: "mallory")), .outOfScope(.service))
        XCTAssertEqual(decide(facts(caller: 0, target: nil, name: "mallory", rhost: "192.0.2.1")), .outOfScope(.remote))
    }

    /// The checks run in a fixed order: service, then locality, then requester.
    func testRefusalOrder() {
        XCTAssertEqual(decide(facts(service: "sshd", caller: 1001, rhost: "192.0.2.1")), .outOfScope(.service))
        XCTAssertEqual(decide(facts(caller: 1001, rhost: "192.0.2.1")), .outOfScope(.remote))
    }
}
