// What a run of the setuid helper means, decoded once from its RESULT (or
// from its absence), and the one table per client that maps it: the PAM
// module, the command-line tool and the app library. A client reads the
// verdict, never the RESULT's fields, so the same failure means the same
// thing everywhere; a unit test walks every verdict through all three.

/// How a run of the helper ended, as every client sees it.
public enum HelperVerdict: Equatable {
    /// Authenticated by `method`; the domain state when the helper sent one.
    case granted(AuthenticationMethod, domainState: [UInt8])
    /// Evaluated and not authenticated, for this reason; `failDelay`: the
    /// failure delay applies (a wrong password or finger).
    case denied(LAErrorCode, failDelay: Bool)
    /// Not the module's to decide: the service is not in `services`.
    case outOfScope
    /// The helper cannot be used here: missing, not setuid root, or not
    /// running as root (a nosuid mount, no_new_privs, a container).
    case unavailable(String)
    /// The helper refused the request before asking or charging anything.
    case refused
    /// The helper failed mid-way: it died, hung, broke the protocol, hit an
    /// internal error, or answered without saying why it did not grant.
    case failed(String)

    /// The verdict of a RESULT (already checked by `ResultFrame.decode`: a
    /// success names its method and carries no error).
    public init(_ result: ResultFrame) {
        switch result.status {
        case .notPrivileged: self = .unavailable("it does not run as root (a nosuid mount, no_new_privs or a container?)")
        case .refused: self = .refused
        case .internalError: self = .failed("it hit an internal error")
        // Only a secret action's client reads this (SecretVerdict).
        case .secretHandled: self = .failed("it answered a secret action")
        case .evaluated:
            if result.pamCode == PAMCode.success.rawValue, let method = result.method {
                self = .granted(method, domainState: result.domainState)
            } else if let error = result.error {
                self = .denied(error, failDelay: result.failDelay)
            } else if result.isOutOfScope {
                self = .outOfScope
            } else {
                self = .failed("it gave no answer for this account")
            }
        }
    }

    /// What went wrong with the helper, naming it, for a log or the tool's
    /// error message; nil when it answered.
    public var problem: String? {
        switch self {
        case .granted, .denied, .outOfScope: return nil
        case .unavailable(let why): return "localauth-helper cannot be used: " + why
        case .refused: return "localauth-helper refused the request"
        case .failed(let why): return "localauth-helper failed: " + why
        }
    }

    // MARK: - The module's table

    /// What `pam_sm_authenticate` returns: the result table's code for an
    /// answer; the step-aside code where the helper cannot be used, so the
    /// password line decides as it would without the module; a system error
    /// where the helper failed (the stack's lines say what that does).
    public var pamCode: PAMCode {
        switch self {
        case .granted: return .success
        case .denied(let error, _): return ResultTable.pamCode(for: error)
        case .outOfScope: return ResultTable.pamCode(for: .outOfScope)
        case .unavailable: return ResultTable.stepAside
        case .refused, .failed: return .systemError
        }
    }

    // MARK: - The command-line tool's table

    /// What `localauth check`, `test` and `evaluate` make of it: an answer
    /// (a grant, or the error an app would get), or the tool's own failure
    /// (exit 1 with `text` on stderr) when the helper gave no answer.
    public var commandAnswer: CommandAnswer {
        switch self {
        case .granted(let method, let state): return .granted(method, domainState: state)
        case .denied(let error, _): return .notAuthenticated(error)
        case .outOfScope: return .notAuthenticated(.biometryNotAvailable)
        case .unavailable, .refused, .failed: return .toolFailure(problem ?? "")
        }
    }

    // MARK: - The app library's table

    /// The error `LAContext` reports (nil: granted) and its message. A helper
    /// that cannot be used means there is no biometry here; one that failed
    /// mid-way cancelled the evaluation (the system's cancel, as on Apple's).
    public var appError: (error: LAErrorCode, message: String?)? {
        switch self {
        case .granted: return nil
        case .denied(let error, _): return (error, nil)
        case .outOfScope: return (.biometryNotAvailable, "The administrator has not enabled localauth for apps (service localauth-app).")
        case .unavailable: return (.biometryNotAvailable, problem)
        case .refused: return (.invalidContext, "The request was refused.")
        case .failed: return (.systemCancel, problem)
        }
    }
}

/// The command-line tool's reading of a verdict.
public enum CommandAnswer: Equatable {
    case granted(AuthenticationMethod, domainState: [UInt8])
    case notAuthenticated(LAErrorCode)
    case toolFailure(String)
}

/// A choice the caller passes to a running helper, as one byte on the
/// control descriptor given to `HelperClient.run`.
public enum ClientChoice: UInt8, CaseIterable {
    /// The person cancelled (userCancel).
    case userCancel = 0x75
    /// The person chose the fallback.
    case userFallback = 0x66
    /// The application cancelled (appCancel).
    case appCancel = 0x61
    /// Touch or type: the person pressed Enter on the password typed while
    /// the reader waited.
    case passwordTyped = 0x70

    public var frame: FrameType {
        switch self {
        case .userCancel: return .userCancel
        case .userFallback: return .userFallback
        case .appCancel: return .cancel
        case .passwordTyped: return .passwordTyped
        }
    }
}

extension ResultFrame {
    /// The RESULT the helper sends for an evaluation's outcome (the
    /// encoding side of `HelperVerdict.init(_:)`).
    public init(status: HelperStatus, outcome: Outcome, failDelay: Bool) {
        switch outcome {
        case .success(let method):
            self.init(status: status, pamCode: PAMCode.success.rawValue, method: method)
        case .failure(let error):
            self.init(status: status, pamCode: ResultTable.pamCode(for: error).rawValue, error: error, failDelay: failDelay)
        case .outOfScope:
            self.init(status: status, pamCode: ResultTable.pamCode(for: .outOfScope).rawValue)
        case .internalError:
            self.init(status: .internalError, pamCode: PAMCode.systemError.rawValue)
        }
    }
}
