// The conversation between an unprivileged client (the module in a screen
// locker, `localauth`, the app library) and the setuid `localauth-helper`:
// length-prefixed frames, versioned by a first HELLO, every length capped.
// Pure encoding and decoding; docs/HELPER-PROTOCOL.md is the reference.

/// The kinds of frame. Raw values are the wire's type byte.
public enum FrameType: UInt8, Equatable, CaseIterable, Sendable {
    /// Both ways, first: the protocol version (and, from the helper, how long
    /// the client may have to wait for it between frames).
    case hello = 0x01
    /// Client to helper, once, after HELLO: what to evaluate.
    case request = 0x02
    /// Helper to client: a message to show.
    case textInfo = 0x10
    case errorText = 0x11
    /// Helper to client, from version 2: the fallback button may show from
    /// now on; the payload is its title. Never sent when the title is empty.
    case fallbackOffered = 0x14
    /// Helper to client: ask with echo off / on; exactly one REPLY or NO_ANSWER follows.
    case promptEchoOff = 0x12
    case promptEchoOn = 0x13
    /// Client to helper: the answer to the last prompt (may be empty).
    case reply = 0x20
    /// Client to helper: the prompt could not be answered (conversation failure).
    case noAnswer = 0x21
    /// Client to helper, at any time after REQUEST: stop (an app's `invalidate()`).
    case cancel = 0x22
    /// The person's cancel button while the reader waits: userCancel.
    case userCancel = 0x23
    /// The person's fallback button while the reader waits, or instead of
    /// answering a prompt.
    case userFallback = 0x24
    /// Client to helper, from version 3, only after a REQUEST with
    /// `keys=client`: the person pressed Enter while the reader waited
    /// (touch or type); the password prompt follows, which the client
    /// answers with what was typed.
    case passwordTyped = 0x25
    /// Version 4, secret actions only. Client to helper: the secret of a
    /// `secret-store`, once, right after the REQUEST. Helper to client: the
    /// secret of a `secret-load`, just before its RESULT. Its bytes go
    /// straight into a SecretBuffer on both sides.
    case secret = 0x26
    /// Helper to client, version 4: one identifier of a `secret-list`.
    case itemName = 0x32
    /// Helper to client, version 4: how a secret action ended (one byte,
    /// `SecretStatus`), just before its RESULT.
    case secretStatus = 0x33
    /// Helper to client, last: the verdict.
    case result = 0x30

    /// Whether the payload is a secret: read into a SecretBuffer, never an
    /// ordinary array.
    public var carriesSecret: Bool { self == .reply || self == .secret }
}

/// Sizes and versions of the wire.
public enum HelperWire {
    /// The newest version spoken. 2 added FALLBACK_OFFERED; a helper
    /// answers a version-1 client in version 1, without it.
    /// 3 added PASSWORD_TYPED and the request key `keys`. 4 added the
    /// secret actions and their frames (SECRET, ITEM_NAME, SECRET_STATUS).
    public static let version: UInt8 = 4
    /// The oldest version still spoken.
    public static let oldestVersion: UInt8 = 1
    /// Type byte and a 32-bit big-endian length.
    public static let headerSize = 5
    /// The largest payload of any frame but REPLY (a SECRET's is the
    /// largest secret an item holds).
    public static let maxPayload = 4096
    /// The largest REPLY: the largest passcode accepted anywhere.
    public static var maxReply: Int { SecretBuffer.capacity }
    /// "LAH", before the version. Computed, not stored: a stored array would
    /// be allocated on every load of the module and leaked at each unload.
    static var magic: [UInt8] { [0x4C, 0x41, 0x48] }

    /// The header of a frame carrying `length` bytes.
    public static func header(_ type: FrameType, length: Int) -> [UInt8] {
        let value = UInt32(truncatingIfNeeded: length)
        return [type.rawValue, UInt8(value >> 24), UInt8((value >> 16) & 0xFF), UInt8((value >> 8) & 0xFF), UInt8(value & 0xFF)]
    }

    /// A whole frame with an ordinary (non-secret) payload.
    public static func frame(_ type: FrameType, _ payload: [UInt8]) -> [UInt8] {
        header(type, length: payload.count) + payload
    }

    /// Reads a header: the type and the payload length, or why it is refused
    /// (unknown type, or longer than that type may be).
    public static func parseHeader(_ bytes: [UInt8]) -> Result<(type: FrameType, length: Int), ProtocolViolation> {
        guard bytes.count == headerSize else { return .failure(.truncated) }
        guard let type = FrameType(rawValue: bytes[0]) else { return .failure(.unknownType(bytes[0])) }
        let length = Int(bytes[1]) << 24 | Int(bytes[2]) << 16 | Int(bytes[3]) << 8 | Int(bytes[4])
        let cap = type == .reply ? maxReply : maxPayload
        guard length <= cap else { return .failure(.oversized(type)) }
        return .success((type, length))
    }
}

/// Why a peer's frames were refused. Any violation ends the conversation.
public enum ProtocolViolation: Error, Equatable {
    case truncated
    case unknownType(UInt8)
    case oversized(FrameType)
    /// A frame that is valid but not allowed at this point.
    case outOfOrder(FrameType)
    case badHello
    case badResult
    /// The peer closed the channel.
    case closed
    /// Nothing arrived in time.
    case timedOut
    /// Reading or writing failed.
    case channelError

    public var text: String {
        switch self {
        case .truncated: return "truncated frame"
        case .unknownType(let type): return "unknown frame type \(type)"
        case .oversized(let type): return "oversized frame (type \(type.rawValue))"
        case .outOfOrder(let type): return "frame out of order (type \(type.rawValue))"
        case .badHello: return "bad HELLO (another protocol version?)"
        case .badResult: return "malformed RESULT"
        case .closed: return "channel closed"
        case .timedOut: return "no answer in time"
        case .channelError: return "channel error"
        }
    }
}

/// The HELLO payloads: the client's is "LAH" and the version; the helper's
/// adds the longest silence (milliseconds) the client should allow between
/// its frames while it works.
public enum HelloFrame {
    public static func client() -> [UInt8] {
        HelperWire.magic + [HelperWire.version]
    }

    /// The helper's HELLO in `version` (the client's, once known; before
    /// that, the oldest, which every client reads).
    public static func helper(silenceMilliseconds: UInt32, version: UInt8 = HelperWire.oldestVersion) -> [UInt8] {
        HelperWire.magic + [version] + bigEndian(silenceMilliseconds)
    }

    /// The version of a client HELLO, when it is one this side speaks.
    public static func clientVersion(_ payload: [UInt8]) -> UInt8? {
        guard payload.count == 4, Array(payload.prefix(3)) == HelperWire.magic,
              (HelperWire.oldestVersion...HelperWire.version).contains(payload[3]) else { return nil }
        return payload[3]
    }

    /// The version and silence limit from a helper HELLO this side speaks.
    public static func helperHello(_ payload: [UInt8]) -> (version: UInt8, silence: UInt32)? {
        guard payload.count == 8, Array(payload.prefix(3)) == HelperWire.magic,
              (HelperWire.oldestVersion...HelperWire.version).contains(payload[3]),
              let silence = readBigEndian(payload, at: 4) else { return nil }
        return (payload[3], silence)
    }
}

/// What a client asks for: `evaluate` prompts; `check` is the preflight
/// (canEvaluatePolicy) and never prompts; the secret actions (version 4)
/// keep the caller's own secrets (docs/DESIGN.md, "Secrets").
public enum HelperAction: Equatable, CaseIterable {
    case evaluate
    case check
    /// Stores the SECRET that follows under `item`, released by `access`.
    case secretStore
    /// The evaluation the item's requirement asks for, then its SECRET.
    case secretLoad
    /// Removes `item`.
    case secretDelete
    /// The caller's identifiers, one ITEM_NAME each.
    case secretList

    /// The name on the wire (`action=`).
    public var wireName: StaticString {
        switch self {
        case .evaluate: return "evaluate"
        case .check: return "check"
        case .secretStore: return "secret-store"
        case .secretLoad: return "secret-load"
        case .secretDelete: return "secret-delete"
        case .secretList: return "secret-list"
        }
    }

    public init?<C: Collection>(wireName: C) where C.Element == UInt8 {
        guard let action = HelperAction.allCases.first(where: { bytesEqual(wireName, $0.wireName) }) else { return nil }
        self = action
    }

    /// One of the secret actions: the caller's own account only, under the
    /// apps' service, from a version-4 client.
    public var isSecret: Bool { self != .evaluate && self != .check }
    /// Whether it names an item (all secret actions but the list).
    public var namesItem: Bool { isSecret && self != .secretList }
}

/// A REQUEST: NUL-separated `key=value` fields. The protocol keys are
/// `action`, `service`, `user` and `tty`; the others are presentation, the
/// only options a caller may set (everything that decides security is the
/// administrator's, in the configuration file).
public struct HelperRequest: Equatable {
    public var action: HelperAction = .evaluate
    public var service: [UInt8] = []
    /// Empty: the caller's own account.
    public var user: [UInt8] = []
    /// For messages and the failure log only; never trusted.
    public var tty: [UInt8] = []
    /// Presentation options, in order: the option keys a caller may set
    /// (`OptionKey.presentationKeys`; `timeout` only below the configured
    /// one, `services` only fewer).
    public var presentation: [([UInt8], [UInt8])] = []
    /// An app's reuse window in seconds (0–300; 0: none): a success of the
    /// same account in the same logind session that recently stands in for
    /// this one (service `localauth-app` only).
    public var reuseSeconds = 0
    /// False: never prompt (an app's `interactionNotAllowed`): succeed by
    /// the reuse window or fail with what is missing, else notInteractive.
    public var interactive = true
    /// The client reads the person's keys while the reader waits and sends
    /// PASSWORD_TYPED on Enter (touch or type: `localauth evaluate` at a
    /// terminal, policy owner). Version 3.
    public var clientReadsKeys = false
    /// A secret action's item: its identifier (`SecretItemFormat`).
    public var item: [UInt8] = []
    /// A `secret-store`'s requirement (`access=`, by its name).
    public var access: SecretRequirement = .matchOrPassword

    public static let maxReuseSeconds = 300

    public init() {}

    public static func == (left: HelperRequest, right: HelperRequest) -> Bool {
        left.action == right.action && left.service == right.service && left.user == right.user && left.tty == right.tty
            && left.presentation.count == right.presentation.count
            && zip(left.presentation, right.presentation).allSatisfy { $0.0 == $1.0 && $0.1 == $1.1 }
            && left.reuseSeconds == right.reuseSeconds && left.interactive == right.interactive
            && left.clientReadsKeys == right.clientReadsKeys && left.item == right.item && left.access == right.access
    }

    /// Adds a presentation option (a key the helper takes from a caller:
    /// `OptionKey.presentationKeys`); any other key is not sent.
    public mutating func present(_ key: OptionKey, _ value: [UInt8]) {
        guard key.setters.contains(.presentation) else { return }
        presentation.append((literalBytes(key.name), value))
    }

    /// The keys a caller may use to change how the prompt looks.
    public static func isPresentationKey<C: Collection>(_ key: C) -> Bool where C.Element == UInt8 {
        OptionKey(name: key)?.setters.contains(.presentation) ?? false
    }

    public func encoded() -> [UInt8] {
        var fields: [[UInt8]] = [literalBytes("action=") + literalBytes(action.wireName), literalBytes("service=") + service]
        if action.namesItem { fields.append(literalBytes("item=") + item) }
        if action == .secretStore { fields.append(literalBytes("access=") + literalBytes(access.name)) }
        if !user.isEmpty { fields.append(literalBytes("user=") + user) }
        if !tty.isEmpty { fields.append(literalBytes("tty=") + tty) }
        if reuseSeconds > 0 { fields.append(literalBytes("reuse=") + utf8Bytes(String(reuseSeconds))) }
        if !interactive { fields.append(literalBytes("interactive=no")) }
        if clientReadsKeys { fields.append(literalBytes("keys=client")) }
        for (key, value) in presentation { fields.append(key + [0x3D] + value) }
        var payload: [UInt8] = []
        for (index, field) in fields.enumerated() {
            if index > 0 { payload.append(0) }
            payload += field
        }
        return payload
    }

    /// Why a request was refused, for the caller's error message and the log.
    public enum Refusal: Error, Equatable, Sendable {
        case malformed
        /// A key that only the administrator may set, or one that does not exist.
        case notAllowed([UInt8])
        case missingService
        /// A secret action that is not whole: its item missing or not an
        /// identifier, a field another action takes, another service than
        /// the apps'.
        case badSecretRequest
    }

    public static func decode(_ payload: [UInt8]) -> Result<HelperRequest, Refusal> {
        var request = HelperRequest()
        var sawService = false
        var sawItem = false
        var sawAccess = false
        for field in splitBytes(payload[...], on: 0) {
            guard let equals = field.firstIndex(of: 0x3D) else { return .failure(.malformed) }
            let key = field[field.startIndex..<equals]
            let value = Array(field[(equals + 1)..<field.endIndex])
            if bytesEqual(key, "action") {
                guard let action = HelperAction(wireName: value) else { return .failure(.malformed) }
                request.action = action
            } else if bytesEqual(key, "item") {
                guard SecretItemFormat.isValidIdentifier(value) else { return .failure(.badSecretRequest) }
                request.item = value
                sawItem = true
            } else if bytesEqual(key, "access") {
                guard let access = SecretRequirement(name: value) else { return .failure(.badSecretRequest) }
                request.access = access
                sawAccess = true
            } else if bytesEqual(key, "service") {
                guard isServiceName(value[...]) else { return .failure(.malformed) }
                request.service = value
                sawService = true
            } else if bytesEqual(key, "user") {
                guard !value.isEmpty, value.count <= 256, !value.contains(0) else { return .failure(.malformed) }
                request.user = value
            } else if bytesEqual(key, "tty") {
                guard value.count <= 256 else { return .failure(.malformed) }
                request.tty = value
            } else if bytesEqual(key, "reuse") {
                guard !value.isEmpty, value.count <= 3, value.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return .failure(.malformed) }
                let seconds = value.reduce(0) { $0 * 10 + Int($1 - 0x30) }
                guard seconds <= maxReuseSeconds else { return .failure(.malformed) }
                request.reuseSeconds = seconds
            } else if bytesEqual(key, "interactive") {
                if bytesEqual(value, "yes") { request.interactive = true }
                else if bytesEqual(value, "no") { request.interactive = false }
                else { return .failure(.malformed) }
            } else if bytesEqual(key, "keys") {
                guard bytesEqual(value, "client") else { return .failure(.malformed) }
                request.clientReadsKeys = true
            } else if isPresentationKey(key) {
                guard request.presentation.count < 32 else { return .failure(.malformed) }
                request.presentation.append((Array(key), value))
            } else {
                return .failure(.notAllowed(Array(key.prefix(40))))
            }
        }
        guard sawService else { return .failure(.missingService) }
        if sawItem != request.action.namesItem || (sawAccess && request.action != .secretStore) { return .failure(.badSecretRequest) }
        if request.action.isSecret && (!bytesEqual(request.service, KnownServices.app) || !request.user.isEmpty || request.reuseSeconds > 0) {
            return .failure(.badSecretRequest)
        }
        return .success(request)
    }
}

/// How the helper ended a request.
public enum HelperStatus: UInt8, Equatable, CaseIterable {
    /// The policy ran; the codes say how it ended.
    case evaluated = 0
    /// The request was refused before anything was charged or asked.
    case refused = 1
    /// The helper does not run as root (nosuid mount, no_new_privs, a container).
    case notPrivileged = 2
    /// Something inside failed.
    case internalError = 3
    /// Version 4: a secret action ended without an evaluation to report
    /// (a store, delete or list, or an item that was not there); the
    /// SECRET_STATUS before it says how.
    case secretHandled = 4
}

/// The RESULT payload: status, PAM code, LAErrorCode (0 when none), how a
/// success was won, whether the failure delay applies, and the domain state.
public struct ResultFrame: Equatable {
    public var status: HelperStatus
    public var pamCode: Int32
    public var error: LAErrorCode?
    public var method: AuthenticationMethod?
    public var failDelay: Bool
    public var domainState: [UInt8]

    public init(status: HelperStatus, pamCode: Int32, error: LAErrorCode? = nil, method: AuthenticationMethod? = nil,
                failDelay: Bool = false, domainState: [UInt8] = []) {
        self.status = status
        self.pamCode = pamCode
        self.error = error
        self.method = method
        self.failDelay = failDelay
        self.domainState = domainState
    }

    /// The most domain-state bytes carried.
    public static let maxDomainState = 64

    /// The helper evaluated nothing because the request is out of scope
    /// (for apps: the administrator has not listed their service).
    public var isOutOfScope: Bool {
        status == .evaluated && error == nil
            && ResultTable.authenticationAnswer(pamCode) == ResultTable.pamCode(for: .outOfScope).rawValue
    }

    public func encoded() -> [UInt8] {
        let methodByte: UInt8
        switch method {
        case nil: methodByte = 0
        case .biometry?: methodByte = 1
        case .passcode?: methodByte = 2
        }
        return [status.rawValue] + bigEndian(UInt32(bitPattern: pamCode)) + bigEndian(UInt32(bitPattern: error?.rawValue ?? 0))
            + [methodByte, failDelay ? 1 : 0] + Array(domainState.prefix(ResultFrame.maxDomainState))
    }

    public static func decode(_ payload: [UInt8]) -> ResultFrame? {
        guard payload.count >= 11, payload.count <= 11 + maxDomainState, let status = HelperStatus(rawValue: payload[0]),
              let pam = readBigEndian(payload, at: 1), let raw = readBigEndian(payload, at: 5) else { return nil }
        let errorCode = Int32(bitPattern: raw)
        var error: LAErrorCode? = nil
        if errorCode != 0 {
            guard let known = LAErrorCode(rawValue: errorCode) else { return nil }
            error = known
        }
        let method: AuthenticationMethod?
        switch payload[9] {
        case 0: method = nil
        case 1: method = .biometry
        case 2: method = .passcode
        default: return nil
        }
        guard payload[10] <= 1 else { return nil }
        let pamCode = Int32(bitPattern: pam)
        // A success must say how it was won and carry no error; anything
        // else claiming success is garbage.
        // (A secret action handled without an evaluation names no method.)
        if pamCode == PAMCode.success.rawValue {
            guard error == nil, (status == .evaluated && method != nil) || (status == .secretHandled && method == nil) else { return nil }
        }
        return ResultFrame(status: status, pamCode: pamCode, error: error, method: method, failDelay: payload[10] == 1,
                            domainState: Array(payload[11...]))
    }
}

func bigEndian(_ value: UInt32) -> [UInt8] {
    [UInt8(value >> 24), UInt8((value >> 16) & 0xFF), UInt8((value >> 8) & 0xFF), UInt8(value & 0xFF)]
}

func readBigEndian(_ bytes: [UInt8], at offset: Int) -> UInt32? {
    guard offset >= 0, bytes.count >= offset + 4 else { return nil }
    return UInt32(bytes[offset]) << 24 | UInt32(bytes[offset + 1]) << 16 | UInt32(bytes[offset + 2]) << 8 | UInt32(bytes[offset + 3])
}
