// Touch or type: the caller's terminal while the reader waits. The module
// reads the person's keys itself (the conversation is never called from
// another thread or while a key is read), with echo and line editing off,
// into a SecretBuffer; the terminal is put back on every way out it can
// see: the verdict, Enter, Ctrl-C, SIGTERM, SIGHUP, SIGQUIT and a hang-up.
// Those signals are blocked while the terminal is changed and read from a
// signalfd, so the terminal is restored before the program's own handling
// of them runs (they stay pending until then). Ctrl-Z is off while keys are
// read, and a stop and `fg` (SIGCONT, whose signalfd wakes the wait) finds
// the settings put back as the shell left them and quiets them again.
// SIGKILL cannot be seen: after it the terminal stays without echo until
// `stty sane` (sudo's own prompt has the same limit).
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
    /// Keys are being read (the terminal is changed). Without keys, the
    /// keyboard still takes Ctrl-C from a signalfd while the reader waits.
    public private(set) var typing = false
    private var interrupt: BlockedInterrupt? = nil
    private var termination: BlockedInterrupt? = nil
    private var resumed: BlockedInterrupt? = nil
    private var tty: Int32 = -1
    private var saved = termios()
    private var quiet = termios()
    private var editor = PasswordLine(keys: LineEditingKeys())

    /// At most this many bytes are read per wake-up (a flood cannot hold the wait).
    static var readLimit: Int { 4096 }
    /// A line cut short (a touch while typing) swallows the rest of its keys
    /// until Enter, or this long without a key, at most `drainMilliseconds`.
    static var quietMilliseconds: Int32 { 1000 }
    static var drainMilliseconds: Int64 { 5000 }

    public init() {}

    /// Blocks SIGINT (read from a signalfd while the reader waits); false
    /// when it cannot.
    public func blockInterrupt() -> Bool {
        if interrupt == nil { interrupt = Syscalls.blockInterrupt() }
        return interrupt != nil
    }

    /// Starts reading keys from the controlling terminal, only when it is
    /// standard input's and this process group is its foreground one (a
    /// job sent to the background, or a `mode=terminal` forced on a script,
    /// reads nothing): SIGTERM, SIGHUP, SIGQUIT and SIGCONT are blocked
    /// first, then echo, line editing and Ctrl-Z are turned off (Ctrl-C and
    /// Ctrl-\ still work). False, with nothing changed, when any step fails.
    public func beginTyping() -> Bool {
        if typing || termination != nil { return typing }
        guard Syscalls.standardInputIsControllingTerminal(), blockInterrupt() else { return false }
        guard let blocked = Syscalls.blockSignals(Syscalls.terminationSignals) else { return false }
        guard let continued = Syscalls.blockSignals([SIGCONT]) else {
            Syscalls.unblockInterrupt(blocked)
            return false
        }
        func undo(_ fd: Int32?) -> Bool {
            if let fd { Syscalls.close(fd) }
            Syscalls.unblockInterrupt(continued)
            Syscalls.unblockInterrupt(blocked)
            return false
        }
        guard let fd = try? Syscalls.open(at: nil, literalBytes("/dev/tty"), .terminal) else { return undo(nil) }
        var settings = termios()
        guard tcgetpgrp(fd) == getpgrp(), tcgetattr(fd, &settings) == 0 else { return undo(fd) }
        saved = settings
        settings.c_lflag &= ~tcflag_t(ECHO | ECHONL | ICANON)
        settings.c_lflag |= tcflag_t(ISIG)
        la_termios_set_cc(&settings, VMIN, 1)
        la_termios_set_cc(&settings, VTIME, 0)
        la_termios_set_cc(&settings, VSUSP, 0)        // _POSIX_VDISABLE: no Ctrl-Z while keys are read
        quiet = settings
        // TCSANOW: what was typed ahead stays, to be read as part of the line.
        guard Syscalls.retryingInterrupted({ tcsetattr(fd, TCSANOW, &settings) }) == 0 else { return undo(fd) }
        editor = PasswordLine(keys: LineEditingKeys(erase: la_termios_cc(&saved, VERASE), kill: la_termios_cc(&saved, VKILL),
                                                    wordErase: la_termios_cc(&saved, VWERASE), endOfFile: la_termios_cc(&saved, VEOF),
                                                    suspend: la_termios_cc(&saved, VSUSP), literalNext: la_termios_cc(&saved, VLNEXT),
                                                    utf8: saved.c_iflag & tcflag_t(IUTF8) != 0))
        Syscalls.setNonBlocking(fd)
        tty = fd
        termination = blocked
        resumed = continued
        typing = true
        return true
    }

    /// What the reader's wait polls: Ctrl-C's signalfd, the other
    /// signals', SIGCONT's, and the terminal while a line is being typed.
    public var pollRequests: [PollRequest] {
        var requests: [PollRequest] = []
        for blocked in [interrupt, termination, resumed] {
            if let blocked { requests.append(PollRequest(fd: blocked.fd, events: PollRequest.readable)) }
        }
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

    /// After a stop and `fg` the shell has put its own settings back: the
    /// SIGCONT is taken and echo and line editing are turned off again.
    private func keepQuiet() {
        guard typing else { return }
        if let resumed, Syscalls.isPending(SIGCONT) { Syscalls.consumeInterrupt(resumed) }
        var now = termios()
        guard tcgetattr(tty, &now) == 0 else { return }
        if now.c_lflag & tcflag_t(ECHO | ICANON) != 0 || la_termios_cc(&now, VSUSP) != 0 {
            var settings = quiet
            _ = Syscalls.retryingInterrupted { tcsetattr(tty, TCSANOW, &settings) }
        }
    }

    /// Reads the keys typed so far into the line, a byte at a time and
    /// without waiting, up to the end of the line: what is typed after
    /// Enter stays for the program's next read. True when the line ended
    /// (Enter, Ctrl-D on an empty line, a hang-up).
    @discardableResult
    public func readKeys() -> Bool {
        guard typing, !lineEnded else { return lineEnded }
        keepQuiet()
        var byte: UInt8 = 0
        defer { withUnsafeMutablePointer(to: &byte) { Syscalls.wipe($0, count: 1) } }
        var count = 0
        while !lineEnded && count < TerminalKeyboard.readLimit {
            let got = Syscalls.retryingInterrupted { CLibc.read(tty, &byte, 1) }
            if got == 0 || (got < 0 && la_errno() != EAGAIN) {
                gaveUp = true              // hung up, or the terminal failed
                break
            }
            if got < 0 { break }           // nothing more for now
            count += 1
            switch editor.apply(byte, to: line) {
            case .editing: break
            case .entered: entered = true
            case .endOfFile: gaveUp = true
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

    /// A password was entered and waits to be taken.
    public var holdsAnEnteredPassword: Bool { entered && !line.isEmpty }

    /// Takes a pending Ctrl-C (the old terminal flow's fallback choice).
    public func consumeInterrupt() {
        if let interrupt { Syscalls.consumeInterrupt(interrupt) }
    }

    /// Stops reading keys and puts the terminal back as it was. Keys typed
    /// while the terminal was quiet and not yet read are read first, so
    /// that they are edited as typed (raw, Backspace would reach the next
    /// program as a byte). A line cut short by the prompt's end (a touch
    /// while typing) swallows the rest of its keys, quietly, until Enter or
    /// a second without a key, and what is left unread is flushed, so that
    /// no part of a password reaches the next program; so is what follows
    /// an Enter on an empty line (typed before the next prompt shows) and a
    /// line given up. Otherwise TCSANOW: what is typed after a password's
    /// Enter stays for the program's next read. The signals stay blocked
    /// (`end` unblocks them); the line stays until taken or discarded.
    public func stopTyping() {
        guard typing else { return }
        readKeys()
        let cutShort = midLine
        if cutShort && !interruptPending && !terminationPending { swallowTheRestOfTheLine() }
        if cutShort || gaveUp || (entered && line.isEmpty) { _ = tcflush(tty, TCIFLUSH) }
        var settings = saved
        _ = Syscalls.retryingInterrupted { tcsetattr(tty, TCSANOW, &settings) }
        Syscalls.close(tty)
        tty = -1
        typing = false
    }

    /// Reads, quietly, until Enter, a second without a key, a signal, or
    /// `drainMilliseconds`; the signals' descriptors are watched too, so a
    /// Ctrl-C is not held back, and a SIGCONT quiets the terminal again.
    private func swallowTheRestOfTheLine() {
        let start = Syscalls.bootTimeNanoseconds()
        var lastKey = start
        let quietNanoseconds = Int64(TerminalKeyboard.quietMilliseconds) * 1_000_000
        while !lineEnded && !interruptPending && !terminationPending {
            let now = Syscalls.bootTimeNanoseconds()
            let left = min(lastKey + quietNanoseconds, start + TerminalKeyboard.drainMilliseconds * 1_000_000) - now
            if left <= 0 { break }
            let requests = pollRequests
            guard let ready = Syscalls.poll(requests, timeoutMilliseconds: Int32(left / 1_000_000 + 1)) else { break }
            if let keysReady = ready.last, requests.last?.fd == tty, keysReady != 0 {
                readKeys()
                lastKey = Syscalls.bootTimeNanoseconds()
            } else {
                keepQuiet()                // a SIGCONT, or nothing (EINTR, the time is up): looked at above
            }
        }
        line.wipe()
    }

    /// Puts everything back: the terminal, then the signal mask in the
    /// reverse order it was built (a Ctrl-C or another signal still pending
    /// reaches the program, as a cancel must). A password not taken is
    /// wiped first.
    public func end() {
        stopTyping()
        line.wipe()
        if let resumed { Syscalls.unblockInterrupt(resumed) }
        resumed = nil
        if let termination { Syscalls.unblockInterrupt(termination) }
        termination = nil
        if let interrupt { Syscalls.unblockInterrupt(interrupt) }
        interrupt = nil
    }

    deinit { end() }
}
