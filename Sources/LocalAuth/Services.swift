// The PAM services localauth knows, declared once: the default `services`,
// the screen lockers that may use the reader while the session is locked,
// the services that ask only the password, and which programs talk to a
// person on a terminal are all read from this one table.

/// How the program behind a service talks to the person.
public enum ServiceKind: Equatable, Sendable {
    /// sudo, su, login, doas: a prompt on a terminal, or a script's pipe.
    case terminalProgram
    /// A screen locker: its own window or console, the person in front of it.
    case screenLocker
    /// A display manager's greeter, or GNOME's and Plasma's lock-screen
    /// conversations run by one.
    case loginScreen
    /// polkit's administrator dialogs, answered through an agent.
    case administratorDialog
    /// Apps, through the LocalAuthentication library and `localauth evaluate`.
    case app
}

/// The `PAM_RHOST` a local-only program sets by convention, which therefore
/// names no remote host for its service. Host names come from reverse
/// lookups a remote attacker may control, so only these count as local.
public enum LocalHostConvention: Equatable, Sendable {
    case none
    /// sudo sets this machine's host name (fully qualified with `Defaults fqdn`).
    case thisHostsName
    /// xsecurelock always sets "localhost".
    case localhost
}

/// One known service.
public struct KnownService: Sendable {
    public let name: StaticString
    public let kind: ServiceKind
    /// May use the reader while the seat's session is locked (the default
    /// of `locker_services`).
    public let unlocksTheScreen: Bool
    /// Asks only the password: the same program runs a fingerprint
    /// conversation of its own beside it (the default of `password_services`).
    public let passwordOnly: Bool
    /// The `PAM_RHOST` its program sets for a local request.
    public let localHost: LocalHostConvention
    /// How the person knows the command, where it differs from the name.
    public let shownAs: StaticString?
    /// Its program runs PAM as the user: the module evaluates through the
    /// setuid helper, which takes only presentation from the stack line.
    public let runsAsTheUser: Bool
    /// A fingerprint-only conversation (it answers none of its prompts):
    /// the password conversation its program runs beside it.
    public let passwordConversation: StaticString?

    init(_ name: StaticString, _ kind: ServiceKind, unlocksTheScreen: Bool = false, passwordOnly: Bool = false,
         localHost: LocalHostConvention = .none, shownAs: StaticString? = nil, runsAsTheUser: Bool = false,
         passwordConversation: StaticString? = nil) {
        self.name = name
        self.shownAs = shownAs
        self.runsAsTheUser = runsAsTheUser
        self.passwordConversation = passwordConversation
        self.kind = kind
        self.unlocksTheScreen = unlocksTheScreen
        self.passwordOnly = passwordOnly
        self.localHost = localHost
    }

    public var bytes: [UInt8] { literalBytes(name) }
}

public enum KnownServices {
    /// Every service in the default `services`, in the order the documents
    /// list them. Each place a person at this computer proves who they are:
    /// `sudo -i` and `su -` (sudo-i, su-l) beside sudo and su. Debian's
    /// services left out, and why, are in DESIGN ("Services").
    // Computed, not stored: a stored global would be allocated on every
    // load of the module and leaked when libpam unloads it.
    public static var table: [KnownService] { [
        KnownService("sudo", .terminalProgram, localHost: .thisHostsName),
        KnownService("sudo-i", .terminalProgram, localHost: .thisHostsName, shownAs: "sudo -i"),
        KnownService("su", .terminalProgram),
        KnownService("su-l", .terminalProgram, shownAs: "su -"),
        KnownService("login", .terminalProgram),
        KnownService("doas", .terminalProgram),
        KnownService("swaylock", .screenLocker, unlocksTheScreen: true, runsAsTheUser: true),
        KnownService("i3lock", .screenLocker, unlocksTheScreen: true, runsAsTheUser: true),
        KnownService("xscreensaver", .screenLocker, unlocksTheScreen: true, runsAsTheUser: true),
        KnownService("xsecurelock", .screenLocker, unlocksTheScreen: true, localHost: .localhost, runsAsTheUser: true),
        KnownService("hyprlock", .screenLocker, unlocksTheScreen: true, runsAsTheUser: true),
        KnownService("vlock", .screenLocker, unlocksTheScreen: true),
        KnownService("mate-screensaver", .screenLocker, unlocksTheScreen: true, runsAsTheUser: true),
        KnownService("cinnamon-screensaver", .screenLocker, unlocksTheScreen: true, runsAsTheUser: true),
        KnownService("polkit-1", .administratorDialog),
        KnownService("gdm-fingerprint", .loginScreen, unlocksTheScreen: true, passwordConversation: "gdm-password"),
        KnownService("gdm-password", .loginScreen, passwordOnly: true),
        KnownService("greetd", .loginScreen),
        KnownService("lightdm", .loginScreen),
        KnownService("sddm", .loginScreen),
        KnownService("kde", .screenLocker, unlocksTheScreen: true, runsAsTheUser: true),
        KnownService("kde-fingerprint", .loginScreen, unlocksTheScreen: true, runsAsTheUser: true,
                     passwordConversation: "kde"),
        KnownService(app, .app),
    ] }

    /// `service`, if it is a known one.
    public static func named(_ service: [UInt8]) -> KnownService? {
        for known in table where bytesEqual(service, known.name) { return known }
        return nil
    }

    /// The service as the person knows its command ("sudo -i" for sudo-i).
    public static func shownName(_ service: [UInt8]) -> [UInt8] {
        guard let shown = named(service)?.shownAs else { return service }
        return literalBytes(shown)
    }

    /// The service apps evaluate under (the LocalAuthentication library,
    /// `localauth evaluate`): in the table, kind `.app`.
    public static var app: StaticString { "localauth-app" }
    /// What `localauth test` names: in scope while `app` is, and never in
    /// the default `services` itself.
    public static var test: StaticString { "localauth-test" }

    /// The kind of `service`, if it is a known one.
    public static func kind(of service: [UInt8]) -> ServiceKind? { named(service)?.kind }
}
