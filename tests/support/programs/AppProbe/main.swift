// A test app over the LocalAuthentication library with a scripted
// presenter (the GUI case): it prints what it is shown, answers prompts
// from its arguments, and turns signals into the app's actions so that a
// test can act at the moment it chooses: SIGUSR1 calls invalidate(),
// SIGUSR2 presses the cancel button, SIGWINCH the fallback button.
//   la-app-probe [--policy owner|biometrics] [--reason TEXT] [--answer A]...
//                [--fallback-title T] [--non-interactive] [--preflight] [--reuse SECONDS]
//                [--fallback-when-offered] [--cancel-at-first-message]
// An answer "<fallback>" or "<cancel>" presses that button at the prompt.
// --fallback-when-offered presses the fallback button as soon as the sheet
// shows it; --cancel-at-first-message presses Cancel once the sheet shows
// its first message (the reader then waits). The fallback's appearance is
// the line "fallback offered: <title>". The last line is
// "result: success" or "result: <name> <code>". --right runs Apple's
// rights instead (Rights.swift).
import Foundation
import LocalAuthentication

final class ScriptedPresenter: LAPresenter, @unchecked Sendable {
    var answers: [String]
    let lock = NSLock()
    var control: LAEvaluationControl?
    var fallbackWhenOffered = false
    var cancelAtFirstMessage = false

    init(answers: [String]) { self.answers = answers }

    func say(_ line: String) {
        FileHandle.standardOutput.write(Data((line + "\n").utf8))
    }

    func begin(reason: String, cancelTitle: String?, fallbackTitle: String?, control: LAEvaluationControl) {
        lock.lock(); self.control = control; lock.unlock()
        say("begin: \(reason)")
    }
    func show(_ message: String, isError: Bool) {
        say("\(isError ? "error" : "info"): \(message)")
        if cancelAtFirstMessage {
            cancelAtFirstMessage = false
            press(false)
        }
    }
    func offerFallback(title: String) {
        say("fallback offered: \(title)")
        if fallbackWhenOffered { press(true) }
    }
    func askPassword(_ prompt: String, into password: LAPassword) -> LAPasswordAnswer {
        say("prompt: \(prompt)")
        guard !answers.isEmpty else { return .cancel }
        let answer = answers.removeFirst()
        if answer == "<fallback>" { return .fallback }
        if answer == "<cancel>" { return .cancel }
        password.set(Array(answer.utf8))
        return .entered
    }
    func dismiss() {
        lock.lock(); control = nil; lock.unlock()
        say("dismiss")
    }
    func press(_ fallback: Bool) {
        lock.lock(); let control = self.control; lock.unlock()
        if fallback { control?.fallback() } else { control?.cancel() }
        say(fallback ? "pressed: fallback" : "pressed: cancel")
    }
}

var arguments = Array(CommandLine.arguments.dropFirst())
var policy = LAPolicy.deviceOwnerAuthentication
var reason = "test the library"
var answers: [String] = []
var fallbackTitle: String? = nil
var nonInteractive = false
var preflightOnly = false
var reuse: TimeInterval = 0
var fallbackWhenOffered = false
var cancelAtFirstMessage = false
var rightVerb: String? = nil
var rightName = ""
var rightSecret: String? = nil
var rightAccess = "default"
while !arguments.isEmpty {
    let name = arguments.removeFirst()
    switch name {
    case "--policy": policy = arguments.removeFirst() == "biometrics" ? .deviceOwnerAuthenticationWithBiometrics : .deviceOwnerAuthentication
    case "--reason": reason = arguments.removeFirst()
    case "--answer": answers.append(arguments.removeFirst())
    case "--fallback-title": fallbackTitle = arguments.removeFirst()
    case "--non-interactive": nonInteractive = true
    case "--preflight": preflightOnly = true
    case "--reuse": reuse = TimeInterval(arguments.removeFirst()) ?? 0
    case "--fallback-when-offered": fallbackWhenOffered = true
    case "--cancel-at-first-message": cancelAtFirstMessage = true
    case "--right":
        rightVerb = arguments.removeFirst()
        if rightVerb != "remove-all" { rightName = arguments.removeFirst() }
    case "--secret": rightSecret = arguments.removeFirst()
    case "--access": rightAccess = arguments.removeFirst()
    default:
        FileHandle.standardError.write(Data("la-app-probe: unknown argument \(name)\n".utf8))
        exit(2)
    }
}

let context = LAContext()
let presenter = ScriptedPresenter(answers: answers)
presenter.fallbackWhenOffered = fallbackWhenOffered
presenter.cancelAtFirstMessage = cancelAtFirstMessage
context.presenter = presenter
context.localizedFallbackTitle = fallbackTitle
context.interactionNotAllowed = nonInteractive
context.touchIDAuthenticationAllowableReuseDuration = reuse

func name(_ error: Error?) -> String {
    guard let error = error as? LAError else { return "other \(String(describing: error))" }
    return "\(error.code) \(error.code.rawValue)"
}

if let rightVerb {
    let finished = DispatchSemaphore(value: 0)
    nonisolated(unsafe) var granted = false
    let verb = rightVerb, name = rightName, secret = rightSecret, access = rightAccess, reasonText = reason
    Task.detached {   // not the main actor's: the main thread waits below
        granted = await runRight(verb, name: name, secret: secret, access: access, reason: reasonText, presenter: presenter)
        finished.signal()
    }
    finished.wait()
    exit(granted ? 0 : 1)
}

if preflightOnly {
    var error: NSError?
    let can = context.canEvaluatePolicy(policy, error: &error)
    presenter.say("biometry: \(context.biometryType == .touchID ? "touchID" : "none")")
    presenter.say(can ? "result: success" : "result: \(name(error.flatMap { LAError(_nsError: $0) }))")
    exit(can ? 0 : 1)
}

signal(SIGUSR1, SIG_IGN)
signal(SIGUSR2, SIG_IGN)
signal(SIGWINCH, SIG_IGN)
let signalQueue = DispatchQueue(label: "signals")
let sources = [SIGUSR1, SIGUSR2, SIGWINCH].map { number -> DispatchSourceSignal in
    let source = DispatchSource.makeSignalSource(signal: number, queue: signalQueue)
    source.setEventHandler {
        switch number {
        case SIGUSR1: context.invalidate()
        case SIGUSR2: presenter.press(false)
        default: presenter.press(true)
        }
    }
    source.resume()
    return source
}
presenter.say("ready")
let done = DispatchSemaphore(value: 0)
nonisolated(unsafe) var succeeded = false
context.evaluatePolicy(policy, localizedReason: reason) { success, error in
    succeeded = success
    if success {
        let state = context.evaluatedPolicyDomainState.map { $0.map { String(format: "%02x", $0) }.joined() } ?? "none"
        presenter.say("domain: \(state)")
    }
    presenter.say(success ? "result: success" : "result: \(name(error))")
    done.signal()
}
done.wait()
_ = sources
exit(succeeded ? 0 : 1)
