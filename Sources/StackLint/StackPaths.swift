// Where an expanded stack goes from each line, moved as libpam's dispatcher
// moves: `done` and `die` end the stack, or only the substack they are in;
// a jump counts a whole substack as one line and cannot leave its own
// substack (trying is a failure); a failure, once recorded, stays.
// From that, for every line: can a way on from here reach the end of the
// stack with no credential checked and no failure recorded? Such a way
// would let the lines before decide, and they may all have succeeded.

struct StackPaths {
    /// What one answer on one line leads to.
    enum Outcome: Equatable {
        /// A credential was checked and passed: this way is the owner's.
        case credential(next: Int)
        /// A failure is recorded (the stack will fail); it goes on at `next`.
        case failure(next: Int)
        /// Nothing recorded; it goes on at `next` (`rules.count`: the end).
        case goesOn(next: Int)
    }

    let rules: [Rule]
    /// For each line, where a decision (done, die) leads: past its substack.
    private let afterDecision: [Int]
    /// For each line: its substack (0: the service's own stack), and which
    /// line of that substack it is, a nested substack counted as one.
    private let frame: [Int]
    private let ordinal: [Int]
    /// For each substack, where each of its lines begins, and where it ends.
    private let frameStarts: [[Int]]
    private let frameEnds: [Int]
    /// Whether some line can `reset`, which forgets recorded failures.
    let canReset: Bool
    /// For each line (and the end), whether every way on from it records a
    /// failure or checks a credential before the stack ends.
    private(set) var closedFrom: [Bool]

    init(_ rules: [Rule]) {
        self.rules = rules
        let count = rules.count
        var frame = [Int](repeating: 0, count: count)
        var ordinal = [Int](repeating: 0, count: count)
        var frameStarts: [[Int]] = [[]]
        var frameEnds: [Int] = [count]
        var open: [Int] = [0]   // the substacks we are inside, innermost last
        for (index, rule) in rules.enumerated() {
            while open.count - 1 > rule.level {
                frameEnds[open.removeLast()] = index
            }
            let current = open.last!
            frame[index] = current
            ordinal[index] = frameStarts[current].count
            frameStarts[current].append(index)
            if rule.kind == .substack {
                frameStarts.append([])
                frameEnds.append(count)
                open.append(frameStarts.count - 1)
            }
        }
        self.frame = frame
        self.ordinal = ordinal
        self.frameStarts = frameStarts
        self.frameEnds = frameEnds
        afterDecision = (0..<count).map { frameEnds[frame[$0]] }
        canReset = rules.contains { rule in rule.answers.contains { rule.control.action($0) == .reset } }
        var closed = [Bool](repeating: false, count: count + 1)
        closedFrom = closed
        for index in stride(from: count - 1, through: 0, by: -1) {
            if rules[index].kind == .substack {
                closed[index] = closed[index + 1]
                continue
            }
            closed[index] = rules[index].answers.allSatisfy { answer in
                switch self.outcome(index, answer) {
                case .credential: return true
                case .failure(let next): return !canReset || closed[next]
                case .goesOn(let next): return closed[next]
                }
            }
        }
        closedFrom = closed
    }

    /// Where a jump of `count` lines from `index` lands, nil when it would
    /// leave the substack or the stack (libpam: a bad jump, a failure).
    /// A jump of N passes over the next N lines and runs the one after.
    func jumpLanding(from index: Int, _ count: Int) -> Int? {
        let starts = frameStarts[frame[index]]
        let target = ordinal[index] + min(count, starts.count) + 1
        if target < starts.count { return starts[target] }
        return target == starts.count ? frameEnds[frame[index]] : nil
    }

    /// What `answer` on the line at `index` leads to.
    func outcome(_ index: Int, _ answer: Int) -> Outcome {
        let rule = rules[index]
        let succeeded = Control.isSuccess(answer)
        switch rule.control.action(answer) {
        case .bad: return .failure(next: index + 1)
        case .die: return .failure(next: afterDecision[index])
        case .ok:
            if succeeded { return rule.successIsCredential ? .credential(next: index + 1) : .goesOn(next: index + 1) }
            return answer == Control.ignoreAnswer ? .goesOn(next: index + 1) : .failure(next: index + 1)
        case .done:
            if succeeded { return rule.successIsCredential ? .credential(next: afterDecision[index]) : .goesOn(next: afterDecision[index]) }
            return answer == Control.ignoreAnswer ? .goesOn(next: afterDecision[index]) : .failure(next: afterDecision[index])
        case .ignore, .reset: return .goesOn(next: index + 1)
        case .jump(let count):
            guard let landing = jumpLanding(from: index, count) else { return .failure(next: rules.count) }
            return succeeded && rule.successIsCredential ? .credential(next: landing) : .goesOn(next: landing)
        }
    }

    /// Whether `outcome` can end the stack with nothing recorded and no
    /// credential checked.
    func isOpen(_ outcome: Outcome) -> Bool {
        switch outcome {
        case .credential: return false
        case .failure(let next): return canReset && !closedFrom[next]
        case .goesOn(let next): return !closedFrom[next]
        }
    }

    /// The line an outcome goes on to (nil at the end of the stack).
    func next(_ outcome: Outcome) -> Int? {
        switch outcome {
        case .credential(let next), .failure(let next), .goesOn(let next): return next < rules.count ? next : nil
        }
    }
}
