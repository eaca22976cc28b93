// Touch or type: the caller's terminal while the reader waits. The module
// reads the person's keys itself (the conversation is never called from
// another thread or while a key is read), with echo and line editing off,
// into a SecretBuffer; the terminal is put back on every way out it can
// see: the verdict, Enter, Ctrl-C, SIGTERM, SIGHUP, SIGQUIT and a hang-up.
// Those signals are blocked while the terminal is changed and read from a
// signalfd, so the terminal is restored before the program's own handling
// of them runs (they stay pending until then). SIGKILL cannot be seen:
// after it the terminal stays without echo until `stty sane` (sudo's own
// prompt has the same limit).
import CLibc
import LocalAuth

/// The caller's controlling terminal and Ctrl-C, shared by the reader's
/// wait (which polls them) and the conversation (which says what the
/// person chose). One per prompt; `end()` puts everything back.
public final class TerminalKeyboard {
    /// What was typed so far; moved out by `takeLine`.
    public let line = SecretBuffer()
    /// Enter was pressed (the line may be empty).
    public private(set) var entered = false
    /// The person gave up: Ctrl-D on an empty line, or the terminal hung up.
    public private(set) var gaveUp = false
    /// Keys are being read (the terminal is changed).
    public private(set) var typing = false
    private var interrupt: BlockedInterrupt? = nil
    private var termination: BlockedInterrupt? = nil
    private var tty: Int32 = -1
    private var saved = termios()
    private var keys = LineEditingKeys()

    public init() {}

    /// Blocks SIGINT (read from a signalfd while the reader waits); false
    /// when it cannot.
    public func blockInterrupt() -> Bool {
        if interrupt == nil { interrupt = Syscalls.blockInterrupt() }
        return interrupt != nil
    }

    /// Starts reading keys from the controlling terminal (which the caller
    /// checked is PAM_TTY's and standard input's): SIGTERM, SIGHUP and
    /// SIGQUIT are blocked first, then echo, line editing and the output
    /// of typed keys are turned off (Ctrl-C and the other signal keys still
    /// work). False, with nothing changed, when any step fails.
    public func beginTyping() -> Bool {
        if typing { return true }
        guard blockInterrupt() else { return false }
        guard let blocked = Syscalls.blockSignals(Syscalls.terminationSignals) else { return false }
        guard let fd = try? Syscalls.open(at: nil, literalBytes("/dev/tty"), .terminal) else {
            Syscalls.unblockInterrupt(blocked)
            return false
        }
        var settings = termios()
        guard tcgetattr(fd, &settings) == 0 else {
            Syscalls.close(fd)
            Syscalls.unblockInterrupt(blocked)
            return false
        }
        saved = settings
        settings.c_lflag &= ~tcflag_t(ECHO | ECHONL | ICANON)
        settings.c_lflag |= tcflag_t(ISIG)
        la_termios_set_cc(&settings, VMIN, 1)
        la_termios_set_cc(&settings, VTIME, 0)
        // TCSANOW: what was typed ahead stays, to be read as part of the line.
        guard Syscalls.retryingInterrupted({ tcsetattr(fd, TCSANOW, &settings) }) == 0 else {
            Syscalls.close(fd)
            Syscalls.unblockInterrupt(blocked)
            return false
        }
        keys = LineEditingKeys(erase: la_termios_cc(&saved, VERASE), kill: la_termios_cc(&saved, VKILL),
                               wordErase: la_termios_cc(&saved, VWERASE), endOfFile: la_termios_cc(&saved, VEOF))
        Syscalls.setNonBlocking(fd)
        tty = fd
        termination = blocked
        typing = true
        return true
    }

    /// What the reader's wait polls: Ctrl-C's signalfd, the other
    /// signals', and the terminal while a line is being typed.
    public var pollRequests: [PollRequest] {
        var requests: [PollRequest] = []
        if let interrupt { requests.append(PollRequest(fd: interrupt.fd, events: PollRequest.readable)) }
        if let termination { requests.append(PollRequest(fd: termination.fd, events: PollRequest.readable)) }
        if typing && !lineEnded { requests.append(PollRequest(fd: tty, events: PollRequest.readable)) }
        return requests
    }

    /// Enter, or the person gave up.
    public var lineEnded: Bool { entered || gaveUp }

    /// A line begun while the reader waited and not yet ended.
    public var midLine: Bool { typing && !lineEnded && !line.isEmpty }

    /// Ctrl-C waits (pending, not taken).
    public var interruptPending: Bool { interrupt != nil && Syscalls.isPending(SIGINT) }

    /// SIGTERM, SIGHUP or SIGQUIT waits: the program is being ended.
    public var terminationPending: Bool {
        termination != nil && Syscalls.terminationSignals.contains { Syscalls.isPending($0) }
    }

    /// Whether the wait must end now: a signal waits, or the line ended.
    public var wantsTheWaitEnded: Bool { interruptPending || terminationPending || (typing && lineEnded) }

    /// Reads the keys typed so far into the line, without waiting. True
    /// when the line ended (Enter, Ctrl-D on an empty line, a hang-up).
    @discardableResult
    public func readKeys() -> Bool {
        guard typing, !lineEnded else { return lineEnded }
        var chunk = [UInt8](repeating: 0, count: 64)
        defer { chunk.withUnsafeMutableBufferPointer { Syscalls.wipe($0.baseAddress!, count: $0.count) } }
        while !lineEnded {
            let got = Syscalls.retryingInterrupted { chunk.withUnsafeMutableBytes { CLibc.read(tty, $0.baseAddress!, $0.count) } }
            if got == 0 || (got < 0 && la_errno() != EAGAIN) {
                gaveUp = true              // hung up, or the terminal failed
                break
            }
            if got < 0 { break }           // nothing more for now
            for index in 0..<got where !lineEnded {
                switch PasswordLine.apply(chunk[index], to: line, keys: keys) {
                case .editing: break
                case .entered: entered = true
                case .endOfFile: gaveUp = true
                }
            }
        }
        return lineEnded
    }

    /// Waits, at most `milliseconds`, for the end of a line begun while the
    /// reader waited (the reader has stopped). True when Enter ended it.
    public func finishLine(milliseconds: Int64, clock: () -> Int64) -> Bool {
        let deadline = clock() + milliseconds * 1_000_000
        while typing && !lineEnded && !interruptPending && !terminationPending {
            let left = (deadline - clock()) / 1_000_000
            if left <= 0 { break }
            guard Syscalls.poll(pollRequests, timeoutMilliseconds: Int32(min(left + 1, 1000))) != nil else { break }
            readKeys()
        }
        return entered
    }

    /// Moves an entered, non-empty line into `secret`. False (and the line
    /// wiped) when there is none, or it was too long to be a password.
    public func takeLine(into secret: SecretBuffer) -> Bool {
        guard entered, !line.isEmpty, !line.overflowed else {
            line.wipe()
            return false
        }
        line.move(into: secret)
        return true
    }

    /// Takes a pending Ctrl-C (the old terminal flow's fallback choice).
    public func consumeInterrupt() {
        if let interrupt { Syscalls.consumeInterrupt(interrupt) }
    }

    /// Stops reading keys: the terminal as it was (TCSANOW: what is typed
    /// after stays for the program's next read, and a line ended by Enter
    /// leaves nothing behind), then SIGTERM, SIGHUP and SIGQUIT unblocked
    /// (one that came meanwhile now acts). Ctrl-C stays blocked until
    /// `end`; the line stays until it is taken or `discardLine`.
    public func stopTyping() {
        guard typing else { return }
        var settings = saved
        _ = Syscalls.retryingInterrupted { tcsetattr(tty, TCSANOW, &settings) }
        Syscalls.close(tty)
        tty = -1
        typing = false
        if let termination { Syscalls.unblockInterrupt(termination) }
        termination = nil
    }

    /// Puts everything back: the terminal, then the signal mask (a Ctrl-C
    /// still pending reaches the program, as a cancel must).
    public func end() {
        stopTyping()
        if let interrupt { Syscalls.unblockInterrupt(interrupt) }
        interrupt = nil
    }

    /// Wipes what was typed.
    public func discardLine() {
        line.wipe()
    }

    deinit {
        end()
        line.wipe()
    }
}
