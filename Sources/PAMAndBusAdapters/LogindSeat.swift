// logind on the system bus: the caller's session (found by its cgroup) and
// the lid, for the rules about whose touch the reader would take. Asked
// before the reader is claimed and again when a match arrives, over the
// prompt's one bus connection.
import LocalAuth
import LibcSystem

public struct LogindSeat: SeatObserver {
    // Computed, not stored: libpam unloads the module at every pam_end, and
    // a stored array in a static would be allocated anew by each load and
    // never freed (a leak per prompt in every long-running PAM caller).
    static var name: [UInt8] { literalBytes("org.freedesktop.login1") }
    static var managerPath: [UInt8] { literalBytes("/org/freedesktop/login1") }
    static var managerInterface: [UInt8] { literalBytes("org.freedesktop.login1.Manager") }
    static var sessionInterface: [UInt8] { literalBytes("org.freedesktop.login1.Session") }
    static var properties: [UInt8] { literalBytes("org.freedesktop.DBus.Properties") }
    /// logind answers in microseconds; a logind that does not answer
    /// within this keeps the reader out, it does not hold the prompt.
    static let callTimeoutMicroseconds: UInt64 = 2_000_000

    /// The session whose facts are asked for; nil: the caller's own.
    let sessionID: [UInt8]?
    /// With an empty `sessionID`: the uid whose user manager that process
    /// runs in (the caller's own is read when `sessionID` is nil).
    let userManagerOwner: UInt32?
    /// `user_manager_stand_in`: whether such a process may stand in its
    /// account's session.
    let standInAllowed: Bool
    /// The prompt's connection, shared with the reader: logind is asked
    /// before the reader is claimed and again when a match arrives.
    private let line: SharedSystemBus
    /// At most this many sessions in logind's list are read, every user's
    /// (logind's own bound, SessionsMax, is 8192 by default); a longer list
    /// is no answer.
    static let sessionsRead = 8192

    public init(sessionID: [UInt8]? = nil, userManagerOwner: UInt32? = nil, standInAllowed: Bool = true,
                bus line: SharedSystemBus = SharedSystemBus()) {
        self.sessionID = sessionID
        self.userManagerOwner = userManagerOwner
        self.standInAllowed = standInAllowed
        self.line = line
    }

    public mutating func observe() -> SeatObservation {
        // Only logind's own absence turns the rules off; a bus that cannot
        // be reached (too many open files, a crowded socket) keeps the
        // reader out.
        guard let bus = line.connection() else { return .unanswered }
        bus.setCallTimeout(microseconds: LogindSeat.callTimeoutMicroseconds)
        defer { bus.setCallTimeout(microseconds: SharedSystemBus.callTimeoutMicroseconds) }
        let id = sessionID ?? LogindSession.callerSession()
        // The lid and the session's object go out together (one round trip).
        guard let lid = bus.start(destination: LogindSeat.name, path: LogindSeat.managerPath, interface: LogindSeat.properties,
                                  member: literalBytes("Get"), arguments: [LogindSeat.managerInterface, literalBytes("LidClosed")]) else {
            return .unanswered
        }
        let found = id.isEmpty ? nil : bus.start(destination: LogindSeat.name, path: LogindSeat.managerPath,
                                                 interface: LogindSeat.managerInterface, member: literalBytes("GetSession"), arguments: [id])
        guard id.isEmpty || found != nil,
              bus.wait(for: [lid] + (found.map { [$0] } ?? []), milliseconds: Int64(LogindSeat.callTimeoutMicroseconds / 1000)) else {
            return .unanswered
        }
        var lidClosed = false
        if lid.succeeded {
            guard let closed = lid.message?.readVariantFlag() else { return .unanswered }
            lidClosed = closed
        } else if LogindSeat.isAbsent(lid.errorName) {
            return .noLogind
        } else if !LogindSeat.isMissingProperty(lid.errorName) {
            return .unanswered
        }
        guard let found else {
            // In no session: a process of a user manager may stand in its
            // account's own session (the caller's own manager is read here,
            // an agent's was read with its session).
            guard standInAllowed, let owner = sessionID == nil ? LogindSession.userManagerOwner(of: 0) : userManagerOwner else {
                return .seen(session: nil, lidClosed: lidClosed)
            }
            switch LogindSeat.standIn(for: owner, bus) {
            case .answered(let session): return .seen(session: session, lidClosed: lidClosed)
            case .unanswered: return .unanswered
            }
        }
        guard found.succeeded else {
            // logind knows no such session: the caller is in none it manages.
            return LogindSeat.isNoAnswer(found.errorName) ? .unanswered : .seen(session: nil, lidClosed: lidClosed)
        }
        guard let path = found.message?.readObjectPath(limit: 256) else { return .unanswered }
        switch LogindSeat.facts(id: id, path: path, bus) {
        case .answered(let session): return .seen(session: session, lidClosed: lidClosed)
        case .unanswered: return .unanswered
        }
    }

    /// A session's facts as logind answers (`answered(nil)`: it knows no
    /// such session), or no answer.
    enum SessionAnswer {
        case answered(SessionFacts?)
        case unanswered
    }

    /// The facts of the session at `path`.
    static func facts(id: [UInt8], path: [UInt8], _ bus: SystemBus) -> SessionAnswer {
        let all = bus.call(destination: LogindSeat.name, path: path, interface: LogindSeat.properties, member: literalBytes("GetAll"),
                           arguments: [LogindSeat.sessionInterface])
        guard all.succeeded else {
            return LogindSeat.isNoAnswer(all.errorName) ? .unanswered : .answered(nil)
        }
        let flagNames = [literalBytes("Active"), literalBytes("Remote"), literalBytes("LockedHint")]
        guard let read = all.message?.readProperties(flags: flagNames, namedPath: literalBytes("Seat"),
                                                     numberedPath: literalBytes("User")),
              let uid = read.number else { return .unanswered }
        func flag(_ name: StaticString) -> Bool? { read.flags.first { bytesEqual($0.name, name) }?.value }
        // A lock state not stated is no answer (never "unlocked").
        guard flag("LockedHint") != nil else { return .unanswered }
        // A session whose activity or remoteness is not stated is not
        // taken for an active local one.
        return .answered(SessionFacts(id: id, uid: uid, active: flag("Active") ?? false, remote: flag("Remote") ?? true,
                                      seat: read.name ?? [], locked: flag("LockedHint") ?? false))
    }

    /// The session a process of `owner`'s user manager stands in: logind's
    /// list, the facts of each of `owner`'s sessions, and the rule
    /// (BiometryRules.userManagerStandIn). A session of theirs that cannot
    /// be read is no answer: it could be the remote one.
    static func standIn(for owner: UInt32, _ bus: SystemBus) -> SessionAnswer {
        let list = bus.call(destination: LogindSeat.name, path: LogindSeat.managerPath, interface: LogindSeat.managerInterface,
                            member: literalBytes("ListSessions"))
        let entries = withExtendedLifetime(list) { list.succeeded ? list.message?.readSessionList(count: sessionsRead, limit: 256) : nil }
        guard let entries else { return .unanswered }
        var sessions: [SessionFacts] = []
        for entry in entries where entry.uid == owner {
            guard case .answered(let session?) = facts(id: entry.id, path: entry.path, bus), session.uid == owner else {
                return .unanswered
            }
            sessions.append(session)
        }
        return .answered(BiometryRules.userManagerStandIn(sessions, account: owner))
    }

    /// No answer came: sd-bus's own errors for a call that timed out or a
    /// connection that went away (or none at all), as opposed to logind's.
    static func isNoAnswer(_ errorName: [UInt8]) -> Bool {
        errorName.isEmpty || bytesEqual(errorName, "org.freedesktop.DBus.Error.NoReply")
            || bytesEqual(errorName, "org.freedesktop.DBus.Error.Timeout")
            || bytesEqual(errorName, "org.freedesktop.DBus.Error.TimedOut")
            || bytesEqual(errorName, "org.freedesktop.DBus.Error.Disconnected")
    }

    /// Nobody owns logind's name on this bus.
    static func isAbsent(_ errorName: [UInt8]) -> Bool {
        bytesEqual(errorName, "org.freedesktop.DBus.Error.ServiceUnknown")
            || bytesEqual(errorName, "org.freedesktop.DBus.Error.NameHasNoOwner")
    }

    /// A logind without the lid property (a machine without a lid switch
    /// reports it false; an older logind may not have it).
    static func isMissingProperty(_ errorName: [UInt8]) -> Bool {
        bytesEqual(errorName, "org.freedesktop.DBus.Error.UnknownProperty")
            || bytesEqual(errorName, "org.freedesktop.DBus.Error.InvalidArgs")
    }
}
