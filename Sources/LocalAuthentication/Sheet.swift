// One request through the helper with the app's sheet, shared by LAContext's
// evaluations and the rights' (LARight, LARightStore): the presenter the app
// set, or the terminal; the pipe its buttons write to; begin and dismiss.
import Foundation
import LocalAuth
import LibcSystem

/// The sheets one owner (a context, a right) has open, so that its
/// `invalidate()` reaches them; and whether it was invalidated.
final class OpenSheets: @unchecked Sendable {
    private let lock = NSLock()
    private var invalidated = false
    private var open: [LAEvaluationControl] = []

    var isInvalidated: Bool { locked { invalidated } }

    /// Ends every open sheet with `appCancel`; later ones are refused.
    func invalidate() {
        let controls: [LAEvaluationControl] = locked {
            invalidated = true
            return open
        }
        for control in controls { control.invalidate() }
    }

    /// Ends the sheets open now with `appCancel`; later ones may open.
    func cancelOpen() {
        let controls: [LAEvaluationControl] = locked { open }
        for control in controls { control.invalidate() }
    }

    fileprivate func add(_ control: LAEvaluationControl) -> Bool {
        locked {
            if invalidated { return false }
            open.append(control)
            return true
        }
    }

    fileprivate func remove(_ control: LAEvaluationControl) {
        locked { open.removeAll { $0 === control } }
    }

    private func locked<T>(_ body: () -> T) -> T {
        lock.lock()
        defer { lock.unlock() }
        return body()
    }
}

/// What the sheet shows.
struct SheetSettings {
    /// nil: the terminal the app runs in.
    var presenter: LAPresenter?
    var reason: String
    var fallbackTitle: String? = nil
    var cancelTitle: String? = nil
}

enum Sheet {
    /// Runs `body` with the sheet open: the conversation to give the helper
    /// and the read end of the buttons' pipe. Without a presenter and a
    /// terminal, nothing can be shown: notInteractive.
    static func run<T>(_ settings: SheetSettings, sheets: OpenSheets,
                       _ body: (PresenterConversation, Int32) -> T) -> Result<T, LAError> {
        let presenter: LAPresenter
        if let chosen = settings.presenter {
            presenter = chosen
        } else {
            guard TerminalPresenter.isAvailable else { return .failure(LAError(.notInteractive, message: "No terminal to ask on.")) }
            presenter = TerminalPresenter()
        }
        guard let pipe = Syscalls.pipe() else { return .failure(LAError(.systemCancel, message: "Cannot start the evaluation.")) }
        Syscalls.setNonBlocking(pipe.write)
        let control = LAEvaluationControl(fd: pipe.write)
        let started = sheets.add(control)
        defer {
            sheets.remove(control)
            control.end()
            Syscalls.close(pipe.write)
            Syscalls.close(pipe.read)
        }
        guard started else { return .failure(LAError(.invalidContext)) }
        presenter.begin(reason: settings.reason, cancelTitle: settings.cancelTitle, fallbackTitle: settings.fallbackTitle, control: control)
        let answer = body(PresenterConversation(presenter: presenter, control: control), pipe.read)
        presenter.dismiss()
        return .success(answer)
    }
}
