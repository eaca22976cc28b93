// Touch or type. For a program at its own terminal (sudo, su, login, doas):
// the conversation says everything, and while the reader waits the module
// reads the person's keys itself, on the same thread (TerminalKeyboard).
// Enter after a password ends the wait with it, Enter alone asks the
// password through the conversation, Ctrl-C cancels. In polkit's
// administrator dialogs: the password prompt is left open on a second
// thread while the reader waits (OpenPrompt), and nothing else is said
// until it is answered.
import LocalAuth
import LibcSystem

public struct TouchOrTypePrompter<Conversation: Prompter>: Prompter {
    var conversation: Conversation
    let keyboard: TerminalKeyboard
    /// A dialog's prompt left open while the reader waits.
    let openPrompt: OpenPrompt
    /// The open prompt's answer, taken when it ended the wait.
    let typedInTheDialog = SecretBuffer()
    /// How long a password begun while the reader waited may take to finish
    /// once the reader stopped (`answer_timeout`).
    let answerMilliseconds: Int64

    public init(_ conversation: Conversation, keyboard: TerminalKeyboard, openPrompt: OpenPrompt = OpenPrompt(),
                answerTimeoutSeconds: Int) {
        self.conversation = conversation
        self.keyboard = keyboard
        self.openPrompt = openPrompt
        self.answerMilliseconds = Int64(answerTimeoutSeconds) * 1000
    }

    public mutating func watchKeys() -> Bool {
        keyboard.beginTyping()
    }

    public mutating func readyToLeavePromptOpen() -> Bool {
        openPrompt.prepare()
    }

    public mutating func leavePromptOpen(_ text: String) -> Bool {
        openPrompt.open(text)
    }

    /// The password prompt. A line begun while the reader waited is
    /// finished first, without a new prompt (the person is typing it);
    /// otherwise the terminal is put back and the program's own
    /// conversation asks (sudo's prompt, with its own timeout).
    public mutating func ask(_ text: String, into secret: SecretBuffer) -> PromptAnswer {
        // A dialog's prompt still open is this question: its answer is
        // waited for. Left empty, the password is asked again.
        if openPrompt.isOpen {
            switch openPrompt.take(into: secret) {
            case .entered: return .entered
            case .failed: return .failed
            case .empty: return conversation.ask(text, into: secret)
            }
        }
        // A password typed and entered before this question (while the
        // reader was being claimed, or waited) is its answer.
        keyboard.readKeys()
        if keyboard.holdsAnEnteredPassword {
            let taken = keyboard.takeLine(into: secret)
            keyboard.end()
            return taken ? .entered : .failed
        }
        if keyboard.midLine {
            let entered = keyboard.finishLine(milliseconds: answerMilliseconds, clock: { Syscalls.bootTimeNanoseconds() })
            if entered && keyboard.takeLine(into: secret) {
                keyboard.end()
                return .entered
            }
            // Erased back to nothing before Enter: asked as usual below.
            // Ctrl-C, a signal, Ctrl-D, a hang-up or the answer timeout: no
            // answer (`end` swallows and flushes the rest, and wipes).
            if !entered {
                keyboard.end()
                return .failed
            }
        }
        keyboard.end()
        return conversation.ask(text, into: secret)
    }

    /// Nothing is said while a dialog's prompt is open: the conversation
    /// is never called from two threads at once, and the agents that take
    /// the verdict while prompting clear the typed text (GNOME Shell) or
    /// stop at a message box (lxpolkit) on a message.
    public mutating func tell(_ text: String, _ kind: MessageKind) {
        if openPrompt.isOpen { return }
        conversation.tell(text, kind)
    }

    /// After the reader's wait was interrupted: while keys are read, a
    /// signal or a given-up line is a cancel, Enter on a password is that
    /// password, Enter alone asks for it. Without keys, the engine's own
    /// rule for Ctrl-C holds.
    public mutating func takeChoice() -> WaitChoice? {
        // A dialog's answer: a password, an empty answer (the password is
        // asked), or a cancelled dialog.
        if openPrompt.isOpen {
            guard openPrompt.answered, !openPrompt.noticeTermination() else { return .cancel }
            switch openPrompt.take(into: typedInTheDialog) {
            case .entered: return .typedPassword
            case .empty: return .passwordWanted
            case .failed: return .cancel
            }
        }
        guard keyboard.typing else { return conversation.takeChoice() }
        if keyboard.interruptPending || keyboard.terminationPending || keyboard.gaveUp { return .cancel }
        if keyboard.entered { return keyboard.line.isEmpty ? .passwordWanted : .typedPassword }
        return .cancel
    }

    public mutating func takeTypedPassword(into secret: SecretBuffer) -> Bool {
        if !typedInTheDialog.isEmpty {
            typedInTheDialog.move(into: secret)
            return true
        }
        let taken = keyboard.takeLine(into: secret)
        keyboard.end()
        return taken
    }

    public mutating func offerFallback(_ title: String) {
        conversation.offerFallback(title)
    }
}
