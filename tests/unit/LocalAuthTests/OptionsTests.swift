import XCTest
import LocalAuth

/// Module arguments and the configuration file. Bad input is
/// logged and ignored, out-of-range values are clamped and logged; never
/// fatal, never weaker than the default.
final class OptionsTests: XCTestCase {
    func parse(_ arguments: [String], config: String? = nil) -> OptionParser {
        parseBytes(arguments.map(bytes), config: config.map(bytes))
    }

    func parseBytes(_ arguments: [[UInt8]], config: [UInt8]? = nil) -> OptionParser {
        var parser = OptionParser()
        if let config { parser.applyConfigFile(config) }
        parser.applyArguments(arguments)
        parser.finish()
        for message in parser.diagnostics {
            XCTAssertFalse(message.utf8.contains { $0 < 0x20 || $0 == 0x7F }, "control byte in a diagnostic: \(message)")
            XCTAssertLessThan(message.utf8.count, 300, "unbounded diagnostic")
        }
        return parser
    }

    /// Parsing `arguments` leaves every option at its default and says why.
    func assertIgnored(_ arguments: [[UInt8]], _ fragment: String, file: StaticString = #filePath, line: UInt = #line) {
        let parser = parseBytes(arguments)
        XCTAssertEqual(parser.options, Options(), "option changed by \(arguments.map { printableText($0, limit: 60) })",
                       file: file, line: line)
        XCTAssertEqual(parser.diagnostics.count, 1, "\(parser.diagnostics)", file: file, line: line)
        XCTAssertTrue(parser.diagnostics.first?.contains(fragment) == true, "\(parser.diagnostics) lacks \(fragment)", file: file, line: line)
    }

    func assertIgnored(_ argument: String, _ fragment: String, file: StaticString = #filePath, line: UInt = #line) {
        assertIgnored([bytes(argument)], fragment, file: file, line: line)
    }

    func testDefaults() {
        let options = Options()
        XCTAssertEqual(options.policy, .owner)
        XCTAssertEqual(options.services, ["sudo", "sudo-i", "su", "su-l", "login", "doas", "swaylock", "i3lock", "xscreensaver", "xsecurelock", "hyprlock",
                                          "vlock", "mate-screensaver", "cinnamon-screensaver", "polkit-1", "gdm-fingerprint", "gdm-password",
                                          "greetd", "lightdm", "sddm", "kde", "kde-fingerprint", "localauth-app"].map(bytes))
        XCTAssertEqual(options.cancelTitle, bytes("Cancel"))
        XCTAssertEqual(options.answerTimeoutSeconds, 120)
        XCTAssertEqual(options.maxTries, 3)
        XCTAssertEqual(options.lockout, 5)
        XCTAssertEqual(options.timeoutSeconds, 30)
        XCTAssertEqual(options.fallbackAfter, 1)
        XCTAssertEqual(options.fallbackTitle, bytes("Enter Password"))
        XCTAssertNil(options.reason)
        XCTAssertNil(options.mode)
        XCTAssertEqual(options.passcodeService, bytes("localauth-passcode"))
        XCTAssertEqual(options.backoff, [BackoffStep(failures: 5, seconds: 60), BackoffStep(failures: 6, seconds: 300),
                                         BackoffStep(failures: 7, seconds: 900), BackoffStep(failures: 9, seconds: 3600)])
        XCTAssertEqual(options.maxBackoffSeconds, 3600)
        XCTAssertFalse(options.evenDenyRoot)
        XCTAssertEqual(options.stateDir, bytes("/var/lib/localauth"))
        XCTAssertFalse(options.debug)
        XCTAssertFalse(options.silent)
        XCTAssertFalse(options.authsucc)
        XCTAssertNil(options.configPath)
        XCTAssertEqual(options.firstBackoffThreshold, 5)
        let empty = parse([])
        XCTAssertEqual(empty.options, options)
        XCTAssertEqual(empty.diagnostics, [])
    }

    func testEveryKeyIsParsed() {
        let parser = parse([
            "policy=biometrics", "services=sudo,gdm-password,kde.locker_2", "max_tries=4", "lockout=9", "timeout=45",
            "fallback_after=2", "fallback_title=Use Passcode", "reason=Unlock %s for %u", "mode=prompt",
            "passcode_service=localauth-pin", "passcode_backoff=3:10s,4:2m,8:1h", "max_backoff=2h", "even_deny_root",
            "state_dir=/run/localauth", "debug", "silent", "authsucc", "conf=/etc/security/other.conf",
        ])
        XCTAssertEqual(parser.diagnostics, [])
        let options = parser.options
        XCTAssertEqual(options.policy, .biometrics)
        XCTAssertEqual(options.services, ["sudo", "gdm-password", "kde.locker_2"].map(bytes))
        XCTAssertEqual(options.maxTries, 4)
        XCTAssertEqual(options.lockout, 9)
        XCTAssertEqual(options.timeoutSeconds, 45)
        XCTAssertEqual(options.fallbackAfter, 2)
        XCTAssertEqual(options.fallbackTitle, bytes("Use Passcode"))
        XCTAssertEqual(options.reason, bytes("Unlock %s for %u"))
        XCTAssertEqual(options.mode, .prompt)
        XCTAssertEqual(options.passcodeService, bytes("localauth-pin"))
        XCTAssertEqual(options.backoff, [BackoffStep(failures: 3, seconds: 10), BackoffStep(failures: 4, seconds: 120),
                                         BackoffStep(failures: 8, seconds: 3600)])
        XCTAssertEqual(options.maxBackoffSeconds, 7200)
        XCTAssertTrue(options.evenDenyRoot)
        XCTAssertEqual(options.stateDir, bytes("/run/localauth"))
        XCTAssertTrue(options.debug)
        XCTAssertTrue(options.silent)
        XCTAssertTrue(options.authsucc)
        XCTAssertEqual(options.configPath, bytes("/etc/security/other.conf"))
        XCTAssertEqual(options.firstBackoffThreshold, 3)
        XCTAssertEqual(parse(["policy=owner", "mode=terminal"]).options.mode, .terminal)
    }

    func testFlagValues() {
        for (value, expected) in [("", true), ("=yes", true), ("=true", true), ("=on", true), ("=1", true),
                                  ("=no", false), ("=false", false), ("=off", false), ("=0", false)] {
            let parser = parse(["debug=yes", "even_deny_root" + value, "silent" + value])
            XCTAssertEqual(parser.diagnostics, [], value)
            XCTAssertEqual(parser.options.evenDenyRoot, expected, value)
            XCTAssertEqual(parser.options.silent, expected, value)
        }
        assertIgnored("even_deny_root=maybe", "expected no value, yes or no")
        assertIgnored("debug=", "expected no value, yes or no")
    }

    func testTheRulesThatAskForThePasswordOrKeepTheReaderOut() {
        let defaults = Options()
        XCTAssertTrue(defaults.passcodeAfterBoot)
        XCTAssertEqual([defaults.unlockIntervalSeconds, defaults.passcodeIntervalSeconds, defaults.fingerprintIntervalSeconds],
                       [48 * 3600, 156 * 3600, 4 * 3600])
        XCTAssertTrue(defaults.skipWhenLidClosed)
        XCTAssertTrue(defaults.isLockerService(bytes("i3lock")))
        XCTAssertFalse(defaults.isLockerService(bytes("sudo")))
        XCTAssertFalse(defaults.isLockerService(bytes("localauth-app")))
        let parsed = parse(["passcode_after_boot=no", "unlock_interval=24h", "passcode_interval=100h", "fingerprint_interval=90m",
                            "locker_services=swaylock, mylocker", "skip_when_lid_closed=off"]).options
        XCTAssertFalse(parsed.passcodeAfterBoot)
        XCTAssertEqual([parsed.unlockIntervalSeconds, parsed.passcodeIntervalSeconds, parsed.fingerprintIntervalSeconds],
                       [24 * 3600, 100 * 3600, 5400])
        XCTAssertEqual(parsed.lockerServices, [bytes("swaylock"), bytes("mylocker")])
        XCTAssertTrue(parsed.isLockerService(bytes("mylocker")))
        XCTAssertFalse(parsed.isLockerService(bytes("i3lock")))
        XCTAssertFalse(parsed.skipWhenLidClosed)
        let clamped = parse(["unlock_interval=10s"])
        XCTAssertEqual(clamped.options.unlockIntervalSeconds, 60)
        XCTAssertTrue(clamped.diagnostics.contains { $0.contains("unlock_interval") })
        assertIgnored("unlock_interval=forever", "expected a duration")
        assertIgnored("passcode_after_boot=maybe", "expected no value, yes or no")
        assertIgnored("locker_services=a b", "expected a comma list")
        // Only presentation keys reach the helper from a caller.
        for key in ["passcode_after_boot", "unlock_interval", "locker_services", "skip_when_lid_closed"] {
            XCTAssertFalse(HelperRequest.isPresentationKey(bytes(key)), key)
        }
    }

    func testDurations() {
        XCTAssertEqual(parse(["timeout=90"]).options.timeoutSeconds, 90)
        XCTAssertEqual(parse(["timeout=90s"]).options.timeoutSeconds, 90)
        XCTAssertEqual(parse(["timeout=2m"]).options.timeoutSeconds, 120)
        XCTAssertEqual(parse(["max_backoff=90m"]).options.maxBackoffSeconds, 5400)
        XCTAssertEqual(parseDuration(bytes("10d")[...]), nil)
        XCTAssertEqual(parseDuration(bytes("240h")[...]), 864_000)
        XCTAssertEqual(parseDuration(bytes("241h")[...]), nil)
        XCTAssertEqual(parseDuration(bytes("m")[...]), nil)
        XCTAssertEqual(parseDuration(bytes("")[...]), nil)
        XCTAssertEqual(parseDuration(bytes("1.5h")[...]), nil)
        XCTAssertEqual(parseDuration(bytes("99999999999999999999s")[...]), nil)
    }

    func testOutOfRangeValuesAreClampedAndLogged() {
        let cases: [(String, (Options) -> Int, Int, String)] = [
            ("max_tries=0", { $0.maxTries }, 1, "max_tries 0 is below 1; using 1"),
            ("max_tries=50", { $0.maxTries }, 5, "max_tries 50 is above 10; using 10"),
            ("lockout=0", { $0.lockout }, 1, "lockout 0 is below 1; using 1"),
            ("lockout=25", { $0.lockout }, 20, "lockout 25 is above 20; using 20"),
            ("timeout=0", { $0.timeoutSeconds }, 1, "timeout 0 is below 1; using 1"),
            ("timeout=301", { $0.timeoutSeconds }, 300, "timeout 301 is above 300; using 300"),
            ("timeout=1h", { $0.timeoutSeconds }, 300, "timeout 3600 is above 300; using 300"),
            ("fallback_after=11", { $0.fallbackAfter }, 10, "fallback_after 11 is above 10; using 10"),
            ("max_backoff=0", { $0.maxBackoffSeconds }, 1, "max_backoff 0 is below 1; using 1"),
            ("max_backoff=48h", { $0.maxBackoffSeconds }, 86_400, "max_backoff 172800 is above 86400; using 86400"),
        ]
        for (argument, value, expected, message) in cases {
            let parser = parse([argument])
            XCTAssertEqual(value(parser.options), expected, argument)
            XCTAssertTrue(parser.diagnostics.contains(message), "\(argument): \(parser.diagnostics)")
        }
        // max_tries 50 → 10, then above lockout 5 → 5.
        let both = parse(["max_tries=50"])
        XCTAssertEqual(both.options.maxTries, 5)
        XCTAssertEqual(both.diagnostics.count, 2)
        XCTAssertEqual(parse(["fallback_after=0"]).options.fallbackAfter, 0)
        XCTAssertEqual(parse(["fallback_after=0"]).diagnostics, [])
    }

    func testLockoutBelowMaxTriesLowersMaxTries() {
        let parser = parse(["lockout=2"])
        XCTAssertEqual(parser.options.lockout, 2)
        XCTAssertEqual(parser.options.maxTries, 2)
        XCTAssertEqual(parser.diagnostics, ["max_tries 3 is above lockout 2; using 2"])
        let zero = parse(["max_tries=7", "lockout=0"])
        XCTAssertEqual(zero.options.lockout, 1)
        XCTAssertEqual(zero.options.maxTries, 1)
        let fine = parse(["max_tries=5", "lockout=5"])
        XCTAssertEqual(fine.diagnostics, [])
    }

    func testLastWins() {
        let parser = parse(["max_tries=4", "policy=biometrics", "max_tries=6", "lockout=8", "policy=owner"])
        XCTAssertEqual(parser.options.maxTries, 6)
        XCTAssertEqual(parser.options.policy, .owner)
        XCTAssertEqual(parser.diagnostics, [])
        let config = parse([], config: "max_tries = 2\nmax_tries = 4\n")
        XCTAssertEqual(config.options.maxTries, 4)
        // A bad later value does not undo a good earlier one.
        let bad = parse(["max_tries=2", "max_tries=lots"])
        XCTAssertEqual(bad.options.maxTries, 2)
        XCTAssertEqual(bad.diagnostics.count, 1)
    }

    func testArgumentsWinOverTheConfigFile() {
        let parser = parse(["max_tries=2", "fallback_title=Passcode"],
                           config: "max_tries = 4\npolicy = biometrics\nfallback_title = Use Password\n")
        XCTAssertEqual(parser.options.maxTries, 2)
        XCTAssertEqual(parser.options.policy, .biometrics, "the file's own keys still apply")
        XCTAssertEqual(parser.options.fallbackTitle, bytes("Passcode"))
        XCTAssertEqual(parser.diagnostics, [])
    }

    func testConfigFileSyntax() {
        let file = """
        # localauth configuration

        \tpolicy=biometrics   # trailing comment
           max_tries   =   2\r
        debug
        timeout =15s
        fallback_title =
        reason = Touch the reader to unlock %s
        #lockout = 1
             # indented comment
        """
        let parser = parse([], config: file)
        XCTAssertEqual(parser.diagnostics, [])
        XCTAssertEqual(parser.options.policy, .biometrics)
        XCTAssertEqual(parser.options.maxTries, 2)
        XCTAssertTrue(parser.options.debug)
        XCTAssertEqual(parser.options.timeoutSeconds, 15)
        XCTAssertEqual(parser.options.fallbackTitle, [], "an empty title is allowed: never offer the fallback")
        XCTAssertEqual(parser.options.reason, bytes("Touch the reader to unlock %s"))
        XCTAssertEqual(parser.options.lockout, 5)
    }

    func testConfigFileDiagnosticsNameTheLine() {
        let parser = parse([], config: "policy = owner\n\nbogus = 1\nmax_tries\n")
        XCTAssertEqual(parser.diagnostics.count, 2)
        let lines = parser.diagnostics + ["", ""]
        XCTAssertTrue(lines[0].contains("bogus") && lines[0].contains("line 3") && lines[0].contains("unknown option"), lines[0])
        XCTAssertTrue(lines[1].contains("max_tries") && lines[1].contains("line 4") && lines[1].contains("missing value"), lines[1])
        XCTAssertEqual(parser.options, Options())
    }

    func testAuthsuccAndConfOnlyAsModuleArguments() {
        let fromFile = parse([], config: "authsucc\nconf = /etc/other.conf\n")
        XCTAssertFalse(fromFile.options.authsucc)
        XCTAssertNil(fromFile.options.configPath)
        XCTAssertEqual(fromFile.diagnostics.filter { $0.contains("only valid as a module argument") }.count, 2)
        let fromArguments = parse(["authsucc", "conf=/etc/other.conf"])
        XCTAssertTrue(fromArguments.options.authsucc)
        XCTAssertEqual(fromArguments.options.configPath, bytes("/etc/other.conf"))
        XCTAssertEqual(OptionParser.configPath(in: ["debug", "conf=/a.conf", "conf=/b.conf"].map(bytes)), bytes("/b.conf"))
        XCTAssertNil(OptionParser.configPath(in: ["debug", "conf="].map(bytes)))
        assertIgnored("conf=relative.conf", "expected an absolute path")
        assertIgnored("conf=/etc/../tmp/x.conf", "expected an absolute path")
    }

    func testUnknownKeysAndMalformedValuesAreIgnored() {
        assertIgnored("maxtries=2", "unknown option")
        assertIgnored("Policy=biometrics", "unknown option")
        assertIgnored("use_first_pass", "unknown option")
        assertIgnored("policy=admin", "expected owner or biometrics")
        assertIgnored("policy=", "expected owner or biometrics")
        assertIgnored("policy", "missing value")
        assertIgnored("mode=gui", "expected terminal, prompt, scan or password")
        for value in ["abc", "-1", "3.5", "", " 3", "0x3", "+3", "9999999999999"] {
            assertIgnored("max_tries=" + value, "expected a number")
            assertIgnored("lockout=" + value, "expected a number")
        }
        for value in ["5x", "1d", "forever", "", "-5m", "11d"] {
            assertIgnored("timeout=" + value, "expected a duration")
            assertIgnored("max_backoff=" + value, "expected a duration")
        }
        assertIgnored("reason=", "expected printable text")
        assertIgnored("passcode_service=../../etc/shadow", "expected a service name")
        assertIgnored("passcode_service=", "expected a service name")
    }

    func testServicesRejectsBadNamesWhole() {
        for value in ["", "sudo,,su", "sudo;rm -rf /", ".hidden", "sudo,.x", "sudo/../x", "su do", "sudo,", ",sudo",
                      String(repeating: "a", count: 65)] {
            assertIgnored("services=" + value, "expected a comma list of service names")
        }
        let many = (1...65).map { "s\($0)" }.joined(separator: ",")
        assertIgnored("services=" + many, "expected a comma list of service names")
        let sixtyFour = (1...64).map { "s\($0)" }.joined(separator: ",")
        XCTAssertEqual(parse(["services=" + sixtyFour]).options.services.count, 64)
        XCTAssertEqual(parse([], config: "services = sudo , login\n").options.services, ["sudo", "login"].map(bytes))
    }

    func testPasscodeBackoffRejectsGarbageAndNonIncreasingSteps() {
        for value in ["garbage", "", "5", "5:", ":1m", "0:1m", "5:0", "5:0s", "5:1d", "5:1m,5:2m", "6:1m,5:5m", "5:1m,,6:5m",
                      "5:1m;6:5m", "-5:1m", "5:-1m", "5:1m,6:5m,", (1...33).map { "\($0):1m" }.joined(separator: ",")] {
            assertIgnored("passcode_backoff=" + value, "expected N:duration steps")
        }
        XCTAssertEqual(parse(["passcode_backoff=5:1m, 7:2h"]).options.backoff,
                       [BackoffStep(failures: 5, seconds: 60), BackoffStep(failures: 7, seconds: 7200)])
    }

    func testStateDirMustBeASafeAbsolutePath() {
        for value in ["relative", "var/lib/localauth", "/var/../etc", "/var/lib/./localauth", "/var//lib", "/var/lib/localauth/", "/",
                      "", "/..", "/tmp/x\n", "/tmp/\u{7F}", "/" + String(repeating: "a", count: 256)] {
            assertIgnored("state_dir=" + value, "expected an absolute path without . or .. parts")
        }
        XCTAssertEqual(parse(["state_dir=/var/lib/localauth-test"]).options.stateDir, bytes("/var/lib/localauth-test"))
        XCTAssertEqual(parse(["state_dir=/var/lib/.hidden..dir"]).options.stateDir, bytes("/var/lib/.hidden..dir"))
    }

    func testBracketedArgumentWithSpaces() {
        // libpam strips [...]: the module gets one argument with spaces.
        let parser = parse(["reason=Unlock the vault for %u"])
        XCTAssertEqual(parser.options.reason, bytes("Unlock the vault for %u"))
        XCTAssertEqual(parser.diagnostics, [])
    }

    // MARK: Hostile input

    func testAOneMegabyteArgumentIsIgnoredWhole() {
        let huge = bytes("reason=") + [UInt8](repeating: 0x41, count: 1 << 20)
        assertIgnored([huge], "value too long")
        assertIgnored([bytes("services=") + [UInt8](repeating: 0x61, count: 1 << 20)], "value too long")
        let hugeKey = [UInt8](repeating: 0x6B, count: 1 << 20)
        assertIgnored([hugeKey], "unknown option")
        let parser = parseBytes([hugeKey, huge, bytes("max_tries=2")])
        XCTAssertEqual(parser.options.maxTries, 2, "later arguments still apply")
        XCTAssertEqual(parser.options.reason, nil)
        // A just-fitting value is accepted.
        let fitting = bytes("fallback_title=") + [UInt8](repeating: 0x42, count: 64)
        XCTAssertEqual(parseBytes([fitting]).options.fallbackTitle.count, 64)
        assertIgnored([bytes("fallback_title=") + [UInt8](repeating: 0x42, count: 65)], "expected printable text")
    }

    func testNonUTF8AndControlCharactersAreRejected() {
        assertIgnored([bytes("fallback_title=") + [0x50, 0xFF, 0xFE]], "expected printable text")
        assertIgnored([bytes("reason=") + [0xC3, 0x28]], "expected printable text")             // invalid sequence
        assertIgnored([bytes("reason=") + [0xE2, 0x82]], "expected printable text")             // truncated
        assertIgnored([bytes("reason=") + [0xED, 0xA0, 0x80]], "expected printable text")       // surrogate
        assertIgnored("reason=line one\nforged log line", "expected printable text")
        assertIgnored("fallback_title=\u{1B}[2JPassword", "expected printable text")
        assertIgnored("reason=tab\there", "expected printable text")
        assertIgnored("reason=del\u{7F}", "expected printable text")
        assertIgnored([bytes("policy=") + [0x62, 0xFF]], "expected owner or biometrics")
        assertIgnored([[0xFF, 0xFE, 0x3D, 0x31]], "unknown option")
        // Valid UTF-8 is text.
        let german = parse(["fallback_title=Passwort eingeben", "reason=Entsperren für %u"])
        XCTAssertEqual(german.diagnostics, [])
        XCTAssertEqual(german.options.reason, bytes("Entsperren für %u"))
    }

    func testNULBytesAreNotTruncatedInto() {
        assertIgnored([bytes("max_tries=3") + [0]], "expected a number")
        assertIgnored([bytes("policy=biometrics") + [0] + bytes("owner")], "expected owner or biometrics")
        assertIgnored([bytes("services=sudo") + [0] + bytes("sshd")], "expected a comma list of service names")
        assertIgnored([bytes("state_dir=/var/lib/x") + [0] + bytes("/../etc")], "expected an absolute path")
        assertIgnored([bytes("reason=a") + [0] + bytes("b")], "expected printable text")
        assertIgnored([bytes("debug") + [0]], "unknown option")
        let config = parseBytes([], config: bytes("max_tries = 2") + [0] + bytes("\npolicy = biometrics\n"))
        XCTAssertEqual(config.options.maxTries, 3)
        XCTAssertEqual(config.options.policy, .biometrics)
    }

    func testDiagnosticsNeverEchoControlBytes() {
        let parser = parseBytes([[0x1B, 0x5B, 0x32, 0x4A, 0x0A, 0x3D, 0x31], bytes("x\nforged=1")])
        XCTAssertEqual(parser.diagnostics.count, 2)
        XCTAssertTrue(parser.diagnostics.first?.contains("?[2J?") == true, "\(parser.diagnostics)")
        XCTAssertTrue(parser.diagnostics.last?.contains("x?forged") == true, "\(parser.diagnostics)")
    }
}
