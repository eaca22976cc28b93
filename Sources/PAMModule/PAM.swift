import CLocalAuth
import LocalAuth

/// The only Swift code that touches `pam_handle_t`: the outer handle of the
/// application's transaction and the inner one of the passcode check.

/// Linux-PAM constants as Swift values.
enum PAMConstant {
    static let silentFlag: Int32 = 0x8000
    /// The failure delay requested after a charged wrong passcode (µs).
    static let failDelayMicroseconds: UInt32 = 2_000_000
}

/// The application's PAM handle.
struct PAMHandle {
    let raw: OpaquePointer

    /// A string item (`PAM_SERVICE`, `PAM_TTY`, ...) as bytes; empty when unset.
    func stringItem(_ type: Int32) -> [UInt8] {
        var value: UnsafeRawPointer? = nil
        guard pam_get_item(raw, type, &value) == PAM_SUCCESS, let pointer = value else { return [] }
        return Syscalls.bytes(ofCString: pointer.assumingMemoryBound(to: CChar.self), limit: 1024)
    }

    /// The target user, asking through the conversation when unset.
    func userName() -> (code: Int32, name: [UInt8]) {
        var name: UnsafePointer<CChar>? = nil
        let code = pam_get_user(raw, &name, nil)
        guard code == PAM_SUCCESS, let name else { return (code, []) }
        return (code, Syscalls.bytes(ofCString: name, limit: 1024))
    }

    func log(_ priority: Int32, _ message: String) {
        message.withCString { la_pam_syslog(raw, priority, $0) }
    }

    /// Sends one message; for prompts, copies the reply into `secret` and
    /// wipes and frees the application's copy.
    func converse(style: Int32, _ text: String, into secret: SecretBuffer?) -> PromptAnswer {
        var item: UnsafeRawPointer? = nil
        guard pam_get_item(raw, PAM_CONV, &item) == PAM_SUCCESS, let conversation = item?.assumingMemoryBound(to: pam_conv.self),
              let function = conversation.pointee.conv else { return .failed }
        var responses: UnsafeMutablePointer<pam_response>? = nil
        let status = text.withCString { cText -> Int32 in
            var message = pam_message(msg_style: style, msg: cText)
            return withUnsafePointer(to: &message) { messagePointer -> Int32 in
                var messages: UnsafePointer<pam_message>? = messagePointer
                return function(1, &messages, &responses, conversation.pointee.appdata_ptr)
            }
        }
        defer {
            if let responses {
                if let reply = responses.pointee.resp {
                    explicit_bzero(reply, strnlen(reply, 1 << 20))
                    free(reply)
                }
                free(responses)
            }
        }
        guard status == PAM_SUCCESS else { return .failed }
        guard let secret else { return .entered }
        guard let reply = responses?.pointee.resp else { return .failed }
        let length = strnlen(reply, SecretBuffer.capacity + 1)
        reply.withMemoryRebound(to: UInt8.self, capacity: length + 1) { secret.assign(from: $0, length: length) }
        return length == 0 ? .empty : .entered
    }

    /// Hands the correct passcode to later modules (keyrings) as `PAM_AUTHTOK`.
    func setAuthToken(_ secret: SecretBuffer) {
        _ = secret.withCString { pam_set_item(raw, PAM_AUTHTOK, UnsafeRawPointer($0)) }
    }

    func requestFailDelay() {
        _ = pam_fail_delay(raw, PAMConstant.failDelayMicroseconds)
    }

    static let markerName: StaticString = "pam_localauth_uid"

    /// R11: notes that this module's authenticate ran for `uid` in this transaction.
    func setMarker(uid: UInt32) {
        guard let memory = malloc(MemoryLayout<UInt32>.size) else { return }
        memory.storeBytes(of: uid, as: UInt32.self)
        let status = pam_set_data(raw, UnsafeRawPointer(PAMHandle.markerName.utf8Start).assumingMemoryBound(to: CChar.self), memory) { _, data, _ in
            free(data)
        }
        if status != PAM_SUCCESS { free(memory) }
    }

    /// The uid noted by `setMarker`, if any.
    func marker() -> UInt32? {
        var data: UnsafeRawPointer? = nil
        let status = pam_get_data(raw, UnsafeRawPointer(PAMHandle.markerName.utf8Start).assumingMemoryBound(to: CChar.self), &data)
        guard status == PAM_SUCCESS, let data else { return nil }
        return data.load(as: UInt32.self)
    }
}

/// The conversation of the application, as the engine's prompter.
struct PAMPrompter: Prompter {
    let handle: PAMHandle

    mutating func ask(_ text: String, into secret: SecretBuffer) -> PromptAnswer {
        handle.converse(style: PAM_PROMPT_ECHO_OFF, text, into: secret)
    }

    mutating func tell(_ text: String, _ kind: MessageKind) {
        _ = handle.converse(style: kind == .error ? PAM_ERROR_MSG : PAM_TEXT_INFO, text, into: nil)
    }
}

/// The administrator's log through `pam_syslog`.
struct PAMLog: EventLog {
    let handle: PAMHandle
    let debug: Bool

    mutating func log(_ level: LogLevel, _ message: String) {
        switch level {
        case .debug: if debug { handle.log(LOG_DEBUG, message) }
        case .notice: handle.log(LOG_NOTICE, message)
        case .warning: handle.log(LOG_WARNING, message)
        case .error: handle.log(LOG_ERR, message)
        }
    }
}

/// What the inner conversation knows: the one answer it may give.
struct InnerConversationState {
    var passcode: UnsafePointer<CChar>? = nil
    var answered = 0
    /// A second prompt, an echo-on prompt or another request was seen.
    var violated = false
}

/// SPEC §6: checks the passcode with a separate PAM transaction on the
/// passcode service. Its conversation answers exactly one echo-off prompt;
/// anything else makes the verdict "wrong".
public struct PAMPasscodeVerifier: PasscodeVerifier {
    let service: [UInt8]
    let tty: [UInt8]
    let remoteHost: [UInt8]
    let requestingUser: [UInt8]
    private var inner: OpaquePointer? = nil
    private var state: UnsafeMutablePointer<InnerConversationState>? = nil
    private var conversation: UnsafeMutablePointer<pam_conv>? = nil

    public init(service: [UInt8], tty: [UInt8], remoteHost: [UInt8], requestingUser: [UInt8]) {
        self.service = service
        self.tty = tty
        self.remoteHost = remoteHost
        self.requestingUser = requestingUser
    }

    public mutating func begin(userName: [UInt8]) -> Bool {
        end()
        let state = UnsafeMutablePointer<InnerConversationState>.allocate(capacity: 1)
        state.initialize(to: InnerConversationState())
        let conversation = UnsafeMutablePointer<pam_conv>.allocate(capacity: 1)
        conversation.initialize(to: pam_conv(conv: { count, messages, responses, appdata in
            innerConverse(count, messages, responses, appdata)
        }, appdata_ptr: UnsafeMutableRawPointer(state)))
        self.state = state
        self.conversation = conversation
        var handle: OpaquePointer? = nil
        let status = withCStrings(service, userName) { cService, cUser in
            pam_start(cService, cUser, conversation, &handle)
        }
        guard status == PAM_SUCCESS, let handle else {
            if let handle { pam_end(handle, status) }
            end()
            return false
        }
        inner = handle
        if !tty.isEmpty { _ = withCStrings(tty, tty) { value, _ in pam_set_item(handle, PAM_TTY, value) } }
        if !remoteHost.isEmpty { _ = withCStrings(remoteHost, remoteHost) { value, _ in pam_set_item(handle, PAM_RHOST, value) } }
        if !requestingUser.isEmpty { _ = withCStrings(requestingUser, requestingUser) { value, _ in pam_set_item(handle, PAM_RUSER, value) } }
        _ = la_set_noop_fail_delay(handle)
        return true
    }

    public mutating func verify(_ passcode: SecretBuffer) -> PasscodeVerdict {
        guard let inner, let state, !passcode.overflowed, passcode.count > 0 else { return .wrong }
        la_passcode_guard_enter()
        defer { la_passcode_guard_leave() }
        let status = passcode.withCString { secret -> Int32 in
            state.pointee.passcode = secret
            defer { state.pointee.passcode = nil }
            return pam_authenticate(inner, Int32(PAM_DISALLOW_NULL_AUTHTOK))
        }
        if state.pointee.answered == 0 && !state.pointee.violated { return .noVerdict }
        let exactlyOnePrompt = state.pointee.answered == 1 && !state.pointee.violated
        return status == PAM_SUCCESS && exactlyOnePrompt ? .correct : .wrong
    }

    public mutating func end() {
        if let inner {
            pam_end(inner, PAM_SUCCESS)
            self.inner = nil
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

/// The inner conversation: one echo-off prompt gets the passcode (in memory
/// allocated for libpam, which the asking module frees); anything else
/// marks the check as violated and fails the conversation.
private func innerConverse(_ count: Int32, _ messages: UnsafeMutablePointer<UnsafePointer<pam_message>?>?,
                           _ responses: UnsafeMutablePointer<UnsafeMutablePointer<pam_response>?>?,
                           _ appdata: UnsafeMutableRawPointer?) -> Int32 {
    guard let appdata, let messages, let responses, count > 0, count <= 32 else { return PAM_CONV_ERR }
    let state = appdata.assumingMemoryBound(to: InnerConversationState.self)
    guard let replies = calloc(Int(count), MemoryLayout<pam_response>.size)?.assumingMemoryBound(to: pam_response.self) else {
        return PAM_BUF_ERR
    }
    for index in 0..<Int(count) {
        guard let message = messages[index] else { continue }
        switch message.pointee.msg_style {
        case PAM_TEXT_INFO, PAM_ERROR_MSG:
            continue
        case PAM_PROMPT_ECHO_OFF where state.pointee.answered == 0 && !state.pointee.violated:
            guard let passcode = state.pointee.passcode, let copy = strdup(passcode) else {
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
            if let reply = replies[index].resp {
                explicit_bzero(reply, strlen(reply))
                free(reply)
            }
        }
        free(replies)
        return PAM_CONV_ERR
    }
    responses.pointee = replies
    return PAM_SUCCESS
}

/// Lends two byte strings as NUL-terminated C strings.
func withCStrings<R>(_ first: [UInt8], _ second: [UInt8], _ body: (UnsafePointer<CChar>, UnsafePointer<CChar>) -> R) -> R {
    var a = first, b = second
    a.append(0)
    b.append(0)
    return a.withUnsafeBufferPointer { aBuffer in
        b.withUnsafeBufferPointer { bBuffer in
            body(UnsafeRawPointer(aBuffer.baseAddress!).assumingMemoryBound(to: CChar.self),
                 UnsafeRawPointer(bBuffer.baseAddress!).assumingMemoryBound(to: CChar.self))
        }
    }
}
