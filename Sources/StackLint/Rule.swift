// One `auth` entry of an expanded stack, as libpam's dispatcher holds it:
// a module line, the mark where a substack begins, or a line libpam
// installs only to fail.
import LocalAuth

struct Rule {
    enum Kind: Equatable {
        /// A module line.
        case module
        /// Where a `substack` begins; its lines follow one level deeper.
        /// libpam skips the mark when it runs the stack and counts the
        /// whole substack as one line when a jump passes over it.
        case substack
        /// A line libpam cannot use (an include it cannot read, a line
        /// with no module or an unknown type): it answers perm_denied.
        case mustFail
    }

    let file: String
    let line: Int
    let kind: Kind
    /// How many substacks deep the line is (0: the service's own stack).
    /// A file's line is read once into a rule at level 0; each include of
    /// the file places a copy at its own level.
    var level: Int
    let control: Control
    let module: String
    let arguments: [String]
    /// For a pam_localauth.so line: the options the module runs with there
    /// (the configuration file it reads, then the arguments, later ones
    /// winning), so the lint judges what the module does, however spelled.
    let options: Options?
    /// Worked out once: the checks ask them of every rule many times.
    let moduleName: String
    /// pam_localauth.so (under any name `namesTheModule` takes for it).
    let isLocalAuth: Bool
    /// A pam_localauth.so line with more arguments than the module reads:
    /// the module refuses it.
    let isRefusedByTheModule: Bool
    /// The answers this line's module can give, by libpam number.
    let answers: [Int]
    /// Whether this module's success is a credential: a password, a
    /// finger or a key was checked.
    let successIsCredential: Bool

    init(file: String, line: Int, kind: Kind = .module, level: Int, control: Control, module: String = "", arguments: [String] = [],
         options moduleOptions: ([String]) -> Options = StackLint.optionsFromArguments) {
        self.file = file
        self.line = line
        self.kind = kind
        self.level = level
        self.control = control
        self.module = module
        self.arguments = arguments
        let name = String(module.split(separator: "/").last ?? Substring(module))
        moduleName = name
        let localAuth = kind == .module && Rule.namesTheModule(name)
        let refused = localAuth && arguments.count > OptionParser.maxArguments
        isLocalAuth = localAuth
        isRefusedByTheModule = refused
        options = localAuth && !refused ? moduleOptions(arguments) : nil
        let authsucc = options?.authsucc ?? false
        switch kind {
        case .substack: answers = []
        case .mustFail: answers = [Control.permissionDenied]
        case .module:
            if refused {
                // The module refuses a line with more arguments than it reads.
                answers = [Control.answerNames.firstIndex(of: PAMCode.systemError.libpamName)!]
            } else if authsucc {
                answers = [Control.answerNames.firstIndex(of: StackLint.stepAside)!]
            } else if localAuth {
                // What the module answers, and module_unknown: what libpam
                // answers for it when it cannot be loaded (a caller can
                // make dlopen fail with a low address-space limit).
                answers = [Control.success] + StackLint.lineFailures.compactMap { Control.answerNames.firstIndex(of: $0.code) }
            } else if name == "pam_deny.so" {
                // Or module_unknown, when libpam cannot load it (a caller
                // can make loading fail with a low address-space limit).
                answers = [Control.authError, Control.moduleUnknown]
            } else if name == "pam_permit.so" {
                answers = [Control.success, Control.moduleUnknown]
            } else if StackLint.passwordModules.contains(name)
                        && !arguments.contains(where: { $0.hasPrefix("ignore_") || $0.hasPrefix("minimum_uid") }) {
                // Password modules answer PAM_IGNORE only when told to
                // (pam_sss's ignore_unknown_user, ignore_authinfo_unavail;
                // pam_krb5's minimum_uid).
                answers = Array(0..<Control.incomplete).filter { $0 != Control.ignoreAnswer }
            } else {
                // Any answer; PAM_INCOMPLETE only pauses the stack.
                answers = Array(0..<Control.incomplete)
            }
        }
        successIsCredential = kind == .module
            && ((localAuth && !authsucc && !refused) || StackLint.passwordModules.contains(name) || StackLint.otherCredentialModules.contains(name))
    }

    /// pam_localauth.so, or a copy or link named after it (pam_localauth-2.so,
    /// pam_localauth, localauth.so): the lint knows the module by its name, so
    /// any module file whose name has "localauth" in it is judged as the
    /// module. (A copy under an unrelated name is not recognised.)
    static func namesTheModule(_ name: String) -> Bool {
        name.lowercased().contains("localauth")
    }
    var isAuthsucc: Bool { options?.authsucc ?? false }
    /// Whether the module runs policy biometrics on this line.
    var isBiometrics: Bool { options?.policy == .biometrics }
    var location: String { "\(file):\(line)" }

    /// libpam's word for what this line does with the answer `code`.
    func action(for code: String) -> String { control.action(named: code).word }

    var failureDies: Bool { control.action(Control.authError) == .die }
}
