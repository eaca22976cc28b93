// The only code that calls sd-bus (libsystemd's D-Bus client): a system bus
// connection, method calls with string arguments, replies and signals read
// as bytes, and signal subscriptions with Swift handlers.
import CPAMAndBus
import LocalAuth
import LibcSystem

/// A method call built and not yet sent; owns its message.
final class PreparedCall {
    fileprivate let message: OpaquePointer

    fileprivate init(_ message: OpaquePointer) {
        self.message = message
    }

    deinit {
        sd_bus_message_unref(message)
    }
}

/// A message received from the bus (a reply or a signal), borrowed for the
/// duration of a call or a handler.
struct BusMessage {
    fileprivate let raw: OpaquePointer

    /// The unique name of the sender.
    var sender: [UInt8]? {
        guard let sender = sd_bus_message_get_sender(raw) else { return nil }
        return Syscalls.bytes(ofCString: sender, limit: 256)
    }

    /// The serial its sender gave it (one counter per sending connection).
    var serial: UInt64? {
        var cookie: UInt64 = 0
        return sd_bus_message_get_cookie(raw, &cookie) >= 0 ? cookie : nil
    }

    /// An array of strings or object paths, each at most `limit` bytes.
    func readStrings(limit: Int) -> [[UInt8]]? {
        var strings: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = nil
        guard sd_bus_message_read_strv(raw, &strings) >= 0, let strings else { return nil }
        var result: [[UInt8]] = []
        var index = 0
        while let string = strings[index] {
            result.append(Syscalls.bytes(ofCString: string, limit: limit))
            Syscalls.release(string)
            index += 1
        }
        Syscalls.release(strings)
        return result
    }

    func readString(limit: Int) -> [UInt8]? {
        var value: UnsafePointer<CChar>? = nil
        guard la_bus_read_s(raw, &value) >= 0, let value else { return nil }
        return Syscalls.bytes(ofCString: value, limit: limit)
    }

    /// A variant holding a string (a `Properties.Get` reply).
    func readVariantString(limit: Int) -> [UInt8]? {
        var value: UnsafePointer<CChar>? = nil
        guard la_bus_read_variant_s(raw, &value) >= 0, let value else { return nil }
        return Syscalls.bytes(ofCString: value, limit: limit)
    }

    /// A string and a boolean (`sb`).
    func readStringAndFlag(limit: Int) -> (text: [UInt8], flag: Bool)? {
        var text: UnsafePointer<CChar>? = nil
        var flag: Int32 = 0
        guard la_bus_read_sb(raw, &text, &flag) >= 0, let text else { return nil }
        return (Syscalls.bytes(ofCString: text, limit: limit), flag != 0)
    }

    /// Three strings (`sss`), as NameOwnerChanged carries.
    func readThreeStrings(limit: Int) -> ([UInt8], [UInt8], [UInt8])? {
        var a: UnsafePointer<CChar>? = nil, b: UnsafePointer<CChar>? = nil, c: UnsafePointer<CChar>? = nil
        guard la_bus_read_sss(raw, &a, &b, &c) >= 0, let a, let b, let c else { return nil }
        return (Syscalls.bytes(ofCString: a, limit: limit), Syscalls.bytes(ofCString: b, limit: limit),
                Syscalls.bytes(ofCString: c, limit: limit))
    }

    /// An object path (`o`), as `GetSession` answers.
    func readObjectPath(limit: Int) -> [UInt8]? {
        var value: UnsafePointer<CChar>? = nil
        guard la_bus_read_o(raw, &value) >= 0, let value else { return nil }
        return Syscalls.bytes(ofCString: value, limit: limit)
    }

    /// logind's `ListSessions` answer (`a(susso)`): each session's id, uid
    /// and object path, each string at most `limit` bytes; nil when it is
    /// not that or holds more than `count` (a list read in part could leave
    /// out the session that matters).
    func readSessionList(count: Int, limit: Int) -> [(id: [UInt8], uid: UInt32, path: [UInt8])]? {
        guard sd_bus_message_enter_container(raw, typeCode("a"), "(susso)") > 0 else { return nil }
        var sessions: [(id: [UInt8], uid: UInt32, path: [UInt8])] = []
        while true {
            var id: UnsafePointer<CChar>? = nil, user: UnsafePointer<CChar>? = nil
            var seat: UnsafePointer<CChar>? = nil, path: UnsafePointer<CChar>? = nil
            var uid: UInt32 = 0
            let read = la_bus_read_session_entry(raw, &id, &uid, &user, &seat, &path)
            if read == 0 { break }
            guard read > 0, let id, let path, sessions.count < count else { return nil }
            sessions.append((Syscalls.bytes(ofCString: id, limit: limit), uid, Syscalls.bytes(ofCString: path, limit: limit)))
        }
        return sessions
    }

    /// A variant holding a boolean (a `Properties.Get` reply).
    func readVariantFlag() -> Bool? {
        var value: Int32 = 0
        guard la_bus_read_variant_b(raw, &value) >= 0 else { return nil }
        return value != 0
    }

    /// The properties of a property dictionary (`a{sv}`) that are booleans
    /// named in `flags`, a `(so)` pair named `namedPath` (its string) or a
    /// `(uo)` pair named `numberedPath` (its number); others are skipped.
    func readProperties(flags: [[UInt8]], namedPath: [UInt8], numberedPath: [UInt8])
        -> (flags: [(name: [UInt8], value: Bool)], name: [UInt8]?, number: UInt32?)? {
        guard sd_bus_message_enter_container(raw, typeCode("a"), "{sv}") > 0 else { return nil }
        var found: [(name: [UInt8], value: Bool)] = []
        var name: [UInt8]? = nil
        var number: UInt32? = nil
        var entries = 0
        while entries < 128, sd_bus_message_enter_container(raw, typeCode("e"), "sv") > 0 {
            entries += 1
            var key: UnsafePointer<CChar>? = nil
            guard sd_bus_message_read_basic(raw, typeCode("s"), &key) >= 0, let key else { return nil }
            let property = Syscalls.bytes(ofCString: key, limit: 64)
            if flags.contains(property) {
                var value: Int32 = 0
                guard la_bus_read_variant_b(raw, &value) >= 0 else { return nil }
                found.append((property, value != 0))
            } else if property == namedPath {
                var text: UnsafePointer<CChar>? = nil, path: UnsafePointer<CChar>? = nil
                guard la_bus_read_variant_so(raw, &text, &path) >= 0, let text else { return nil }
                name = Syscalls.bytes(ofCString: text, limit: 256)
            } else if property == numberedPath {
                var value: UInt32 = 0
                var path: UnsafePointer<CChar>? = nil
                guard la_bus_read_variant_uo(raw, &value, &path) >= 0 else { return nil }
                number = value
            } else if sd_bus_message_skip(raw, "v") < 0 {
                return nil
            }
            _ = sd_bus_message_exit_container(raw)
        }
        return (found, name, number)
    }

    /// Whether this is an error reply.
    var isError: Bool { sd_bus_message_is_method_error(raw, nil) > 0 }

    /// The error's name, for an error reply.
    var errorName: [UInt8] {
        guard let error = sd_bus_message_get_error(raw), let name = error.pointee.name else { return [] }
        return Syscalls.bytes(ofCString: name, limit: 256)
    }

    /// The boolean properties among `names` in a PropertiesChanged signal
    /// (`sa{sv}as`) for `interface`; other properties are skipped.
    func readChangedBooleans(interface expected: [UInt8], names: [[UInt8]]) -> [(name: [UInt8], value: Bool)] {
        var interface: UnsafePointer<CChar>? = nil
        guard sd_bus_message_read_basic(raw, typeCode("s"), &interface) >= 0, let interface,
              Syscalls.bytes(ofCString: interface, limit: 256) == expected else { return [] }
        return readBooleanProperties(names: names)
    }

    /// The boolean properties among `names` in a property dictionary
    /// (`a{sv}`, as `Properties.GetAll` answers); others are skipped.
    func readBooleanProperties(names: [[UInt8]]) -> [(name: [UInt8], value: Bool)] {
        guard sd_bus_message_enter_container(raw, typeCode("a"), "{sv}") > 0 else { return [] }
        var values: [(name: [UInt8], value: Bool)] = []
        var entries = 0
        while entries < 64, sd_bus_message_enter_container(raw, typeCode("e"), "sv") > 0 {
            entries += 1
            var key: UnsafePointer<CChar>? = nil
            guard sd_bus_message_read_basic(raw, typeCode("s"), &key) >= 0, let key else { return values }
            let name = Syscalls.bytes(ofCString: key, limit: 64)
            if names.contains(name) && sd_bus_message_enter_container(raw, typeCode("v"), "b") > 0 {
                var value: Int32 = 0
                guard sd_bus_message_read_basic(raw, typeCode("b"), &value) >= 0 else { return values }
                values.append((name, value != 0))
                _ = sd_bus_message_exit_container(raw)
            } else if sd_bus_message_skip(raw, "v") < 0 {
                return values
            }
            _ = sd_bus_message_exit_container(raw)
        }
        return values
    }
}

private func typeCode(_ character: Unicode.Scalar) -> CChar {
    CChar(bitPattern: UInt8(truncatingIfNeeded: character.value))
}

/// The answer to a method call: the reply, or the error's name.
final class BusReply {
    /// Negative errno when the call failed (an error reply, a timeout, no bus).
    let status: Int32
    let errorName: [UInt8]
    private let raw: OpaquePointer?

    fileprivate init(status: Int32, errorName: [UInt8], raw: OpaquePointer?) {
        self.status = status
        self.errorName = errorName
        self.raw = raw
    }

    deinit {
        if let raw { sd_bus_message_unref(raw) }
    }

    var succeeded: Bool { status >= 0 }
    /// The reply message, when the call succeeded.
    var message: BusMessage? { raw.map { BusMessage(raw: $0) } }
}

/// The reply to a call sent without waiting (`SystemBus.start`), filled in
/// while the bus dispatches: several calls can then share one round trip.
final class PendingReply {
    fileprivate(set) var answered = false
    fileprivate var raw: OpaquePointer? = nil
    fileprivate(set) var errorName: [UInt8] = []

    deinit {
        if let raw { sd_bus_message_unref(raw) }
    }

    /// Answered with a method return (not an error, a timeout or no bus).
    var succeeded: Bool { answered && raw != nil }
    /// The reply message, when the call succeeded.
    var message: BusMessage? { raw.map { BusMessage(raw: $0) } }
}

/// Code run for each matching signal, while `SystemBus.process` dispatches.
final class BusSignalHandler {
    let body: (BusMessage) -> Void
    init(_ body: @escaping (BusMessage) -> Void) { self.body = body }
}

/// A connection to the system bus (`DBUS_SYSTEM_BUS_ADDRESS` is read with
/// `secure_getenv`, so it is ignored in setuid processes).
final class SystemBus {
    private var raw: OpaquePointer?
    private var slots: [OpaquePointer] = []
    private var handlers: [BusSignalHandler] = []

    /// Connects; every method call then gives up after `callTimeoutMicroseconds`.
    init?(callTimeoutMicroseconds: UInt64) {
        var opened: OpaquePointer? = nil
        guard sd_bus_open_system(&opened) >= 0, let opened else { return nil }
        _ = sd_bus_set_method_call_timeout(opened, callTimeoutMicroseconds)
        raw = opened
    }

    deinit { close() }

    /// Calls a method with zero, one or two string arguments and waits for
    /// the reply. Messages that arrive meanwhile are queued for `process`.
    func call(destination: [UInt8], path: [UInt8], interface: [UInt8], member: [UInt8], arguments: [[UInt8]] = []) -> BusReply {
        guard let raw else { return BusReply(status: -Errno.notConnected.code, errorName: [], raw: nil) }
        var error = sd_bus_error()
        var reply: OpaquePointer? = nil
        let status = withCStrings(destination, path) { cDestination, cPath in
            withCStrings(interface, member) { cInterface, cMember -> Int32 in
                switch arguments.count {
                case 0:
                    return la_bus_call(raw, cDestination, cPath, cInterface, cMember, &error, &reply)
                case 1:
                    return withCStrings(arguments[0], arguments[0]) { first, _ in
                        la_bus_call_s(raw, cDestination, cPath, cInterface, cMember, first, &error, &reply)
                    }
                default:
                    return withCStrings(arguments[0], arguments[1]) { first, second in
                        la_bus_call_ss(raw, cDestination, cPath, cInterface, cMember, first, second, &error, &reply)
                    }
                }
            }
        }
        let name = error.name.map { Syscalls.bytes(ofCString: $0, limit: 256) } ?? []
        sd_bus_error_free(&error)
        if status < 0, let reply {
            sd_bus_message_unref(reply)
            return BusReply(status: status, errorName: name, raw: nil)
        }
        return BusReply(status: status, errorName: name, raw: reply)
    }

    /// Sends a method call with zero, one or two string arguments without
    /// waiting; the reply (or the error, or sd-bus's own timeout error) is
    /// kept in the returned box while `wait` or `process` dispatch. Calls
    /// sent one after another are answered in order by each destination.
    func start(destination: [UInt8], path: [UInt8], interface: [UInt8], member: [UInt8],
               arguments: [[UInt8]] = []) -> PendingReply? {
        guard let raw else { return nil }
        let pending = PendingReply()
        let holder = BusSignalHandler { message in
            pending.answered = true
            if message.isError {
                pending.errorName = message.errorName
            } else {
                pending.raw = sd_bus_message_ref(message.raw)
            }
        }
        var slot: OpaquePointer? = nil
        let userdata = Unmanaged.passUnretained(holder).toOpaque()
        let callback: sd_bus_message_handler_t = { message, userdata, _ in
            guard let message, let userdata else { return 0 }
            Unmanaged<BusSignalHandler>.fromOpaque(userdata).takeUnretainedValue().body(BusMessage(raw: message))
            return 0
        }
        let status = withCStrings(destination, path) { cDestination, cPath in
            withCStrings(interface, member) { cInterface, cMember -> Int32 in
                switch arguments.count {
                case 0:
                    return la_bus_call_async(raw, &slot, cDestination, cPath, cInterface, cMember, callback, userdata)
                case 1:
                    return withCStrings(arguments[0], arguments[0]) { first, _ in
                        la_bus_call_async_s(raw, &slot, cDestination, cPath, cInterface, cMember, callback, userdata, first)
                    }
                default:
                    return withCStrings(arguments[0], arguments[1]) { first, second in
                        la_bus_call_async_ss(raw, &slot, cDestination, cPath, cInterface, cMember, callback, userdata, first, second)
                    }
                }
            }
        }
        guard status >= 0, let slot else { return nil }
        slots.append(slot)
        handlers.append(holder)
        return pending
    }

    /// Waits until every reply in `replies` has come (answered, an error or
    /// timed out), for at most `milliseconds`. False when time ran out or
    /// the connection failed.
    func wait(for replies: [PendingReply], milliseconds: Int64) -> Bool {
        let until = Syscalls.bootTimeNanoseconds() + milliseconds * 1_000_000
        return wait(until: { replies.allSatisfy { $0.answered } },
                    remainingMilliseconds: { (until - Syscalls.bootTimeNanoseconds()) / 1_000_000 })
    }

    /// Runs `handler` for every signal `member` of `interface` that `sender`
    /// sends from `path` (an empty path or sender: any), without waiting
    /// for the bus to confirm the match: the bus handles a connection's
    /// messages in order, so the match is in force for everything sent
    /// after it. A match the bus refuses closes the connection (sd-bus's
    /// default), which fails every later call. False when the match cannot
    /// be sent.
    func subscribeWithoutWaiting(sender: [UInt8], path: [UInt8], interface: [UInt8], member: [UInt8],
                                 _ handler: BusSignalHandler) -> Bool {
        guard let raw else { return false }
        var slot: OpaquePointer? = nil
        let userdata = Unmanaged.passUnretained(handler).toOpaque()
        let status = withCStrings(sender, path) { cSender, cPath in
            withCStrings(interface, member) { cInterface, cMember in
                sd_bus_match_signal_async(raw, &slot, sender.isEmpty ? nil : cSender, path.isEmpty ? nil : cPath, cInterface, cMember,
                                          { message, userdata, _ in
                    guard let message, let userdata else { return 0 }
                    Unmanaged<BusSignalHandler>.fromOpaque(userdata).takeUnretainedValue().body(BusMessage(raw: message))
                    return 0
                }, nil, userdata)
            }
        }
        guard status >= 0, let slot else { return false }
        slots.append(slot)
        handlers.append(handler)
        return true
    }

    /// Sets how long each later method call may wait for its reply.
    func setCallTimeout(microseconds: UInt64) {
        if let raw { _ = sd_bus_set_method_call_timeout(raw, microseconds) }
    }

    /// Builds a method call with no argument or one string argument, to be
    /// sent later with `send`: building is the slow part, so two calls that
    /// must leave close together are both built first.
    func prepareCall(destination: [UInt8], path: [UInt8], interface: [UInt8], member: [UInt8],
                     argument: [UInt8]? = nil) -> PreparedCall? {
        guard let raw else { return nil }
        var message: OpaquePointer? = nil
        let built = withCStrings(destination, path) { cDestination, cPath in
            withCStrings(interface, member) { cInterface, cMember -> Bool in
                sd_bus_message_new_method_call(raw, &message, cDestination, cPath, cInterface, cMember) >= 0
            }
        }
        guard built, let message else { return nil }
        let call = PreparedCall(message)
        if let argument {
            let appended = withCStrings(argument, argument) { cArgument, _ in
                sd_bus_message_append_basic(message, CChar(UInt8(ascii: "s")), cArgument) >= 0
            }
            guard appended else { return nil }
        }
        return call
    }

    /// Sends a prepared call without waiting: its reply (or error) reaches
    /// `handler` while `process` dispatches. False when it could not be sent.
    func send(_ call: PreparedCall, _ handler: BusSignalHandler) -> Bool {
        guard let raw else { return false }
        var slot: OpaquePointer? = nil
        let userdata = Unmanaged.passUnretained(handler).toOpaque()
        let callback: sd_bus_message_handler_t = { message, userdata, _ in
            guard let message, let userdata else { return 0 }
            Unmanaged<BusSignalHandler>.fromOpaque(userdata).takeUnretainedValue().body(BusMessage(raw: message))
            return 0
        }
        guard sd_bus_call_async(raw, &slot, call.message, callback, userdata, 0) >= 0, let slot else { return false }
        slots.append(slot)
        handlers.append(handler)
        return true
    }

    /// Dispatches and waits until `done` says so, for as long as
    /// `remainingMilliseconds` gives time left. False when time ran out or
    /// the connection failed.
    func wait(until done: () -> Bool, remainingMilliseconds: () -> Int64) -> Bool {
        while true {
            guard processAll(while: { remainingMilliseconds() > 0 }) else { return false }
            if done() { return true }
            let left = remainingMilliseconds()
            guard left > 0, let request = pollRequest,
                  Syscalls.poll([request], timeoutMilliseconds: Int32(min(left, 1000))) != nil else { return false }
        }
    }

    /// Dispatches one queued or readable message; 0 when there was none,
    /// negative when the connection failed.
    func process() -> Int32 {
        guard let raw else { return -Errno.notConnected.code }
        return sd_bus_process(raw, nil)
    }

    /// Dispatches until nothing is queued or readable, or until `keepGoing`
    /// says stop (it is asked every 64 messages, so a flood of traffic
    /// cannot keep the caller here for ever). False when it was stopped
    /// with messages left or the connection failed.
    @discardableResult
    func processAll(while keepGoing: () -> Bool = { true }) -> Bool {
        var count = 0
        while true {
            let processed = process()
            if processed < 0 { return false }
            if processed == 0 { return true }
            count += 1
            if count % 64 == 0 && !keepGoing() { return false }
        }
    }

    /// What to poll for: the connection's descriptor and events.
    var pollRequest: PollRequest? {
        guard let raw else { return nil }
        return PollRequest(fd: sd_bus_get_fd(raw), events: Int16(truncatingIfNeeded: sd_bus_get_events(raw)))
    }

    /// Drops every subscription, flushes and closes the connection.
    func close() {
        for slot in slots { sd_bus_slot_unref(slot) }
        slots.removeAll()
        handlers.removeAll()
        if let raw {
            sd_bus_flush_close_unref(raw)
            self.raw = nil
        }
    }
}

/// One system bus connection for a prompt, shared by the reader and logind:
/// one connection set up (and one handshake with the bus) instead of two.
public final class SharedSystemBus {
    private var bus: SystemBus? = nil
    /// A connection that could not be made is not tried again in this
    /// prompt (there is no bus, or no room on it).
    private var unreachable = false
    /// fprintd answers in milliseconds; no call may hang the prompt.
    static let callTimeoutMicroseconds: UInt64 = 5_000_000

    public init() {}

    /// The connection, made on first use.
    func connection() -> SystemBus? {
        if bus == nil && !unreachable {
            bus = SystemBus(callTimeoutMicroseconds: SharedSystemBus.callTimeoutMicroseconds)
            unreachable = bus == nil
        }
        return bus
    }

    /// Ends the prompt's connection; a later prompt connects anew.
    func close() {
        bus?.close()
        bus = nil
        unreachable = false
    }
}
