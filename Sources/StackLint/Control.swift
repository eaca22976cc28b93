// A stack line's control field, read as libpam 1.5 reads it: what the line
// does with each of the 32 answers a module can give.

/// What a line does with one answer.
enum Action: Equatable {
    case ignore, ok, done, bad, die, reset
    case jump(Int)

    /// libpam's word for it, as an administrator writes it.
    var word: String {
        switch self {
        case .ignore: return "ignore"
        case .ok: return "ok"
        case .done: return "done"
        case .bad: return "bad"
        case .die: return "die"
        case .reset: return "reset"
        case .jump(let count): return String(count)
        }
    }

    /// libpam's action words, in the order it tries them (it takes the
    /// first that the text starts with).
    static let words: [(String, Action)] = [("ignore", .ignore), ("ok", .ok), ("done", .done), ("bad", .bad), ("die", .die), ("reset", .reset)]
}

/// The control of one line: an action for every answer.
struct Control: Equatable {
    /// libpam's names of the answers, by their number (PAM_SUCCESS is 0).
    static let answerNames = [
        "success", "open_err", "symbol_err", "service_err", "system_err", "buf_err", "perm_denied", "auth_err",
        "cred_insufficient", "authinfo_unavail", "user_unknown", "maxtries", "new_authtok_reqd", "acct_expired",
        "session_err", "cred_unavail", "cred_expired", "cred_err", "no_module_data", "conv_err", "authtok_err",
        "authtok_recover_err", "authtok_lock_busy", "authtok_disable_aging", "try_again", "ignore", "abort",
        "authtok_expired", "module_unknown", "bad_item", "conv_again", "incomplete",
    ]
    static let success = 0, permissionDenied = 6, authError = 7, newAuthtokRequired = 12, ignoreAnswer = 25, incomplete = 31

    let actions: [Action]
    /// Why libpam rejected a `[...]` control; it then treats every answer,
    /// success included, as `bad`.
    let problem: String?

    func action(_ answer: Int) -> Action { actions[answer] }

    func action(named name: String) -> Action {
        Control.answerNames.firstIndex(of: name).map { actions[$0] } ?? .bad
    }

    /// The control as written in the second field (nil for include and
    /// substack, which are not controls).
    init?(_ field: String) {
        let lowered = field.lowercased()
        switch lowered {
        case "include", "substack":
            return nil
        case "required", "requisite", "optional", "sufficient":
            var actions = [Action?](repeating: nil, count: Control.answerNames.count)
            let succeeded: Action = lowered == "sufficient" ? .done : .ok
            actions[Control.success] = succeeded
            actions[Control.newAuthtokRequired] = succeeded
            if lowered == "required" || lowered == "requisite" { actions[Control.ignoreAnswer] = .ignore }
            let otherwise: Action = lowered == "required" ? .bad : lowered == "requisite" ? .die : .ignore
            self.init(actions: actions.map { $0 ?? otherwise }, problem: nil)
        default:
            // libpam reads any other word as it reads the inside of a [...].
            let bytes = Array(field.utf8)
            let bracketed = bytes.count >= 2 && bytes.first == 0x5B && bytes.last == 0x5D
            self.init(parsing: bracketed ? Array(bytes.dropFirst().dropLast()) : bytes)
        }
    }

    private init(actions: [Action], problem: String?) {
        self.actions = actions
        self.problem = problem
    }

    /// The inside of a `[...]`, read as libpam's parser does: each answer
    /// name (case as written; the first name the text starts with), spaces
    /// allowed around `=`, an action word or a positive count; a later
    /// setting of an answer wins, `default` fills only the answers not set
    /// yet, and anything it cannot read makes every answer `bad`.
    init(parsing text: [UInt8]) {
        var actions = [Action?](repeating: nil, count: Control.answerNames.count)
        func isSpace(_ byte: UInt8) -> Bool { byte == 0x20 || (0x09...0x0D).contains(byte) }
        func starts(_ word: String, at index: Int) -> Bool {
            let bytes = Array(word.utf8)
            return index + bytes.count <= text.count && Array(text[index..<(index + bytes.count)]) == bytes
        }
        var index = 0
        var problem: String? = nil
        parse: while index < text.count {
            while index < text.count && isSpace(text[index]) { index += 1 }
            if index >= text.count { break }
            let names = Control.answerNames + ["default"]
            guard let answer = names.firstIndex(where: { starts($0, at: index) }) else { problem = "expecting an answer name"; break parse }
            index += names[answer].utf8.count
            while index < text.count && isSpace(text[index]) { index += 1 }
            guard index < text.count, text[index] == 0x3D else { problem = "expecting '='"; break parse }
            index += 1
            while index < text.count && isSpace(text[index]) { index += 1 }
            guard index < text.count else { problem = "expecting an action"; break parse }
            var action: Action
            if let (word, named) = Action.words.first(where: { starts($0.0, at: index) }) {
                action = named
                index += word.utf8.count
            } else {
                var count = 0
                let from = index
                while index < text.count, (0x30...0x39).contains(text[index]) {
                    count = min(count * 10 + Int(text[index] - 0x30), 1 << 20)
                    index += 1
                }
                guard index > from else { problem = "expecting an action or a number"; break parse }
                guard count > 0 else { problem = "a jump of 0"; break parse }
                action = .jump(count)
            }
            if answer == Control.answerNames.count {
                for slot in actions.indices where actions[slot] == nil { actions[slot] = action }
            } else {
                actions[answer] = action
            }
        }
        self.init(actions: problem != nil ? [Action](repeating: .bad, count: Control.answerNames.count) : actions.map { $0 ?? .bad },
                  problem: problem)
    }

    /// A line libpam installs to fail (an unreadable include, a line with no
    /// module): every answer `bad`.
    static let mustFail = Control(parsing: Array("default=bad".utf8))
}
