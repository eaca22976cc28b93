// Fuzz target: the configuration file and the module's arguments. The
// input is a configuration file, then after the first NUL byte the stack
// line's arguments, one per further NUL. Whatever the input, the options
// that come out stay within their documented bounds.
import LocalAuth

func fuzzOne(_ bytes: [UInt8]) {
    let split = bytes.firstIndex(of: 0) ?? bytes.endIndex
    var parser = OptionParser()
    parser.applyConfigFile(Array(bytes[bytes.startIndex..<split]))
    let rest = split < bytes.endIndex ? Array(bytes[(split + 1)...]) : []
    parser.applyArguments(rest.split(separator: 0, omittingEmptySubsequences: false).map { Array($0) })
    parser.finish()
    let options = parser.options
    fuzzCheck((1...20).contains(options.lockout), "lockout \(options.lockout)")
    fuzzCheck(options.maxTries >= 1 && options.maxTries <= options.lockout, "max_tries \(options.maxTries)")
    fuzzCheck((1...86_400).contains(options.maxBackoffSeconds), "max_backoff \(options.maxBackoffSeconds)")
    fuzzCheck(options.timeoutSeconds >= 1, "timeout \(options.timeoutSeconds)")
    fuzzCheck(options.stateDir.first == 0x2F, "state_dir not absolute")
    fuzzCheck(!options.passcodeService.isEmpty, "empty passcode service")
    for line in parser.diagnostics { fuzzCheck(!line.isEmpty, "empty diagnostic") }
}
