// Ctrl-C while the sensor waits, in terminal mode: SIGINT is blocked with
// pthread_sigmask and read from a signalfd, never caught with sigaction, so
// the application's own handling is untouched once the mask is restored.
import LocalAuth

struct TerminalInterrupt {
    private var blocked: BlockedInterrupt? = nil

    /// Starts catching Ctrl-C; false when it cannot (the wait is then not interruptible).
    mutating func begin() -> Bool {
        if blocked == nil { blocked = Syscalls.blockInterrupt() }
        return blocked != nil
    }

    /// What to poll for a Ctrl-C, while catching.
    var pollRequest: PollRequest? {
        blocked.map { PollRequest(fd: $0.fd, events: PollRequest.readable) }
    }

    /// Takes the pending Ctrl-C as the fallback choice.
    func consume() {
        if let blocked { Syscalls.consumeInterrupt(blocked) }
    }

    /// Restores the mask: a Ctrl-C left pending reaches the application.
    mutating func end() {
        if let blocked { Syscalls.unblockInterrupt(blocked) }
        blocked = nil
    }
}
