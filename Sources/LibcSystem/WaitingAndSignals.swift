// Waiting and signals: poll with one rule for EINTR, signals blocked and
// read from signalfds (never caught with a handler), and memory handed to
// or taken from C libraries.
import CLibc
import LocalAuth

/// Signals blocked for this thread and readable from a signalfd instead
/// (the terminal's, polkit's cancel): the saved mask puts things back as
/// they were.
public struct BlockedInterrupt {
    public let fd: Int32
    fileprivate let savedMask: sigset_t
}

extension Syscalls {
    /// Waits until one of `requests` is ready or `timeoutMilliseconds` pass.
    /// Returns the ready events of each request (all zero on a timeout), or
    /// nil when poll failed other than by a signal.
    public static func poll(_ requests: [PollRequest], timeoutMilliseconds: Int32) -> [Int16]? {
        var fds = requests.map { pollfd(fd: $0.fd, events: $0.events, revents: 0) }
        let ready = fds.withUnsafeMutableBufferPointer { CLibc.poll($0.baseAddress!, nfds_t($0.count), timeoutMilliseconds) }
        if ready < 0 { return la_errno() == EINTR ? [Int16](repeating: 0, count: requests.count) : nil }
        return fds.map { $0.revents }
    }

    /// Blocks SIGINT for the calling thread and opens a signalfd for it;
    /// nil when either fails (the mask is then unchanged).
    public static func blockInterrupt() -> BlockedInterrupt? {
        blockSignals([SIGINT])
    }

    /// The signals that end a program at its terminal besides Ctrl-C: a
    /// kill's SIGTERM, a hang-up's SIGHUP, Ctrl-\'s SIGQUIT.
    public static var terminationSignals: [Int32] { [SIGTERM, SIGHUP, SIGQUIT] }

    /// Whether `signal` is pending for this thread or the process (blocked, not yet taken).
    public static func isPending(_ signal: Int32) -> Bool {
        var set = sigset_t()
        guard sigpending(&set) == 0 else { return false }
        return sigismember(&set, signal) == 1
    }

    /// Blocks `signals` for the calling thread and opens a signalfd for
    /// them; nil when either fails (the mask is then unchanged). Blocks
    /// nest: unblock in the reverse order.
    public static func blockSignals(_ signals: [Int32]) -> BlockedInterrupt? {
        var set = sigset_t()
        var saved = sigset_t()
        sigemptyset(&set)
        for signal in signals { sigaddset(&set, signal) }
        guard pthread_sigmask(SIG_BLOCK, &set, &saved) == 0 else { return nil }
        let fd = signalfd(-1, &set, Int32(SFD_CLOEXEC | SFD_NONBLOCK))
        guard fd >= 0 else {
            pthread_sigmask(SIG_SETMASK, &saved, nil)
            return nil
        }
        return BlockedInterrupt(fd: fd, savedMask: saved)
    }

    /// Takes one pending signal from the signalfd (the fallback consumed a SIGINT).
    public static func consumeInterrupt(_ blocked: BlockedInterrupt) {
        var info = signalfd_siginfo()
        _ = withUnsafeMutableBytes(of: &info) { CLibc.read(blocked.fd, $0.baseAddress!, $0.count) }
    }

    /// Closes the signalfd and restores the mask; a signal still pending is
    /// then delivered to the application as usual.
    public static func unblockInterrupt(_ blocked: BlockedInterrupt) {
        close(blocked.fd)
        var saved = blocked.savedMask
        pthread_sigmask(SIG_SETMASK, &saved, nil)
    }

    /// Frees memory a C library allocated with malloc.
    public static func release(_ pointer: UnsafeMutableRawPointer?) {
        free(pointer)
    }

    /// Memory for a C library that will free it (a PAM reply, PAM data).
    public static func allocate(zeroedBytes count: Int) -> UnsafeMutableRawPointer? {
        calloc(1, count)
    }

    /// A malloc'ed copy of a C string, for a library that frees it.
    public static func duplicate(_ string: UnsafePointer<CChar>) -> UnsafeMutablePointer<CChar>? {
        strdup(string)
    }

    /// The length of a C string, at most `limit`.
    public static func length(of string: UnsafePointer<CChar>, limit: Int) -> Int {
        strnlen(string, limit)
    }

    /// Overwrites a C string (up to `limit` bytes) with zeros and frees it.
    public static func wipeAndRelease(_ string: UnsafeMutablePointer<CChar>, limit: Int) {
        explicit_bzero(string, strnlen(string, limit))
        free(string)
    }
}
