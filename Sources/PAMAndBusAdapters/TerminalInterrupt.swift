// What may end a fingerprint wait besides a verdict or the deadline: Ctrl-C
// in terminal mode, and there, while keys are read (touch or type), Enter
// or a signal that ends the program; or the helper's client (a CANCEL, or
// the client gone).
// The terminal's signals are blocked with pthread_sigmask and read from
// signalfds (TerminalKeyboard), never caught with sigaction, so the
// application's own handling is untouched once the mask is restored.
import LocalAuth
import LibcSystem

/// What ends a wait early.
public enum WaitInterruption {
    case none
    /// The caller's terminal (R16 terminal mode): Ctrl-C, and the keys
    /// when the conversation reads them (touch or type).
    case terminal(TerminalKeyboard)
    /// Anything arriving on, or the closing of, this descriptor (the
    /// helper's channel to its client).
    case channel(Int32)
    /// The answer to a dialog's prompt left open while the reader waits
    /// (polkit's agent helper): a password, an empty answer, or a cancel.
    case openPrompt(OpenPrompt)
}

struct TerminalInterrupt {
    let source: WaitInterruption

    init(_ source: WaitInterruption) { self.source = source }

    /// Starts watching; false when it cannot (the wait is then not interruptible).
    func begin() -> Bool {
        switch source {
        case .none: return false
        case .channel, .openPrompt: return true
        case .terminal(let keyboard): return keyboard.blockInterrupt()
        }
    }

    /// What to poll, while watching.
    var pollRequests: [PollRequest] {
        switch source {
        case .none: return []
        case .channel(let fd): return [PollRequest(fd: fd, events: PollRequest.readable)]
        case .openPrompt(let prompt): return prompt.pollRequests
        case .terminal(let keyboard): return keyboard.pollRequests
        }
    }

    /// After `pollRequests` showed something ready: whether the wait ends.
    /// Keys are read into the line; only Enter (or a signal) ends it.
    func endsTheWait() -> Bool {
        // The agent's SIGTERM starts the cancel's deadline at once.
        if case .openPrompt(let prompt) = source { _ = prompt.noticeTermination() }
        guard case .terminal(let keyboard) = source else { return true }
        keyboard.readKeys()
        return keyboard.wantsTheWaitEnded
    }

    /// Whether something is waiting on what `pollRequests` watches (for
    /// the terminal: a signal, or a line ended by the keys typed so far).
    var isPending: Bool {
        if case .terminal = source { return endsTheWait() }
        let requests = pollRequests
        guard !requests.isEmpty, let ready = Syscalls.poll(requests, timeoutMilliseconds: 0) else { return false }
        return ready.contains { $0 != 0 }
    }

    /// Takes the pending Ctrl-C as the fallback choice (a channel's frame is
    /// left for the helper to read).
    func consume() {
        if case .terminal(let keyboard) = source { keyboard.consumeInterrupt() }
    }

    /// Restores the mask: a Ctrl-C left pending reaches the application.
    /// For the terminal, the keys not read yet are read first (edited as
    /// typed). A password line begun and not yet ended keeps the terminal
    /// as it is: the conversation finishes it. A password entered gets the
    /// terminal back and keeps the signals blocked until it is taken.
    func end() {
        guard case .terminal(let keyboard) = source else { return }
        keyboard.readKeys()
        if keyboard.midLine { return }
        if keyboard.holdsAnEnteredPassword {
            keyboard.stopTyping()
        } else {
            keyboard.end()
        }
    }
}
