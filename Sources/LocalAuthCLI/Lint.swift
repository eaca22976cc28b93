// `localauth config --check`: the configuration file, and the PAM stacks
// against the stack-line rules of docs/DESIGN.md (see StackLint).
import LocalAuth
import LibcSystem
import StackLint

/// The most service files the lint reads from one directory; a directory
/// with more is an error, never a silent partial check.
let maxServiceFiles = 4096

func configCommand(_ arguments: Arguments) throws -> ExitCode {
    guard arguments.flags.contains("--check") else { throw CLIError("config needs --check\n" + helpText("config"), .usage) }
    var findings = LintReport()
    func report(_ severity: String, _ message: String, service: String? = nil) {
        findings.add(severity, message, service: service)
    }

    // The configuration file.
    var path = utf8Bytes(arguments.positional.first ?? "\(Options.defaultConfigPath)")
    if path.first != 0x2F {
        // A relative FILE is the administrator's convenience: resolve it here.
        guard let directory = Syscalls.currentDirectory() else { throw CLIError("cannot resolve \(printableText(path))") }
        path = directory + [0x2F] + path
    }
    let configuration = Configuration.load(path: path)
    if let problem = configuration.fileProblem {
        report("error", "\(printableText(path)): \(problem); the module ignores it")
    } else if !configuration.fileRead {
        print("note: \(printableText(path)) does not exist; defaults apply")
    }
    for diagnostic in configuration.diagnostics { report("error", "\(printableText(path)): \(diagnostic)") }
    let options = configuration.options
    findings.servicesFirst = options.services.map { printableText($0) }

    // The PAM stacks.
    let directory = utf8Bytes(arguments.values["--pam-dir"] ?? "/etc/pam.d")
    guard let entries = Syscalls.directoryEntries(at: nil, directory, limit: maxServiceFiles + 1) else {
        throw CLIError("cannot read \(printableText(directory))")
    }
    if entries.count > maxServiceFiles {
        report("error", "\(printableText(directory)) has more than \(maxServiceFiles) entries: the lint cannot check them all")
    }
    // Debian's libpam reads an include that names an absolute path as it
    // is and any other name in /etc/pam.d only, through symbolic links; a
    // directory or a device reads as empty there.
    // A module line runs with the file its conf= names, or this one, and
    // then its arguments: the module's own loader says what that makes.
    var loadedOptions: [[[UInt8]]: Options] = [:]
    let lint = StackLint(file: { name in
        switch Syscalls.readFollowingLinks(name.hasPrefix("/") ? utf8Bytes(name) : directory + [0x2F] + utf8Bytes(name), limit: 16 << 20) {
        case .bytes(let bytes): return .bytes(bytes)
        case .notRegular: return .bytes([])
        case .missing: return .missing
        case .tooLarge, .cannotOpen: return .unjudgeable
        }
    }, options: { lineArguments in
        // Loaded once per argument list (keyed by bytes, as names are): a file
        // included by many services brings the same lines into each expansion.
        let bytes = lineArguments.map { utf8Bytes($0) }
        if let known = loadedOptions[bytes] { return known }
        let options = Configuration.load(path: OptionParser.configPath(in: bytes) ?? path, arguments: bytes).options
        loadedOptions[bytes] = options
        return options
    })
    // The services: the files of the directory, and with the default one
    // those of /usr/lib/pam.d that no file of the same name hides. Names are
    // compared as bytes (Swift compares strings by canonical equivalence;
    // libpam opens bytes), and a name that is not UTF-8 cannot be judged.
    func sameName(_ left: String, _ right: String) -> Bool { Array(left.utf8) == Array(right.utf8) }
    // Every entry counts, a directory too: libpam opens it, reads no line
    // and runs `other`, and it hides the vendor's file of the same name.
    func serviceNames(_ entries: [(name: [UInt8], isDirectory: Bool)], in place: [UInt8]) -> [String] {
        var names: [String] = []
        for entry in entries {
            guard let name = String(validating: entry.name, as: UTF8.self) else {
                report("error", "\(printableText(place))/\(printableText(entry.name)): a file name that is not UTF-8: the lint cannot check it")
                continue
            }
            names.append(name)
        }
        return names
    }
    var services = serviceNames(entries, in: directory)
    var vendorServices: [String] = []
    if arguments.values["--pam-dir"] == nil,
       let vendor = Syscalls.directoryEntries(at: nil, utf8Bytes("/usr/lib/pam.d"), limit: maxServiceFiles + 1) {
        if vendor.count > maxServiceFiles {
            report("error", "/usr/lib/pam.d has more than \(maxServiceFiles) entries: the lint cannot check them all")
        }
        for name in serviceNames(vendor, in: utf8Bytes("/usr/lib/pam.d")) where !services.contains(where: { sameName($0, name) }) {
            vendorServices.append(name)
            services.append("/usr/lib/pam.d/" + name)
        }
    }
    /// The file libpam reads for a service name: ours, the vendor's, or
    /// (when neither exists) `other`.
    func serviceFile(_ name: String) -> String? {
        if services.contains(where: { sameName($0, name) }) { return name }
        if vendorServices.contains(where: { sameName($0, name) }) { return "/usr/lib/pam.d/" + name }
        return nil
    }
    var passcodeServices: [String] = []
    func addPasscodeService(_ name: String) {
        if !passcodeServices.contains(where: { sameName($0, name) }) { passcodeServices.append(name) }
    }
    addPasscodeService(printableText(options.passcodeService))   // a service name: lowercase ASCII only
    for service in services {
        for named in lint.passcodeServicesNamed(service) { addPasscodeService(named) }
    }
    let passcodeFiles = passcodeServices.compactMap(serviceFile)
    // Where accounts come from: a directory's accounts need its module in
    // the passcode service.
    var accountSources: [String] = []
    if case .bytes(let text) = Syscalls.readFollowingLinks(utf8Bytes(arguments.values["--nsswitch"] ?? "/etc/nsswitch.conf"), limit: 1 << 20) {
        accountSources = StackLint.passwdSources(nsswitch: text)
    }
    for service in services {
        if passcodeFiles.contains(where: { sameName($0, service) }) {
            for finding in lint.passcodeServiceFindings(service) + lint.directoryAccountFindings(service, sources: accountSources) {
                report(finding.severity, finding.text, service: service)
            }
        } else {
            for finding in lint.serviceFindings(service) { report(finding.severity, finding.text, service: service) }
        }
    }
    for service in passcodeServices where serviceFile(service) == nil {
        // libpam runs `other` for a service it has no file for: the password
        // check would be whatever `other` says.
        report("error", "\(printableText(directory))/\(service) is missing: libpam would check the password with 'other' instead")
        if let other = serviceFile("other") {
            for finding in lint.passcodeServiceFindings(other) { report(finding.severity, "as the passcode service: " + finding.text) }
        }
    }
    for line in findings.lines { print(line) }
    print("\(findings.errors) error(s), \(findings.warnings) warning(s)")
    return findings.errors == 0 ? .success : .failure
}

/// The lint's findings, each said once: a line of a file that many services
/// include (common-auth) is one finding, naming the services that reach it,
/// not one per service.
struct LintReport {
    /// The services a finding names first, in this order (the module's
    /// `services`: the ones a person knows); the others follow by name.
    var servicesFirst: [String] = []
    private var order: [String] = []
    private var found: [String: (severity: String, services: [String])] = [:]

    /// How many services a finding names before "and N more".
    static let servicesNamed = 3

    mutating func add(_ severity: String, _ message: String, service: String?) {
        let key = severity + ": " + message
        if found[key] == nil {
            order.append(key)
            found[key] = (severity, [])
        }
        // A finding about the service's own file names it already.
        if let service, !message.hasPrefix(service + ":"), !(found[key]?.services.contains(service) ?? true) {
            found[key]?.services.append(service)
        }
    }

    var lines: [String] {
        order.map { key in
            let reached = found[key]?.services ?? []
            guard !reached.isEmpty else { return key }
            let services = servicesFirst.filter { reached.contains($0) } + reached.filter { !servicesFirst.contains($0) }.sorted()
            let named = services.prefix(LintReport.servicesNamed).joined(separator: ", ")
            let more = services.count > LintReport.servicesNamed ? " and \(services.count - LintReport.servicesNamed) more" : ""
            return key + " (reached from " + named + more + ")"
        }
    }

    var errors: Int { order.filter { found[$0]?.severity == "error" }.count }
    var warnings: Int { order.count - errors }
}

