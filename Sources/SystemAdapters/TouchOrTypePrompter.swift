// Touch or type, for a program at its own terminal (sudo, su, login, doas):
// the conversation says everything, and while the reader waits the module
// reads the person's keys itself, on the same thread (TerminalKeyboard).
// Enter after a password ends the wait with it, Enter alone asks the
// password through the conversation, Ctrl-C cancels.
import LocalAuth
import LocalAuthSystem

public struct TouchOrTypePrompter<Conversation: Prompter>: Prompter {
    var conversation: Conversation
    let keyboard: TerminalKeyboard
    /// How long a password begun while the reader waited may take to finish
    /// once the reader stopped (`answer_timeout`).
    let answerMilliseconds: Int64

    public init(_ conversation: Conversation, keyboard: TerminalKeyboard, answerTimeoutSeconds: Int) {
        self.conversation = conversation
        self.keyboard = keyboard
        self.answerMilliseconds = Int64(answerTimeoutSeconds) * 1000
    }

    public mutating func watchKeys() -> Bool {
        keyboard.beginTyping()
    }

    /// The password prompt. A line begun while the reader waited is
    /// finished first, without a new prompt (the person is typing it);
    /// otherwise the terminal is put back and the program's own
    /// conversation asks (sudo's prompt, with its own timeout).
    public mutating func ask(_ text: String, into secret: SecretBuffer) -> PromptAnswer {
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

    public mutating func tell(_ text: String, _ kind: MessageKind) {
        conversation.tell(text, kind)
    }

    /// After the reader's wait was interrupted: while keys are read, a
    /// signal or a given-up line is a cancel, Enter on a password is that
    /// password, Enter alone asks for it. Without keys, the engine's own
    /// rule for Ctrl-C holds.
    public mutating func takeChoice() -> WaitChoice? {
        guard keyboard.typing else { return conversation.takeChoice() }
        if keyboard.interruptPending || keyboard.terminationPending || keyboard.gaveUp { return .cancel }
        if keyboard.entered { return keyboard.line.isEmpty ? .passwordWanted : .typedPassword }
        return .cancel
    }

    public mutating func takeTypedPassword(into secret: SecretBuffer) -> Bool {
        let taken = keyboard.takeLine(into: secret)
        keyboard.end()
        return taken
    }

    public mutating func offerFallback(_ title: String) {
        conversation.offerFallback(title)
    }
}
