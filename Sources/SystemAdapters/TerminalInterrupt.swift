// What may end a fingerprint wait besides a verdict or the deadline: Ctrl-C
// in terminal mode, or the helper's client (a CANCEL, or the client gone).
// SIGINT is blocked with pthread_sigmask and read from a signalfd, never
// caught with sigaction, so the application's own handling is untouched
// once the mask is restored.
import LocalAuth
import LocalAuthSystem

/// What ends a wait early.
public enum WaitInterruption: Equatable {
    case none
    /// Ctrl-C on the terminal (R16 terminal mode).
    case controlC
    /// Anything arriving on, or the closing of, this descriptor (the
    /// helper's channel to its client).
    case channel(Int32)
}

struct TerminalInterrupt {
    let source: WaitInterruption
    private var blocked: BlockedInterrupt? = nil

    init(_ source: WaitInterruption) { self.source = source }

    /// Starts watching; false when it cannot (the wait is then not interruptible).
    mutating func begin() -> Bool {
        switch source {
        case .none: return false
        case .channel: return true
        case .controlC:
            if blocked == nil { blocked = Syscalls.blockInterrupt() }
            return blocked != nil
        }
    }

    /// What to poll, while watching.
    var pollRequest: PollRequest? {
        if case .channel(let fd) = source { return PollRequest(fd: fd, events: PollRequest.readable) }
        return blocked.map { PollRequest(fd: $0.fd, events: PollRequest.readable) }
    }

    /// Whether something is waiting on what `pollRequest` watches.
    var isPending: Bool {
        guard let request = pollRequest, let ready = Syscalls.poll([request], timeoutMilliseconds: 0) else { return false }
        return ready[0] != 0
    }

    /// Takes the pending Ctrl-C as the fallback choice (a channel's frame is
    /// left for the helper to read).
    func consume() {
        if let blocked { Syscalls.consumeInterrupt(blocked) }
    }

    /// Restores the mask: a Ctrl-C left pending reaches the application.
    mutating func end() {
        if let blocked { Syscalls.unblockInterrupt(blocked) }
        blocked = nil
    }
}
