import XCTest
import LocalAuth

/// How a root caller's prompt talks to the person (R16), and the known
/// services: a script's sudo (-S from a pipe, -A) is not a person at the
/// terminal, so its password is the first answer, checked at once.
final class InteractionChoiceTests: XCTestCase {
    let person = CallerFacts(ownsItsTerminal: true, readsItsTerminal: true, threads: 1)
    let pipedIn = CallerFacts(ownsItsTerminal: true, readsItsTerminal: false, threads: 1)
    let askpass = CallerFacts(ownsItsTerminal: true, readsItsTerminal: true, threads: 1, passwordFromElsewhere: true)
    let noTerminal = CallerFacts(ownsItsTerminal: false, readsItsTerminal: false, threads: 1)
    let threaded = CallerFacts(ownsItsTerminal: true, readsItsTerminal: true, threads: 3)
    let background = CallerFacts(ownsItsTerminal: true, readsItsTerminal: true, inForeground: false, threads: 1)

    func testTheTable() {
        var forced = Options()
        forced.mode = .scan
        let rows: [(String, Options, String, CallerFacts, InteractionMode)] = [
            ("sudo typed at its terminal", Options(), "sudo", person, .terminal),
            ("sudo -i typed at its terminal", Options(), "sudo-i", person, .terminal),
            ("su - typed at its terminal", Options(), "su-l", person, .terminal),
            ("sudo -S fed by a pipe in a terminal", Options(), "sudo", pipedIn, .prompt),
            ("sudo -A in a terminal", Options(), "sudo", askpass, .prompt),
            ("sudo from cron (no controlling terminal)", Options(), "sudo", noTerminal, .prompt),
            ("su from a script without a terminal", Options(), "su", noTerminal, .prompt),
            ("login without a person at its terminal", Options(), "login", pipedIn, .prompt),
            ("doas fed by a pipe", Options(), "doas", pipedIn, .prompt),
            ("a terminal not its own", Options(), "sudo", CallerFacts(ownsItsTerminal: false, readsItsTerminal: true, threads: 1), .prompt),
            ("a threaded terminal program with a person", Options(), "sudo", threaded, .prompt),
            ("sudo in a job sent to the background", Options(), "sudo", background, .prompt),
            ("polkit's helper (no terminal)", Options(), "polkit-1", noTerminal, .prompt),
            ("a display manager", Options(), "lightdm", noTerminal, .prompt),
            ("a console locker at its terminal", Options(), "vlock", person, .terminal),
            ("a service localauth does not know, at its terminal", Options(), "cron", person, .terminal),
            ("gdm-password is the password only", Options(), "gdm-password", person, .password),
            ("mode= wins over a script", forced, "sudo", pipedIn, .scan),
            ("mode= wins over a person", forced, "sudo", person, .scan),
        ]
        for (name, options, service, caller, mode) in rows {
            XCTAssertEqual(InteractionMode.chosen(options, service: Array(service.utf8), caller: caller), mode, name)
        }
    }

    func testSudosCommandLine() {
        let rows: [(String, Bool)] = [
            ("sudo true", false),
            ("sudo -A true", true),
            ("sudo -S true", true),
            ("/usr/bin/sudo -kS true", true),
            ("sudo -kA -u root true", true),
            ("sudo --askpass true", true),
            ("sudo --stdin true", true),
            ("sudo --ask true", true),
            ("sudo --std true", true),
            ("sudoedit -A /etc/hosts", true),
            ("sudo -u -A true", false),             // -A is -u's value
            ("sudo -uA true", false),               // the same, attached
            ("sudo -p -S true", false),             // the prompt "-S"
            ("sudo --prompt -S true", false),
            ("sudo --prompt=x -S true", true),
            ("sudo -hhost -S true", true),          // -h takes only an attached value
            ("sudo -h -S true", true),
            ("sudo true -S", false),                // the command's own option
            ("sudo -- -S", false),
            ("sudo -i", false),
            ("sudo --s true", false),               // ambiguous: sudo refuses it
            ("su -S", false),                       // not sudo
            ("doas -A true", false),
            ("", false),
        ]
        for (line, expected) in rows {
            let arguments = line.split(separator: " ").map { Array($0.utf8) }
            XCTAssertEqual(SudoCommandLine.takesThePasswordElsewhere(arguments), expected, line)
        }
    }

    /// The option defaults are read from the one table of known services.
    func testTheDefaultsComeFromTheTableOfServices() {
        let names = KnownServices.table.map { String(decoding: $0.bytes, as: UTF8.self) }
        XCTAssertEqual(Set(names).count, names.count, "a service listed twice")
        XCTAssertEqual(Options.defaultServices.map { String(decoding: $0, as: UTF8.self) }, names)
        for service in ["sudo", "sudo-i", "su", "su-l", "login", "doas"] {
            XCTAssertEqual(KnownServices.kind(of: Array(service.utf8)), .terminalProgram, service)
        }
        XCTAssertEqual(Options.defaultPasswordServices, [Array("gdm-password".utf8)])
        XCTAssertEqual(Options.knownLockers.map { String(decoding: $0, as: UTF8.self) },
                       ["swaylock", "i3lock", "xscreensaver", "xsecurelock", "hyprlock", "vlock", "mate-screensaver",
                        "cinnamon-screensaver", "gdm-fingerprint", "kde", "kde-fingerprint"])
        XCTAssertNil(KnownServices.kind(of: Array("passwd".utf8)))
        XCTAssertEqual(KnownServices.shownName(Array("sudo-i".utf8)), Array("sudo -i".utf8))
        XCTAssertEqual(KnownServices.shownName(Array("su-l".utf8)), Array("su -".utf8))
        XCTAssertEqual(KnownServices.shownName(Array("sudo".utf8)), Array("sudo".utf8))
    }

    /// polkit's dialogs: the prompt stays open while the reader waits only
    /// inside polkit's agent helper, in prompt mode, for an agent measured
    /// to take the verdict while its prompt is up.
    func testAPromptStaysOpenOnlyInPolkitsHelperForAnAgentThatTakesTheVerdict() {
        let helper = "/usr/lib/polkit-1/polkit-agent-helper-1"
        let rows: [(String, String, InteractionMode, String, String, Bool)] = [
            ("GNOME Shell", "polkit-1", .prompt, helper, "/usr/bin/gnome-shell", true),
            ("Plasma's agent", "polkit-1", .prompt, helper, "/usr/lib/x86_64-linux-gnu/libexec/polkit-kde-authentication-agent-1", true),
            ("lxpolkit", "polkit-1", .prompt, helper, "/usr/bin/lxpolkit", true),
            ("MATE's agent waits in its prompt", "polkit-1", .prompt, helper,
             "/usr/libexec/polkit-mate-authentication-agent-1", false),
            ("polkit-gnome's agent waits in its prompt", "polkit-1", .prompt, helper,
             "/usr/libexec/polkit-gnome-authentication-agent-1", false),
            ("pkttyagent reads until Enter", "polkit-1", .prompt, helper, "/usr/bin/pkttyagent", false),
            ("pkexec's own agent", "polkit-1", .prompt, helper, "/usr/bin/pkexec", false),
            ("an agent nobody measured", "polkit-1", .prompt, helper, "/usr/bin/some-agent", false),
            ("an agent that could not be read", "polkit-1", .prompt, helper, "", false),
            ("not polkit's helper", "polkit-1", .prompt, "/usr/bin/sudo", "/usr/bin/gnome-shell", false),
            ("a program named like the helper's directory", "polkit-1", .prompt, "/usr/lib/polkit-agent-helper-1/x",
             "/usr/bin/gnome-shell", false),
            ("another service in the helper", "sudo", .prompt, helper, "/usr/bin/gnome-shell", false),
            ("mode= scan", "polkit-1", .scan, helper, "/usr/bin/gnome-shell", false),
            ("mode= password", "polkit-1", .password, helper, "/usr/bin/gnome-shell", false),
            ("mode= terminal", "polkit-1", .terminal, helper, "/usr/bin/gnome-shell", false),
        ]
        for (name, service, mode, own, agent, open) in rows {
            XCTAssertEqual(AdministratorDialog.promptStaysOpen(service: Array(service.utf8), mode: mode, ownProgram: Array(own.utf8),
                                                               agentProgram: Array(agent.utf8)), open, name)
        }
        let names = AdministratorDialog.agents.map { "\($0.program)" }
        XCTAssertEqual(Set(names).count, names.count, "an agent listed twice")
    }
}
