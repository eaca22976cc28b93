// System calls for the helper's socket and process, on both sides: the
// socket pair, sending and receiving with deadlines, starting and reaping.
import CLibc
import LocalAuth

// MARK: - The helper's socket and process (client and helper)

/// How far one non-blocking send or receive got.
public enum TransferProgress: Equatable {
    case done(Int)
    /// Nothing moved now; wait until the socket is ready.
    case wouldBlock
    /// The peer closed the connection.
    case closed
    case failed
}

extension PollRequest {
    /// Room to write.
    public static var writable: Int16 { Int16(POLLOUT) }
    /// Error or hang-up (reported whether asked for or not).
    public static var failed: Int16 { Int16(POLLERR | POLLHUP | POLLNVAL) }
}

extension Syscalls {
    /// Where the setuid helper is installed.
    public static var helperPath: [UInt8] { bytes(ofCString: la_helper_path()) }

    /// A connected pair of stream sockets, both close-on-exec.
    public static func socketPair() -> (Int32, Int32)? {
        var fds: [Int32] = [-1, -1]
        let made = fds.withUnsafeMutableBufferPointer {
            socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, $0.baseAddress!)
        }
        return made == 0 ? (fds[0], fds[1]) : nil
    }

    /// Sends what the socket takes now, never raising SIGPIPE.
    public static func sendSome(_ fd: Int32, _ pointer: UnsafePointer<UInt8>, count: Int) -> TransferProgress {
        let sent = retryingInterrupted { CLibc.send(fd, pointer, count, Int32(MSG_NOSIGNAL) | Int32(MSG_DONTWAIT)) }
        if sent > 0 { return .done(sent) }
        if sent == 0 { return .closed }
        switch la_errno() {
        case EAGAIN, EWOULDBLOCK: return .wouldBlock
        case EPIPE, ECONNRESET: return .closed
        default: return .failed
        }
    }

    /// Receives what is there now.
    public static func receiveSome(_ fd: Int32, _ pointer: UnsafeMutablePointer<UInt8>, count: Int) -> TransferProgress {
        let got = retryingInterrupted { CLibc.recv(fd, pointer, count, Int32(MSG_DONTWAIT)) }
        if got > 0 { return .done(got) }
        if got == 0 { return .closed }
        switch la_errno() {
        case EAGAIN, EWOULDBLOCK: return .wouldBlock
        case ECONNRESET: return .closed
        default: return .failed
        }
    }

    /// Starts `path` with no arguments and an empty environment, `channel`
    /// as its standard input, /dev/null as its output, every signal at its
    /// default and none blocked. The child's pid, or nil.
    public static func spawn(_ path: [UInt8], channel: Int32) -> Int32? {
        var actions = posix_spawn_file_actions_t()
        guard posix_spawn_file_actions_init(&actions) == 0 else { return nil }
        defer { posix_spawn_file_actions_destroy(&actions) }
        var attributes = posix_spawnattr_t()
        guard posix_spawnattr_init(&attributes) == 0 else { return nil }
        defer { posix_spawnattr_destroy(&attributes) }
        var noSignals = sigset_t()
        var allSignals = sigset_t()
        sigemptyset(&noSignals)
        sigfillset(&allSignals)
        guard posix_spawn_file_actions_adddup2(&actions, channel, 0) == 0,
              posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0) == 0,
              posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0) == 0,
              posix_spawnattr_setsigmask(&attributes, &noSignals) == 0,
              posix_spawnattr_setsigdefault(&attributes, &allSignals) == 0,
              posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF)) == 0 else { return nil }
        var cPath = path
        cPath.append(0)
        var pid: pid_t = 0
        let started = cPath.withUnsafeMutableBufferPointer { pathBuffer -> Int32 in
            let pathPointer = UnsafeMutableRawPointer(pathBuffer.baseAddress!).assumingMemoryBound(to: CChar.self)
            var argv: [UnsafeMutablePointer<CChar>?] = [pathPointer, nil]
            var envp: [UnsafeMutablePointer<CChar>?] = [nil]
            return argv.withUnsafeMutableBufferPointer { argvBuffer in
                envp.withUnsafeMutableBufferPointer { envpBuffer in
                    posix_spawn(&pid, pathPointer, &actions, &attributes, argvBuffer.baseAddress!, envpBuffer.baseAddress!)
                }
            }
        }
        return started == 0 ? pid : nil
    }

    /// Collects the exit of child `pid`, waiting at most `milliseconds` on
    /// the boot clock; true once it is gone (or was already collected by
    /// someone else). The helper takes a moment to end after its last
    /// frame, so waitpid is tried again after a pause that starts at 50 µs
    /// and doubles up to 1 ms: a prompt waits about as long as the helper
    /// takes (with a fixed 5 ms between tries, nearly every prompt through
    /// the helper waited 5 ms), and a helper that never ends wakes the
    /// caller at most a thousand times a second until the bound. It makes
    /// only the calls any process that starts a helper makes already: no
    /// sandbox of the caller's meets a new one here.
    @discardableResult
    public static func reap(_ pid: Int32, waitingMilliseconds milliseconds: Int) -> Bool {
        let deadline = bootTimeNanoseconds() + Int64(min(max(milliseconds, 0), 60_000)) * 1_000_000
        var pause: Int64 = 50_000
        while true {
            var status: Int32 = 0
            let result = retryingInterrupted { waitpid(pid, &status, WNOHANG) }
            if result == pid || result < 0 { return true }  // < 0, ECHILD: reaped elsewhere (SIGCHLD ignored)
            let left = deadline - bootTimeNanoseconds()
            if left <= 0 { return false }
            sleep(nanoseconds: min(pause, left))
            pause = min(pause * 2, 1_000_000)
        }
    }
}
