// Touch or type in polkit's administrator dialogs: the password prompt is
// asked on a second thread and left open while the reader waits on the
// module's own thread. The agent shows the prompt; a touch ends the
// evaluation with the prompt still open (the helper writes its verdict and
// exits, and the agent closes the dialog), a typed password ends the wait
// with that password. Only inside polkit's agent helper
// (AdministratorDialog.promptStaysOpen): nowhere else may a conversation
// call be left waiting.
//
// The module calls the conversation from one thread at a time: while the
// prompt is open it says nothing (the prompter drops its messages), and
// after it is answered the prompt's thread has returned. The one exception
// is after a success: the prompt's thread still waits in the agent's
// conversation while the helper runs the stack's account modules, whose
// messages (a password-expiry warning) polkit's helper writes without
// reading; a module that asked something there would have its answer taken
// by the waiting thread (Debian's stacks ask nothing after a success).
//
// What the two threads share lives in memory of its own, never in Swift
// objects, so that the prompt's thread touches no reference counts; a mutex
// guards it, and whichever side is last frees it: the module when it takes
// the answer, the thread when the module left without it.
import CLibc
import CPAMAndBus
import LocalAuth
import LibcSystem

/// What the module and the prompt's thread share.
struct OpenPromptShared {
    enum State { case open, answered, abandoned }
    let lock: UnsafeMutablePointer<pthread_mutex_t>
    var state: State = .open
    /// The conversation replied (false: it failed, e.g. the agent went away).
    var replied = false
    var answerLength = 0
    /// SecretBuffer.capacity + 1 bytes, wiped when taken or abandoned.
    let answer: UnsafeMutablePointer<UInt8>
    /// The prompt's text, a C string of its own.
    let text: UnsafeMutablePointer<CChar>
    let conversation: PAMConversationFunction
    /// Written once when the answer is in (the module polls the read end).
    let notifyWrite: Int32

    /// Frees everything; the caller holds no lock and no one else refers to it.
    static func free(_ shared: UnsafeMutablePointer<OpenPromptShared>) {
        Syscalls.wipe(shared.pointee.answer, count: SecretBuffer.capacity + 1)
        shared.pointee.answer.deallocate()
        shared.pointee.text.deallocate()
        Syscalls.close(shared.pointee.notifyWrite)
        Syscalls.destroyMutex(shared.pointee.lock)
        shared.deinitialize(count: 1)
        shared.deallocate()
    }
}

/// The prompt's thread: one conversation call, its answer handed over
/// under the lock, or wiped when the module no longer waits for it.
private let openPromptThread: Syscalls.ThreadBody = { argument in
    guard let argument else { return nil }
    let shared = argument.assumingMemoryBound(to: OpenPromptShared.self)
    let answer = UnsafeMutablePointer<UInt8>.allocate(capacity: SecretBuffer.capacity + 1)
    var length = 0
    let replied = shared.pointee.conversation.send(PAM_PROMPT_ECHO_OFF, shared.pointee.text) { reply, replyLength in
        length = replyLength
        if replyLength <= SecretBuffer.capacity { answer.update(from: reply, count: replyLength) }
    }
    Syscalls.lock(shared.pointee.lock)
    if shared.pointee.state == .abandoned {
        Syscalls.unlock(shared.pointee.lock)
        Syscalls.wipe(answer, count: SecretBuffer.capacity + 1)
        answer.deallocate()
        OpenPromptShared.free(shared)
        return nil
    }
    if replied && length <= SecretBuffer.capacity { shared.pointee.answer.update(from: answer, count: length) }
    shared.pointee.answerLength = length
    shared.pointee.replied = replied
    shared.pointee.state = .answered
    _ = Syscalls.writeByte(shared.pointee.notifyWrite, 1)
    Syscalls.unlock(shared.pointee.lock)
    // Nothing of the shared memory is touched after the lock is released:
    // the module may free it from now on.
    Syscalls.wipe(answer, count: SecretBuffer.capacity + 1)
    answer.deallocate()
    return nil
}

/// The module's side of an open prompt (its own thread only).
public final class OpenPrompt {
    /// What the prompt's answer was.
    public enum Answer: Equatable {
        /// Text, now in the secret buffer.
        case entered
        /// An empty answer.
        case empty
        /// The conversation failed (the dialog was cancelled, the agent went
        /// away) or the answer did not fit.
        case failed
    }

    private let conversation: PAMConversationFunction?
    private var shared: UnsafeMutablePointer<OpenPromptShared>? = nil
    private var thread: pthread_t? = nil
    private var notifyRead: Int32 = -1
    /// SIGTERM, blocked while the prompt is open (in this thread and the
    /// prompt's): the agent ends the helper with it when the person
    /// cancels, and the wait then ends as a cancel that gives back the
    /// attempt no finger reached, before the signal is let through.
    private var termination: BlockedInterrupt? = nil
    /// The agent's SIGTERM was seen (the deadline is armed).
    private var terminationNoticed = false
    /// How long the module may take, once the agent sent SIGTERM, to give
    /// back the attempt no finger reached: the agent waits for the helper
    /// to end, its dialog (GNOME Shell: the whole shell) frozen meanwhile.
    /// Past it the helper ends with the attempt still counted (R3).
    static var cancelMilliseconds: Int { 500 }

    /// `conversation` nil: the prompt can never be opened.
    init(conversation: PAMConversationFunction?) {
        self.conversation = conversation
    }

    /// An open prompt over the application's conversation.
    public convenience init(handle: PAMHandle) {
        self.init(conversation: handle.handle.conversation())
    }

    /// An open prompt that never opens (every caller but polkit's agent helper).
    public convenience init() {
        self.init(conversation: nil)
    }

    /// A prompt is open and not yet answered (or answered and not yet taken).
    public var isOpen: Bool { shared != nil }

    /// What the reader's wait polls: readable once the answer is in, or
    /// the agent sent SIGTERM (the dialog was cancelled).
    public var pollRequests: [PollRequest] {
        guard shared != nil else { return [] }
        var requests = [PollRequest(fd: notifyRead, events: PollRequest.readable)]
        if let termination { requests.append(PollRequest(fd: termination.fd, events: PollRequest.readable)) }
        return requests
    }

    /// Whether the answer is in (without waiting).
    public var answered: Bool {
        guard shared != nil,
              let ready = Syscalls.poll([PollRequest(fd: notifyRead, events: PollRequest.readable)], timeoutMilliseconds: 0) else { return false }
        return ready.contains { $0 != 0 }
    }

    /// The agent asked the helper to end (SIGTERM pending).
    public var terminationPending: Bool { termination != nil && Syscalls.isPending(SIGTERM) }

    /// Whether the agent asked the helper to end; the first time, the
    /// helper is given `cancelMilliseconds` to finish.
    public func noticeTermination() -> Bool {
        guard terminationNoticed || terminationPending else { return false }
        if !terminationNoticed {
            terminationNoticed = true
            Syscalls.endProcess(afterMilliseconds: OpenPrompt.cancelMilliseconds)
        }
        return true
    }

    /// Gets everything ready that can fail but the thread (the module kept
    /// loaded, the pipe, the mutex); false when something cannot be had.
    public func prepare() -> Bool {
        if prepared != nil || shared != nil { return true }
        guard conversation != nil, Syscalls.keepThisObjectLoaded(), let pipe = Syscalls.pipe() else { return false }
        guard let lock = Syscalls.makeMutex() else {
            Syscalls.close(pipe.read)
            Syscalls.close(pipe.write)
            return false
        }
        prepared = Prepared(pipe: pipe, lock: lock)
        return true
    }

    private struct Prepared {
        let pipe: (read: Int32, write: Int32)
        let lock: UnsafeMutablePointer<pthread_mutex_t>
    }
    private var prepared: Prepared? = nil

    /// Gives back what `prepare` got and `open` did not use.
    private func releasePrepared() {
        guard let prepared else { return }
        Syscalls.close(prepared.pipe.read)
        Syscalls.close(prepared.pipe.write)
        Syscalls.destroyMutex(prepared.lock)
        self.prepared = nil
    }

    /// Asks `text` on a thread of its own; false when it cannot (no
    /// conversation, no thread, what `prepare` gets).
    public func open(_ text: String) -> Bool {
        guard shared == nil, let conversation, prepare(), let ready = prepared else { return false }
        prepared = nil
        let (pipe, lock) = (ready.pipe, ready.lock)
        let utf8 = Array(text.utf8)
        let copy = UnsafeMutablePointer<CChar>.allocate(capacity: utf8.count + 1)
        for (index, byte) in utf8.enumerated() { copy[index] = CChar(bitPattern: byte) }
        copy[utf8.count] = 0
        let answer = UnsafeMutablePointer<UInt8>.allocate(capacity: SecretBuffer.capacity + 1)
        answer.initialize(repeating: 0, count: SecretBuffer.capacity + 1)
        let memory = UnsafeMutablePointer<OpenPromptShared>.allocate(capacity: 1)
        memory.initialize(to: OpenPromptShared(lock: lock, answer: answer, text: copy, conversation: conversation,
                                               notifyWrite: pipe.write))
        // Blocked before the thread starts, which inherits the mask.
        termination = Syscalls.blockSignals([SIGTERM])
        guard termination != nil, let started = Syscalls.startThread(openPromptThread, UnsafeMutableRawPointer(memory)) else {
            OpenPromptShared.free(memory)
            Syscalls.close(pipe.read)
            letTerminationThrough()
            return false
        }
        shared = memory
        thread = started
        notifyRead = pipe.read
        return true
    }

    /// Waits for the answer (as long as the person takes: the dialog has no
    /// timeout of its own) and moves it into `secret`; the prompt is then
    /// closed. `.failed` when none is open.
    public func take(into secret: SecretBuffer) -> Answer {
        guard let memory = shared else { return .failed }
        // A signal wakes poll early; only its failure or the agent's
        // SIGTERM ends the wait (the prompt then stays open, and `end`
        // leaves it).
        while !answered {
            if noticeTermination() { return .failed }
            guard Syscalls.poll(pollRequests, timeoutMilliseconds: -1) != nil else { return .failed }
        }
        Syscalls.lock(memory.pointee.lock)
        var answer = Answer.failed
        if memory.pointee.replied && memory.pointee.answerLength <= SecretBuffer.capacity {
            secret.assign(from: memory.pointee.answer, length: memory.pointee.answerLength)
            answer = memory.pointee.answerLength == 0 ? .empty : .entered
        }
        Syscalls.unlock(memory.pointee.lock)
        closeAnswered()
        return answer
    }

    /// Ends the prompt. Answered: the thread is joined and everything
    /// wiped and freed. Still open after a success (the finger won): the
    /// thread is left waiting in the conversation, which the agent helper's
    /// exit ends, and frees the shared memory itself if an answer ever
    /// comes. Still open after anything else: the answer is waited for and
    /// wiped, so that the next line of the stack, which may ask a password
    /// of its own, never converses while this prompt still does.
    public func end(succeeded: Bool) {
        defer { letTerminationThrough() }
        releasePrepared()
        guard let memory = shared else { return }
        // After the agent's SIGTERM nobody answers: the agent waits for
        // this process to end.
        if !succeeded && !noticeTermination() {
            let discarded = SecretBuffer()
            _ = take(into: discarded)
            discarded.wipe()
            guard shared != nil else { return }
        }
        Syscalls.lock(memory.pointee.lock)
        if memory.pointee.state == .answered {
            Syscalls.unlock(memory.pointee.lock)
            closeAnswered()
            return
        }
        memory.pointee.state = .abandoned
        Syscalls.unlock(memory.pointee.lock)
        if let thread { Syscalls.detachThread(thread) }
        Syscalls.close(notifyRead)
        shared = nil
        thread = nil
        notifyRead = -1
    }

    private func closeAnswered() {
        guard let memory = shared else { return }
        if let thread { Syscalls.joinThread(thread) }
        OpenPromptShared.free(memory)
        Syscalls.close(notifyRead)
        shared = nil
        thread = nil
        notifyRead = -1
        letTerminationThrough()
    }

    /// Restores the signal mask: a SIGTERM that came meanwhile now ends the
    /// helper, as the agent asked, whatever action the helper inherited.
    private func letTerminationThrough() {
        guard let termination else { return }
        if noticeTermination() { Syscalls.restoreDefaultAction(SIGTERM) }
        Syscalls.unblockInterrupt(termination)
        self.termination = nil
    }
}
