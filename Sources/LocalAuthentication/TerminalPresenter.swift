// The default presenter: the terminal the app runs in (/dev/tty), as
// Apple's sheet on a terminal. Messages are written to it; while the reader
// waits for a finger, Ctrl-C or Ctrl-D is Cancel and, once the
// fallback is offered (after the first finger not recognized), Enter is the
// fallback; other keys do nothing. Each is said on screen when it starts to
// work. The password is read with echo off. The terminal's signal
// characters are off for the whole evaluation, so the app never sees the
// Ctrl-C meant for the sheet.
import Foundation
import LocalAuth
import LibcSystem
import LocalAuthTerminal

public final class TerminalPresenter: LAPresenter, @unchecked Sendable {
    private let condition = NSCondition()
    private var terminal: Int32 = -1
    private var saved: TerminalSettings? = nil
    private var wake: (read: Int32, write: Int32)? = nil
    private var control: LAEvaluationControl? = nil
    /// The watcher reads keys only while `watching`; it says it stopped
    /// reading by setting `parked`.
    private var watching = false
    private var parked = true
    private var ending = false
    private var exited = true
    private var watcher: Thread? = nil

    /// The longest time a password prompt waits (the helper's own limit is
    /// at most this).
    static let answerSeconds: Int64 = 600

    public init() {}

    /// Whether there is a terminal to talk to.
    public static var isAvailable: Bool {
        guard let fd = Terminal.openControlling() else { return false }
        Syscalls.close(fd)
        return true
    }

    public func begin(reason: String, cancelTitle: String?, fallbackTitle: String?, control: LAEvaluationControl) {
        condition.lock()
        defer { condition.unlock() }
        guard let fd = Terminal.openControlling() else { return }
        terminal = fd
        try? Syscalls.writeAll(fd, utf8Bytes(SheetKeys.cancelHint(cancelTitle) + "\n"))
        saved = Terminal.keys(fd)
        wake = Syscalls.pipe()
        self.control = control
        ending = false
        watching = true
        parked = false
        exited = false
        let thread = Thread { [weak self] in self?.watchKeys() }
        watcher = thread
        thread.start()
    }

    public func offerFallback(title: String) {
        guard terminal >= 0 else { return }
        try? Syscalls.writeAll(terminal, utf8Bytes(SheetKeys.fallbackHint(title) + "\n"))
    }

    public func show(_ message: String, isError: Bool) {
        guard terminal >= 0 else { return }
        try? Syscalls.writeAll(terminal, utf8Bytes(message + "\n"))
    }

    public func askPassword(_ prompt: String, into password: LAPassword) -> LAPasswordAnswer {
        guard terminal >= 0, let saved else { return .cancel }
        pauseWatching()
        defer { resumeWatching() }
        Terminal.line(terminal, from: saved)
        defer { _ = Terminal.keys(terminal) }
        try? Syscalls.writeAll(terminal, utf8Bytes(prompt))
        password.wipe()
        let scratch = UnsafeMutablePointer<UInt8>.allocate(capacity: SecretBuffer.capacity + 1)
        defer {
            Syscalls.wipe(scratch, count: SecretBuffer.capacity + 1)
            scratch.deallocate()
        }
        var count = 0
        let deadline = Syscalls.bootTimeNanoseconds() + TerminalPresenter.answerSeconds * 1_000_000_000
        while true {
            // invalidate() ends the prompt; so does the longest answer time.
            guard Syscalls.bootTimeNanoseconds() < deadline, control?.isInvalidated != true else {
                try? Syscalls.writeAll(terminal, [0x0A])
                return .cancel
            }
            guard let ready = Syscalls.poll([PollRequest(fd: terminal, events: PollRequest.readable)], timeoutMilliseconds: 200),
                  ready[0] != 0 else { continue }
            guard let byte = Syscalls.readByte(terminal) else { return .cancel }
            if byte == 0x03 || byte == 0x04 {
                try? Syscalls.writeAll(terminal, [0x0A])
                return .cancel
            }
            if byte == 0x0A || byte == 0x0D { break }
            if count <= SecretBuffer.capacity { scratch[count] = byte }
            count += 1
        }
        try? Syscalls.writeAll(terminal, [0x0A])
        password.set(UnsafeBufferPointer(start: scratch, count: min(count, SecretBuffer.capacity + 1)))
        return .entered
    }

    public func dismiss() {
        condition.lock()
        defer { condition.unlock() }
        ending = true
        if let wake { try? Syscalls.writeAll(wake.write, [0]) }
        condition.broadcast()
        while watcher != nil && !exited { condition.wait() }
        watcher = nil
        if terminal >= 0 {
            if let saved { Terminal.restore(terminal, saved) }
            Syscalls.close(terminal)
        }
        if let wake {
            Syscalls.close(wake.read)
            Syscalls.close(wake.write)
        }
        terminal = -1
        saved = nil
        wake = nil
        control = nil
    }

    /// Stops the watcher reading keys before a prompt reads the line.
    private func pauseWatching() {
        condition.lock()
        watching = false
        if let wake { try? Syscalls.writeAll(wake.write, [0]) }
        while !parked { condition.wait() }
        condition.unlock()
    }

    private func resumeWatching() {
        condition.lock()
        watching = true
        condition.broadcast()
        condition.unlock()
    }

    /// The watcher thread: between prompts, Ctrl-C and Ctrl-D cancel,
    /// and Enter asks for the fallback (which does nothing until offered).
    private func watchKeys() {
        while true {
            condition.lock()
            while !watching && !ending {
                if !parked { parked = true; condition.broadcast() }
                condition.wait()
            }
            if ending {
                parked = true
                exited = true
                condition.broadcast()
                condition.unlock()
                return
            }
            parked = false
            let fd = terminal
            let wakeRead = wake?.read ?? -1
            let control = self.control
            condition.unlock()
            guard let ready = Syscalls.poll([PollRequest(fd: fd, events: PollRequest.readable),
                                             PollRequest(fd: wakeRead, events: PollRequest.readable)], timeoutMilliseconds: 1000) else {
                continue
            }
            if ready[1] != 0 {
                _ = Syscalls.readByte(wakeRead)
                continue
            }
            guard ready[0] != 0 else { continue }
            guard let byte = Syscalls.readByte(fd) else {
                // The terminal hung up: nobody is left to answer.
                control?.cancel()
                condition.lock()
                watching = false
                condition.unlock()
                continue
            }
            switch SheetKeys.choice(byte, fallbackOffered: control?.isFallbackOffered ?? false) {
            case .userCancel?: control?.cancel()
            case .userFallback?: control?.fallback()
            case .appCancel?, .passwordTyped?, nil: break
            }
        }
    }
}
