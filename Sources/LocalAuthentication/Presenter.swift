// How an evaluation's conversation reaches the person: the presenter
// protocol a GUI app implements, the password it fills, and the control its
// buttons use. The default presenter is the terminal (TerminalPresenter).
import Foundation
import LocalAuth
import LibcSystem

/// A password as the person typed it, in memory this library owns and
/// wipes as soon as it has been passed on (and again when released). It is
/// never turned into a `String`.
public final class LAPassword: @unchecked Sendable {
    let buffer = SecretBuffer()

    init() {}

    /// Replaces the content with `bytes` (UTF-8). More than `capacity`
    /// bytes is refused as a wrong password would be, never truncated.
    public func set<Bytes: Collection>(_ bytes: Bytes) where Bytes.Element == UInt8 {
        let length = bytes.count
        guard length <= SecretBuffer.capacity else {
            buffer.assign(from: [UInt8](), length: length)
            return
        }
        _ = buffer.fill(length: length) { storage in
            var index = 0
            for byte in bytes { storage[index] = byte; index += 1 }
            return true
        }
    }

    /// Wipes the content.
    public func wipe() { buffer.wipe() }

    /// The longest password accepted, in bytes.
    public static var capacity: Int { SecretBuffer.capacity }
}

/// How the person answered a password prompt.
public enum LAPasswordAnswer: Sendable {
    /// The secret holds what they typed (possibly nothing).
    case entered
    /// They chose the fallback button (policy biometrics: `userFallback`).
    case fallback
    /// They cancelled.
    case cancel
}

/// What a presenter's buttons do while the reader waits for a finger. Safe
/// to call from any thread; a call after the evaluation ended does nothing.
public final class LAEvaluationControl: @unchecked Sendable {
    private let lock = NSLock()
    /// The write end of the evaluation's control pipe; -1 once it ended.
    private var fd: Int32
    private var invalidated = false
    private var fallbackOffered = false

    init(fd: Int32) { self.fd = fd }

    /// The cancel button: the evaluation ends with `userCancel`.
    public func cancel() { send(ClientChoice.userCancel.rawValue) }

    /// The fallback button: the password (policy owner) or `userFallback`
    /// (policy biometrics). It works only once the fallback was offered
    /// (`LAPresenter.offerFallback`, after the first failed finger); before
    /// that, and always when the app's fallback title is empty, it does
    /// nothing.
    public func fallback() {
        lock.lock()
        let offered = fallbackOffered
        lock.unlock()
        if offered { send(ClientChoice.userFallback.rawValue) }
    }

    /// Whether the fallback button may show now.
    public var isFallbackOffered: Bool {
        lock.lock(); defer { lock.unlock() }
        return fallbackOffered
    }

    func offerFallback() {
        lock.lock(); fallbackOffered = true; lock.unlock()
    }

    /// True once the app called `invalidate()`: a presenter that is asking
    /// for the password stops asking (its answer would be ignored).
    public var isInvalidated: Bool {
        lock.lock(); defer { lock.unlock() }
        return invalidated
    }

    func invalidate() {
        lock.lock(); invalidated = true; lock.unlock()
        send(ClientChoice.appCancel.rawValue)
    }

    /// The evaluation ended: later presses go nowhere.
    func end() {
        lock.lock(); fd = -1; lock.unlock()
    }

    private func send(_ byte: UInt8) {
        lock.lock(); defer { lock.unlock() }
        // Non-blocking: a flood of presses never blocks a caller.
        if fd >= 0 { try? Syscalls.writeAll(fd, [byte]) }
    }
}

/// Shows one evaluation's conversation. The library calls these one at a
/// time on its private queue, between `begin` and `dismiss`.
public protocol LAPresenter: AnyObject {
    /// The evaluation started; `control` serves the cancel and fallback
    /// buttons until `dismiss`. `reason` is the app's localizedReason.
    func begin(reason: String, cancelTitle: String?, fallbackTitle: String?, control: LAEvaluationControl)
    /// A message: the instruction to touch the reader, "not recognized",
    /// a lockout notice. `isError` marks failures.
    func show(_ message: String, isError: Bool)
    /// Asks for the password with echo off and fills `password`.
    func askPassword(_ prompt: String, into password: LAPassword) -> LAPasswordAnswer
    /// The evaluation ended; hide everything.
    func dismiss()
    /// The fallback button (titled `title`) may show from now on: after the
    /// first finger that was not recognized. Never called when the app's
    /// fallback title is empty.
    func offerFallback(title: String)
}

extension LAPresenter {
    public func offerFallback(title: String) {}
}
