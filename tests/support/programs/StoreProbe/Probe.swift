// la-store-probe: drives the real ledger over the real on-disk
// FileStateStore, for the integration tests in tests/module/test_store.py. A test
// tool: it is built by the tests and never installed.
//
//   charge STATE_DIR UID NAME COUNT [passcode|fingerprint] [--progress] [--lock-wait=MS]
//       COUNT attempts, each charged in its own store transaction through
//       Ledger.chargePasscode (default) or Ledger.chargeFingerprint.
//       passcode: the options carry an empty back-off schedule, so a charge
//         is never refused by R9 and P can grow to any count (3200 in the
//         concurrency test) while every charge still goes through the
//         ledger's check-and-charge transaction and the store's
//         lock, read, write in place and fdatasync path.
//       fingerprint: lockout is set to its maximum (20); a charge refused by
//         the limit is a failure of this command.
//       --progress: prints "charged N" on stdout after each durable charge
//         (written with write(2), so nothing is buffered when the process is
//         killed). Without it the command prints nothing on success.
//       --lock-wait=MS: the longest wait for a lock another holds (the
//         store's bound, 3000 ms by default).
//   show STATE_DIR UID NAME
//       Ledger.snapshot (which applies R12 to a damaged record) with the
//       default options, then Ledger.backoffRemaining; prints
//       "F=<n> P=<n> backoff_ms=<n>".
//   inspect STATE_DIR UID NAME
//       Reads the record under the lock without changing anything (no R12
//       repair) and prints "status=absent", "status=damaged reason=<text>" or
//       "status=loaded F=<n> P=<n> backoff_ms=<n>" (stored remainder).
//   hold STATE_DIR UID NAME SECONDS
//       Takes the user's lock (inside withRecord), prints "held", sleeps,
//       releases it by returning without a change.
//   password-entered STATE_DIR UID NAME
//       What a correct password accepted by the password module leaves in
//       the record (Ledger.resetAfterPasswordSuccess, the authsucc path),
//       with the enrollment fprintd reports now: the state a user is in
//       after the first password of this boot. Tests that are about the
//       fingerprint start from it; the tests of the boot rule do not.
//
// Exit status: 0 success, 1 failure (message on stderr), 2 usage.
import Glibc
import LocalAuth
import LibcSystem
import PAMAndBusAdapters

/// The ledger's log lines go to stderr, so a failing command says why.
struct StderrLog: EventLog {
    mutating func log(_ level: LogLevel, _ message: String) {
        writeText(2, "la-store-probe: log: " + message + "\n")
    }
}

typealias ProbeLedger = Ledger<FileStateStore, SystemClock, StderrLog>

func writeText(_ fd: Int32, _ text: String) {
    var bytes = Array(text.utf8)
    var offset = 0
    while offset < bytes.count {
        let written = bytes.withUnsafeMutableBytes { buffer in
            Glibc.write(fd, buffer.baseAddress! + offset, buffer.count - offset)
        }
        if written < 0 {
            if errno == EINTR { continue }
            return
        }
        offset += written
    }
}

func fail(_ message: String) -> Int32 {
    writeText(2, "la-store-probe: " + message + "\n")
    return 1
}

let usageText = """
usage: la-store-probe charge STATE_DIR UID NAME COUNT [passcode|fingerprint] [--progress] [--lock-wait=MS]
       la-store-probe password-entered STATE_DIR UID NAME
       la-store-probe show STATE_DIR UID NAME
       la-store-probe inspect STATE_DIR UID NAME
       la-store-probe hold STATE_DIR UID NAME SECONDS

"""

func usage() -> Int32 {
    writeText(2, usageText)
    return 2
}

struct Target {
    var store: FileStateStore
    var user: UserIdentity
}

/// STATE_DIR UID NAME, shared by every command.
func parseTarget(_ arguments: ArraySlice<String>) -> Target? {
    guard arguments.count >= 3 else { return nil }
    let directory = arguments[arguments.startIndex]
    guard directory.hasPrefix("/"), let uid = UInt32(arguments[arguments.startIndex + 1]) else { return nil }
    let name = Array(arguments[arguments.startIndex + 2].utf8)
    guard !name.isEmpty else { return nil }
    return Target(store: FileStateStore(directoryPath: Array(directory.utf8)), user: UserIdentity(uid: uid, name: name))
}

func makeLedger(_ target: Target, options: Options) -> ProbeLedger {
    Ledger(options: options, store: target.store, clock: SystemClock(), log: StderrLog())
}

func probeRequest(_ user: UserIdentity) -> Request {
    Request(scope: .inScope, userName: user.name, user: user, service: Array("la-store-probe".utf8), mode: .prompt)
}

public func run(arguments: [String]) -> Int32 {
    guard let command = arguments.first else { return usage() }
    let rest = arguments.dropFirst()
    switch command {
    case "charge": return charge(rest)
    case "show": return show(rest)
    case "inspect": return inspect(rest)
    case "hold": return hold(rest)
    case "password-entered": return passwordEntered(rest)
    default: return usage()
    }
}

func charge(_ arguments: ArraySlice<String>) -> Int32 {
    var positional: [String] = []
    var progress = false
    var lockWait: Int? = nil
    for argument in arguments {
        if argument == "--progress" {
            progress = true
        } else if argument.hasPrefix("--lock-wait=") {
            guard let milliseconds = Int(argument.dropFirst("--lock-wait=".count)), milliseconds > 0 else { return usage() }
            lockWait = milliseconds
        } else {
            positional.append(argument)
        }
    }
    guard positional.count == 4 || positional.count == 5, var target = parseTarget(positional[0..<3]),
          let count = Int(positional[3]), count >= 0 else { return usage() }
    if let lockWait { target.store.lockWaitMilliseconds = lockWait }
    let kind = positional.count == 5 ? positional[4] : "passcode"
    var options = Options()
    options.stateDir = target.store.directoryPath
    switch kind {
    case "passcode": options.backoff = []
    case "fingerprint": options.lockout = 20
    default: return usage()
    }
    var ledger = makeLedger(target, options: options)
    let request = probeRequest(target.user)
    var done = 0
    while done < count {
        done += 1
        if kind == "passcode" {
            switch ledger.chargePasscode(target.user, request) {
            case .charged: break
            case .waiting(let milliseconds): return fail("charge \(done): refused by back-off (\(milliseconds) ms)")
            case .storeFailed: return fail("charge \(done): the store failed; attempt refused")
            }
        } else {
            switch ledger.chargeFingerprint(target.user, request) {
            case .charged: break
            case .limitReached: return fail("charge \(done): fingerprint lockout reached")
            case .storeFailed: return fail("charge \(done): the store failed; attempt refused")
            }
        }
        if progress { writeText(1, "charged \(done)\n") }
    }
    return 0
}

func passwordEntered(_ arguments: ArraySlice<String>) -> Int32 {
    guard arguments.count == 3, let target = parseTarget(arguments) else { return usage() }
    var options = Options()
    options.stateDir = target.store.directoryPath
    var ledger = makeLedger(target, options: options)
    let enrollment = currentEnrollment(userName: target.user.name)
    guard ledger.resetAfterPasswordSuccess(target.user, enrollment: enrollment) else { return fail("password-entered: cannot write") }
    return 0
}

func show(_ arguments: ArraySlice<String>) -> Int32 {
    guard arguments.count == 3, let target = parseTarget(arguments) else { return usage() }
    var options = Options()
    options.stateDir = target.store.directoryPath
    var ledger = makeLedger(target, options: options)
    guard let record = ledger.snapshot(target.user) else { return fail("show: cannot read or repair the record") }
    guard let backoff = ledger.backoffRemaining(target.user) else { return fail("show: cannot read the back-off") }
    writeText(1, "F=\(record.fingerprintFailures) P=\(record.passcodeFailures) backoff_ms=\(backoff)\n")
    return 0
}

func inspect(_ arguments: ArraySlice<String>) -> Int32 {
    guard arguments.count == 3, var target = parseTarget(arguments) else { return usage() }
    let line: String
    do {
        line = try target.store.withRecord(uid: target.user.uid, userName: target.user.name) { record, status -> String in
            switch status {
            case .absent: return "status=absent"
            case .damaged(let why): return "status=damaged reason=\(why.text)"
            case .loaded:
                guard let record else { return "status=loaded-without-record" }
                return "status=loaded F=\(record.fingerprintFailures) P=\(record.passcodeFailures) backoff_ms=\(record.backoffRemainingMilliseconds)"
            }
        }
    } catch {
        return fail("inspect: store failure \(error)")
    }
    writeText(1, line + "\n")
    return 0
}

func hold(_ arguments: ArraySlice<String>) -> Int32 {
    guard arguments.count == 4, var target = parseTarget(arguments.prefix(3)),
          let seconds = UInt32(arguments[arguments.startIndex + 3]) else { return usage() }
    do {
        try target.store.withRecord(uid: target.user.uid, userName: target.user.name) { _, _ in
            writeText(1, "held\n")
            var remaining = timespec(tv_sec: Int(seconds), tv_nsec: 0)
            var left = timespec()
            while nanosleep(&remaining, &left) != 0 && errno == EINTR { remaining = left }
        }
    } catch {
        return fail("hold: store failure \(error)")
    }
    return 0
}
