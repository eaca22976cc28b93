// The ledger: every read and write of a user's attempt state, each one
// transaction under the user's lock, with the record arithmetic of R3, R9,
// R12 and R13. The engine charges and settles through it; `authsucc`,
// `localauth reset` and `status` and the store tests use it directly.

/// The instant an operation happens, read once per store transaction.
public struct Moment: Equatable {
    public var boot: Int64
    public var wall: Int64
    public var bootID: [UInt8]

    public init(boot: Int64, wall: Int64, bootID: [UInt8]) {
        self.boot = boot
        self.wall = wall
        self.bootID = bootID
    }
}

public struct Ledger<Store: StateStore, Time: Clock, Log: EventLog> {
    public var options: Options
    public var store: Store
    /// Where the counting goes on while the state directory is read-only
    /// (RuntimeCounting); nil: nowhere, such a failure refuses.
    public var runtime: Store?
    public var clock: Time
    public var log: Log
    /// The failure of the last transaction, nil when it succeeded.
    public private(set) var lastFailure: StoreFailure? = nil
    /// Whether the last transaction counted in /run (the disk read-only).
    public private(set) var lastCountedInRuntime = false
    /// Said once per ledger: the log line that counting went to /run.
    private var notedRuntime = false

    public init(options: Options, store: Store, runtime: Store? = nil, clock: Time, log: Log) {
        self.options = options
        self.store = store
        self.runtime = runtime
        self.clock = clock
        self.log = log
    }


    public mutating func now() -> Moment {
        Moment(boot: clock.bootNanoseconds(), wall: clock.wallSeconds(), bootID: clock.bootID())
    }

    /// Whether back-off applies to this user (root is exempt unless
    /// `even_deny_root`, R9).
    func backoffApplies(_ user: UserIdentity) -> Bool { user.uid != 0 || options.evenDenyRoot }

    /// One transaction on the user's record, with the moment and the rules
    /// of now. A store failure is logged as "cannot <action> uid N: <why>"
    /// followed by `consequence`, and gives nil.
    mutating func transaction<Result>(_ user: UserIdentity, _ action: String, consequence: String = "", level: LogLevel = .error,
                                      _ body: (inout StateRecord?, LoadStatus, RecordRules, Moment) -> Result) -> Result? {
        // The result is carried out through a closure, so that the
        // transaction's code exists once rather than once per result type.
        var result: Result? = nil
        let done = transact(user, action, consequence: consequence, level: level) { record, status, rules, moment in
            result = body(&record, status, rules, moment)
        }
        return done ? result : nil
    }

    /// The transaction behind `transaction`; false when the store failed.
    /// A record kept in /run while the disk was read-only is folded into
    /// the disk's first (on disk before it leaves /run: a crash between
    /// the two folds it again, which never lowers a count). When the disk
    /// is read-only the transaction runs in /run instead (RuntimeCounting),
    /// from the disk's record the first time. `body` changes only the
    /// record, so running it again there after a write the disk refused
    /// changes nothing else.
    mutating func transact(_ user: UserIdentity, _ action: String, consequence: String, level: LogLevel,
                           _ body: (inout StateRecord?, LoadStatus, RecordRules, Moment) -> Void) -> Bool {
        let moment = now()
        let rules = RecordRules(options: options, backoffApplies: backoffApplies(user))
        var folded: StateRecord? = nil
        lastCountedInRuntime = false
        // What /run holds, looked at first so that a shortage refuses: a
        // fold skipped would leave the disk's lower counts to decide. (A
        // record /run gets after this look, from a prompt that found the
        // disk read-only an instant before, is folded by the next one.)
        var held: (record: StateRecord?, status: LoadStatus) = (nil, .absent)
        if let runtime {
            do { held = try runtime.peek(uid: user.uid, userName: user.name) } catch {
                return failed(.runtimeUnusable(error), user, action, consequence, level)
            }
        }
        do {
            try store.withRecord(uid: user.uid, userName: user.name) { record, status in
                var status = status
                if case (let held?, .loaded) = held {
                    record = RuntimeCounting.fold(disk: status == .loaded ? record : nil, runtime: held, options: rules.options,
                                                  backoffApplies: rules.backoffApplies, moment: moment)
                    status = .loaded
                    folded = held
                }
                body(&record, status, rules, moment)
            }
            lastFailure = nil
        } catch {
            guard runtime != nil, RuntimeCounting.applies(to: error, facts: store.storageFacts()) else {
                return failed(error, user, action, consequence, level)
            }
            return transactInRuntime(user, action, consequence: consequence, level: level, rules: rules, moment: moment, body)
        }
        if let folded {
            do {
                if try runtime?.remove(uid: user.uid, userName: user.name, ifStill: folded) == true {
                    log.log(.notice, "uid \(user.uid): the counts kept in \(RuntimeCounting.directory) while the state directory was "
                            + "read-only are back in \(printableText(options.stateDir))")
                }
            } catch {
                log.log(.warning, "uid \(user.uid): the counts kept in \(RuntimeCounting.directory) are on disk but stay there "
                        + "(\(storeFailureText(error, directory: utf8Bytes("\(RuntimeCounting.directory)"), describe: store.describe))); "
                        + "they are folded again, never lowered")
            }
        }
        return true
    }

    /// The transaction in /run: its record, or, when it holds none, the
    /// disk's as it still reads raised to one short of each limit
    /// (`RuntimeCounting.seed`; R12's replacement when the disk fails even
    /// that read). The disk is read under /run's lock, once /run is seen
    /// to hold nothing: a record another prompt folded back and removed a
    /// moment before is then on the disk that is read. (Folding the disk's
    /// record into /run's at every transaction instead would undo each
    /// success counted there, and keep a wait anchored in an earlier boot
    /// from ever running out: the read-only disk cannot save its progress.)
    mutating func transactInRuntime(_ user: UserIdentity, _ action: String, consequence: String, level: LogLevel, rules: RecordRules,
                                    moment: Moment, _ body: (inout StateRecord?, LoadStatus, RecordRules, Moment) -> Void) -> Bool {
        let disk = store
        var diskFailure: StoreFailure? = nil
        do throws(StoreFailure) {
            try runtime?.withRecord(uid: user.uid, userName: user.name) { record, status in
                var status = status
                var start: StateRecord? = nil
                if status == .absent {
                    let stored: (record: StateRecord?, status: LoadStatus)
                    do throws(StoreFailure) { stored = try disk.peek(uid: user.uid, userName: user.name) } catch {
                        diskFailure = error
                        return
                    }
                    if case .damaged = stored.status {
                        (record, status) = stored
                    } else {
                        start = RuntimeCounting.seed(stored.record ?? rules.fresh(user, moment), options: rules.options)
                        record = start
                        status = .loaded
                    }
                }
                body(&record, status, rules, moment)
                // A look (`localauth status`) that changed nothing leaves
                // /run as it was: the first change makes the record there.
                if let start, record == start { record = nil }
            }
            if let diskFailure { throw diskFailure }
        } catch {
            return failed(.runtimeUnusable(error), user, action, consequence, level)
        }
        lastFailure = nil
        lastCountedInRuntime = true
        if !notedRuntime {
            notedRuntime = true
            log.log(.notice, "state directory \(printableText(options.stateDir)) is read-only (its filesystem): counting in "
                    + "\(RuntimeCounting.directory) until it is writable again")
        }
        return true
    }

    mutating func failed(_ error: StoreFailure, _ user: UserIdentity, _ action: String, _ consequence: String, _ level: LogLevel) -> Bool {
        lastFailure = error
        log.log(level, "cannot \(action) uid \(user.uid): \(storeFailureText(error, directory: options.stateDir, describe: store.describe))\(consequence)")
        return false
    }

    /// R11: the password module of a biometrics-policy stack succeeded for
    /// this user after this module's own prompt: reset `F` and `P`.
    /// It is a correct password too: the rules that ask for the password
    /// (after a boot, after long disuse, after an enrollment change) are
    /// satisfied by it, with `enrollment` as the enrollment it saw (nil:
    /// not read, the last one read is kept).
    public mutating func resetAfterPasswordSuccess(_ user: UserIdentity, enrollment: [UInt8]?) -> Bool {
        transaction(user, "reset the record of") { record, _, _, moment -> Bool in
            var current = record ?? StateRecord(uid: user.uid, userName: user.name, createdWallSeconds: moment.wall)
            current.fingerprintFailures = 0
            current.passcodeFailures = 0
            current.backoffRemainingMilliseconds = 0
            current.settleFailures()
            current.notePasscodeSuccess(moment, enrollment: enrollment)
            current.lastUnlockBootNanoseconds = moment.boot
            current.lastUnlockBootID = moment.bootID
            current.lastUnlockMethod = .passcode
            current.lastUnlockSession = []
            record = current
            return true
        } ?? false
    }

    /// `localauth reset`: the counts and the wait go; nothing else (it is no
    /// password, so the rules that ask for one stay as they are).
    public mutating func resetCounts(_ user: UserIdentity) -> Bool {
        transaction(user, "reset the record of") { record, status, _, moment -> Bool in
            guard record != nil || status != .absent else { return true }
            var current = record ?? StateRecord(uid: user.uid, userName: user.name, createdWallSeconds: moment.wall)
            current.fingerprintFailures = 0
            current.passcodeFailures = 0
            current.backoffRemainingMilliseconds = 0
            current.settleFailures()
            record = current
            return true
        } ?? false
    }

    /// What the store holds for a user, read without changing anything (for
    /// `localauth status`): a damaged record is reported, not replaced.
    public struct Inspection: Equatable {
        public var status: LoadStatus
        public var record: StateRecord?
        public var remainingBackoffMilliseconds: Int64
        public var fingerprintLocked: Bool
    }

    public mutating func inspect(_ user: UserIdentity) -> Inspection? {
        let lockout = options.lockout
        return transaction(user, "read the record of") { record, status, rules, moment -> Inspection in
            let remaining = record.map { rules.remainingBackoff($0, moment: moment) } ?? 0
            let locked = (record?.fingerprintFailures ?? 0) >= lockout
            return Inspection(status: status, record: record, remainingBackoffMilliseconds: remaining, fingerprintLocked: locked)
        }
    }

    /// Reads the record, replacing a damaged one per R12 (and saying so).
    public mutating func snapshot(_ user: UserIdentity) -> StateRecord? {
        var damage: RecordDamage? = nil
        let result = transaction(user, "read the record of") { record, status, rules, moment -> StateRecord in
            if case .damaged(let why) = status { damage = why }
            var current = rules.current(&record, status, user: user, moment: moment)
            if rules.reanchorBackoff(&current, moment: moment) { record = current }
            return current
        }
        if result != nil, let damage {
            log.log(.warning, "record of uid \(user.uid) was replaced (\(damage.text)): fingerprint locked, passcode after the first back-off")
        }
        return result
    }

    public enum FingerprintCharge: Equatable {
        /// The attempt's number, and F with this attempt counted, as the
        /// record stood under the lock (another prompt may have changed it).
        case charged(UInt64, failures: Int)
        case limitReached
        case storeFailed
    }

    /// R3: under the lock, check the limit and durably count the attempt as failed.
    public mutating func chargeFingerprint(_ user: UserIdentity, _ request: Request) -> FingerprintCharge {
        transaction(user, "charge a fingerprint attempt for", consequence: "; attempt refused") { record, status, rules, moment in
            var current = rules.current(&record, status, user: user, moment: moment)
            guard current.fingerprintFailures < rules.options.lockout else {
                record = current
                return FingerprintCharge.limitReached
            }
            current.fingerprintFailures += 1
            let sequence = current.appendFailure(kind: .fingerprint, wallSeconds: moment.wall, service: request.service,
                                                 tty: request.tty, remoteHost: request.remoteHost)
            record = current
            return .charged(sequence, failures: current.fingerprintFailures)
        } ?? .storeFailed
    }

    public enum PasscodeCharge: Equatable {
        case charged(UInt64)
        case waiting(Int64)
        case storeFailed
    }

    /// R3 + R9: under the lock, refuse during a back-off, else count the
    /// entry as wrong and start the back-off it would earn.
    public mutating func chargePasscode(_ user: UserIdentity, _ request: Request) -> PasscodeCharge {
        transaction(user, "charge a passcode attempt for", consequence: "; attempt refused") { record, status, rules, moment in
            var current = rules.current(&record, status, user: user, moment: moment)
            let remaining = rules.remainingBackoff(current, moment: moment)
            if remaining > 0 {
                if rules.reanchorBackoff(&current, moment: moment) { record = current }
                return PasscodeCharge.waiting(remaining)
            }
            current.passcodeFailures += 1
            rules.startBackoff(&current, moment: moment)
            let sequence = current.appendFailure(kind: .passcode, wallSeconds: moment.wall, service: request.service,
                                                 tty: request.tty, remoteHost: request.remoteHost)
            record = current
            return .charged(sequence)
        } ?? .storeFailed
    }

    /// The remaining passcode wait in milliseconds; nil when the store failed.
    public mutating func backoffRemaining(_ user: UserIdentity) -> Int64? {
        transaction(user, "read the back-off of") { record, status, rules, moment -> Int64 in
            var current = rules.current(&record, status, user: user, moment: moment)
            let remaining = rules.remainingBackoff(current, moment: moment)
            if remaining > 0, rules.reanchorBackoff(&current, moment: moment) { record = current }
            return remaining
        }
    }

    /// An attempt that provably ended without a verdict is given back (R3).
    public mutating func refund(_ user: UserIdentity, kind: FailureEntry.Kind, sequence: UInt64) {
        _ = transaction(user, "refund an attempt for", consequence: "; it stays counted", level: .warning) { record, status, rules, _ in
            guard status == .loaded, var current = record else { return }
            // Only an attempt whose count is still there: a success since
            // then reset it, and a later charge must not pay for it.
            guard current.recentFailures.contains(where: { $0.sequence == sequence && !$0.settled }) else { return }
            switch kind {
            case .fingerprint: current.fingerprintFailures = max(0, current.fingerprintFailures - 1)
            case .passcode:
                current.passcodeFailures = max(0, current.passcodeFailures - 1)
                // The charge started the wait its count earned (R9). Drop
                // it only when the count left earns none: a parallel
                // prompt's charge may have earned the running wait.
                if rules.options.backoffSeconds(afterFailures: current.passcodeFailures) == 0 || !rules.backoffApplies {
                    current.backoffRemainingMilliseconds = 0
                }
            }
            current.removeFailure(sequence: sequence)
            record = current
        }
    }

    /// R4/R8: a match or a correct passcode resets both counts.
    public mutating func recordSuccess(_ user: UserIdentity, method: AuthenticationMethod, sequence: UInt64, enrollment: [UInt8]? = nil,
                                       session: [UInt8] = []) {
        _ = transaction(user, "record a success for") { record, _, _, moment in
            var current = record ?? StateRecord(uid: user.uid, userName: user.name, createdWallSeconds: moment.wall)
            current.fingerprintFailures = 0
            current.passcodeFailures = 0
            current.backoffRemainingMilliseconds = 0
            current.removeFailure(sequence: sequence)
            current.settleFailures()
            current.lastUnlockBootNanoseconds = moment.boot
            current.lastUnlockBootID = moment.bootID
            current.lastUnlockMethod = method
            current.lastUnlockSession = session.count <= RecordFormat.maxSessionLength ? session : []
            switch method {
            case .biometry:
                current.lastFingerprintSuccessWallSeconds = moment.wall
                current.lastFingerprintSuccessBootNanoseconds = moment.boot
                current.lastFingerprintSuccessBootID = moment.bootID
            case .passcode:
                current.notePasscodeSuccess(moment, enrollment: enrollment)
            }
            record = current
        }
    }
}

/// The administrator's words for a store failure; directory problems name the path.
public func storeFailureText(_ failure: StoreFailure, directory: [UInt8], describe: (Errno) -> String) -> String {
    switch failure {
    case .directoryUnusable(let problem):
        let path = "state directory " + printableText(directory)
        switch problem {
        case .notAbsolute: return path + " is not an absolute path"
        case .unsafeAncestor:
            return path + ": a directory on its path is a symlink, not root's, or writable by group or others; refused"
        case .missingAncestor: return path + ": a directory on its path is missing"
        case .missingInWritableParent: return path + " is missing and its parent is writable by others; create it as root with mode 0700"
        case .unsafeDirectory: return path + " is not a directory owned by root with mode 0700"
        case .cannotOpen(let errno): return path + " cannot be opened: " + describe(errno)
        }
    case .lockFailed(let errno): return "lock failed: " + describe(errno)
    case .lockHeld(let milliseconds):
        return "another prompt held the record's lock for \(milliseconds) ms (a process stopped or frozen while writing); not waited for longer"
    case .writeFailed(let errno): return "write failed: " + describe(errno)
    case .readFailed(let errno): return "read failed: " + describe(errno)
    case .fileSizeLimited: return "file size limit"
    case .runtimeUnusable(let inRuntime):
        return "state directory " + printableText(directory) + " is read-only, and counting in "
            + "\(RuntimeCounting.directory) failed too: " + storeFailureText(inRuntime, directory: utf8Bytes("\(RuntimeCounting.directory)"),
                                                                            describe: describe)
    }
}

/// The record arithmetic of R3, R9, R12 and R13, free of any I/O so it can
/// run inside a store transaction.
struct RecordRules {
    let options: Options
    let backoffApplies: Bool

    /// The record to work on: the stored one, a fresh one for an absent file
    /// (not stored unless changed), or the R12 replacement for a damaged one
    /// (stored at once).
    func current(_ record: inout StateRecord?, _ status: LoadStatus, user: UserIdentity, moment: Moment) -> StateRecord {
        switch status {
        case .loaded:
            if let record { return record }
            return fresh(user, moment)
        case .absent:
            return fresh(user, moment)
        case .damaged:
            var replacement = fresh(user, moment)
            replacement.fingerprintFailures = options.lockout
            replacement.passcodeFailures = options.firstBackoffThreshold
            startBackoff(&replacement, moment: moment)
            record = replacement
            return replacement
        }
    }

    /// A new record. Its attempt numbers start from the clocks, not from 1,
    /// so an attempt charged to a record that was since replaced can never
    /// match (and be refunded against) a new attempt.
    func fresh(_ user: UserIdentity, _ moment: Moment) -> StateRecord {
        var record = StateRecord(uid: user.uid, userName: user.name, createdWallSeconds: moment.wall)
        record.nextSequence = UInt64(truncatingIfNeeded: moment.wall) << 24 ^ UInt64(truncatingIfNeeded: moment.boot) | 1
        return record
    }

    /// R9: the wait earned by the current passcode failure count.
    func startBackoff(_ record: inout StateRecord, moment: Moment) {
        let seconds = backoffApplies ? options.backoffSeconds(afterFailures: record.passcodeFailures) : 0
        record.backoffRemainingMilliseconds = Int64(seconds) * 1000
        record.backoffAnchorBootNanoseconds = moment.boot
        record.backoffBootID = moment.bootID
    }

    /// R13: the wait left, counted on the boot clock within a boot; a new
    /// boot resumes the stored remainder. Never more than the stored wait.
    func remainingBackoff(_ record: StateRecord, moment: Moment) -> Int64 {
        let stored = storedWait(record)
        guard backoffApplies, stored > 0 else { return 0 }
        guard record.backoffBootID == moment.bootID, moment.boot >= record.backoffAnchorBootNanoseconds else {
            return stored
        }
        let elapsed = (moment.boot - record.backoffAnchorBootNanoseconds) / 1_000_000
        return max(0, stored - elapsed)
    }

    /// The stored wait, never more than `max_backoff`: a record may hold any
    /// number (a valid checksum says nothing about sense), and the
    /// administrator may have lowered the bound since; a wait that never
    /// ends would lock the owner out (R12).
    func storedWait(_ record: StateRecord) -> Int64 {
        min(record.backoffRemainingMilliseconds, Int64(options.maxBackoffSeconds) * 1000)
    }

    /// Saves the wait's progress: the remainder as of now, anchored to now in
    /// this boot. A later boot then resumes from the last remainder any
    /// prompt saw, rather than from the full wait (R13). A boot clock below
    /// the anchor, or another boot id, counts no elapsed time: the boot id may
    /// be unreadable, and time is never assumed to have passed.
    /// True when the record changed.
    func reanchorBackoff(_ record: inout StateRecord, moment: Moment) -> Bool {
        guard record.backoffRemainingMilliseconds > 0 else { return false }
        var remaining = storedWait(record)
        if record.backoffBootID == moment.bootID, moment.boot >= record.backoffAnchorBootNanoseconds {
            remaining = max(0, remaining - (moment.boot - record.backoffAnchorBootNanoseconds) / 1_000_000)
        }
        if remaining == record.backoffRemainingMilliseconds, record.backoffBootID == moment.bootID,
           record.backoffAnchorBootNanoseconds == moment.boot {
            return false
        }
        record.backoffRemainingMilliseconds = remaining
        record.backoffAnchorBootNanoseconds = moment.boot
        record.backoffBootID = moment.bootID
        return true
    }
}

extension Ledger {
    /// An app's reuse window: the method of this account's last success
    /// when it happened in this boot, in `session` (never an empty one),
    /// at most `seconds` ago on the boot clock, with no failure since; nil
    /// otherwise or when the record cannot be read. Reads only.
    public mutating func recentUnlock(_ user: UserIdentity, session: [UInt8], withinSeconds seconds: Int) -> AuthenticationMethod? {
        guard seconds > 0, !session.isEmpty, let record = snapshot(user), let method = record.lastUnlockMethod else { return nil }
        let moment = now()
        let age = moment.boot - record.lastUnlockBootNanoseconds
        guard record.lastUnlockBootID == moment.bootID, moment.bootID != RecordFormat.zeroID,
              record.lastUnlockSession == session, age >= 0, age <= Int64(seconds) * 1_000_000_000,
              record.fingerprintFailures == 0, record.passcodeFailures == 0 else { return nil }
        return method
    }
}
