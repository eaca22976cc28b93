// The PAM stack lint with an injected reader: each stack that would weaken
// the policy is a row with the finding it must produce, and the shipped
// stacks produce none.
import XCTest
@testable import StackLint
import LocalAuth

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
        let biometrics = """
                     auth [success=3 conv_err=die default=ignore] pam_localauth.so policy=biometrics
                     auth [success=1 default=die] pam_unix.so
                     auth requisite pam_deny.so
                     auth optional pam_localauth.so authsucc
                     auth required pam_permit.so
                     """
        let lint = lint(["sudo": owner + "\n" + passwordLines, "localauth-passcode": "auth required pam_unix.so\n"])
        XCTAssertEqual(lint.serviceFindings("sudo"), [])
        XCTAssertEqual(lint.passcodeServiceFindings("localauth-passcode"), [])
        // sudo-biometrics is an example for /etc/pam.d/sudo.
        XCTAssertEqual(self.lint(["sudo": biometrics]).serviceFindings("sudo"), [])
    }

    /// The desktop: another fingerprint module in a stack (gdm-fingerprint
    /// as gdm3 ships it) takes the finger outside the counts; a service that
    /// reaches the module but is not in services gets the password only.
    func testDesktopStacksSayWhereTheFingerOrTheCountsAreLost() {
        let gdmFingerprint = "auth requisite pam_nologin.so\nauth required pam_succeed_if.so user != root quiet_success\n"
            + "auth required pam_fprintd.so\nauth optional pam_gnome_keyring.so\n"
        let commonAuth = owner + "\n" + passwordLines
        let lint = lint(["gdm-fingerprint": gdmFingerprint, "common-auth": commonAuth, "cups": "@include common-auth\n",
                         "polkit-1": "@include common-auth\n", "other": "@include common-auth\n",
                         "sudo": "auth include common-auth\n",
                         "mate-screensaver": owner + " services=sudo,mate-screensaver\n" + passwordLines])
        XCTAssertEqual(lint.serviceFindings("gdm-fingerprint").map(\.text), [
            "gdm-fingerprint:3: pam_fprintd.so checks fingerprints outside localauth's counts: a finger gets in here while "
            + "localauth has the fingerprint locked, and misses here are not counted"])
        XCTAssertEqual(lint.serviceFindings("cups").map(\.text), [
            "cups: reaches pam_localauth.so (common-auth:1) but 'cups' is not in services: the module steps aside there, so it "
            + "asks for the password only and counts nothing (name it in services if a person at this computer uses it)"])
        // In services by default, by a line's own services=, or `other`
        // (which stands for every program without a file): nothing said.
        XCTAssertEqual(lint.serviceFindings("polkit-1"), [])
        XCTAssertEqual(lint.serviceFindings("sudo"), [])
        XCTAssertEqual(lint.serviceFindings("mate-screensaver"), [])
        XCTAssertEqual(lint.serviceFindings("other"), [])

        // localauth's gdm-fingerprint: a fingerprint-only conversation (no
        // password module, no authsucc, the step-aside fails the stack).
        let ours = "auth requisite pam_nologin.so\nauth required pam_succeed_if.so user != root quiet_success\n"
            + "auth required pam_localauth.so policy=biometrics mode=scan fallback_title=\nauth optional pam_gnome_keyring.so\n"
        XCTAssertEqual(self.lint(["gdm-fingerprint": ours]).serviceFindings("gdm-fingerprint"), [])
        // In prompt mode GDM would never answer; owner would need a password line.
        let prompting = ours.replacingOccurrences(of: " mode=scan", with: "")
        XCTAssertEqual(self.lint(["gdm-fingerprint": prompting]).serviceFindings("gdm-fingerprint").map(\.text), [
            "gdm-fingerprint:3: when the module steps aside (out of scope: another service, a remote login, another user; the "
            + "fallback, no reader, a locked fingerprint) it answers authinfo_unavail, which this line turns into 'bad': nobody "
            + "gets in here that way, not even with the right password; write authinfo_unavail=ignore (or a jump) to let the "
            + "password module decide",
            "gdm-fingerprint:3: a policy=biometrics line needs a later 'pam_localauth.so authsucc' line reached through the "
            + "password module's success (R11)",
            "gdm-fingerprint:3: gdm-fingerprint is a conversation nobody answers while the reader waits: write "
            + "policy=biometrics mode=scan (a prompt here would wait until the program kills it)"])
        // Plasma 6 runs kde-fingerprint beside kde: the same stack needs kde
        // among the password services (kde is a prompt-mode locker by default,
        // for Plasma 5's single conversation).
        // (password_services from the configuration file: a scan line's own keys are ignored.)
        let configured = StackLint(read: { $0 == "kde-fingerprint" ? Array(ours.utf8) : nil },
                                   options: { StackLint.optionsFromArguments(["password_services=gdm-password,kde"] + $0) })
        XCTAssertEqual(configured.serviceFindings("kde-fingerprint"), [])
        XCTAssertEqual(self.lint(["kde-fingerprint": ours]).serviceFindings("kde-fingerprint").map(\.text), [
            "kde-fingerprint:3: kde runs beside kde-fingerprint but is not in password_services: both conversations would ask "
            + "for the reader (set password_services to include kde)"])
        // Only a desktop's fingerprint conversation is exempt from "use policy
        // owner": a locker's scan line with a password after it is not.
        let lockerScan = "auth [success=3 conv_err=die default=ignore] pam_localauth.so policy=biometrics mode=scan\n"
            + "auth [success=1 default=die] pam_unix.so\nauth requisite pam_deny.so\nauth optional pam_localauth.so authsucc\n"
            + "auth required pam_permit.so\n"
        XCTAssertTrue(self.lint(["swaylock": lockerScan]).serviceFindings("swaylock").contains {
            $0.severity == "error" && $0.text.contains("swaylock runs as the user")
        })
        // A scan line runs through the helper: administrator keys there are ignored.
        let tightened = ours.replacingOccurrences(of: "fallback_title=", with: "fallback_title= max_tries=1 state_dir=/x")
        XCTAssertEqual(self.lint(["gdm-fingerprint": tightened]).serviceFindings("gdm-fingerprint").map(\.text), [
            "gdm-fingerprint:3: max_tries is ignored on a mode=scan line, which runs through localauth-helper: set it in "
            + "/etc/security/localauth.conf",
            "gdm-fingerprint:3: state_dir is ignored on a mode=scan line, which runs through localauth-helper: set it in "
            + "/etc/security/localauth.conf"])
        // The same line in a stack with a password module is judged as any other.
        let withPassword = ours + passwordLines
        XCTAssertFalse(self.lint(["sudo": withPassword]).serviceFindings("sudo").isEmpty)
    }

    /// Found by the long fuzzing run: a jump past the last line onto an
    /// empty substack at the very end (its lines all of another type) led
    /// the authsucc check one past the last rule, and the lint trapped
    /// (`localauth config --check` would stop with an index out of range).
    func testAJumpOntoAnEmptySubstackAtTheEndIsJudged() {
        let files = [
            "sudo": "auth [success=1 default=ignore] pam_unix.so\nauth requisite pam_deny.so\nauth substack deeper\n",
            "deeper": "account required pam_permit.so\n",
        ]
        let findings = lint(files).serviceFindings("sudo")
        XCTAssertFalse(findings.contains { $0.text.contains("authsucc") }, "\(findings)")
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
        let findings = counting.serviceFindings("sudo")
        XCTAssertEqual(errors(findings), ["sudo: more than 4096 lines or 256 files: only the first were checked, so the lint cannot pass it"],
                       "too large to judge: said, not passed")
        XCTAssertTrue(findings.contains { $0.text.contains("go round in a loop") }, "\(findings)")
        XCTAssertLessThanOrEqual(findings.count, 16, "each thing said once: \(findings)")
        XCTAssertLessThanOrEqual(reads.count, 257, "bounded, not 10^8 expansions")
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

    /// libpam takes only positive jumps: a negative one is a control it
    /// cannot read, and it then takes every answer as a failure.
    func testNegativeJumpsAreNotFollowed() {
        let files = ["sudo": "auth [success=-3 default=-2] pam_localauth.so\nauth requisite pam_deny.so\n"
                     + "auth [success=-1 default=ignore] pam_unix.so\nauth required pam_localauth.so authsucc\n"]
        let findings = errors(lint(files).serviceFindings("sudo"))
        XCTAssertTrue(findings.contains { $0.hasPrefix("sudo:1: libpam cannot read this control") }, "\(findings)")
        XCTAssertEqual(Control("success=-3 default=-2")?.actions, [Action](repeating: .bad, count: 32))
    }

    func testStacksThatWeakenThePolicy() {
        let rows: [(String, String, String)] = [
            ("done on the module line", "auth sufficient pam_localauth.so\n" + passwordLines, "'done' on the pam_localauth.so line"),
            ("only optional modules past the module",
             "auth [success=1 ignore=ignore authinfo_unavail=ignore default=die] pam_localauth.so\nauth optional pam_permit.so\n",
             "can reach its end with no password asked"),
            ("owner without default=die",
             "auth [success=2 default=ignore] pam_localauth.so\n" + passwordLines, "must end the stack (default=die)"),
            // Safe while the back-off's refusal was auth_err: its own code must end the stack too.
            ("owner naming every failure but the back-off's refusal",
             "auth [success=2 ignore=ignore authinfo_unavail=ignore auth_err=die conv_err=die system_err=die default=ignore] "
             + "pam_localauth.so\n" + passwordLines, "cred_insufficient must end the stack (default=die)"),
            ("owner jumping onto pam_deny for every failure but the back-off's refusal",
             "auth [success=2 ignore=ignore authinfo_unavail=ignore auth_err=1 conv_err=1 system_err=1 default=ignore] "
             + "pam_localauth.so\n" + passwordLines, "cred_insufficient must end the stack (default=die)"),
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

    /// Stacks that grant with no credential when libpam runs them, each
    /// written so that a lint reading the file more simply than libpam
    /// (the first of two settings, spaces around `=`, one physical line at
    /// a time, a substack flattened, "some password line later") would
    /// have found nothing wrong.
    func testStacksThatLibpamReadsDifferentlyFromAQuickReading() {
        let before = "auth required pam_succeed_if.so user != root quiet_success\n"
        var rows: [(String, [String: String])] = [
            ("the later of two settings wins",
             ["svc": before + "auth [success=ok authinfo_unavail=bad default=die authinfo_unavail=ignore] pam_localauth.so\n"]),
            ("the first default fills what is not set",
             ["svc": before + "auth [success=ok default=ignore default=die] pam_localauth.so\n"]),
            ("spaces around the equals sign",
             ["svc": before + "auth [success = ok default = ignore] pam_localauth.so\n"]),
            ("a line continued with a backslash",
             ["svc": before + "auth [success=ok default=ignore] \\\n   # a comment inside\n\n   pam_localauth.so\n"]),
            ("a jump counts a substack as one line",
             ["svc": before + "auth [success=3 authinfo_unavail=2 default=die] pam_localauth.so\nauth substack extras\n"
                     + "auth required pam_unix.so\nauth optional pam_permit.so\n",
              "extras": "auth optional pam_env.so\nauth optional pam_env.so\nauth optional pam_env.so\n"]),
            ("a later line's jump skips the password line",
             ["svc": before + "auth [success=3 authinfo_unavail=ignore default=die] pam_localauth.so\nauth [default=1] pam_env.so\n"
                     + "auth required pam_unix.so\nauth optional pam_permit.so\n"]),
            ("a sufficient line ends the substack before its password line",
             ["svc": before + "auth substack inner\nauth optional pam_permit.so\n",
              "inner": "auth [success=done authinfo_unavail=ignore default=die] pam_localauth.so\nauth sufficient pam_permit.so\n"
                       + "auth required pam_unix.so\n"]),
        ]
        // Found by an attack review, each run through libpam 1.5.2: a
        // bracketed keyword or module path, @include in another case, an
        // include on a line of an unknown type, a jump count that wraps.
        let inc = "auth [success=ok authinfo_unavail=ignore default=die] pam_localauth.so\n"
        rows += [
            ("a bracketed keyword", ["svc": before + "auth [success=ok authinfo_unavail=ignore default=die] pam_localauth.so\n"
                                             + "auth [sufficient] pam_permit.so\nauth required pam_unix.so\n"]),
            ("a bracketed module path", ["svc": before + "auth [success=ok default=ignore] [/lib/security/pam_localauth.so]\n"]),
            ("@Include in capitals", ["svc": before + "@Include inc\n", "inc": inc]),
            ("-@include", ["svc": before + "-@include inc\n", "inc": inc]),
            ("an include on a line of an unknown type", ["svc": before + "auht include inc\n", "inc": inc]),
            ("a jump count that wraps", ["svc": before + "auth [success=ok authinfo_unavail=4294967298 default=die] pam_localauth.so\n"
                                                + "auth required pam_unix.so\nauth optional pam_permit.so\n"]),
        ]
        // Found by a second attack review, run through libpam 1.5.2: an
        // argument in brackets is the bare word to the module (pam_sss's
        // ignore_unknown_user answers ignore for an unknown user).
        rows += [
            ("a bracketed ignore_ argument", ["svc": before + "auth [success=1 authinfo_unavail=ignore default=die] pam_localauth.so\n"
                                                   + "auth required pam_sss.so [ignore_unknown_user]\n"]),
            ("a bracketed ignore_ argument right after another", ["svc": before
                + "auth [success=1 authinfo_unavail=ignore default=die] pam_localauth.so\n"
                + "auth required pam_sss.so [x][ignore_unknown_user]\n"]),
        ]
        for (name, files) in rows {
            let found = errors(lint(files).serviceFindings("svc"))
            XCTAssertTrue(found.contains { $0.contains("can reach its end with no password asked") }, "\(name): \(found)")
        }
        // The same shapes with the password line where libpam will run it.
        let safe: [(String, [String: String])] = [
            ("the later setting fails the stack",
             ["svc": before + "auth [success=ok authinfo_unavail=ignore default=die authinfo_unavail=bad] pam_localauth.so\n"]),
            ("a jump past the substack onto the password line",
             ["svc": before + "auth [success=3 authinfo_unavail=1 default=die] pam_localauth.so\nauth substack extras\n"
                     + "auth required pam_unix.so\nauth optional pam_permit.so\n",
              "extras": "auth optional pam_env.so\nauth optional pam_env.so\nauth optional pam_env.so\n"]),
            ("a jump too far is a failure in libpam",
             ["svc": before + "auth [success=ok authinfo_unavail=9 default=die] pam_localauth.so\nauth optional pam_permit.so\n"]),
            ("an include that cannot be read fails every login",
             ["svc": before + "auth [success=ok authinfo_unavail=ignore default=die] pam_localauth.so\nauth include missing\n"]),
        ]
        for (name, files) in safe {
            let found = errors(lint(files).serviceFindings("svc"))
            XCTAssertFalse(found.contains { $0.contains("can reach its end") }, "\(name): \(found)")
        }
    }

    /// A `die` inside a substack ends only the substack: a wrong password
    /// there goes on to the authsucc line after it, which would reset.
    func testAuthsuccReachedByLeavingASubstackIsAnError() {
        let files = ["svc": "auth [success=2 conv_err=die default=ignore] pam_localauth.so policy=biometrics\n"
                            + "auth substack la-password\nauth optional pam_localauth.so authsucc\nauth required pam_permit.so\n",
                     "la-password": "auth [success=1 default=die] pam_unix.so\nauth requisite pam_deny.so\n"]
        let found = errors(lint(files).serviceFindings("svc"))
        XCTAssertTrue(found.contains { $0.contains("reaches the authsucc line on") }, "\(found)")
    }

    /// Passcode services that accept any password, each run through libpam.
    func testPasscodeServicesThatForgetTheFailure() {
        let rows: [(String, [String: String])] = [
            ("a bracketed include", ["localauth-passcode": "auth required pam_unix.so\nauth [include] extra\n",
                                     "extra": "auth [success=reset] pam_exec.so /bin/true\nauth required pam_exec.so /bin/true\n"]),
            ("a reset on a line of an unknown type", ["localauth-passcode": "auth required pam_unix.so\n"
                                                      + "autx [perm_denied=reset] pam_permit.so\nauth required pam_shells.so\n"]),
        ]
        for (name, files) in rows {
            let found = errors(lint(files).passcodeServiceFindings("localauth-passcode"))
            XCTAssertFalse(found.isEmpty, name)
        }
    }

    /// The control field as libpam's parser reads it.
    func testControlsAreReadAsLibpamReadsThem() {
        let allBad = [Action](repeating: .bad, count: 32)
        let rows: [(String, [(String, Action)]?)] = [
            ("required", [("success", .ok), ("ignore", .ignore), ("auth_err", .bad), ("new_authtok_reqd", .ok)]),
            ("REQUISITE", [("success", .ok), ("ignore", .ignore), ("authinfo_unavail", .die)]),
            ("sufficient", [("success", .done), ("ignore", .ignore), ("auth_err", .ignore)]),
            ("optional", [("success", .ok), ("auth_err", .ignore)]),
            ("[success=2 default=ignore]", [("success", .jump(2)), ("auth_err", .ignore)]),
            ("[default=die success=ok]", [("success", .ok), ("conv_err", .die)]),
            ("[success=ok success=bad]", [("success", .bad), ("auth_err", .bad)]),
            ("[default=ignore default=die]", [("auth_err", .ignore)]),
            ("[ success =\tok  default= die ]", [("success", .ok), ("auth_err", .die)]),
            ("[success=1default=ignore]", [("success", .jump(1)), ("auth_err", .ignore)]),
            ("[Success=ok default=ignore]", nil),
            ("[success=okay]", nil),
            ("[success=0]", nil),
            ("[sucess=ok]", nil),
            ("[success=ok auth_err]", nil),
            ("requird", nil),
            ("SUFFICIENT", [("success", .done)]),
            ("[success=4294967298 default=ignore]", [("success", .jump(2))]),
            ("[success=4294967295 default=ignore]", [("success", .ok)]),
            ("[success=4294967290 default=ignore]", [("success", .ignore)]),
            ("[success=4294967280 default=ignore]", [("success", .bad)]),
            ("[success=4294967296]", nil),
        ]
        for (text, expected) in rows {
            // As libpam's field reader gives it: without the brackets.
            let control = Control(text.hasPrefix("[") ? String(text.dropFirst().dropLast()) : text)!
            if let expected {
                XCTAssertNil(control.problem, text)
                for (answer, action) in expected { XCTAssertEqual(control.action(named: answer), action, "\(text) \(answer)") }
            } else {
                XCTAssertNotNil(control.problem, text)
                XCTAssertEqual(control.actions, allBad, text)
            }
        }
        XCTAssertNil(Control("Include"))
        XCTAssertNil(Control("substack"))
    }

    /// Lines as libpam's line reader assembles them.
    func testFilesAreReadIntoLinesAsLibpamReadsThem() {
        func lines(_ text: String) -> [String] { PAMFile.lines(Array(text.utf8)).lines.map { String(decoding: $0.text, as: UTF8.self) } }
        func fields(_ text: String) -> [[String]] { PAMFile.lines(Array(text.utf8)).lines.map { PAMFile.fields($0.text) } }
        XCTAssertEqual(fields("auth required \\\n  pam_unix.so nullok\n"), [["auth", "required", "pam_unix.so", "nullok"]])
        XCTAssertEqual(fields("auth required \\  \t\n\n# note\n  pam_unix.so\n"), [["auth", "required", "pam_unix.so"]])
        XCTAssertEqual(fields("auth required pam_unix.so # \\\nauth optional pam_env.so\n"),
                       [["auth", "required", "pam_unix.so"], ["auth", "optional", "pam_env.so"]], "a comment ends the line, backslash or not")
        XCTAssertEqual(fields("auth [success=1 \\] default=ignore]pam_unix.so arg"), [["auth", "success=1 ] default=ignore", "pam_unix.so", "arg"]])
        XCTAssertEqual(fields("auth [sufficient] [/lib/pam_permit.so]"), [["auth", "sufficient", "/lib/pam_permit.so"]])
        XCTAssertEqual(PAMFile.lines(Array("auth required pam_unix.so\nauth required \\\n".utf8)).complete, false, "continued at the end")
        XCTAssertEqual(PAMFile.lines(Array("auth required pam_unix.so".utf8)).complete, true, "a last line without a newline")
        // 1023 bytes at a time: the rest of a longer line is a line of its own.
        let long = "auth required pam_env.so " + String(repeating: "x", count: 1023 - 25) + "auth sufficient pam_permit.so\n"
        XCTAssertEqual(fields(long).map { Array($0.prefix(3)) }, [["auth", "required", "pam_env.so"], ["auth", "sufficient", "pam_permit.so"]])
        XCTAssertEqual(lines("auth required pam_unix.so\u{0}auth sufficient pam_permit.so\n"), ["auth required pam_unix.so"], "a NUL ends the text")
        XCTAssertEqual(PAMFile.lines(Array("auth required \\\n".utf8) + [UInt8](repeating: 0x78, count: 1007) + Array("\\\nx\n".utf8)).complete,
                       false, "a joined line that fills the buffer")
        XCTAssertEqual(PAMFile.lines(Array("a\n\n  # c\nb \\\n c\n".utf8)).lines.map(\.number), [1, 4])
    }

    /// What the lint tells an administrator comes from the result table:
    /// every code the module answers without granting, the step-aside first.
    func testTheModulesFailuresComeFromTheResultTable() {
        XCTAssertEqual(StackLint.answersThatMustEndTheStack, ["auth_err", "system_err", "cred_insufficient", "conv_err"])
        XCTAssertEqual(StackLint.moduleFailures.map(\.code), ["authinfo_unavail", "system_err", "auth_err", "cred_insufficient", "conv_err"])
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
            ("auth optional pam_unix.so\nauth required pam_env.so\n", "pam_env.so must not be able to pass the check"),
            ("auth sufficient pam_unix.so\nauth required pam_nologin.so successok\n", "pam_nologin.so must not be able to pass"),
            ("auth [success=done default=ignore] pam_unix.so\nauth optional pam_sss.so use_first_pass\n"
             + "auth required pam_env.so\n", "pam_env.so must not be able to pass"),
            // A directory module told to ignore unknown users answers PAM_IGNORE for every local account.
            ("auth optional pam_exec.so quiet /bin/true\nauth [success=done default=ignore] pam_unix.so\n"
             + "auth required pam_winbind.so use_first_pass UNKNOWN_OK\n", "pam_exec.so must not be able to pass"),
            ("auth required pam_unix.so\nauth [success=ok ignore=reset default=bad] pam_winbind.so use_first_pass unknown_ok\n",
             "no jumps or 'reset'"),
            ("auth [success=1 new_authtok_reqd=1 default=ignore] pam_sss.so\nauth requisite pam_deny.so\n", "no jumps or 'reset'"),
            ("auth [success=1 default=ignore] pam_unix.so\nauth required pam_sss.so use_first_pass\n", "no jumps or 'reset'"),
            ("auth [success=1 default=ignore] pam_env.so\nauth required pam_unix.so\n", "no jumps or 'reset'"),
            ("auth sufficient pam_env.so\nauth required pam_unix.so\n", "no jumps or 'reset'"),
            ("auth [success=reset default=bad] pam_unix.so\nauth required pam_sss.so\n", "no jumps or 'reset'"),
            ("auth required pam_matrix.so\n", "not the system's pam_matrix.so"),
            ("auth required /tmp/x/pam_unix.so\n", "not the system's pam_unix.so"),
            ("auth required ../../../../tmp/pam_unix.so\n", "not the system's pam_unix.so"),
            ("auth [success=done default=ignore] /home/u/security/pam_unix.so\nauth required pam_sss.so\n", "not the system's"),
            ("auth required pam_sss.so try_cert_auth\n", "takes something other than the password"),
            ("auth required pam_krb5.so search_k5login\n", "takes something other than the password"),
            ("auth required pam_env.so\n", "no password module"),
        ]
        for (stack, expected) in rows {
            let found = errors(lint(["localauth-passcode": stack]).passcodeServiceFindings("localauth-passcode"))
            XCTAssertTrue(found.contains { $0.contains(expected) }, "\(stack): \(found)")
        }
        XCTAssertEqual(errors(lint([:]).passcodeServiceFindings("localauth-passcode")), ["localauth-passcode: missing or unreadable"])
    }

    /// nsswitch.conf's passwd sources, and a warning for each directory
    /// whose accounts the passcode service cannot check.
    func testDirectoryAccountsNeedTheirModule() {
        let nsswitch = utf8Bytes("# passwd: files\ngroup: files sss\npasswd:  files [NOTFOUND=return] sss # directory\n")
        XCTAssertEqual(StackLint.passwdSources(nsswitch: nsswitch), ["files", "sss"])
        XCTAssertEqual(StackLint.passwdSources(nsswitch: utf8Bytes("passwd: files\npasswd : files ldap winbind\n")),
                       ["files", "ldap", "winbind"])
        XCTAssertEqual(StackLint.passwdSources(nsswitch: utf8Bytes("hosts: files dns\n")), [])
        let unixOnly = lint(["localauth-passcode": "auth required pam_unix.so\n"])
        XCTAssertEqual(unixOnly.directoryAccountFindings("localauth-passcode", sources: ["files", "systemd"]), [])
        let found = unixOnly.directoryAccountFindings("localauth-passcode", sources: ["files", "sss", "winbind"])
        XCTAssertEqual(found.map(\.severity), ["warning", "warning"])
        XCTAssertTrue(found[0].text.contains("accounts from 'sss'") && found[0].text.contains("pam_sss.so"), "\(found)")
        XCTAssertTrue(found[1].text.contains("accounts from 'winbind'"), "\(found)")
        let withSSS = lint(["localauth-passcode": "auth [success=done default=ignore] pam_unix.so\nauth required pam_sss.so use_first_pass\n"])
        XCTAssertEqual(withSSS.directoryAccountFindings("localauth-passcode", sources: ["files", "sss", "ldap"]), [])
    }

    /// Local accounts checked by pam_unix and directory accounts by the
    /// directory's module after it: only a password module's success ends
    /// or skips, and the last one decides.
    func testPasscodeServicesForDirectoryAccounts() {
        let stacks = [
            "auth [success=done default=ignore] pam_unix.so\nauth required pam_sss.so use_first_pass\n",
            "auth [success=done default=ignore] pam_unix.so\nauth [success=die default=ignore] pam_localuser.so\n"
                + "auth required pam_sss.so use_first_pass\n",
            "auth sufficient pam_unix.so\nauth requisite pam_sss.so use_first_pass\n",
            "auth [success=done new_authtok_reqd=done default=ignore] pam_unix.so\n"
                + "auth [success=done default=ignore] pam_ldap.so use_first_pass\nauth required pam_krb5.so use_first_pass\n",
            "auth required pam_sss.so\n",
            "auth required /lib/x86_64-linux-gnu/security/pam_unix.so\n",
            "auth required /usr/lib/security/pam_unix.so\nauth optional pam_exec.so quiet /bin/true\n",
            "auth required pam_matrix.so passdb=/etc/passdb\n",
            // Nothing recorded fails in libpam: a wrong password here is refused.
            "auth optional pam_unix.so\n",
        ]
        for stack in stacks {
            XCTAssertEqual(lint(["localauth-passcode": stack]).passcodeServiceFindings("localauth-passcode"), [], stack)
        }
    }

    /// Found by a third attack review, each run through libpam 1.5.2 and
    /// the module: what the lint cannot read as libpam and the module do
    /// is an error, never a guess.
    func testWhatTheLintCannotReadAsTheModuleAndLibpamDoIsAnError() {
        // More arguments than the module reads: it refuses the line.
        let many = Array(repeating: "x", count: OptionParser.maxArguments)
        let line = "auth [success=2 authinfo_unavail=ignore default=die] pam_localauth.so passcode_service=weak " + many.joined(separator: " ")
            + " passcode_service=localauth-passcode\n"
        let found = errors(lint(["svc": line + passwordLines]).serviceFindings("svc"))
        XCTAssertTrue(found.contains { $0.contains("more than \(OptionParser.maxArguments) arguments") }, "\(found)")
        XCTAssertEqual(lint(["svc": line]).authRules("svc").first?.isAuthsucc, false)
        XCTAssertEqual(lint(["svc": line]).passcodeServicesNamed("svc"), [])
        // An include the lint cannot read (too large, not openable here):
        // libpam may read it whole.
        let stack = "auth [success=1 authinfo_unavail=ignore default=die] pam_localauth.so\nauth include /site/auth\n"
        let unjudged = StackLint(file: { name in
            switch name {
            case "svc": return .bytes(Array(stack.utf8))
            case "/site/auth": return .unjudgeable
            default: return .missing
            }
        })
        XCTAssertTrue(errors(unjudged.serviceFindings("svc")).contains { $0.contains("/site/auth cannot be read here") })
        // pam_deny that libpam could not load, on a line that ignores that.
        let deny = "auth [success=1 authinfo_unavail=ignore default=die] pam_localauth.so\n"
            + "auth [auth_err=die default=ignore] pam_deny.so\nauth required pam_permit.so\n"
        XCTAssertTrue(errors(lint(["svc": deny]).serviceFindings("svc")).contains { $0.contains("can reach its end") })
    }

    /// Found by a fourth attack review: a byte that is not UTF-8 in a line
    /// (an include's name, a conf= path) names another file for the lint
    /// than for libpam; a pam_permit.so libpam cannot load answers
    /// module_unknown; a passcode service named with capitals is another
    /// file once libpam lowercases it (the option parser refuses it).
    func testLinesTheLintCannotReadAsTextAndModulesThatDoNotLoad() {
        var bytes = Array("auth [success=1 authinfo_unavail=ignore default=die] pam_localauth.so\n@include /abs/x".utf8)
        bytes += [0xFF] + Array("\nauth required pam_unix.so\n".utf8)
        let odd = StackLint(read: { $0 == "svc" ? bytes : nil })
        XCTAssertTrue(errors(odd.serviceFindings("svc")).contains { $0.contains("svc:2: bytes that are not UTF-8") })
        let passcode = StackLint(read: { $0 == "localauth-passcode" ? Array("auth required pam_unix.so x".utf8) + [0xC3, 0x28] : nil })
        XCTAssertTrue(errors(passcode.passcodeServiceFindings("localauth-passcode")).contains { $0.contains("not UTF-8") })
        let permit = "auth required pam_succeed_if.so uid >= 1000\n"
            + "auth [success=3 authinfo_unavail=ignore default=die] pam_localauth.so\n"
            + "auth [success=ok default=2] /lib64/security/pam_permit.so\n"
            + "auth [success=1 default=die] pam_unix.so\nauth requisite pam_deny.so\n"
        XCTAssertTrue(errors(lint(["svc": permit]).serviceFindings("svc")).contains { $0.contains("can reach its end") })
        var parser = OptionParser()
        parser.applyArguments([Array("passcode_service=Strict".utf8), Array("services=Sudo".utf8)])
        XCTAssertEqual(parser.diagnostics.count, 2)
        XCTAssertEqual(parser.options.passcodeService, Options().passcodeService)
    }

    /// Found by a fifth attack review, run through libpam 1.5.2: names that
    /// Swift takes as equal (é precomposed, and e with a combining accent)
    /// are two files to libpam; a copy of the module under a name like its
    /// own is the module.
    func testNamesAreBytesAndTheModuleIsKnownUnderItsNames() {
        let nfc = "/inc/pw-\u{E9}", nfd = "/inc/pw-e\u{301}"
        XCTAssertEqual(nfc, nfd)                     // to Swift
        XCTAssertNotEqual(Array(nfc.utf8), Array(nfd.utf8))   // to libpam
        let files: [[UInt8]: String] = [
            Array("a-common".utf8): "auth include \(nfc)\n",
            Array(nfc.utf8): "auth requisite pam_unix.so\n",
            Array(nfd.utf8): "auth required pam_permit.so\n",
            Array("sudo".utf8): "auth [success=1 authinfo_unavail=ignore default=die] pam_localauth.so\nauth include \(nfd)\n",
        ]
        let lint = StackLint(read: { files[Array($0.utf8)].map { Array($0.utf8) } })
        XCTAssertEqual(errors(lint.serviceFindings("a-common")), [])
        XCTAssertTrue(errors(lint.serviceFindings("sudo")).contains { $0.contains("can reach its end") })
        for module in ["/lib/security/pam_localauth-1.so", "/lib/security/pam_localauth", "localauth.so"] {
            let renamed = self.lint(["svc": "auth [success=1 authinfo_unavail=ignore default=die] \(module)\n"
                                            + "auth required pam_permit.so\n"])
            XCTAssertTrue(errors(renamed.serviceFindings("svc")).contains { $0.contains("can reach its end") }, module)
        }
        // A locker's stack from /usr/lib/pam.d is a locker's stack.
        let vendor = self.lint(["/usr/lib/pam.d/i3lock": "auth [success=1 default=die] pam_localauth.so policy=biometrics\n"
                                                          + "auth required pam_unix.so\n"])
        XCTAssertTrue(errors(vendor.serviceFindings("/usr/lib/pam.d/i3lock")).contains { $0.contains("i3lock runs as the user") })
    }

    /// Found by a seventh attack review: libpam compares keywords with
    /// strcasecmp in the calling program's locale (sudo takes the user's), so
    /// in tr_TR "REQUISITE" is no keyword and the pam_deny line before an
    /// authsucc line stops guarding it. A keyword in capitals is an error.
    func testKeywordsInCapitalsAreAnError() {
        let stack = "auth [success=3 conv_err=die default=ignore] pam_localauth.so policy=biometrics\n"
            + "auth [success=1 default=ignore] pam_unix.so\nauth REQUISITE pam_deny.so\n"
            + "auth optional pam_localauth.so authsucc\nauth required pam_permit.so\n"
        XCTAssertTrue(errors(lint(["svc": stack]).serviceFindings("svc")).contains { $0.contains("svc:3: 'REQUISITE' in capitals") })
        XCTAssertTrue(errors(lint(["localauth-passcode": "Auth required pam_unix.so\n"]).passcodeServiceFindings("localauth-passcode"))
            .contains { $0.contains("'Auth' in capitals") })
        XCTAssertEqual(errors(lint(["svc": stack.replacingOccurrences(of: "REQUISITE", with: "requisite")]).serviceFindings("svc")), [])
    }

    func testNamedPasscodeServicesAreFound() {
        let lint = lint(["svc": "auth [success=2 ignore=ignore authinfo_unavail=ignore default=die] pam_localauth.so passcode_service=vault\n"])
        XCTAssertEqual(lint.passcodeServicesNamed("svc"), ["vault"])
        // In brackets, as libpam hands it to the module.
        let bracketed = self.lint(["svc": "auth [success=2 default=die] pam_localauth.so [passcode_service=loose]\n"])
        XCTAssertEqual(bracketed.passcodeServicesNamed("svc"), ["loose"])
        // From the configuration file a conf= argument names: the module's
        // own loader is asked, so whatever it reads the lint judges.
        let configured = StackLint(read: { $0 == "svc" ? Array("auth [success=2 default=die] pam_localauth.so conf=/etc/x.conf\n".utf8) : nil },
                                   options: { arguments in
                                       var options = StackLint.optionsFromArguments(arguments)
                                       if arguments.contains("conf=/etc/x.conf") { options.passcodeService = Array("loose".utf8) }
                                       return options
                                   })
        XCTAssertEqual(configured.passcodeServicesNamed("svc"), ["loose"])
    }

    /// The module reads its arguments in order, later ones winning, and
    /// takes a flag as `authsucc`, `authsucc=yes` or `[authsucc]`: the lint
    /// judges each line by what the module will do.
    func testALineIsJudgedByTheOptionsTheModuleRunsWith() {
        let head = "auth [success=4 conv_err=die default=ignore] pam_localauth.so policy=biometrics\n"
        let misplaced = "auth [success=2 default=ignore] pam_matrix.so\n"
            + "auth [success=2 authinfo_unavail=ignore default=die] pam_localauth.so %@ policy=biometrics\n"
            + "auth requisite pam_deny.so\nauth optional pam_localauth.so authsucc\nauth required pam_permit.so\n"
        for spelling in ["authsucc", "authsucc=yes", "[authsucc]", "authsucc=no authsucc"] {
            let files = ["svc": head + misplaced.replacingOccurrences(of: "%@", with: spelling)]
            XCTAssertTrue(errors(lint(files).serviceFindings("svc")).contains { $0.contains("authsucc") }, spelling)
        }
        for spelling in ["authsucc authsucc=no", "[x\\] authsucc ]"] {
            let rules = lint(["svc": "auth optional pam_localauth.so \(spelling)\n"]).authRules("svc")
            XCTAssertEqual(rules.map(\.isAuthsucc), [false], spelling)
        }
        // policy=biometrics then policy=owner runs as owner: owner's rule applies.
        let owner = lint(["svc": "auth [success=2 default=ignore] pam_localauth.so policy=biometrics policy=owner\n" + passwordLines])
        XCTAssertTrue(errors(owner.serviceFindings("svc")).contains { $0.contains("default=die") })
        XCTAssertEqual(owner.authRules("svc").first?.isBiometrics, false)
    }
}
