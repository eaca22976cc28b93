// When the finger is not enough, and whose touch it is: the rules that keep
// the reader out of a prompt although it works and the user has a finger
// enrolled. Pure functions of the record, the moment, the enrollment and
// logind's answer, so that each rule is a row of a table.

/// Why the password is required before the fingerprint works again. Only a
/// correct password lifts it.
public enum PasscodeRequirement: Equatable {
    /// No correct password since this boot.
    case afterRestart
    /// No unlock of any kind for `unlock_interval` (the seconds given).
    case noUnlockFor(Int)
    /// No correct password for `passcode_interval` and no match for
    /// `fingerprint_interval` (the password's seconds given).
    case passcodeUnusedFor(Int)
    /// The enrolled prints changed since the last correct password.
    case enrollmentChanged

    /// The `localauth status` and `check` answer.
    public var statusText: String {
        switch self {
        case .afterRestart: return "password required: after restart"
        case .noUnlockFor(let seconds): return "password required: not unlocked for \(hoursText(seconds))"
        case .passcodeUnusedFor(let seconds): return "password required: password not used for \(hoursText(seconds))"
        case .enrollmentChanged: return "password required: enrollment changed"
        }
    }
}

/// Why logind's answer keeps the reader out of this prompt.
public enum TouchDenial: Equatable {
    /// The caller is not in an active, local session on a seat that
    /// belongs to the user.
    case notActiveSession
    /// The session's screen is locked and this service is no screen locker.
    case screenLocked
    /// The lid is closed (the reader is inside).
    case lidClosed
    /// logind is there but did not answer.
    case logindUnanswered

    public var statusText: String {
        switch self {
        case .notActiveSession: return "fingerprint not used: not the active local session on a seat"
        case .screenLocked: return "fingerprint not used: the screen is locked (only the screen locker may use the reader)"
        case .lidClosed: return "fingerprint not used: the lid is closed"
        case .logindUnanswered: return "fingerprint not used: logind did not answer"
        }
    }
}

/// Everything that keeps a working, enrolled reader out of a prompt.
public enum BiometryBlock: Equatable {
    case passcodeRequired(PasscodeRequirement)
    case touch(TouchDenial)

    /// What the block makes of biometrics, as Apple reports it: a password
    /// requirement is a lockout (only the password lifts it); a touch that
    /// cannot be meant is biometrics not available now.
    public var error: LAErrorCode {
        switch self {
        case .passcodeRequired: return .biometryLockout
        case .touch: return .biometryNotAvailable
        }
    }

    public var statusText: String {
        switch self {
        case .passcodeRequired(let requirement): return requirement.statusText
        case .touch(let denial): return denial.statusText
        }
    }
}

public enum BiometryRules {
    /// The password requirement in force for `record` at `moment`, for a
    /// user whose enrollment is now `domainState`; nil when the finger may
    /// be used. Every interval is measured on the boot clock. A success
    /// in an earlier boot is counted as at least as old as this boot,
    /// since nothing trusted says how long the machine was off.
    public static func passcodeRequirement(_ record: StateRecord, moment: Moment, domainState: [UInt8],
                                           options: Options) -> PasscodeRequirement? {
        let zero = RecordFormat.zeroID
        let passcodeSeen = record.lastPasscodeSuccessBootID != zero
        if options.passcodeAfterBoot && (moment.bootID == zero || record.lastPasscodeSuccessBootID != moment.bootID) {
            return .afterRestart
        }
        if passcodeSeen && !domainState.isEmpty && record.lastPasscodeSuccessDigest != RecordFormat.storedDigest(domainState) {
            return .enrollmentChanged
        }
        if let age = age(record.lastUnlockBootNanoseconds, record.lastUnlockBootID, moment),
           age >= seconds(options.unlockIntervalSeconds) {
            return .noUnlockFor(options.unlockIntervalSeconds)
        }
        if let passcodeAge = age(record.lastPasscodeSuccessBootNanoseconds, record.lastPasscodeSuccessBootID, moment),
           passcodeAge >= seconds(options.passcodeIntervalSeconds) {
            let fingerAge = age(record.lastFingerprintSuccessBootNanoseconds, record.lastFingerprintSuccessBootID, moment)
            if fingerAge.map({ $0 >= seconds(options.fingerprintIntervalSeconds) }) ?? true {
                return .passcodeUnusedFor(options.passcodeIntervalSeconds)
            }
        }
        return nil
    }

    /// Why logind's answer keeps the reader out of a prompt of `service`
    /// for `user`; nil when it does not (or there is no logind).
    public static func touchDenial(_ observation: SeatObservation, user: UserIdentity, service: [UInt8],
                                   options: Options) -> TouchDenial? {
        switch observation {
        case .noLogind: return nil
        case .unanswered: return .logindUnanswered
        case .seen(let session, let lidClosed):
            if lidClosed && options.skipWhenLidClosed { return .lidClosed }
            guard let session, !outsideTargetSession(observation, user: user) else { return .notActiveSession }
            if session.locked && !options.isLockerService(service) { return .screenLocked }
            return nil
        }
    }

    /// Whether an app's sheet has lost the person: the session locked, or
    /// stopped being `user`'s active local one (a switch of user). The
    /// system then cancels it (systemCancel). Without an answer from logind
    /// nothing changes (a match is checked again anyway).
    public static func appLostThePerson(_ observation: SeatObservation, user: UserIdentity) -> Bool {
        guard case .seen(let session, _) = observation else { return false }
        guard let session else { return true }
        return outsideTargetSession(observation, user: user) || session.locked
    }

    /// The services whose sheet the system cancels when the person leaves
    /// it: apps only. A screen locker works on a locked session by design,
    /// and the other prompts end with the person's own keys.
    public static func cancelsWhenThePersonLeaves(service: [UInt8]) -> Bool {
        bytesEqual(service, KnownServices.app)
    }

    /// For a root caller acting for a name: whether the reader is kept out
    /// without a word (R14): outside the account's own session, or when
    /// logind does not answer. Without logind the rules do not apply.
    public static func keepsQuietForANamedAccount(_ observation: SeatObservation, user: UserIdentity) -> Bool {
        switch observation {
        case .noLogind: return false
        case .unanswered: return true
        case .seen: return outsideTargetSession(observation, user: user)
        }
    }

    /// The session a process in no login session stands in when it runs in
    /// `account`'s own user manager (systemd's user@UID.service, where
    /// GNOME's and Plasma's default sessions run the desktop's terminals,
    /// apps and polkit agents): the account's one active local session on a
    /// seat, as `sessions` (logind's list) shows it, and only while the
    /// account has no remote session (an ssh login, open or closing, can
    /// start processes in that same user manager). nil: none, and the
    /// reader stays out. systemd and polkit take such a process for the
    /// account's graphical session too. The account's only session on a
    /// seat, whatever its state: with two (a locked desktop and a text
    /// console switched to), nothing says which one the process belongs to,
    /// and standing in the active one would let the locked desktop's
    /// terminals and dialogs take the reader past its lock.
    public static func userManagerStandIn(_ sessions: [SessionFacts], account: UInt32) -> SessionFacts? {
        var seated: [SessionFacts] = []
        for session in sessions where session.uid == account {
            if session.remote { return nil }
            if !session.seat.isEmpty { seated.append(session) }
        }
        guard seated.count == 1, seated[0].active else { return nil }
        return seated[0]
    }

    /// Whether logind places the caller outside `user`'s own active local
    /// session on a seat (a login screen, a greeter, another user's or a
    /// remote session); false when logind is absent or did not answer.
    public static func outsideTargetSession(_ observation: SeatObservation, user: UserIdentity) -> Bool {
        guard case .seen(let session, _) = observation else { return false }
        guard let session else { return true }
        return !(session.uid == user.uid && session.active && !session.remote && !session.seat.isEmpty)
    }

    /// How long ago a success at `boot` nanoseconds of boot `bootID` was;
    /// nil for never. Earlier boots: at least this boot's age. A time
    /// ahead of the clock (only a root-made time namespace can do that)
    /// counts as now.
    static func age(_ boot: Int64, _ bootID: [UInt8], _ moment: Moment) -> Int64? {
        guard bootID != RecordFormat.zeroID else { return nil }
        guard bootID == moment.bootID else { return max(moment.boot, 0) }
        let (difference, overflow) = moment.boot.subtractingReportingOverflow(boot)
        // A time no clock can give (a damaged field): as old as can be.
        guard !overflow else { return Int64.max }
        return max(difference, 0)
    }

    static func seconds(_ value: Int) -> Int64 { Int64(value) * 1_000_000_000 }
}

/// "48 hours", "1 hour", "90 minutes".
func hoursText(_ seconds: Int) -> String {
    if seconds % 3600 == 0 { return seconds == 3600 ? "1 hour" : "\(seconds / 3600) hours" }
    return "\((seconds + 59) / 60) minutes"
}
