// la-app-probe's rights: Apple's LARightStore and LARight through the real
// helper, the conversation shown by the same scripted presenter.
//   la-app-probe --right save NAME --secret TEXT [--access REQUIREMENT] [--answer A]...
//   la-app-probe --right load NAME [--reason TEXT] [--answer A]...   (prints "secret: TEXT")
//   la-app-probe --right remove NAME | --right remove-all | --right check NAME
// REQUIREMENT: default, biometry, biometry-current-set, biometry-then-password.
import Foundation
import LocalAuthentication

func requirement(named name: String) -> LAAuthenticationRequirement? {
    switch name {
    case "default": return .default
    case "biometry": return .biometry
    case "biometry-current-set": return .biometryCurrentSet
    case "biometry-then-password": return .biometry(fallback: .devicePasscode)
    default: return nil
    }
}

/// Runs one rights verb; the last line is "result: success" or "result: <name> <code>".
func runRight(_ verb: String, name identifier: String, secret: String?, access: String, reason: String, presenter: ScriptedPresenter) async -> Bool {
    let store = LARightStore.shared
    store.presenter = presenter
    do {
        switch verb {
        case "save":
            guard let requirement = requirement(named: access) else { throw LAError(.invalidContext) }
            let right = LARight(requirement: requirement)
            right.presenter = presenter
            _ = try await store.saveRight(right, identifier: identifier, secret: Data((secret ?? "").utf8))
        case "load":
            let right = try await store.right(forIdentifier: identifier)
            right.presenter = presenter
            try await right.authorize(localizedReason: reason)
            presenter.say("state: \(right.state == .authorized ? "authorized" : "other")")
            let data = try await right.secret.loadData()
            presenter.say("secret: \(String(decoding: data, as: UTF8.self))")
            await right.deauthorize()
            do {
                _ = try await right.secret.loadData()
                presenter.say("after deauthorize: readable")
            } catch {
                presenter.say("after deauthorize: \(name(error))")
            }
        case "check":
            let right = try await store.right(forIdentifier: identifier)
            try await right.checkCanAuthorize()
        case "remove": try await store.removeRight(forIdentifier: identifier)
        case "remove-all": try await store.removeAllRights()
        default: throw LAError(.invalidContext)
        }
        presenter.say("result: success")
        return true
    } catch {
        presenter.say("result: \(name(error))")
        return false
    }
}
