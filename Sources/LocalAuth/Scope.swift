// R1: the module acts only for the target user, asking locally, in a
// covered service. Everyone else cannot touch that user's counters.

/// Facts about one PAM call that decide its scope.
public struct ScopeFacts: Equatable {
    public var service: [UInt8]
    /// The caller's real uid.
    public var callerUID: UInt32
    /// The target's uid, nil for an unknown user.
    public var targetUID: UInt32?
    public var targetName: [UInt8]
    /// `PAM_RUSER`, empty when unset.
    public var requestingUser: [UInt8]
    /// `PAM_RHOST`, empty when unset.
    public var remoteHost: [UInt8]
    /// This machine's host name (sudo sets `PAM_RHOST` to it).
    public var localHostName: [UInt8]
    /// logind's word on the caller's session: true when it calls it remote;
    /// nil when there is no logind or no session. For polkit's
    /// socket-activated helper, the agent's session.
    public var sessionIsRemote: Bool?
    /// Inside polkit's socket-activated agent helper (root, one instance per
    /// connection): the real uid of the agent on the other end of its
    /// standard input, read from the kernel while that agent was alive; nil
    /// everywhere else, or when the agent could not be told.
    public var polkitAgentUID: UInt32?

    public init(service: [UInt8], callerUID: UInt32, targetUID: UInt32?, targetName: [UInt8], requestingUser: [UInt8],
                remoteHost: [UInt8], localHostName: [UInt8], sessionIsRemote: Bool?, polkitAgentUID: UInt32? = nil) {
        self.service = service
        self.callerUID = callerUID
        self.targetUID = targetUID
        self.targetName = targetName
        self.requestingUser = requestingUser
        self.remoteHost = remoteHost
        self.localHostName = localHostName
        self.sessionIsRemote = sessionIsRemote
        self.polkitAgentUID = polkitAgentUID
    }
}

/// Why a call is out of scope (for the debug log).
public enum ScopeRefusal: Equatable {
    case service
    case remote
    case requester
}

public enum ScopeDecision: Equatable {
    case inScope
    /// In scope, but no such user: R14's look-alike path.
    case unknownUser
    case outOfScope(ScopeRefusal)
}

public enum Scope {
    public static func decide(_ facts: ScopeFacts, options: Options) -> ScopeDecision {
        guard options.covers(service: facts.service) else { return .outOfScope(.service) }
        // polkit 127 and later run the agent helper as root for any local
        // client of its socket, which names the account before polkitd has
        // checked anything: a root caller there stands only for the agent
        // on the other end, and only when that agent runs as the account
        // itself (its real uid: pkexec's own text agent is setuid root, so
        // its effective uid says nothing). Its session then stands for the
        // caller's: a remote one is out of scope here, and the seat rules
        // decide whose touch it is (R17). An agent of another uid, or one
        // that could not be told, leaves the password line to decide,
        // uncounted. (Up to 126 the helper is setuid: the real uid is the
        // person's.)
        if facts.callerUID == 0 && isPolkit(facts.service) {
            guard let agent = facts.polkitAgentUID, agent != 0, let target = facts.targetUID, agent == target else {
                return .outOfScope(.requester)
            }
        }
        guard isLocal(facts.remoteHost, localHostName: facts.localHostName, service: facts.service), facts.sessionIsRemote != true else {
            return .outOfScope(.remote)
        }
        let requesterNamesTarget = facts.requestingUser.isEmpty || facts.requestingUser == facts.targetName
        guard let target = facts.targetUID else {
            return facts.callerUID == 0 && requesterNamesTarget ? .unknownUser : .outOfScope(.requester)
        }
        if facts.callerUID == target && requesterNamesTarget { return .inScope }
        if facts.callerUID == 0 && requesterNamesTarget { return .inScope }
        return .outOfScope(.requester)
    }

    /// polkit's service, whose root caller is its socket-activated helper.
    public static func isPolkit(_ service: [UInt8]) -> Bool {
        KnownServices.named(service)?.kind == .administratorDialog
    }

    /// The services the helper acts for on one request: the configured
    /// ones, plus the requested one where the request needs no listing. A
    /// preflight never prompts or charges, so it is in scope for any
    /// service but apps' (whose `canEvaluatePolicy` follows the list, so
    /// that turning apps off turns it off too). `localauth test`
    /// (localauth-test) is a person trying their own account before the
    /// services are set up; the helper cannot tell which program asks, so
    /// an app naming that service meets the apps' switch: it is in scope
    /// only while localauth-app is.
    public static func helperOptions(_ configured: Options, service: [UInt8], preflight: Bool) -> Options {
        var options = configured
        let isApp = bytesEqual(service, KnownServices.app)
        let isTest = bytesEqual(service, KnownServices.test)
        if (preflight && !isApp) || (isTest && configured.covers(service: literalBytes(KnownServices.app))) {
            options.services.append(service)
        }
        return options
    }

    /// An unset `PAM_RHOST`, or a loopback address literal. Host names come
    /// from reverse lookups that a remote attacker may control, so a name
    /// counts as local only where a local-only program sets it by
    /// convention (KnownService.localHost): sudo naming this very host (for
    /// `sudo` and `sudo -i` alike), and xsecurelock naming "localhost".
    public static func isLocal(_ remoteHost: [UInt8], localHostName: [UInt8], service: [UInt8]) -> Bool {
        if remoteHost.isEmpty { return true }
        if bytesEqual(remoteHost, "::1") || isIPv4Loopback(remoteHost) { return true }
        let convention = KnownServices.named(service)?.localHost ?? LocalHostConvention.none
        if convention == .localhost && bytesEqual(remoteHost, "localhost") { return true }
        guard convention == .thisHostsName, !localHostName.isEmpty else { return false }
        // With `Defaults fqdn` sudo sets the fully qualified name.
        return remoteHost == localHostName || (remoteHost.count > localHostName.count + 1
            && Array(remoteHost.prefix(localHostName.count)) == localHostName && remoteHost[localHostName.count] == 0x2E)
    }

    /// `127.x.y.z` written as a dotted quad.
    static func isIPv4Loopback(_ text: [UInt8]) -> Bool {
        let parts = splitBytes(text[...], on: 0x2E)
        guard parts.count == 4, bytesEqual(parts[0], "127") else { return false }
        for part in parts {
            guard part.count <= 3, let value = parseDecimal(part), value <= 255 else { return false }
        }
        return true
    }
}
