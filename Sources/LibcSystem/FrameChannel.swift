// One end of the helper's socket: whole frames in and out, each bounded by
// a deadline on the boot clock, so a peer that stops reading or writing
// cannot hold the other side. A REPLY's bytes go straight into a
// SecretBuffer and never through an ordinary array.
import LocalAuth

/// A frame received: its type and payload (empty for a REPLY or SECRET,
/// whose bytes went into the secret buffer).
public struct ReceivedFrame: Equatable {
    public var type: FrameType
    public var payload: [UInt8]
}

public struct FrameChannel {
    public let fd: Int32

    public init(fd: Int32) { self.fd = fd }

    /// Sends one frame; false when the peer is gone or too slow.
    public func send(_ type: FrameType, _ payload: [UInt8], deadline: Int64) -> Bool {
        let frame = HelperWire.frame(type, payload)
        return frame.withUnsafeBufferPointer { sendBytes($0.baseAddress!, count: $0.count, deadline: deadline) }
    }

    /// Sends a frame whose payload is a secret, from the secret's own memory.
    public func sendSecret(_ type: FrameType, _ secret: SecretBuffer, deadline: Int64) -> Bool {
        let header = HelperWire.header(type, length: secret.count)
        guard header.withUnsafeBufferPointer({ sendBytes($0.baseAddress!, count: $0.count, deadline: deadline) }) else { return false }
        return secret.withBytes { pointer, count in count == 0 || sendBytes(pointer, count: count, deadline: deadline) }
    }

    /// Receives one frame. A REPLY or SECRET is accepted only when `secret`
    /// is given (a prompt is open, a secret is awaited); its bytes land
    /// there, and a longer one than the buffer takes ends the conversation.
    public func receive(deadline: Int64, secret: SecretBuffer? = nil) -> Result<ReceivedFrame, ProtocolViolation> {
        var header = [UInt8](repeating: 0, count: HelperWire.headerSize)
        let gotHeader = header.withUnsafeMutableBufferPointer {
            receiveBytes($0.baseAddress!, count: $0.count, deadline: deadline, frameStart: true)
        }
        if let failure = gotHeader { return .failure(failure) }
        let type: FrameType
        let length: Int
        switch HelperWire.parseHeader(header) {
        case .failure(let violation): return .failure(violation)
        case .success(let parsed): (type, length) = parsed
        }
        if type.carriesSecret {
            guard let secret else { return .failure(.outOfOrder(type)) }
            var failure: ProtocolViolation? = nil
            let filled = secret.fill(length: length) { pointer in
                failure = length == 0 ? nil : receiveBytes(pointer, count: length, deadline: deadline)
                return failure == nil
            }
            if !filled { return .failure(failure ?? .oversized(type)) }
            return .success(ReceivedFrame(type: type, payload: []))
        }
        var payload = [UInt8](repeating: 0, count: length)
        if length > 0 {
            let gotPayload = payload.withUnsafeMutableBufferPointer { receiveBytes($0.baseAddress!, count: $0.count, deadline: deadline) }
            if let failure = gotPayload { return .failure(failure) }
        }
        return .success(ReceivedFrame(type: type, payload: payload))
    }

    /// True when the peer has sent something or hung up (for waits that a
    /// client's CANCEL or disappearance must end).
    public var pollRequest: PollRequest { PollRequest(fd: fd, events: PollRequest.readable) }

    public func close() { Syscalls.close(fd) }

    private func sendBytes(_ pointer: UnsafePointer<UInt8>, count: Int, deadline: Int64) -> Bool {
        var sent = 0
        while sent < count {
            switch Syscalls.sendSome(fd, pointer + sent, count: count - sent) {
            case .done(let amount): sent += amount
            case .wouldBlock:
                guard let wait = FrameChannel.millisecondsLeft(deadline),
                      let ready = Syscalls.poll([PollRequest(fd: fd, events: PollRequest.writable)], timeoutMilliseconds: wait),
                      ready[0] & PollRequest.failed == 0 else { return false }
            case .failed, .closed: return false
            }
        }
        return true
    }

    private func receiveBytes(_ pointer: UnsafeMutablePointer<UInt8>, count: Int, deadline: Int64,
                              frameStart: Bool = false) -> ProtocolViolation? {
        var got = 0
        while got < count {
            switch Syscalls.receiveSome(fd, pointer + got, count: count - got) {
            case .done(let amount): got += amount
            case .closed: return got == 0 && frameStart ? .closed : .truncated
            case .failed: return .channelError
            case .wouldBlock:
                guard let wait = FrameChannel.millisecondsLeft(deadline) else { return .timedOut }
                guard Syscalls.poll([pollRequest], timeoutMilliseconds: wait) != nil else { return .channelError }
            }
        }
        return nil
    }

    /// Milliseconds until `deadline` (at most a second per poll, so a wait
    /// re-checks the clock), nil once it has passed.
    static func millisecondsLeft(_ deadline: Int64) -> Int32? {
        let left = deadline - Syscalls.bootTimeNanoseconds()
        guard left > 0 else { return nil }
        return Int32(min(left / 1_000_000 + 1, 1000))
    }
}
