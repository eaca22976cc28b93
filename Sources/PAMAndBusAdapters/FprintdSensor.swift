// The fingerprint reader through fprintd on the system bus: the device that
// holds the user's prints, one claim per prompt, one VerifyStart per
// attempt, fprintd's messages read in order, and the stop decided from
// evidence (VerifyStopRule). docs/DESIGN.md lists the fprintd facts this
// relies on.
import LocalAuth
import LibcSystem

/// What the bus handlers leave for the verify loop.
final class FprintdEvents {
    /// What fprintd said about the running attempt, oldest first.
    var log: [FprintdSignal] = []
    /// fprintd left the bus (NameOwnerChanged with an empty new owner).
    var vanished = false
    /// fprintd's unique bus name: signals from anyone else are ignored.
    /// Empty until the bus has answered (nothing is accepted before).
    var owner: [UInt8] = []
    /// Set from just before our VerifyStart until every message fprintd sent
    /// before answering our VerifyStop has been read: fprintd broadcasts
    /// every session's statuses, and only these are ours.
    var armed = false

}

private var fprintdName: [UInt8] { literalBytes("net.reactivated.Fprint") }
private var managerPath: [UInt8] { literalBytes("/net/reactivated/Fprint/Manager") }
private var managerInterface: [UInt8] { literalBytes("net.reactivated.Fprint.Manager") }
private var deviceInterface: [UInt8] { literalBytes("net.reactivated.Fprint.Device") }
private var propertiesInterface: [UInt8] { literalBytes("org.freedesktop.DBus.Properties") }
private var busName: [UInt8] { literalBytes("org.freedesktop.DBus") }
private var busPath: [UInt8] { literalBytes("/org/freedesktop/DBus") }
private var fingerNeeded: [UInt8] { literalBytes("finger-needed") }
private var fingerPresent: [UInt8] { literalBytes("finger-present") }

/// The fingerprint reader through fprintd.
public struct FprintdSensor<Time: Clock>: FingerprintSensor {
    private var clock: Time
    /// The prompt's connection, shared with logind.
    private let line: SharedSystemBus
    private var bus: SystemBus? = nil
    private var device: [UInt8] = []
    /// The user whose prints `device` was chosen for on this connection.
    private var deviceUser: [UInt8]? = nil
    private var claimed = false
    private var verifying = false
    private var events: FprintdEvents? = nil
    /// The stop and the release `letGo` sent, answered before `close` ends.
    private var lettingGo: [PendingReply] = []
    /// `prepare`'s question for the devices, answered on this connection;
    /// the first choice of a device reads it.
    private var devicesAsked: PendingReply? = nil
    /// What ends a wait besides a verdict or the deadline.
    private var interrupt: TerminalInterrupt

    public init(interruption: WaitInterruption, clock: Time, bus line: SharedSystemBus = SharedSystemBus()) {
        self.interrupt = TerminalInterrupt(interruption)
        self.clock = clock
        self.line = line
    }

    /// For `localauth status`: the device holding the user's prints and the
    /// enrolled finger names, with the availability (never claims).
    public mutating func describe(userName: [UInt8]) -> (availability: SensorAvailability, device: [UInt8], fingers: [[UInt8]]) {
        guard connect() else { return (.unreachable, [], []) }
        let availability = chooseDevice(userName)
        let fingers = device.isEmpty ? [] : enrolledFingers(on: device, userName) ?? []
        return (availability, device, fingers)
    }

    /// The user's finger names on every device fprintd has (nil for a
    /// device that answered with an error); nil when fprintd did not
    /// answer. What a stored secret's binding is read from: it must not
    /// take one reader's fingers for another's.
    public mutating func fingersOnEveryDevice(userName: [UInt8]) -> [[[UInt8]]?]? {
        guard connect(), let bus else { return nil }
        let reply = bus.call(destination: fprintdName, path: managerPath, interface: managerInterface, member: literalBytes("GetDevices"))
        guard reply.succeeded, let devices = reply.message?.readStrings(limit: 256) else { return nil }
        return devices.map { enrolledFingers(on: $0, userName) }
    }

    // MARK: FingerprintSensor

    /// Connects and asks for fprintd's devices without waiting: sd-bus sends
    /// its greeting at once, the question follows it, and the answers
    /// arrive while the record is read.
    public mutating func prepare() {
        guard connect(), let bus, devicesAsked == nil else { return }
        devicesAsked = bus.start(destination: fprintdName, path: managerPath, interface: managerInterface,
                                 member: literalBytes("GetDevices"))
    }

    public mutating func availability(userName: [UInt8]) -> SensorAvailability {
        guard connect() else { return .unreachable }
        return chooseDevice(userName)
    }

    public mutating func open(userName: [UInt8]) -> SensorSession {
        guard connect(), let bus else { return .failed }
        // The device the availability check of this prompt chose, or a new choice.
        if device.isEmpty || deviceUser != userName {
            guard case .available = chooseDevice(userName), !device.isEmpty else { return .failed }
        }
        let events = FprintdEvents()
        self.events = events
        // Everything the claim needs goes out at once and is answered in
        // order, in one round trip: the watch on fprintd leaving, its unique
        // name (signals from anyone else are ignored), the claim and the
        // scan type. No signal counts before the claim is answered.
        guard watchOwner(events),
              let owner = bus.start(destination: busName, path: busPath, interface: busName, member: literalBytes("GetNameOwner"),
                                    arguments: [fprintdName]),
              let claim = bus.start(destination: fprintdName, path: device, interface: deviceInterface, member: literalBytes("Claim"),
                                    arguments: [userName]),
              // Properties.Get: the name has a dash, which sd-bus refuses as a member name.
              let scan = bus.start(destination: fprintdName, path: device, interface: propertiesInterface, member: literalBytes("Get"),
                                   arguments: [deviceInterface, literalBytes("scan-type")]) else {
            close()
            return .failed
        }
        let answered = bus.wait(for: [owner, claim, scan], milliseconds: Int64(SharedSystemBus.callTimeoutMicroseconds / 1000))
        claimed = claim.succeeded
        guard answered, claim.succeeded, let name = owner.message?.readString(limit: 256), !name.isEmpty else {
            close()
            return bytesEqual(claim.errorName, "net.reactivated.Fprint.Error.AlreadyInUse") ? .busy : .failed
        }
        events.owner = name
        guard subscribeStatuses(events) else {
            close()
            return .failed
        }
        // Anything fprintd sent before the claim was answered belongs to
        // another session (statuses are broadcast): drop it.
        drain()
        _ = interrupt.begin()
        let scanType = scan.message?.readVariantString(limit: 16).map { bytesEqual($0, "swipe") ? ScanType.swipe : .press } ?? .press
        return .opened(scanType)
    }

    /// How long a Ctrl-C (or a client's cancel) that came before the reader
    /// asked for a finger waits for it to ask, so that the stop can prove
    /// no finger was judged; it is never longer on a working reader.
    static var askGraceNanoseconds: Int64 { 1_000_000_000 }

    public mutating func verifyAttempt(deadline: Int64, onHint: (RetryHint) -> Void) -> AttemptEnd {
        verifyAttempt(deadline: deadline, onHint: onHint, stillWanted: { true })
    }

    /// How often `stillWanted` is asked while the reader waits.
    static var lookNanoseconds: Int64 { 500_000_000 }

    public mutating func verifyAttempt(deadline: Int64, onHint: (RetryHint) -> Void, stillWanted: () -> Bool) -> AttemptEnd {
        guard let bus, let events, claimed else { return .deviceError }
        if verifying { finishVerifying() }
        drain()
        events.armed = true
        let start = bus.call(destination: fprintdName, path: device, interface: deviceInterface, member: literalBytes("VerifyStart"),
                             arguments: [literalBytes("any")])
        guard start.succeeded else {
            events.armed = false
            return events.vanished ? .vanished : .deviceError
        }
        verifying = true
        var handled = 0
        var interrupted = false
        // Whether fprintd said the reader waits for a finger: a stop before
        // that can prove nothing (the probe would find it not waiting), so
        // a Ctrl-C that comes first waits, briefly, for it.
        var readerAsked = false
        var askGraceEnds: Int64 = 0
        var nextLook = clock.bootNanoseconds() + FprintdSensor.lookNanoseconds
        // What ends the wait once `interrupted`: the person's Ctrl-C (or the
        // client's cancel), or an app that lost the person.
        var stopReason = StopReason.interrupted
        while true {
            // Dispatch what is there, but never past the deadline: a flood
            // of bus traffic must not keep the prompt here.
            var dispatched = 0
            while true {
                let processed = bus.process()
                if processed < 0 { return settle(after: .deviceError, unread: handled) }
                if processed == 0 { break }
                dispatched += 1
                if dispatched % 64 == 0 && clock.bootNanoseconds() >= deadline { break }
            }
            // fprintd's own verdicts, in the order it sent them. A disconnect
            // or an error status, and fprintd leaving the bus, end the attempt
            // without the stop rule: fprintd sends nothing after a verdict, and
            // anything it sent before leaving is read before NameOwnerChanged
            // (the bus driver relays a sender's messages before its exit).
            while handled < events.log.count {
                let signal = events.log[handled]
                handled += 1
                if signal.kind == .fingerNeeded(true) { readerAsked = true }
                guard case .status(let result) = signal.kind else { continue }
                switch result {
                case .hint(let hint): onHint(hint)
                // After a match nothing follows: letGo() (or close()) sends
                // the stop together with the release, one round trip for both.
                case .match: events.armed = false; return .match
                case .noMatch: finishVerifying(); return .noMatch
                case .disconnected: finishVerifying(); return .disconnected
                case .unknownError: finishVerifying(); return .deviceError
                }
            }
            if events.vanished { verifying = false; events.armed = false; return .vanished }
            // A Ctrl-C counts only after every verdict already received was
            // handled, and the stop then reads what fprintd sent before it.
            let now = clock.bootNanoseconds()
            if interrupted && (readerAsked || now >= askGraceEnds || now >= deadline) {
                return settle(after: stopReason, unread: handled)
            }
            if now >= deadline { return settle(after: .timeout, unread: handled) }
            if !interrupted && now >= nextLook {
                if !stillWanted() {
                    // Stopped as for a Ctrl-C: once the reader has said it
                    // waits (or briefly), so that the stop can prove no
                    // finger was judged.
                    interrupted = true
                    stopReason = .sessionLeft
                    askGraceEnds = clock.bootNanoseconds() + FprintdSensor.askGraceNanoseconds
                }
                // The look is a call on this connection: fprintd's messages
                // that came meanwhile wait in its queue, handled first.
                nextLook = clock.bootNanoseconds() + FprintdSensor.lookNanoseconds
                continue
            }
            let waitUntil = interrupted ? min(askGraceEnds, deadline) : min(deadline, nextLook)
            let waitMilliseconds = Int32(min((waitUntil - now) / 1_000_000 + 1, 1000))
            guard let busRequest = bus.pollRequest else { return settle(after: .deviceError, unread: handled) }
            var requests = [busRequest]
            // Once interrupted only the bus matters (the interrupt stays readable).
            if !interrupted { requests += interrupt.pollRequests }
            guard let ready = Syscalls.poll(requests, timeoutMilliseconds: waitMilliseconds) else {
                return settle(after: .deviceError, unread: handled)
            }
            if !interrupted && ready.dropFirst().contains(where: { $0 != 0 }) && interrupt.endsTheWait() {
                interrupted = true
                askGraceEnds = clock.bootNanoseconds() + FprintdSensor.askGraceNanoseconds
            }
        }
    }

    public mutating func interruptPending() -> Bool {
        interrupt.isPending
    }

    public mutating func consumeInterrupt() {
        interrupt.consume()
    }

    public mutating func letGo() {
        guard let bus else { return }
        // The stop of a verification that gave its verdict and the release
        // go out together, one round trip for both.
        if verifying, let stop = bus.start(destination: fprintdName, path: device, interface: deviceInterface,
                                           member: literalBytes("VerifyStop")) {
            lettingGo.append(stop)
        }
        verifying = false
        if claimed, let release = bus.start(destination: fprintdName, path: device, interface: deviceInterface,
                                            member: literalBytes("Release")) {
            lettingGo.append(release)
        }
        claimed = false
    }

    public mutating func close() {
        if let bus {
            // The prompt ends when the stop and the release are answered, so
            // that the next prompt finds the reader free.
            letGo()
            if !lettingGo.isEmpty {
                _ = bus.wait(for: lettingGo, milliseconds: Int64(SharedSystemBus.callTimeoutMicroseconds / 1000))
            }
            lettingGo = []
            events?.armed = false
            line.close()
            self.bus = nil
        }
        device = []
        deviceUser = nil
        devicesAsked = nil
        interrupt.end()
        events = nil
    }

    // MARK: Bus work

    private mutating func connect() -> Bool {
        if bus != nil { return true }
        bus = line.connection()
        return bus != nil
    }

    /// Picks the device holding the user's prints: with devices but no
    /// prints on any of them the user is not enrolled; when a device
    /// answered with an error and none has prints, what is enrolled is not
    /// known and the reader is failing.
    private mutating func chooseDevice(_ userName: [UInt8]) -> SensorAvailability {
        guard let bus else { return .unreachable }
        let devices: [[UInt8]]?
        if let asked = devicesAsked {
            devicesAsked = nil
            let answered = bus.wait(for: [asked], milliseconds: Int64(SharedSystemBus.callTimeoutMicroseconds / 1000))
            devices = answered && asked.succeeded ? asked.message?.readStrings(limit: 256) : nil
        } else {
            let reply = bus.call(destination: fprintdName, path: managerPath, interface: managerInterface, member: literalBytes("GetDevices"))
            devices = reply.succeeded ? reply.message?.readStrings(limit: 256) : nil
        }
        guard let devices else { return .unreachable }
        guard !devices.isEmpty else { return .noDevice }
        var failed = false
        for candidate in devices {
            guard let fingers = enrolledFingers(on: candidate, userName) else { failed = true; continue }
            if !fingers.isEmpty {
                device = candidate
                deviceUser = userName
                return .available(domainState: EnrollmentDigest.compute(
                    device: candidate, fingers: fingers, userName: userName, printRoot: literalBytes(EnrollmentDigest.defaultPrintRoot),
                    files: DiskPrintFiles()))
            }
        }
        device = []
        deviceUser = nil
        return failed ? .failing : .notEnrolled
    }

    /// The finger names fprintd lists for the user on a device: empty when
    /// it says the user has none (its NoEnrolledPrints error, for an
    /// unknown name too), nil for any other error or an unreadable answer
    /// (PermissionDenied while polkit is down): an error is never read as
    /// "no prints", which a password success would record as the
    /// enrollment.
    private func enrolledFingers(on path: [UInt8], _ userName: [UInt8]) -> [[UInt8]]? {
        guard let bus else { return nil }
        let reply = bus.call(destination: fprintdName, path: path, interface: deviceInterface, member: literalBytes("ListEnrolledFingers"),
                             arguments: [userName])
        guard reply.succeeded else {
            return bytesEqual(reply.errorName, "net.reactivated.Fprint.Error.NoEnrolledPrints") ? [] : nil
        }
        return reply.message?.readStrings(limit: 64)
    }

    /// Watches for fprintd leaving the bus. Only the bus driver can say
    /// that: anyone may send a signal named NameOwnerChanged, and sd-bus
    /// does not check the sender of a match on a well-known name. A forged
    /// one would end the attempt without the stop rule.
    private func watchOwner(_ events: FprintdEvents) -> Bool {
        guard let bus else { return false }
        let owners = BusSignalHandler { message in
            guard message.sender == busName, let (name, old, new) = message.readThreeStrings(limit: 256) else { return }
            if name == fprintdName && !old.isEmpty && old == events.owner && new.isEmpty { events.vanished = true }
        }
        return bus.subscribeWithoutWaiting(sender: busName, path: busPath, interface: busName, member: literalBytes("NameOwnerChanged"), owners)
    }

    /// Takes the reader's statuses and properties from fprintd's unique
    /// name only. The match names that sender, so sd-bus itself drops what
    /// anyone else sends straight to this connection, and each handler
    /// checks the sender again. Subscribed once the name is known, before
    /// any VerifyStart: the bus handles a connection's messages in order.
    private func subscribeStatuses(_ events: FprintdEvents) -> Bool {
        guard let bus else { return false }
        let statuses = BusSignalHandler { message in
            guard message.sender == events.owner, events.armed, let serial = message.serial,
                  let (text, _) = message.readStringAndFlag(limit: 64), let result = FprintdResult(text) else { return }
            events.log.append(FprintdSignal(.status(result), serial: serial))
        }
        let properties = BusSignalHandler { message in
            guard message.sender == events.owner, events.armed, let serial = message.serial else { return }
            for (name, value) in message.readChangedBooleans(interface: deviceInterface, names: [fingerNeeded, fingerPresent]) {
                let kind: FprintdSignal.Kind = name == fingerNeeded ? .fingerNeeded(value) : .fingerPresent(value)
                events.log.append(FprintdSignal(kind, serial: serial))
            }
        }
        return bus.subscribeWithoutWaiting(sender: events.owner, path: device, interface: deviceInterface, member: literalBytes("VerifyStatus"),
                                           statuses)
            && bus.subscribeWithoutWaiting(sender: events.owner, path: device, interface: propertiesInterface,
                                           member: literalBytes("PropertiesChanged"), properties)
    }

    /// Ends a verification that gave its verdict. A later VerifyStop gets
    /// its reply with no status; anything still queued is dropped.
    private mutating func finishVerifying() {
        guard let bus, verifying else { return }
        verifying = false
        _ = bus.call(destination: fprintdName, path: device, interface: deviceInterface, member: literalBytes("VerifyStop"))
        events?.armed = false
        drain()
    }

    /// Stops a verification that has no verdict yet and decides how the
    /// attempt ended. A probe of the reader's state and VerifyStop go out
    /// back to back, the time between the two sends measured on the boot
    /// clock (which counts a process stopped by its user); the attempt stays
    /// armed until both are answered and every message before them has been
    /// read: fprintd may have judged a finger whose verdict is still queued
    /// behind other traffic (R3). The rule itself is `VerifyStopRule`;
    /// reading is bounded, and what could not be read in time leaves the
    /// attempt charged.
    private mutating func settle(after reason: StopReason, unread: Int) -> AttemptEnd {
        guard let bus, let events else { return .stoppedAfterPossibleScan(reason, unproven: .notAttempted) }
        verifying = false
        let probe = ReaderProbeCall(owner: events.owner)
        var stopAnswered = false
        var stopReplySerial: UInt64? = nil
        let stopHandler = BusSignalHandler { message in
            stopAnswered = true
            guard !message.isError, message.sender == events.owner else { return }
            stopReplySerial = message.serial
        }
        var clock = self.clock
        // Both calls are built before the clock starts: only the two sends
        // lie between the probe and the stop.
        guard let probeCall = bus.prepareCall(destination: fprintdName, path: device, interface: propertiesInterface,
                                              member: literalBytes("GetAll"), argument: deviceInterface),
              let stopCall = bus.prepareCall(destination: fprintdName, path: device, interface: deviceInterface,
                                             member: literalBytes("VerifyStop")) else {
            _ = bus.call(destination: fprintdName, path: device, interface: deviceInterface, member: literalBytes("VerifyStop"))
            events.armed = false
            drain()
            return .stoppedAfterPossibleScan(reason, unproven: .notAttempted)
        }
        // The first send wakes the bus daemon, which on a busy machine may
        // take the processor before the second: both go out as one urgent,
        // bounded step (two non-blocking writes).
        let (sent, sendGap) = Syscalls.withUrgentScheduling { () -> (Bool, Int64) in
            let beforeProbe = clock.bootNanoseconds()
            let sent = bus.send(probeCall, probe.handler) && bus.send(stopCall, stopHandler)
            return (sent, clock.bootNanoseconds() - beforeProbe)
        }
        if !sent {
            // The stop may not have left: make sure the verify ends.
            _ = bus.call(destination: fprintdName, path: device, interface: deviceInterface, member: literalBytes("VerifyStop"))
        }
        let readUntil = clock.bootNanoseconds() + 5_000_000_000
        let complete = sent && bus.wait(until: { probe.answered && stopAnswered },
                                        remainingMilliseconds: { (readUntil - clock.bootNanoseconds()) / 1_000_000 })
        events.armed = false
        let log = events.log
        events.log.removeAll()
        return VerifyStopRule.end(after: reason, log: log, unread: unread, probe: complete ? probe.reading : nil,
                                  stopReplySerial: complete ? stopReplySerial : nil, sendGapNanoseconds: sendGap)
    }

    /// Dispatches every queued message and forgets what the handlers logged.
    private func drain() {
        bus?.processAll()
        events?.log.removeAll()
    }
}

/// What fprintd answered to one `GetAll` probe of the reader.
final class ProbeAnswer {
    var answered = false
    var reading: ReaderProbe? = nil
}

/// One `GetAll` probe of the reader. The handler holds only the answer box,
/// which the bus may keep alive after the prompt has moved on.
struct ReaderProbeCall {
    let answer = ProbeAnswer()
    let handler: BusSignalHandler

    var answered: Bool { answer.answered }
    var reading: ReaderProbe? { answer.reading }

    init(owner: [UInt8]) {
        let answer = self.answer
        handler = BusSignalHandler { message in
            answer.answered = true
            guard !message.isError, message.sender == owner, let serial = message.serial else { return }
            var needed: Bool? = nil, present: Bool? = nil
            for (name, value) in message.readBooleanProperties(names: [fingerNeeded, fingerPresent]) {
                if name == fingerNeeded { needed = value } else { present = value }
            }
            if let needed, let present { answer.reading = ReaderProbe(serial: serial, fingerNeeded: needed, fingerPresent: present) }
        }
    }
}
