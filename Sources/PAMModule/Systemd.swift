import CLocalAuth
import LocalAuth

/// The only code that calls libsystemd: fprintd over sd-bus (SPEC §9) and
/// logind's view of the caller's session (R1).

/// logind's word on the caller's session: true when remote, nil when there
/// is no logind or the caller has no session.
public func loginSessionIsRemote() -> Bool? {
    var session: UnsafeMutablePointer<CChar>? = nil
    guard sd_pid_get_session(0, &session) >= 0, let name = session else { return nil }
    defer { free(name) }
    let remote = sd_session_is_remote(name)
    return remote < 0 ? nil : remote > 0
}

/// What the bus callbacks leave for the verify loop. Lives at a fixed
/// address (allocated) because sd-bus keeps a pointer to it.
struct FprintdEvents {
    /// What fprintd said about the running attempt, oldest first.
    var log: [FprintdSignal] = []
    /// fprintd left the bus (NameOwnerChanged with an empty new owner).
    var vanished = false
    /// fprintd's unique bus name: signals from anyone else are ignored.
    var owner: [UInt8] = []
    /// Set from just before our VerifyStart until every message fprintd sent
    /// before answering our VerifyStop has been read: fprintd broadcasts
    /// every session's statuses, and only these are ours.
    var armed = false
}

private let fprintdName: StaticString = "net.reactivated.Fprint"
private let managerPath: StaticString = "/net/reactivated/Fprint/Manager"
private let managerInterface: StaticString = "net.reactivated.Fprint.Manager"
private let deviceInterface: StaticString = "net.reactivated.Fprint.Device"

private func cString(_ literal: StaticString) -> UnsafePointer<CChar> {
    UnsafeRawPointer(literal.utf8Start).assumingMemoryBound(to: CChar.self)
}

/// The fingerprint reader through fprintd on the system bus.
public struct FprintdSensor: FingerprintSensor {
    /// Ctrl-C ends a wait (terminal mode, R16).
    let interruptible: Bool
    private var bus: OpaquePointer? = nil
    private var device: [UInt8] = []
    private var claimed = false
    private var verifying = false
    private var events: UnsafeMutablePointer<FprintdEvents>? = nil
    private var slots: [OpaquePointer?] = []
    private var signalFD: Int32 = -1
    private var savedMask = sigset_t()

    public init(interruptible: Bool) {
        self.interruptible = interruptible
    }

    /// For `localauth status`: the device holding the user's prints and the
    /// enrolled finger names, with the availability (never claims).
    public mutating func describe(userName: [UInt8]) -> (availability: SensorAvailability, device: [UInt8], fingers: [[UInt8]]) {
        guard connect() else { return (.unreachable, [], []) }
        let availability = chooseDevice(userName)
        let fingers = device.isEmpty ? [] : enrolledFingers(on: device, userName)
        return (availability, device, fingers)
    }

    // MARK: FingerprintSensor

    public mutating func availability(userName: [UInt8]) -> SensorAvailability {
        guard connect() else { return .unreachable }
        return chooseDevice(userName)
    }

    public mutating func open(userName: [UInt8]) -> SensorSession {
        guard connect() else { return .failed }
        guard case .available = chooseDevice(userName), !device.isEmpty else { return .failed }
        guard let owner = nameOwner() else { return .failed }
        let events = UnsafeMutablePointer<FprintdEvents>.allocate(capacity: 1)
        events.initialize(to: FprintdEvents(owner: owner))
        self.events = events
        guard subscribe(events) else { close(); return .failed }
        var error = sd_bus_error()
        let status = withCStrings(device, userName) { path, user in
            la_bus_call_s(bus, cString(fprintdName), path, cString(deviceInterface), "Claim", user, &error, nil)
        }
        let busy = status < 0 && error.name != nil && bytesEqual(Syscalls.bytes(ofCString: error.name!), "net.reactivated.Fprint.Error.AlreadyInUse")
        sd_bus_error_free(&error)
        guard status >= 0 else {
            close()
            return busy ? .busy : .failed
        }
        claimed = true
        // Anything fprintd sent before the claim was answered belongs to
        // another session (statuses are broadcast): drop it.
        drain()
        if interruptible { blockInterrupts() }
        return .opened(scanType())
    }

    public mutating func verifyAttempt(deadline: Int64, onHint: (RetryHint) -> Void) -> AttemptEnd {
        guard let bus, let events, claimed else { return .deviceError }
        if verifying { finishVerifying() }
        drain()
        events.pointee.log.removeAll()
        events.pointee.armed = true
        var error = sd_bus_error()
        let status = withCStrings(device, literalBytes("any")) { path, finger in
            la_bus_call_s(bus, cString(fprintdName), path, cString(deviceInterface), "VerifyStart", finger, &error, nil)
        }
        sd_bus_error_free(&error)
        guard status >= 0 else {
            events.pointee.armed = false
            return events.pointee.vanished ? .vanished : .deviceError
        }
        verifying = true
        var handled = 0
        var interrupted = false
        while true {
            while true {
                let processed = sd_bus_process(bus, nil)
                if processed < 0 { return settle(after: .deviceError, unread: handled) }
                if processed == 0 { break }
            }
            while handled < events.pointee.log.count {
                let signal = events.pointee.log[handled]
                handled += 1
                guard case .status(let result) = signal.kind else { continue }
                switch result {
                case .hint(let hint): onHint(hint)
                case .match: finishVerifying(); return .match
                case .noMatch: finishVerifying(); return .noMatch
                case .disconnected: finishVerifying(); return .disconnected
                case .unknownError: finishVerifying(); return .deviceError
                }
            }
            if events.pointee.vanished { verifying = false; events.pointee.armed = false; return .vanished }
            // A Ctrl-C counts only after every verdict already received was
            // handled, and the stop then reads what fprintd sent before it.
            if interrupted { return settle(after: .interrupted, unread: handled) }
            let now = Syscalls.bootTimeNanoseconds()
            if now >= deadline { return settle(after: .timeout, unread: handled) }
            let waitMilliseconds = Int32(min((deadline - now) / 1_000_000 + 1, 1000))
            var fds = [pollfd(fd: sd_bus_get_fd(bus), events: Int16(truncatingIfNeeded: sd_bus_get_events(bus)), revents: 0),
                       pollfd(fd: signalFD, events: Int16(POLLIN), revents: 0)]
            let ready = fds.withUnsafeMutableBufferPointer { poll($0.baseAddress!, signalFD >= 0 ? 2 : 1, waitMilliseconds) }
            if ready < 0 && la_errno() != EINTR { return settle(after: .deviceError, unread: handled) }
            if signalFD >= 0 && fds[1].revents & Int16(POLLIN) != 0 { interrupted = true }
        }
    }

    public mutating func consumeInterrupt() {
        guard signalFD >= 0 else { return }
        var info = signalfd_siginfo()
        _ = withUnsafeMutableBytes(of: &info) { read(signalFD, $0.baseAddress!, $0.count) }
    }

    public mutating func close() {
        if let bus {
            if verifying { finishVerifying() }
            if claimed {
                var error = sd_bus_error()
                _ = withCStrings(device, device) { path, _ in
                    la_bus_call(bus, cString(fprintdName), path, cString(deviceInterface), "Release", &error, nil)
                }
                sd_bus_error_free(&error)
                claimed = false
            }
        }
        for slot in slots { if let slot { sd_bus_slot_unref(slot) } }
        slots.removeAll()
        if signalFD >= 0 {
            CLocalAuth.close(signalFD)
            signalFD = -1
            pthread_sigmask(SIG_SETMASK, &savedMask, nil)
        }
        if let events {
            events.deinitialize(count: 1)
            events.deallocate()
            self.events = nil
        }
        if let bus {
            sd_bus_flush_close_unref(bus)
            self.bus = nil
        }
    }

    // MARK: Bus work

    private mutating func connect() -> Bool {
        if bus != nil { return true }
        var opened: OpaquePointer? = nil
        guard sd_bus_open_system(&opened) >= 0, let opened else { return false }
        // No call may hang the prompt: fprintd answers in milliseconds.
        _ = sd_bus_set_method_call_timeout(opened, 5_000_000)
        bus = opened
        return true
    }

    /// Picks the device holding the user's prints: with devices but no
    /// prints on any of them the user is not enrolled.
    private mutating func chooseDevice(_ userName: [UInt8]) -> SensorAvailability {
        guard let bus else { return .unreachable }
        var error = sd_bus_error()
        var reply: OpaquePointer? = nil
        let status = la_bus_call(bus, cString(fprintdName), cString(managerPath), cString(managerInterface), "GetDevices", &error, &reply)
        sd_bus_error_free(&error)
        guard status >= 0, let reply else { return .unreachable }
        defer { sd_bus_message_unref(reply) }
        guard let devices = readStrings(reply, limit: 256) else { return .unreachable }
        guard !devices.isEmpty else { return .noDevice }
        for candidate in devices {
            let fingers = enrolledFingers(on: candidate, userName)
            if !fingers.isEmpty {
                device = candidate
                return .available(domainState: EnrollmentDigest.compute(
                    device: candidate, fingers: fingers, userName: userName, printRoot: literalBytes(EnrollmentDigest.defaultPrintRoot)))
            }
        }
        device = []
        return .notEnrolled
    }

    private func enrolledFingers(on path: [UInt8], _ userName: [UInt8]) -> [[UInt8]] {
        guard let bus else { return [] }
        var error = sd_bus_error()
        var reply: OpaquePointer? = nil
        let status = withCStrings(path, userName) { cPath, user in
            la_bus_call_s(bus, cString(fprintdName), cPath, cString(deviceInterface), "ListEnrolledFingers", user, &error, &reply)
        }
        sd_bus_error_free(&error)
        guard status >= 0, let reply else { return [] }
        defer { sd_bus_message_unref(reply) }
        return readStrings(reply, limit: 64) ?? []
    }

    /// An array of strings or object paths from a reply, each at most `limit` bytes.
    private func readStrings(_ reply: OpaquePointer, limit: Int) -> [[UInt8]]? {
        var strings: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = nil
        guard sd_bus_message_read_strv(reply, &strings) >= 0, let strings else { return nil }
        var result: [[UInt8]] = []
        var index = 0
        while let string = strings[index] {
            result.append(Syscalls.bytes(ofCString: string, limit: limit))
            free(string)
            index += 1
        }
        free(strings)
        return result
    }

    /// fprintd's unique name, so that signals from anyone else are ignored.
    private func nameOwner() -> [UInt8]? {
        guard let bus else { return nil }
        var error = sd_bus_error()
        var reply: OpaquePointer? = nil
        let status = la_bus_call_s(bus, "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", "GetNameOwner",
                                   cString(fprintdName), &error, &reply)
        sd_bus_error_free(&error)
        guard status >= 0, let reply else { return nil }
        defer { sd_bus_message_unref(reply) }
        var owner: UnsafePointer<CChar>? = nil
        guard la_bus_read_s(reply, &owner) >= 0, let owner else { return nil }
        return Syscalls.bytes(ofCString: owner, limit: 256)
    }

    private mutating func subscribe(_ events: UnsafeMutablePointer<FprintdEvents>) -> Bool {
        guard let bus else { return false }
        var statusSlot: OpaquePointer? = nil
        var ownerSlot: OpaquePointer? = nil
        let owner = events.pointee.owner
        let first = withCStrings(owner, device) { sender, path in
            sd_bus_match_signal(bus, &statusSlot, sender, path, cString(deviceInterface), "VerifyStatus", { message, userdata, _ in
                guard let message, let userdata else { return 0 }
                let events = userdata.assumingMemoryBound(to: FprintdEvents.self)
                guard let sender = sd_bus_message_get_sender(message),
                      Syscalls.bytes(ofCString: sender, limit: 256) == events.pointee.owner else { return 0 }
                guard events.pointee.armed else { return 0 }
                var text: UnsafePointer<CChar>? = nil
                var done: Int32 = 0
                var serial: UInt64 = 0
                guard la_bus_read_sb(message, &text, &done) >= 0, let text, sd_bus_message_get_cookie(message, &serial) >= 0,
                      let result = FprintdResult(Syscalls.bytes(ofCString: text, limit: 64)) else { return 0 }
                events.pointee.log.append(FprintdSignal(.status(result), serial: serial))
                return 0
            }, UnsafeMutableRawPointer(events))
        }
        var propertiesSlot: OpaquePointer? = nil
        let third = withCStrings(owner, device) { sender, path in
            sd_bus_match_signal(bus, &propertiesSlot, sender, path, "org.freedesktop.DBus.Properties", "PropertiesChanged", { message, userdata, _ in
                guard let message, let userdata else { return 0 }
                let events = userdata.assumingMemoryBound(to: FprintdEvents.self)
                guard let sender = sd_bus_message_get_sender(message),
                      Syscalls.bytes(ofCString: sender, limit: 256) == events.pointee.owner, events.pointee.armed else { return 0 }
                var serial: UInt64 = 0
                guard sd_bus_message_get_cookie(message, &serial) >= 0 else { return 0 }
                for kind in readFingerProperties(message) { events.pointee.log.append(FprintdSignal(kind, serial: serial)) }
                return 0
            }, UnsafeMutableRawPointer(events))
        }
        let second = sd_bus_match_signal(bus, &ownerSlot, "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
                                         "NameOwnerChanged", { message, userdata, _ in
            guard let message, let userdata else { return 0 }
            let events = userdata.assumingMemoryBound(to: FprintdEvents.self)
            var name: UnsafePointer<CChar>? = nil, old: UnsafePointer<CChar>? = nil, new: UnsafePointer<CChar>? = nil
            guard la_bus_read_sss(message, &name, &old, &new) >= 0, let name, let new else { return 0 }
            if bytesEqual(Syscalls.bytes(ofCString: name, limit: 64), "net.reactivated.Fprint") && new.pointee == 0 {
                events.pointee.vanished = true
            }
            return 0
        }, UnsafeMutableRawPointer(events))
        slots.append(statusSlot)
        slots.append(ownerSlot)
        slots.append(propertiesSlot)
        return first >= 0 && second >= 0 && third >= 0
    }

    /// Ends a verification that gave its verdict. A later VerifyStop gets
    /// its reply with no status; anything still queued is dropped.
    private mutating func finishVerifying() {
        guard let bus, verifying else { return }
        verifying = false
        var error = sd_bus_error()
        _ = withCStrings(device, device) { path, _ in
            la_bus_call(bus, cString(fprintdName), path, cString(deviceInterface), "VerifyStop", &error, nil)
        }
        sd_bus_error_free(&error)
        events?.pointee.armed = false
        drain()
    }

    /// Stops a verification that has no verdict yet and decides how the
    /// attempt ended. The attempt stays armed until fprintd's reply to the
    /// stop has arrived and every message before it has been read: fprintd
    /// may have judged a finger whose verdict is still queued behind other
    /// traffic (R3). The rule itself is `VerifyStopRule`.
    private mutating func settle(after reason: StopReason, unread: Int) -> AttemptEnd {
        guard let bus, let events else { return .stoppedAfterPossibleScan(reason) }
        verifying = false
        var error = sd_bus_error()
        var reply: OpaquePointer? = nil
        let status = withCStrings(device, device) { path, _ in
            la_bus_call(bus, cString(fprintdName), path, cString(deviceInterface), "VerifyStop", &error, &reply)
        }
        sd_bus_error_free(&error)
        var replySerial: UInt64? = nil
        if status >= 0, let reply {
            var serial: UInt64 = 0
            if sd_bus_message_get_cookie(reply, &serial) >= 0 { replySerial = serial }
        }
        if let reply { sd_bus_message_unref(reply) }
        while sd_bus_process(bus, nil) > 0 {}
        events.pointee.armed = false
        let log = events.pointee.log
        events.pointee.log.removeAll()
        return VerifyStopRule.end(after: reason, log: log, unread: unread, stopReplySerial: replySerial)
    }

    /// Dispatches every queued message and forgets what the callbacks logged.
    private mutating func drain() {
        guard let bus else { return }
        while sd_bus_process(bus, nil) > 0 {}
        events?.pointee.log.removeAll()
    }

    /// The device's `scan-type` property. Read through Properties.Get: the
    /// name has a dash, which sd-bus refuses as a member name.
    private func scanType() -> ScanType {
        guard let bus else { return .press }
        var error = sd_bus_error()
        var reply: OpaquePointer? = nil
        let status = withCStrings(device, literalBytes("scan-type")) { path, property in
            la_bus_call_ss(bus, cString(fprintdName), path, "org.freedesktop.DBus.Properties", "Get", cString(deviceInterface),
                           property, &error, &reply)
        }
        sd_bus_error_free(&error)
        guard status >= 0, let reply else { return .press }
        defer { sd_bus_message_unref(reply) }
        var value: UnsafePointer<CChar>? = nil
        guard la_bus_read_variant_s(reply, &value) >= 0, let value else { return .press }
        return bytesEqual(Syscalls.bytes(ofCString: value, limit: 16), "swipe") ? .swipe : .press
    }

    private mutating func blockInterrupts() {
        var set = sigset_t()
        sigemptyset(&set)
        sigaddset(&set, SIGINT)
        guard pthread_sigmask(SIG_BLOCK, &set, &savedMask) == 0 else { return }
        signalFD = signalfd(-1, &set, Int32(SFD_CLOEXEC | SFD_NONBLOCK))
        if signalFD < 0 { pthread_sigmask(SIG_SETMASK, &savedMask, nil) }
    }
}

/// The `finger-needed` and `finger-present` values of a PropertiesChanged
/// signal (`sa{sv}as`); other properties are skipped.
private func readFingerProperties(_ message: OpaquePointer) -> [FprintdSignal.Kind] {
    var interface: UnsafePointer<CChar>? = nil
    guard sd_bus_message_read_basic(message, CChar(UInt8(ascii: "s")), &interface) >= 0, let interface,
          bytesEqual(Syscalls.bytes(ofCString: interface, limit: 64), "net.reactivated.Fprint.Device"),
          sd_bus_message_enter_container(message, CChar(UInt8(ascii: "a")), "{sv}") > 0 else { return [] }
    var kinds: [FprintdSignal.Kind] = []
    var entries = 0
    while entries < 64, sd_bus_message_enter_container(message, CChar(UInt8(ascii: "e")), "sv") > 0 {
        entries += 1
        var key: UnsafePointer<CChar>? = nil
        guard sd_bus_message_read_basic(message, CChar(UInt8(ascii: "s")), &key) >= 0, let key else { return kinds }
        let name = Syscalls.bytes(ofCString: key, limit: 64)
        let needed = bytesEqual(name, "finger-needed"), present = bytesEqual(name, "finger-present")
        if (needed || present) && sd_bus_message_enter_container(message, CChar(UInt8(ascii: "v")), "b") > 0 {
            var value: Int32 = 0
            guard sd_bus_message_read_basic(message, CChar(UInt8(ascii: "b")), &value) >= 0 else { return kinds }
            kinds.append(needed ? .fingerNeeded(value != 0) : .fingerPresent(value != 0))
            _ = sd_bus_message_exit_container(message)
        } else if sd_bus_message_skip(message, "v") < 0 {
            return kinds
        }
        _ = sd_bus_message_exit_container(message)
    }
    return kinds
}
