// The only code that calls libpam: items, the user, syslog, one
// conversation message, the authentication token, the failure delay, module
// data, and the nested transaction of the password check with its one-answer
// conversation.
import CPAMAndBus
import LocalAuth
import LibcSystem

/// Linux-PAM's values as Swift constants.
public enum PAMValue {
    public static var success: Int32 { PAM_SUCCESS }
    public static var conversationError: Int32 { PAM_CONV_ERR }
    /// `PAM_SILENT` in the flags of an entry point.
    public static var silentFlag: Int32 { Int32(PAM_SILENT) }
    static var service: Int32 { PAM_SERVICE }
    static var tty: Int32 { PAM_TTY }
    static var remoteHost: Int32 { PAM_RHOST }
    static var requestingUser: Int32 { PAM_RUSER }
}

/// Message styles of the conversation.
enum PAMMessageStyle {
    case promptEchoOff
    case errorMessage
    case textInfo

    var raw: Int32 {
        switch self {
        case .promptEchoOff: return PAM_PROMPT_ECHO_OFF
        case .errorMessage: return PAM_ERROR_MSG
        case .textInfo: return PAM_TEXT_INFO
        }
    }
}

/// A `pam_handle_t` as libpam gave it to the module.
struct LibPAMHandle {
    let raw: OpaquePointer

    /// A string item as bytes; empty when unset.
    func stringItem(_ type: Int32) -> [UInt8] {
        var value: UnsafeRawPointer? = nil
        guard pam_get_item(raw, type, &value) == PAM_SUCCESS, let pointer = value else { return [] }
        return Syscalls.bytes(ofCString: pointer.assumingMemoryBound(to: CChar.self), limit: 1024)
    }

    /// The target user, asking through the conversation when unset.
    func user() -> (code: Int32, name: [UInt8]) {
        var name: UnsafePointer<CChar>? = nil
        let code = pam_get_user(raw, &name, nil)
        guard code == PAM_SUCCESS, let name else { return (code, []) }
        return (code, Syscalls.bytes(ofCString: name, limit: 1024))
    }

    func syslog(_ level: LogLevel, _ message: String) {
        let priority = Syscalls.syslogPriority(level)
        message.withCString { la_pam_syslog(raw, priority, $0) }
    }

    /// Sends one message; for a prompt, copies the reply into `secret`, and
    /// always wipes and frees the application's copy.
    func converse(_ style: PAMMessageStyle, _ text: String, into secret: SecretBuffer?) -> PromptAnswer {
        guard let conversation = conversation() else { return .failed }
        var answer = PromptAnswer.failed
        let replied = text.withCString { cText in
            conversation.send(style.raw, cText) { reply, length in
                guard let secret else { return }
                secret.assign(from: reply, length: length)
                answer = length == 0 ? .empty : .entered
            }
        }
        guard replied else { return .failed }
        return secret == nil ? .entered : answer
    }

    /// The application's conversation, copied out of the handle.
    func conversation() -> PAMConversationFunction? {
        var item: UnsafeRawPointer? = nil
        guard pam_get_item(raw, PAM_CONV, &item) == PAM_SUCCESS, let conversation = item?.assumingMemoryBound(to: pam_conv.self),
              conversation.pointee.conv != nil else { return nil }
        return PAMConversationFunction(conversation: conversation.pointee)
    }

    /// `PAM_AUTHTOK`, for later modules (keyrings).
    func setAuthToken(_ secret: SecretBuffer) {
        _ = secret.withCString { pam_set_item(raw, PAM_AUTHTOK, UnsafeRawPointer($0)) }
    }

    /// Copies `PAM_AUTHTOK` into `secret` (never into a String); false when
    /// it is not set or longer than the buffer holds.
    func copyAuthToken(into secret: SecretBuffer) -> Bool {
        var item: UnsafeRawPointer? = nil
        guard pam_get_item(raw, PAM_AUTHTOK, &item) == PAM_SUCCESS, let item else { return false }
        let text = item.assumingMemoryBound(to: CChar.self)
        let length = Syscalls.length(of: text, limit: SecretBuffer.capacity + 1)
        guard length <= SecretBuffer.capacity else { return false }
        item.withMemoryRebound(to: UInt8.self, capacity: length + 1) { secret.assign(from: $0, length: length) }
        return true
    }

    /// Whether a module set `PAM_AUTHTOK` in this run of the stack: libpam
    /// clears it when each pam_authenticate begins and ends. (Its text may
    /// have been wiped since; only that it was set is asked.)
    func authTokenIsSet() -> Bool {
        var item: UnsafeRawPointer? = nil
        return pam_get_item(raw, PAM_AUTHTOK, &item) == PAM_SUCCESS && item != nil
    }

    func requestFailDelay(microseconds: UInt32) {
        _ = pam_fail_delay(raw, microseconds)
    }

    /// Stores a uid as module data under `name`, freed by libpam at pam_end.
    func setData(_ name: StaticString, uid: UInt32) {
        guard let memory = Syscalls.allocate(zeroedBytes: MemoryLayout<UInt32>.size) else { return }
        memory.storeBytes(of: uid, as: UInt32.self)
        let status = pam_set_data(raw, UnsafeRawPointer(name.utf8Start).assumingMemoryBound(to: CChar.self), memory) { _, data, _ in
            Syscalls.release(data)
        }
        if status != PAM_SUCCESS { Syscalls.release(memory) }
    }

    /// The uid stored by `setData`, if any.
    func uidData(_ name: StaticString) -> UInt32? {
        var data: UnsafeRawPointer? = nil
        let status = pam_get_data(raw, UnsafeRawPointer(name.utf8Start).assumingMemoryBound(to: CChar.self), &data)
        guard status == PAM_SUCCESS, let data else { return nil }
        return data.load(as: UInt32.self)
    }
}

/// What the inner conversation knows: the one answer it may give.
struct InnerConversationState {
    var passcode: UnsafePointer<CChar>? = nil
    var answered = 0
    /// A second prompt, an echo-on prompt or another request was seen.
    var violated = false
}

/// A nested PAM transaction whose conversation answers exactly one echo-off
/// prompt with the secret it is lent; anything else marks it violated.
struct LibPAMTransaction {
    private var handle: OpaquePointer? = nil
    private var state: UnsafeMutablePointer<InnerConversationState>? = nil
    private var conversation: UnsafeMutablePointer<pam_conv>? = nil

    /// Starts the transaction on `service` for `user` with the items given
    /// (empty ones are left unset) and a failure delay that does nothing.
    mutating func start(service: [UInt8], user: [UInt8], tty: [UInt8], remoteHost: [UInt8], requestingUser: [UInt8]) -> Bool {
        end()
        let state = UnsafeMutablePointer<InnerConversationState>.allocate(capacity: 1)
        state.initialize(to: InnerConversationState())
        let conversation = UnsafeMutablePointer<pam_conv>.allocate(capacity: 1)
        conversation.initialize(to: pam_conv(conv: { count, messages, responses, appdata in
            innerConverse(count, messages, responses, appdata)
        }, appdata_ptr: UnsafeMutableRawPointer(state)))
        self.state = state
        self.conversation = conversation
        var started: OpaquePointer? = nil
        let status = withCStrings(service, user) { cService, cUser in
            pam_start(cService, cUser, conversation, &started)
        }
        guard status == PAM_SUCCESS, let started else {
            if let started { pam_end(started, status) }
            end()
            return false
        }
        handle = started
        for (item, value) in [(PAM_TTY, tty), (PAM_RHOST, remoteHost), (PAM_RUSER, requestingUser)] where !value.isEmpty {
            _ = withCStrings(value, value) { cValue, _ in pam_set_item(started, item, cValue) }
        }
        _ = la_set_noop_fail_delay(started)
        return true
    }

    /// Authenticates with the secret lent to the conversation, inside the
    /// recursion guard. Returns the PAM code and how many prompts were
    /// answered, and whether anything else was asked.
    mutating func authenticate(_ secret: SecretBuffer) -> (code: Int32, answered: Int, violated: Bool)? {
        guard let handle, let state else { return nil }
        la_passcode_guard_enter()
        defer { la_passcode_guard_leave() }
        let code = secret.withCString { cSecret -> Int32 in
            state.pointee.passcode = cSecret
            defer { state.pointee.passcode = nil }
            return pam_authenticate(handle, Int32(PAM_DISALLOW_NULL_AUTHTOK))
        }
        return (code, state.pointee.answered, state.pointee.violated)
    }

    mutating func end() {
        if let handle {
            pam_end(handle, PAM_SUCCESS)
            self.handle = nil
        }
        if let state {
            state.deinitialize(count: 1)
            state.deallocate()
            self.state = nil
        }
        if let conversation {
            conversation.deinitialize(count: 1)
            conversation.deallocate()
            self.conversation = nil
        }
    }
}

/// True inside the module's own password transaction on this thread: an
/// instance of the module reached there must do nothing.
func insidePasscodeTransaction() -> Bool {
    la_passcode_guard_active() != 0
}

/// The inner conversation: one echo-off prompt gets the passcode (in memory
/// allocated for libpam, which the asking module frees); anything else
/// marks the check as violated and fails the conversation.
private func innerConverse(_ count: Int32, _ messages: UnsafeMutablePointer<UnsafePointer<pam_message>?>?,
                           _ responses: UnsafeMutablePointer<UnsafeMutablePointer<pam_response>?>?,
                           _ appdata: UnsafeMutableRawPointer?) -> Int32 {
    guard let appdata, let messages, let responses, count > 0, count <= 32 else { return PAM_CONV_ERR }
    let state = appdata.assumingMemoryBound(to: InnerConversationState.self)
    guard let replies = Syscalls.allocate(zeroedBytes: Int(count) * MemoryLayout<pam_response>.size)?
        .assumingMemoryBound(to: pam_response.self) else {
        return PAM_BUF_ERR
    }
    for index in 0..<Int(count) {
        guard let message = messages[index] else { continue }
        switch message.pointee.msg_style {
        case PAM_TEXT_INFO, PAM_ERROR_MSG:
            continue
        case PAM_PROMPT_ECHO_OFF where state.pointee.answered == 0 && !state.pointee.violated:
            guard let passcode = state.pointee.passcode, let copy = Syscalls.duplicate(passcode) else {
                state.pointee.violated = true
                break
            }
            replies[index].resp = copy
            state.pointee.answered += 1
        default:
            state.pointee.violated = true
        }
        if state.pointee.violated { break }
    }
    if state.pointee.violated {
        for index in 0..<Int(count) {
            if let reply = replies[index].resp { Syscalls.wipeAndRelease(reply, limit: SecretBuffer.capacity + 1) }
        }
        Syscalls.release(replies)
        return PAM_CONV_ERR
    }
    responses.pointee = replies
    return PAM_SUCCESS
}

/// The application's conversation function and its data, copied from
/// `PAM_CONV`: callable without the handle (the open prompt's thread never
/// touches the handle, which pam_end frees). Plain values only: calling it
/// touches no reference counts.
struct PAMConversationFunction {
    let conversation: pam_conv

    /// Sends one message of `style`. A prompt's reply is given to `take`
    /// (its bytes and length, at most SecretBuffer.capacity + 1 read), then
    /// wiped and freed. False when the conversation failed, or a prompt got
    /// no reply.
    func send(_ style: Int32, _ text: UnsafePointer<CChar>, take: (UnsafePointer<UInt8>, Int) -> Void) -> Bool {
        guard let function = conversation.conv else { return false }
        var responses: UnsafeMutablePointer<pam_response>? = nil
        var message = pam_message(msg_style: style, msg: text)
        let status = withUnsafePointer(to: &message) { messagePointer -> Int32 in
            var messages: UnsafePointer<pam_message>? = messagePointer
            return function(1, &messages, &responses, conversation.appdata_ptr)
        }
        defer {
            if let responses {
                if let reply = responses.pointee.resp { Syscalls.wipeAndRelease(reply, limit: 1 << 20) }
                Syscalls.release(responses)
            }
        }
        guard status == PAM_SUCCESS else { return false }
        guard style == PAM_PROMPT_ECHO_OFF else { return true }
        guard let reply = responses?.pointee.resp else { return false }
        let length = Syscalls.length(of: reply, limit: SecretBuffer.capacity + 1)
        reply.withMemoryRebound(to: UInt8.self, capacity: length + 1) { take($0, length) }
        return true
    }
}
