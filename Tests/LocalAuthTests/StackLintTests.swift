// The PAM stack lint with an injected reader: each stack that would weaken
// the policy is a row with the finding it must produce, and the shipped
// stacks produce none.
import XCTest
@testable import StackLint

final class StackLintTests: XCTestCase {
    /// A lint over in-memory service files.
    func lint(_ files: [String: String]) -> StackLint {
        StackLint { name in files[name].map { Array($0.utf8) } }
    }

    func errors(_ findings: [Finding]) -> [String] {
        findings.filter { $0.severity == "error" }.map(\.text)
    }

    let owner = "auth [success=2 ignore=ignore authinfo_unavail=ignore default=die] pam_localauth.so"
    let passwordLines = "auth [success=1 default=ignore] pam_unix.so\nauth requisite pam_deny.so\nauth required pam_permit.so\n"

    func testTheShippedStacksAreClean() {
        let files = ["sudo": owner + "\n" + passwordLines,
                     "sudo-biometrics": """
                     auth [success=3 conv_err=die default=ignore] pam_localauth.so policy=biometrics
                     auth [success=1 default=die] pam_unix.so
                     auth requisite pam_deny.so
                     auth optional pam_localauth.so authsucc
                     auth required pam_permit.so
                     """,
                     "localauth-passcode": "auth required pam_unix.so\n"]
        let lint = lint(files)
        XCTAssertEqual(lint.serviceFindings("sudo"), [])
        XCTAssertEqual(lint.serviceFindings("sudo-biometrics"), [])
        XCTAssertEqual(lint.passcodeServiceFindings("localauth-passcode"), [])
    }

    /// Found by fuzzing: files that include each other many times over
    /// expanded without end (ten includes per file, eight levels deep: 10^8
    /// rules). Cycles are not followed, and the reads and rules are capped,
    /// so the lint answers at once; a stack that includes itself is read
    /// once and still judged.
    func testIncludesThatRepeatOrLoopAreBounded() {
        var files: [String: String] = [:]
        let names = (0..<10).map { "f\($0)" }
        for name in names {
            files[name] = names.map { "auth include \($0)" }.joined(separator: "\n") + "\nauth required pam_permit.so\n"
        }
        files["sudo"] = "auth substack sudo\n@include sudo\n" + names.map { "auth include \($0)" }.joined(separator: "\n") + "\n"
        final class Reads { var count = 0 }
        let reads = Reads()
        let counting = StackLint { name in
            reads.count += 1
            return files[name].map { Array($0.utf8) }
        }
        XCTAssertEqual(counting.serviceFindings("sudo"), [], "no localauth line: nothing to report")
        XCTAssertLessThanOrEqual(reads.count, 256, "bounded, not 10^8 expansions")
        let looping = ["sudo": "auth include sudo\n" + owner + "\nauth optional pam_permit.so\n"]
        XCTAssertEqual(errors(lint(looping).serviceFindings("sudo")).count, 1, "still judged: nothing mandatory after the module")
    }

    /// The most rules a service can expand to, every one a module line or
    /// an authsucc line: each check is a pass over the rules, not one per
    /// pair of rules (a fuzzer's input took 38 s; 4096 rules checked
    /// pairwise against every control are hundreds of millions of steps).
    func testTheLargestStackIsCheckedInOnePassPerRule() {
        let block = (0..<32).map { _ in
            "auth [success=1 default=ignore] pam_localauth.so\nauth requisite pam_deny.so\nauth required pam_localauth.so authsucc"
        }.joined(separator: "\n")
        var files = ["sudo": (0..<48).map { "@include part\($0)" }.joined(separator: "\n")]
        for index in 0..<48 { files["part\(index)"] = block }
        let findings = lint(files).serviceFindings("sudo")
        XCTAssertEqual(lint(files).authRules("sudo").count, 4096)
        XCTAssertFalse(findings.isEmpty)
        XCTAssertTrue(findings.allSatisfy { $0.severity == "error" || $0.severity == "warning" })
    }

    /// libpam takes only positive jumps; a negative one is no way back up
    /// the stack (and once indexed the rules before the first one).
    func testNegativeJumpsAreNotFollowed() {
        let files = ["sudo": "auth [success=-3 default=-2] pam_localauth.so\nauth requisite pam_deny.so\n"
                     + "auth [success=-1 default=ignore] pam_unix.so\nauth required pam_localauth.so authsucc\n"]
        let findings = errors(lint(files).serviceFindings("sudo"))
        XCTAssertTrue(findings.contains { $0.contains("auth_err must end the stack") }, "\(findings)")
    }

    func testStacksThatWeakenThePolicy() {
        let rows: [(String, String, String)] = [
            ("done on the module line", "auth sufficient pam_localauth.so\n" + passwordLines, "'done' on the pam_localauth.so line"),
            ("only optional modules past the module",
             "auth [success=1 ignore=ignore authinfo_unavail=ignore default=die] pam_localauth.so\nauth optional pam_permit.so\n",
             "goes on to only optional modules"),
            ("owner without default=die",
             "auth [success=2 default=ignore] pam_localauth.so\n" + passwordLines, "must end the stack (default=die)"),
            ("success onto pam_deny",
             "auth [success=1 ignore=ignore authinfo_unavail=ignore default=die] pam_localauth.so\nauth required pam_unix.so\nauth requisite pam_deny.so\n",
             "success jumps onto pam_deny.so"),
            ("biometrics without authsucc",
             "auth [success=2 conv_err=die default=ignore] pam_localauth.so policy=biometrics\nauth [success=1 default=die] pam_unix.so\nauth requisite pam_deny.so\nauth required pam_permit.so\n",
             "needs a later 'pam_localauth.so authsucc' line"),
            ("gdm-fingerprint with the module optional",
             "auth requisite pam_nologin.so\nauth required pam_succeed_if.so user != root quiet_success\n"
             + "auth optional pam_localauth.so policy=biometrics\n",
             "it would succeed on the lines before it with no match and no password"),
            ("authsucc under required",
             "auth [success=3 conv_err=die default=ignore] pam_localauth.so policy=biometrics\nauth [success=1 default=die] pam_unix.so\n"
             + "auth requisite pam_deny.so\nauth required pam_localauth.so authsucc\nauth required pam_permit.so\n",
             "the authsucc line only records and always answers authinfo_unavail"),
            ("authsucc reachable without the password",
             "auth [success=3 conv_err=die default=ignore] pam_localauth.so policy=biometrics\nauth [success=2 default=ignore] pam_unix.so\nauth optional pam_permit.so\nauth optional pam_localauth.so authsucc\nauth required pam_permit.so\n",
             "the authsucc line must follow 'auth requisite pam_deny.so'"),
        ]
        for (name, stack, expected) in rows {
            let found = errors(lint(["svc": stack]).serviceFindings("svc"))
            XCTAssertTrue(found.contains { $0.contains(expected) }, "\(name): \(found)")
        }
    }

    /// What the lint tells an administrator comes from the result table:
    /// every code the module answers without granting, the step-aside first.
    func testTheModulesFailuresComeFromTheResultTable() {
        XCTAssertEqual(StackLint.moduleFailures.map(\.code), ["authinfo_unavail", "system_err", "auth_err", "conv_err"])
        XCTAssertEqual(StackLint.stepAside, "authinfo_unavail")
        XCTAssertFalse(StackLint.moduleFailures.contains { $0.code == "ignore" || $0.code == "success" })
    }

    /// A line that fails the stack on the step-aside is safe, and the lint
    /// says what it costs; one that maps it to ignore before a password
    /// module says nothing.
    func testTheStepAsideOnARequiredLineIsExplained() {
        let required = lint(["gdm-fingerprint": "auth requisite pam_nologin.so\nauth required pam_localauth.so\n"])
            .serviceFindings("gdm-fingerprint")
        XCTAssertTrue(required.contains { $0.severity == "warning" && $0.text.contains("which this line turns into 'bad': nobody gets in") },
                      "\(required)")
        XCTAssertFalse(required.contains { $0.text.contains("only optional modules") }, "\(required)")
        XCTAssertFalse(lint(["sudo": owner + "\n" + passwordLines]).serviceFindings("sudo").contains { $0.text.contains("steps aside") })
    }

    func testLockersThatRunAsTheUser() {
        let clean = lint(["i3lock": owner + "\n" + passwordLines,
                          "xscreensaver": owner + " instruction_in_prompt\n" + passwordLines])
        XCTAssertEqual(clean.serviceFindings("i3lock"), [])
        XCTAssertEqual(clean.serviceFindings("xscreensaver"), [])
        let biometrics = lint(["swaylock": """
                               auth [success=3 conv_err=die default=ignore] pam_localauth.so policy=biometrics
                               auth [success=1 default=die] pam_unix.so
                               auth requisite pam_deny.so
                               auth optional pam_localauth.so authsucc
                               auth required pam_permit.so
                               """])
        XCTAssertTrue(errors(biometrics.serviceFindings("swaylock")).contains { $0.contains("use policy owner") })
        let ignored = lint(["i3lock": owner + " state_dir=/tmp/x lockout=20 reason=Unlock\n" + passwordLines])
        let warnings = ignored.serviceFindings("i3lock").map(\.text)
        XCTAssertEqual(warnings.count, 2, "\(warnings)")
        XCTAssertTrue(warnings.allSatisfy { $0.contains("set it in /etc/security/localauth.conf") })
        let held = lint(["xscreensaver": owner + " instruction_in_prompt=no\n" + passwordLines])
        XCTAssertTrue(held.serviceFindings("xscreensaver").contains { $0.text.contains("without instruction_in_prompt") })
        XCTAssertEqual(lint(["xscreensaver": owner + "\n" + passwordLines]).serviceFindings("xscreensaver"), [],
                       "on by default for xscreensaver")
        // The same lines in sudo's file are fine: sudo runs the module as root.
        XCTAssertEqual(lint(["sudo": owner + " state_dir=/var/lib/x\n" + passwordLines]).serviceFindings("sudo"), [])
    }

    func testIncludesAreFollowed() {
        let lint = lint(["svc": "@include common-auth\n", "common-auth": "auth sufficient pam_localauth.so\n" + passwordLines])
        XCTAssertTrue(errors(lint.serviceFindings("svc")).contains { $0.hasPrefix("common-auth:1:") })
    }

    func testPasscodeServicesThatCouldStandInForThePassword() {
        let rows: [(String, String)] = [
            ("@include common-auth\n", "must be an explicit list"),
            ("auth sufficient pam_fprintd.so\nauth required pam_unix.so\n", "pam_fprintd.so must not be in the passcode service"),
            ("auth sufficient pam_rootok.so\nauth required pam_unix.so\n", "pam_rootok.so must not be"),
            ("auth [success=done default=ignore] pam_unix.so\n", "no jumps, 'sufficient' or 'done'"),
            ("auth optional pam_unix.so\n", "must be required or requisite here"),
            ("auth required pam_env.so\n", "no password module"),
        ]
        for (stack, expected) in rows {
            let found = errors(lint(["localauth-passcode": stack]).passcodeServiceFindings("localauth-passcode"))
            XCTAssertTrue(found.contains { $0.contains(expected) }, "\(stack): \(found)")
        }
        XCTAssertEqual(errors(lint([:]).passcodeServiceFindings("localauth-passcode")), ["localauth-passcode: missing or unreadable"])
    }

    func testNamedPasscodeServicesAreFound() {
        let lint = lint(["svc": "auth [success=2 ignore=ignore authinfo_unavail=ignore default=die] pam_localauth.so passcode_service=vault\n"])
        XCTAssertEqual(lint.passcodeServicesNamed("svc"), ["vault"])
    }
}
