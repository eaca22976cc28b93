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
    static let success = 0, permissionDenied = 6, authError = 7, newAuthtokRequired = 12, ignoreAnswer = 25, moduleUnknown = 28,
               incomplete = 31

    /// The answers libpam's keyword controls treat as a success.
    static func isSuccess(_ answer: Int) -> Bool { answer == success || answer == newAuthtokRequired }

    let actions: [Action]
    /// Why libpam rejected a `[...]` control; it then treats every answer,
    /// success included, as `bad`.
    let problem: String?

    func action(_ answer: Int) -> Action { actions[answer] }

    func action(named name: String) -> Action {
        Control.answerNames.firstIndex(of: name).map { actions[$0] } ?? .bad
    }

    /// The control as libpam's field reader gives it (brackets already
    /// taken off): a keyword in any case, else what its parser reads (nil
    /// for include and substack, which are not controls).
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
            self.init(parsing: Array(field.utf8))
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
            var action: Action?
            if let (word, named) = Action.words.first(where: { starts($0.0, at: index) }) {
                action = named
                index += word.utf8.count
            } else {
                // libpam adds the digits up in a C int, which wraps:
                // 4294967299 is a jump of 3, and a sum that wraps below 0
                // lands on ok, done, bad, die or reset (-1 to -5), on
                // "not set" (-6), or on a jump libpam cannot take (a failure).
                var count: Int32 = 0
                let from = index
                while index < text.count, (0x30...0x39).contains(text[index]) {
                    count = count &* 10 &+ Int32(text[index] - 0x30)
                    index += 1
                }
                guard index > from else { problem = "expecting an action or a number"; break parse }
                guard count != 0 else { problem = "a jump of 0"; break parse }
                let wrapped: [Int32: Action] = [-1: .ok, -2: .done, -3: .bad, -4: .die, -5: .reset]
                if count > 0 {
                    action = .jump(Int(count))
                } else if let named = wrapped[count] {
                    action = named
                } else if count == -6 {
                    action = nil   // libpam's "not set": a default fills it
                } else {
                    action = .bad
                }
            }
            if answer == Control.answerNames.count {
                if let action { for slot in actions.indices where actions[slot] == nil { actions[slot] = action } }
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
