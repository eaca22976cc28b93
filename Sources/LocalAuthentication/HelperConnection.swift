// The context's way to the setuid helper, behind a protocol so that the
// unit tests can stand in a scripted helper. The real connection starts
// `localauth-helper` through the same client code the PAM module uses.
import Foundation
import LocalAuth
import LibcSystem

/// One evaluation's run through the helper.
protocol HelperConnection: Sendable {
    /// Runs `request`, showing the conversation through `conversation` and
    /// turning bytes read from `control` (a pipe's read end) into the
    /// user's and the app's choices.
    func run(_ request: HelperRequest, conversation: PresenterConversation, control: Int32?) -> HelperVerdict
    /// Runs a secret action: `outgoing` is a store's secret, `incoming`
    /// receives a load's. Returns the verdict and a list's names.
    func runSecret(_ request: HelperRequest, conversation: PresenterConversation, control: Int32?, outgoing: SecretBuffer?,
                   incoming: SecretBuffer?) -> (SecretVerdict, [[UInt8]])
}

/// The installed helper.
struct SetuidHelperConnection: HelperConnection {
    func run(_ request: HelperRequest, conversation: PresenterConversation, control: Int32?) -> HelperVerdict {
        var client = HelperClient(prompter: conversation)
        defer { client.lastAnswer.wipe() }
        return client.run(request, control: control)
    }

    func runSecret(_ request: HelperRequest, conversation: PresenterConversation, control: Int32?, outgoing: SecretBuffer?,
                   incoming: SecretBuffer?) -> (SecretVerdict, [[UInt8]]) {
        var client = HelperClient(prompter: conversation)
        defer { client.lastAnswer.wipe() }
        client.outgoingSecret = outgoing
        client.incomingSecret = incoming
        return (client.runSecret(request, control: control), client.itemNames)
    }
}

/// The helper's conversation, shown by a presenter. Passwords pass from the
/// presenter's secret to the helper's frame without a copy that is not
/// wiped.
struct PresenterConversation: Prompter, @unchecked Sendable {
    let presenter: LAPresenter?
    /// The evaluation's buttons: the fallback one works once offered.
    var control: LAEvaluationControl? = nil

    mutating func ask(_ text: String, into secret: SecretBuffer) -> PromptAnswer {
        secret.wipe()
        guard let presenter else { return .failed }
        let typed = LAPassword()
        defer { typed.wipe() }
        switch presenter.askPassword(text, into: typed) {
        case .cancel: return .failed
        case .fallback: return .fallback
        case .entered:
            if typed.buffer.overflowed {
                secret.assign(from: [UInt8](), length: SecretBuffer.capacity + 1)
                return .entered
            }
            let copied = typed.buffer.withBytes { bytes, count in
                secret.fill(length: count) { storage in
                    storage.update(from: bytes, count: count)
                    return true
                }
            }
            guard copied else { return .failed }
            return secret.isEmpty ? .empty : .entered
        }
    }

    mutating func tell(_ text: String, _ kind: MessageKind) {
        presenter?.show(text, isError: kind == .error)
    }

    mutating func offerFallback(_ title: String) {
        control?.offerFallback()
        presenter?.offerFallback(title: title)
    }
}
