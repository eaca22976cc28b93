// The option-key table is the one declaration of every key: these tests
// hold the parser, the helper's filter, the lint and the shipped documents
// to it, so a key added in one place and forgotten in another fails here.
import Foundation
import XCTest
@testable import LocalAuth
@testable import StackLint

final class OptionKeyTableTests: XCTestCase {
    /// A value of each kind that the parser accepts, and one it refuses.
    func sample(_ key: OptionKey) -> (good: String, bad: String) {
        switch key.kind {
        case .flag: (Options().value(of: key) == .flag(true) ? "no" : "yes", "maybe")
        case .number(let range): ("\(range.upperBound)", "many")
        case .duration(let range): ("\(range.upperBound)s", "soon")
        case .serviceList: ("sudo,su", "a b")
        case .serviceName: ("other-passcode", "../x")
        case .text: ("Use the password", "\u{7}")
        case .path: ("/run/localauth-test", "relative")
        case .policy: ("biometrics", "admin")
        case .mode: ("terminal", "gui")
        case .backoff: ("2:1m,4:2m", "4:1m,2:2m")
        case .tpm: ("swtpm:700", "swtpm:2321")
        }
    }

    func parsed(_ line: String, asArgument: Bool) -> OptionParser {
        var parser = OptionParser()
        if asArgument { parser.applyArguments([Array(line.utf8)]) } else { parser.applyConfigFile(Array(line.utf8)) }
        return parser
    }

    /// Each key, from each source: a good value changes the option (and
    /// nothing is reported) exactly where the table allows it; a bad value
    /// changes nothing and says what was expected.
    func testEveryKeyParsesWhereTheTableAllowsIt() {
        for key in OptionKey.allCases {
            let name = String(describing: key.name)
            let (good, bad) = sample(key)
            for (asArgument, setter) in [(true, OptionSetters.stackLine), (false, OptionSetters.configFile)] {
                let parser = parsed("\(name)=\(good)", asArgument: asArgument)
                if key.setters.contains(setter) {
                    XCTAssertEqual(parser.diagnostics, [], "\(name) from \(setter)")
                    XCTAssertNotEqual(parser.options.value(of: key), Options().value(of: key), "\(name)=\(good) changed nothing")
                } else {
                    XCTAssertEqual(parser.diagnostics.count, 1, name)
                    XCTAssertTrue(parser.diagnostics.first?.contains("only valid") ?? false, "\(name): \(parser.diagnostics)")
                    XCTAssertEqual(parser.options, Options(), name)
                }
                guard key.setters.contains(setter) else { continue }
                let refused = parsed("\(name)=\(bad)", asArgument: asArgument)
                XCTAssertEqual(refused.options, Options(), "\(name)=\(bad)")
                XCTAssertTrue(refused.diagnostics.first?.contains(String(describing: key.kind.expectation)) ?? false, "\(name): \(refused.diagnostics)")
            }
        }
    }

    /// Numbers and durations are clamped to the table's range.
    func testEveryRangeClamps() {
        for key in OptionKey.allCases {
            guard case .number(let range) = key.kind, key.setters.contains(.configFile) else { continue }
            var parser = parsed("\(key.name) = 1000000", asArgument: false)
            parser.finish()
            XCTAssertEqual(parser.options.value(of: key), .number(key == .maxTries ? min(range.upperBound, parser.options.lockout)
                                                                                  : range.upperBound), "\(key.name)")
        }
        for key in OptionKey.allCases {
            guard case .duration(let range) = key.kind, key.setters.contains(.configFile) else { continue }
            var parser = parsed("\(key.name) = 1s", asArgument: false)
            parser.finish()
            XCTAssertEqual(parser.options.value(of: key), .number(range.lowerBound), "\(key.name)")
        }
    }

    /// The helper takes exactly the presentation keys; the module sends
    /// only those; every value it sends is one the helper's parser takes.
    func testTheHelperTakesPresentationOnly() {
        for key in OptionKey.allCases {
            XCTAssertEqual(HelperRequest.isPresentationKey(Array(String(describing: key.name).utf8)),
                           key.setters.contains(.presentation), "\(key.name)")
            guard key.setters.contains(.presentation) else { continue }
            var options = Options()
            let (good, _) = sample(key)
            var parser = OptionParser()
            parser.applyArguments([Array("\(key.name)=\(good)".utf8)])
            options = parser.options
            guard let wire = options.wireValue(of: key) else { return XCTFail("\(key.name) is not sent") }
            let (applied, diagnostics) = Options().withPresentation([(Array(String(describing: key.name).utf8), wire)])
            XCTAssertEqual(diagnostics, [], "\(key.name)")
            if key != .timeout && key != .services {      // these only narrow
                XCTAssertEqual(applied.value(of: key), options.value(of: key), "\(key.name)")
            }
        }
    }

    /// Every option shows in `status` with some text.
    func testEveryKeyHasAStatusValue() {
        for key in OptionKey.allCases {
            XCTAssertFalse(Options().displayValue(of: key).isEmpty, "\(key.name)")
        }
        XCTAssertEqual(Options().displayValue(of: .timeout), "30s")
        XCTAssertEqual(Options().displayValue(of: .maxTries), "3")
        XCTAssertEqual(Options().displayValue(of: .lockerServices), "swaylock,i3lock,xscreensaver,xsecurelock,hyprlock,vlock,mate-screensaver,cinnamon-screensaver,gdm-fingerprint,kde,kde-fingerprint")
    }

    /// On a locker that runs PAM as the user, every key the helper does not
    /// take from the stack line is reported.
    func testTheLintNamesEveryKeyALockerCannotPass() {
        for key in OptionKey.ignoredThroughTheHelper where key != .authsucc {
            let (good, _) = sample(key)
            let argument = key.kind == .flag ? String(describing: key.name) : "\(key.name)=\(good)"
            let stack = "auth [success=1 default=ignore] pam_localauth.so \(argument)\nauth required pam_unix.so\n"
            let lint = StackLint { name in name == "swaylock" ? Array(stack.utf8) : nil }
            XCTAssertTrue(lint.serviceFindings("swaylock").contains { $0.text.contains("\(key.name) is ignored for swaylock") },
                          "\(key.name)")
        }
        for key in OptionKey.presentationKeys {
            let (good, _) = sample(key)
            let stack = "auth [success=1 default=ignore] pam_localauth.so \(key.name)=\(good)\nauth required pam_unix.so\n"
            let lint = StackLint { name in name == "swaylock" ? Array(stack.utf8) : nil }
            XCTAssertFalse(lint.serviceFindings("swaylock").contains { $0.text.contains("is ignored for") }, "\(key.name)")
        }
    }

    // MARK: - The documents

    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()   // tests/unit/LocalAuthTests/this file

    func text(_ path: String) throws -> String {
        try String(contentsOf: OptionKeyTableTests.root.appendingPathComponent(path), encoding: .utf8)
    }

    /// The item headings (`.TP`/`.TQ` followed by the key) of a man page's
    /// section, as the keys they name.
    func manItems(_ path: String, section: String) throws -> Set<String> {
        let lines = try text(path).components(separatedBy: "\n")
        guard let start = lines.firstIndex(of: ".SH \(section)") else { XCTFail("\(path): no \(section)"); return [] }
        let end = lines[(start + 1)...].firstIndex { $0.hasPrefix(".SH ") } ?? lines.count
        var keys: Set<String> = []
        for index in (start + 1)..<end where lines[index] == ".TP" || lines[index] == ".TQ" {
            guard index + 1 < end else { continue }
            let heading = lines[index + 1].replacingOccurrences(of: "\"", with: "")
            guard heading.hasPrefix(".B") else { continue }
            let words = heading.split(separator: " ").dropFirst()
            guard let first = words.first else { continue }
            let key = String(first.prefix { $0.isLowercase || $0 == "_" })
            if !key.isEmpty { keys.insert(key) }
        }
        return keys
    }

    func names(_ keys: [OptionKey]) -> Set<String> { Set(keys.map { String(describing: $0.name) }) }

    /// The shipped example stacks are for known services, the Makefile
    /// installs every one, and the lint's service lists are the table's.
    func testTheShippedStacksAndTheLintFollowTheServiceTable() throws {
        let known = Set(KnownServices.table.map { "\($0.name)" })
        let shipped = try FileManager.default.contentsOfDirectory(atPath: OptionKeyTableTests.root.appendingPathComponent("pam.d").path)
        // localauth-passcode is the password check's own service; sudo-biometrics a variant of sudo's stack.
        let stacks = Set(shipped).subtracting(["localauth-passcode"])
        XCTAssertEqual(stacks.subtracting(known), ["sudo-biometrics"])
        let makefile = try text("Makefile").components(separatedBy: "\n")
        guard let start = makefile.firstIndex(where: { $0.hasPrefix("EXAMPLE_STACKS := ") }) else { return XCTFail("no EXAMPLE_STACKS") }
        var line = String(makefile[start].dropFirst("EXAMPLE_STACKS := ".count))
        var index = start
        while line.hasSuffix("\\") {
            index += 1
            line = String(line.dropLast()) + " " + makefile[index]
        }
        XCTAssertEqual(Set(line.split(whereSeparator: { $0 == " " || $0 == "\t" }).map(String.init)), stacks)
        XCTAssertEqual(StackLint.lockersRunningAsTheUser, Set(KnownServices.table.filter(\.runsAsTheUser).map { "\($0.name)" }))
        XCTAssertEqual(StackLint.lockersRunningAsTheUser, ["i3lock", "swaylock", "xscreensaver", "xsecurelock", "hyprlock",
                                                           "mate-screensaver", "cinnamon-screensaver", "kde", "kde-fingerprint"])
        XCTAssertEqual(StackLint.fingerprintConversations, ["gdm-fingerprint": "gdm-password", "kde-fingerprint": "kde"])
        for (conversation, partner) in StackLint.fingerprintConversations {
            XCTAssertNotNil(KnownServices.named(Array(conversation.utf8)))
            XCTAssertEqual(KnownServices.named(Array(partner.utf8))?.passwordConversation == nil, true, partner)
        }
        XCTAssertEqual(KnownServices.kind(of: literalBytes(KnownServices.app)), .app)
        XCTAssertNil(KnownServices.named(literalBytes(KnownServices.test)), "localauth test's service is never a default")
    }

    /// The man pages and README give the default services as the code has them.
    func testTheDocumentsGiveTheDefaultServices() throws {
        let defaults = Options.defaultServices.map { String(decoding: $0, as: UTF8.self) }
        let manList = "\"" + defaults.map { $0.replacingOccurrences(of: "-", with: "\\-") }.joined(separator: ", ") + "\""
        for page in ["man/pam_localauth.8", "man/localauth.conf.5"] {
            XCTAssertTrue(try text(page).contains(manList), "\(page) lacks \(manList)")
        }
        XCTAssertTrue(try text("README.md").contains("`" + defaults.joined(separator: ",") + "`"))
    }

    func testTheManPagesNameEveryKeyAndNoOther() throws {
        let configKeys = names(OptionKey.allCases.filter { $0.setters.contains(.configFile) })
        XCTAssertEqual(try manItems("man/localauth.conf.5", section: "KEYS"), configKeys)
        let argumentKeys = names(OptionKey.allCases.filter { $0.setters.contains(.stackLine) })
        XCTAssertEqual(try manItems("man/pam_localauth.8", section: "OPTIONS"), argumentKeys)
    }

    /// The protocol document's table of REQUEST fields lists the protocol's
    /// own fields and exactly the presentation keys.
    func testTheProtocolDocumentNamesThePresentationKeys() throws {
        let lines = try text("docs/HELPER-PROTOCOL.md").components(separatedBy: "\n")
        guard let heading = lines.firstIndex(of: "### REQUEST fields") else { return XCTFail("no REQUEST fields table") }
        var fields: Set<String> = []
        for line in lines[(heading + 1)...].drop(while: { !$0.hasPrefix("|") }).prefix(while: { $0.hasPrefix("|") }) {
            let first = line.split(separator: "|").first ?? ""
            for piece in first.split(separator: "`").enumerated() where piece.offset % 2 == 1 { fields.insert(String(piece.element)) }
        }
        let protocolFields: Set<String> = ["action", "service", "user", "tty", "reuse", "interactive", "keys"]
        XCTAssertEqual(fields.subtracting(protocolFields), names(OptionKey.presentationKeys))
    }
}
