// What the setuid helper may do with a request, decided as pure functions of
// the caller, the configuration, the request and what the engine reports:
// whose account, with which options, under which scope, by which path
// (preflight, an app's reuse window, a non-interactive answer, a prompt),
// and what a cancel turns an outcome into. HelperService only performs
// these decisions; HelperPolicyTests walks them as tables.

/// The setuid helper's decisions.
public enum HelperPolicy {
    /// Whom a request is for.
    public enum Target: Equatable {
        case account(UserIdentity)
        /// A root caller's evaluation of a name without an account (a PAM
        /// program asking for whatever name was typed, such as GDM's
        /// fingerprint conversation): answered as a known name without a
        /// usable finger is (R14), since a refusal would tell them apart.
        case unknownName([UInt8])
    }

    /// The account a request is for: the caller's own; another only when
    /// the caller is root; a name without an account only for a root
    /// caller's evaluation. Any other name is refused whether or not it
    /// exists (no enumeration through the helper). The name is looked up
    /// once, whatever the answer (the time does not tell names apart).
    public static func target(callerUID: UInt32, callerName: [UInt8]?, requested: [UInt8], action: HelperAction,
                              lookup: ([UInt8]) -> UserIdentity?) -> Result<Target, HelperRequest.Refusal> {
        guard let callerName else { return .failure(.notAllowed(literalBytes("user"))) }
        if requested.isEmpty || requested == callerName { return .success(.account(UserIdentity(uid: callerUID, name: callerName))) }
        guard callerUID == 0 else { return .failure(.notAllowed(literalBytes("user"))) }
        if let other = lookup(requested) { return .success(.account(other)) }
        return action == .evaluate ? .success(.unknownName(requested)) : .failure(.notAllowed(literalBytes("user")))
    }

    /// The options a request runs with: the administrator's, with the
    /// caller's presentation over them (a shorter timeout, fewer services at
    /// most), and the scope's service list as `Scope.helperOptions` widens
    /// it for a preflight and for `localauth test`.
    public static func options(configured: Options, request: HelperRequest) -> (options: Options, scopeOptions: Options, diagnostics: [String]) {
        let (options, diagnostics) = configured.withPresentation(request.presentation)
        return (options, Scope.helperOptions(options, service: request.service, preflight: request.action == .check), diagnostics)
    }

    /// The interaction mode of an evaluation through the helper: scan or
    /// the password alone when the caller asks (its conversation shows
    /// messages and answers nothing while the reader waits; another
    /// conversation has the reader), the password alone where the
    /// administrator's `password_services` says so, else prompt. Never
    /// terminal: the helper has no terminal, and a caller's Ctrl-C arrives
    /// as a frame.
    public static func mode(_ options: Options, service: [UInt8]) -> InteractionMode {
        switch options.mode {
        case .scan?: return .scan
        case .password?: return .password
        case .terminal?, .prompt?: return options.passwordServices.contains(service) ? .password : .prompt
        case nil:
            if options.passwordServices.contains(service) { return .password }
            // Apps show Apple's sheet: the reader at once, the fallback
            // only after a miss (LAContext asks for it; so does this).
            return bytesEqual(service, KnownServices.app) ? .scan : .prompt
        }
    }

    /// The request's hard deadline in seconds: the fingerprint phase and
    /// two answers, with slack.
    public static func hardDeadlineSeconds(_ options: Options) -> Int {
        options.timeoutSeconds + 2 * options.answerTimeoutSeconds + 30
    }

    /// How an in-scope request is answered.
    public enum Path: Equatable {
        /// The preflight (`canEvaluate`): never prompts.
        case preflight
        /// An app's reuse window: a success of this account in this session
        /// within `seconds` stands in for a prompt; if there is none, `then`.
        indirect case reuse(seconds: Int, then: Path)
        /// Nothing may be shown: the preflight's error, else notInteractive.
        case withoutPrompt
        /// The evaluation, in prompt mode.
        case evaluate
    }

    /// The path for `request`. The reuse window is for apps only: a PAM
    /// service always asks.
    public static func path(_ request: HelperRequest) -> Path {
        guard request.action == .evaluate else { return .preflight }
        let rest: Path = request.interactive ? .evaluate : .withoutPrompt
        if request.reuseSeconds > 0 && bytesEqual(request.service, KnownServices.app) {
            return .reuse(seconds: request.reuseSeconds, then: rest)
        }
        return rest
    }

    /// The answer without a prompt: what is missing, or notInteractive when
    /// nothing is (a prompt would have been needed).
    public static func errorWithoutPrompt(preflight: Result<[UInt8], LAErrorCode>) -> LAErrorCode {
        switch preflight {
        case .success: return .notInteractive
        case .failure(let missing): return missing
        }
    }

    /// A frame the client sent that the helper finds waiting after a
    /// failed evaluation.
    public enum LateFrame: Equatable {
        /// The app cancelled (its invalidate()).
        case appCancel
        /// A button pressed as the evaluation ended: changes nothing.
        case ignored
        /// Anything else breaks the protocol.
        case violation
    }

    public static func lateFrame(_ type: FrameType) -> LateFrame {
        switch type {
        case .cancel: return .appCancel
        case .userCancel, .userFallback, .passwordTyped: return .ignored
        default: return .violation
        }
    }

    /// The outcome reported: a failure after the app cancelled is appCancel;
    /// a success stands, whatever came after it.
    public static func reported(_ outcome: Outcome, appCancelled: Bool) -> Outcome {
        if case .failure = outcome, appCancelled { return .failure(.appCancel) }
        return outcome
    }

    /// Whether a success carries the domain state (an app reads
    /// evaluatedPolicyDomainState after one; PAM services never need it).
    public static func carriesDomainState(_ outcome: Outcome, service: [UInt8]) -> Bool {
        if case .success = outcome { return bytesEqual(service, KnownServices.app) }
        return false
    }
}

/// What one caller may hold of the helper. At most `live` helpers run at
/// once for a uid (slots held until they exit). A helper that has exited
/// stays a process until its caller reaps it; the helper gives itself back
/// to the caller's uid before it exits, so an unreaped one counts against
/// the caller's own process limit, and a caller that already left
/// `unreaped` of them unreaped is refused before any work.
public enum HelperBounds {
    public static let live = 4
    public static let unreaped = 16
    /// The name an ended helper takes before it goes back to its caller
    /// (LA_ENDED_HELPER_NAME in the C shim, where its deadline's end uses
    /// it too): the helpers a caller left unreaped are its zombies of that
    /// name, whatever name the caller started the program under.
    public static let endedName = "localauth-ended"

    /// Whether a line of /proc/PID/stat is an exited, unreaped process
    /// (state Z) whose command name is `command` (the helper's own, as the
    /// kernel keeps it: at most 15 bytes). The name is the text between the
    /// first "(" and the last ")", since a name may hold either. The owner
    /// (which uid) is asked of the directory, not of this line.
    public static func isUnreaped(stat: [UInt8], command: [UInt8]) -> Bool {
        guard let open = stat.firstIndex(of: 0x28), let close = stat.lastIndex(of: 0x29), open < close,
              close + 2 < stat.count, stat[close + 1] == 0x20 else { return false }
        return stat[(open + 1)..<close].elementsEqual(command) && stat[close + 2] == 0x5A
    }

    /// Whether a caller holding `count` unreaped helpers is refused.
    public static func refusesUnreaped(_ count: Int) -> Bool { count >= unreaped }
}
