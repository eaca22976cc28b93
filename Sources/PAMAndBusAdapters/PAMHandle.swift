// The application's PAM transaction as the module sees it: the facts of the
// call, the conversation as the engine's prompter, pam_syslog as its log,
// the authentication token and failure delay, and the marker that lets the
// authsucc line know this module ran (R11).
import LocalAuth
import LibcSystem

/// The application's handle, as the module's entry points get it.
public struct PAMHandle {
    let handle: LibPAMHandle

    public init(raw: OpaquePointer) {
        handle = LibPAMHandle(raw: raw)
    }

    public var service: [UInt8] { handle.stringItem(PAMValue.service) }
    public var tty: [UInt8] { handle.stringItem(PAMValue.tty) }
    public var remoteHost: [UInt8] { handle.stringItem(PAMValue.remoteHost) }
    public var requestingUser: [UInt8] { handle.stringItem(PAMValue.requestingUser) }

    /// The target user, or the PAM code to return when there is none.
    public enum TargetUser {
        case name([UInt8])
        case failed(PAMCode)
    }

    /// The target user, asked through the conversation when unset.
    public func userName() -> TargetUser {
        let (code, name) = handle.user()
        if code == PAMValue.success { return .name(name) }
        return .failed(code == PAMValue.conversationError ? .conversationError : .systemError)
    }

    public func log(_ level: LogLevel, _ message: String) {
        handle.syslog(level, message)
    }

    /// Hands the correct passcode to later modules (keyrings) as `PAM_AUTHTOK`.
    public func setAuthToken(_ secret: SecretBuffer) {
        handle.setAuthToken(secret)
    }

    /// Whether a module of this run of the stack set `PAM_AUTHTOK` (a
    /// password module that asked).
    public var authTokenIsSet: Bool { handle.authTokenIsSet() }

    /// `PAM_AUTHTOK` copied into `secret`; false when it is not set.
    public func copyAuthToken(into secret: SecretBuffer) -> Bool { handle.copyAuthToken(into: secret) }

    /// The failure delay asked after a charged wrong passcode.
    public static let failDelayMicroseconds: UInt32 = 2_000_000

    public func requestFailDelay() {
        handle.requestFailDelay(microseconds: PAMHandle.failDelayMicroseconds)
    }

    static let markerName: StaticString = "pam_localauth_uid"

    /// R11: notes that this module's authenticate ran for `uid` in this transaction.
    public func setMarker(uid: UInt32) {
        handle.setData(PAMHandle.markerName, uid: uid)
    }

    /// The uid noted by `setMarker`, if any.
    public func marker() -> UInt32? {
        handle.uidData(PAMHandle.markerName)
    }

    /// True when this call comes from inside the module's own password
    /// check (the inner transaction): the module must then do nothing.
    public static var insideOwnPasscodeCheck: Bool { insidePasscodeTransaction() }
}

/// The application's conversation, as the engine's prompter.
public struct PAMPrompter: Prompter {
    let handle: PAMHandle

    public init(handle: PAMHandle) { self.handle = handle }

    public mutating func ask(_ text: String, into secret: SecretBuffer) -> PromptAnswer {
        handle.handle.converse(.promptEchoOff, text, into: secret)
    }

    public mutating func tell(_ text: String, _ kind: MessageKind) {
        _ = handle.handle.converse(kind == .error ? .errorMessage : .textInfo, text, into: nil)
    }
}

/// The administrator's log through `pam_syslog`; debug lines only with `debug`.
public struct PAMLog: EventLog {
    let handle: PAMHandle
    let debug: Bool

    public init(handle: PAMHandle, debug: Bool) {
        self.handle = handle
        self.debug = debug
    }

    public mutating func log(_ level: LogLevel, _ message: String) {
        if level == .debug && !debug { return }
        handle.log(level, message)
    }
}
