// What polkit's open prompt needs of the process, the one place the module
// runs a second thread: threads, mutexes, keeping the module loaded, and
// the deadline of a cancel. Each call is wrapped once; the thread's body
// must be a C function (it touches no reference counts).
import CLibc

extension Syscalls {
    /// A thread's entry point: a C function of one pointer.
    public typealias ThreadBody = @convention(c) (UnsafeMutableRawPointer?) -> UnsafeMutableRawPointer?

    /// Starts a thread running `body(argument)`; nil when it cannot.
    public static func startThread(_ body: ThreadBody, _ argument: UnsafeMutableRawPointer) -> pthread_t? {
        var thread = pthread_t()
        return pthread_create(&thread, nil, body, argument) == 0 ? thread : nil
    }

    /// Waits for `thread` to end.
    public static func joinThread(_ thread: pthread_t) {
        _ = pthread_join(thread, nil)
    }

    /// Lets `thread` end on its own, never joined.
    public static func detachThread(_ thread: pthread_t) {
        _ = pthread_detach(thread)
    }

    /// A mutex in memory of its own (never moved); nil when it cannot be made.
    public static func makeMutex() -> UnsafeMutablePointer<pthread_mutex_t>? {
        let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
        guard pthread_mutex_init(mutex, nil) == 0 else {
            mutex.deallocate()
            return nil
        }
        return mutex
    }

    public static func lock(_ mutex: UnsafeMutablePointer<pthread_mutex_t>) { _ = pthread_mutex_lock(mutex) }
    public static func unlock(_ mutex: UnsafeMutablePointer<pthread_mutex_t>) { _ = pthread_mutex_unlock(mutex) }

    public static func destroyMutex(_ mutex: UnsafeMutablePointer<pthread_mutex_t>) {
        _ = pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    /// Keeps the shared object this code is in loaded until the process
    /// exits (dlopen RTLD_NOLOAD|RTLD_NODELETE on itself): a thread of its
    /// own still waiting after pam_end must have its code to return into.
    public static func keepThisObjectLoaded() -> Bool {
        la_keep_this_object_loaded() == 0
    }

    /// Ends the process if it still runs `milliseconds` from now (SIGALRM,
    /// its default action put back first).
    public static func endProcess(afterMilliseconds milliseconds: Int) {
        _ = la_default_signal(SIGALRM)
        _ = la_alarm_after(milliseconds)
    }

    /// Puts back the default action of `signal` (which ends the process).
    public static func restoreDefaultAction(_ signal: Int32) {
        _ = la_default_signal(signal)
    }

    /// Writes one byte to `fd` (a notification); false when it could not.
    public static func writeByte(_ fd: Int32, _ byte: UInt8) -> Bool {
        var value = byte
        return retryingInterrupted { CLibc.write(fd, &value, 1) } == 1
    }
}
