// polkit's administrator dialogs and touch or type (R16): which agents can
// take the helper's verdict while their password prompt is still up, so the
// module may leave that prompt open on a second thread while the reader
// waits. Declared once; the rule and its table are pure and table-tested,
// and the adapter reads only the two program names.

/// How one polkit agent behaves while its password prompt is up.
public struct DialogAgent: Sendable {
    /// The agent's program (the last name of its executable).
    public let program: StaticString
    /// The agent closes its dialog on the helper's verdict while its prompt
    /// waits for an answer: a touch completes the dialog with nothing typed.
    public let takesTheVerdictWhilePrompting: Bool
    /// Why, as measured on Debian 12 (docs/PROGRAMS.md says the same per agent).
    public let why: StaticString
}

public enum AdministratorDialog {
    /// The program polkit runs the PAM conversation in (setuid, a child of
    /// the agent, which exits at the verdict).
    public static var agentHelper: StaticString { "polkit-agent-helper-1" }

    /// The agents measured on Debian 12's polkit. An agent not listed keeps
    /// the prompt mode: one it does not know may block in its prompt.
    public static var agents: [DialogAgent] { [
        DialogAgent(program: "gnome-shell", takesTheVerdictWhilePrompting: true,
                    why: "closes its dialog on the verdict; its OK needs text, so only an open prompt reaches the reader"),
        DialogAgent(program: "polkit-kde-authentication-agent-1", takesTheVerdictWhilePrompting: true,
                    why: "closes its dialog on the verdict"),
        DialogAgent(program: "lxpolkit", takesTheVerdictWhilePrompting: true,
                    why: "closes its dialog on the verdict"),
        DialogAgent(program: "polkit-mate-authentication-agent-1", takesTheVerdictWhilePrompting: false,
                    why: "waits in its prompt's own dialog loop: the verdict is read only after OK"),
        DialogAgent(program: "polkit-gnome-authentication-agent-1", takesTheVerdictWhilePrompting: false,
                    why: "waits in its prompt's own dialog loop: the verdict is read only after OK"),
        DialogAgent(program: "pkttyagent", takesTheVerdictWhilePrompting: false,
                    why: "reads the answer from the terminal until Enter: the verdict is read only after it"),
        DialogAgent(program: "pkexec", takesTheVerdictWhilePrompting: false,
                    why: "its own text agent reads the answer until Enter, as pkttyagent does"),
    ] }

    /// The agent whose program is `program` (a path or a name), if listed.
    public static func agent(_ program: [UInt8]) -> DialogAgent? {
        let name = lastName(program)
        for agent in agents where bytesEqual(name, agent.program) { return agent }
        return nil
    }

    /// Whether a prompt of `service` in `mode`, run by the program `ownProgram`
    /// for the agent `agentProgram`, leaves its password prompt open while
    /// the reader waits. Only inside polkit's agent helper: a conversation
    /// left waiting in another thread is safe only in a process that exits
    /// at the verdict. Which agent it is only chooses how the dialog looks:
    /// a program that names itself as a listed agent gets the same counts
    /// and the same checks. The programs are read only when the service
    /// and the mode could leave a prompt open (every other prompt of every
    /// other program reads nothing for this).
    public static func promptStaysOpen(service: [UInt8], mode: InteractionMode, ownProgram: @autoclosure () -> [UInt8],
                                       agentProgram: @autoclosure () -> [UInt8]) -> Bool {
        guard mode == .prompt, KnownServices.kind(of: service) == .administratorDialog,
              bytesEqual(lastName(ownProgram()), agentHelper) else { return false }
        return agent(agentProgram())?.takesTheVerdictWhilePrompting ?? false
    }

    static func lastName(_ path: [UInt8]) -> [UInt8] {
        path.split(separator: 0x2F, omittingEmptySubsequences: false).last.map { Array($0) } ?? path
    }
}
