// Fuzz target: conversation replies. The input scripts one or more prompts
// of the engine over the unit tests' fakes: what the person answers at each
// question (any bytes, empty, a failed conversation, the fallback button)
// and how each fingerprint attempt ends. Whatever the script, a prompt
// succeeds only by a match or by exactly the right passcode, a refused or
// oversized answer never reaches the verifier as the passcode, and what is
// owed on the record never goes down without a success, and the reader is
// released at the end of every prompt.
import LocalAuth

private let attemptEnds: [AttemptEnd] = [
    .match, .noMatch, .timeout, .interrupted, .disconnected, .deviceError, .vanished,
    .stoppedAfterPossibleScan(.interrupted), .stoppedAfterPossibleScan(.timeout, unproven: .fingerPresent),
]

/// Reads the input as: one header byte (policy, mode, silence, the first
/// prompt of a boot), a byte each for the stored fingerprint and passcode
/// failures, then steps separated by 0xFF. A step whose first byte is below
/// 0x40 ends a fingerprint attempt; 0xFE starts another prompt; any other
/// step is an answer (its first byte chooses the kind, the rest are the
/// bytes typed; a step of 0xFD followed by a length repeats its next byte
/// to that many times 16, to reach past the passcode's capacity).
func fuzzOne(_ bytes: [UInt8]) {
    guard bytes.count >= 3 else { return }
    let header = bytes[0]
    var options = Options()
    options.passcodeAfterBoot = header & 8 != 0
    let policy: EvaluationPolicy = header & 1 == 0 ? .owner : .biometrics
    let mode: InteractionMode = header & 2 == 0 ? .terminal : .prompt
    let silent = header & 4 != 0
    let world = World(options: options, store: FakeStore(storedRecord(f: Int(bytes[1] % 8), p: Int(bytes[2] % 12))))

    var prompts: [(answers: [Answer], steps: [SensorStep])] = [([], [])]
    var start = 3
    while start < bytes.count {
        var end = start
        while end < bytes.count && bytes[end] != 0xFF { end += 1 }
        let step = Array(bytes[start..<end])
        start = end + 1
        guard let tag = step.first else { continue }
        let rest = Array(step.dropFirst())
        if tag < 0x40 {
            prompts[prompts.count - 1].steps.append(SensorStep(attemptEnds[Int(tag) % attemptEnds.count],
                                                                hints: rest.count > 0 && rest[0] & 1 == 1 ? [.retryScan] : []))
        } else if tag == 0xFE {
            if prompts.count < 8 { prompts.append(([], [])) }
        } else if tag == 0xFD {
            let filled = rest.count >= 2 ? [UInt8](repeating: rest[1], count: Int(rest[0]) * 16) : []
            prompts[prompts.count - 1].answers.append(.bytes(filled))
        } else {
            let answer: Answer
            switch tag % 4 {
            case 0: answer = .bytes(rest)
            case 1: answer = .empty
            case 2: answer = .failed
            default: answer = .fallback
            }
            prompts[prompts.count - 1].answers.append(answer)
        }
    }

    for prompt in prompts {
        let before = world.store.fingerprintFailures + world.store.passcodeFailures
        let verifiedBefore = world.verifier.sawCorrect.count
        let result = world.prompt(policy: policy, mode: mode, silent: silent, answers: prompt.answers, script: prompt.steps)
        let played = prompt.steps.prefix(prompt.steps.count - world.sensor.script.count)
        fuzzCheck(!world.sensor.isOpen, "the reader was left claimed")
        fuzzCheck(!world.sensor.verifiedWhileClosed, "a scan was asked of an unclaimed reader")
        let passcodeRight = world.verifier.sawCorrect.dropFirst(verifiedBefore).contains(true)
        let matched = played.contains { $0.end == .match }
        switch result.outcome {
        case .success(.biometry):
            fuzzCheck(matched, "a fingerprint success without a match")
        case .success(.passcode):
            fuzzCheck(passcodeRight, "a passcode success without the right passcode")
        default:
            let after = world.store.fingerprintFailures + world.store.passcodeFailures
            fuzzCheck(after >= before, "a prompt that did not succeed lowered what is owed (\(before) -> \(after))")
        }
        // What is left of this prompt's script must not spill into the next.
        world.sensor.script.removeAll()
        world.prompter.answers.removeAll()
    }
}
