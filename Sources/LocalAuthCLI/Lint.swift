// `localauth config --check`: the configuration file, and the PAM stacks
// against the stack-line rules of docs/DESIGN.md (see StackLint).
import LocalAuth
import StackLint

func configCommand(_ arguments: Arguments) throws -> ExitCode {
    guard arguments.flags.contains("--check") else { throw CLIError("config needs --check\n" + helpText("config"), .usage) }
    var errors = 0
    var warnings = 0
    func report(_ severity: String, _ message: String) {
        print("\(severity): \(message)")
        if severity == "error" { errors += 1 } else { warnings += 1 }
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

    // The PAM stacks.
    let directory = utf8Bytes(arguments.values["--pam-dir"] ?? "/etc/pam.d")
    guard let entries = Syscalls.directoryEntries(at: nil, directory, limit: 1024) else {
        throw CLIError("cannot read \(printableText(directory))")
    }
    // libpam reads an include that names an absolute path as it is, a
    // name in /etc/pam.d or else in /usr/lib/pam.d, through symbolic links.
    let vendorDirectory: [UInt8]? = arguments.values["--pam-dir"] == nil ? utf8Bytes("/usr/lib/pam.d") : nil
    let lint = StackLint { name in
        if name.hasPrefix("/") { return Syscalls.readRegularFile(at: nil, utf8Bytes(name), limit: 1 << 20, followLinks: true) }
        return Syscalls.readRegularFile(at: nil, directory + [0x2F] + utf8Bytes(name), limit: 1 << 20, followLinks: true)
            ?? vendorDirectory.flatMap { Syscalls.readRegularFile(at: nil, $0 + [0x2F] + utf8Bytes(name), limit: 1 << 20, followLinks: true) }
    }
    var passcodeServices = [printableText(options.passcodeService)]
    for entry in entries where !entry.isDirectory {
        for named in lint.passcodeServicesNamed(printableText(entry.name)) where !passcodeServices.contains(named) {
            passcodeServices.append(named)
        }
    }
    for entry in entries where !entry.isDirectory {
        let name = printableText(entry.name)
        if passcodeServices.contains(name) {
            for finding in lint.passcodeServiceFindings(name) { report(finding.severity, finding.text) }
        } else {
            for finding in lint.serviceFindings(name) { report(finding.severity, finding.text) }
        }
    }
    for service in passcodeServices where !entries.contains(where: { printableText($0.name) == service }) {
        let severity = service == printableText(options.passcodeService) ? "warning" : "error"
        report(severity, "\(printableText(directory))/\(service) is missing: the passcode fallback cannot run")
    }
    print("\(errors) error(s), \(warnings) warning(s)")
    return errors == 0 ? .success : .failure
}

