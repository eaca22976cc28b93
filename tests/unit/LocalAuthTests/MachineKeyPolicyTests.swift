import XCTest
@testable import LocalAuth

/// What protects the secrets' machine key, as tables: the `tpm` option's
/// values, the first step from what is on disk and whether a TPM is used,
/// and what follows each answer of the TPM. A sealed key is never replaced
/// unless the TPM itself says it will never open it.
final class MachineKeyPolicyTests: XCTestCase {
    func testTheOptionsValues() {
        let rows: [(String, TPMChoice?)] = [
            ("auto", .auto), ("off", .off), ("/dev/tpmrm0", .device(Array("/dev/tpmrm0".utf8))), ("swtpm:700", .swtpm(port: 700)),
            ("swtpm:1022", .swtpm(port: 1022)), ("swtpm:1", .swtpm(port: 1)),
            // A port any user may listen on (or its control channel's) could stand in for the TPM.
            ("swtpm:1023", nil), ("swtpm:2321", nil), ("swtpm:65535", nil), ("swtpm:0", nil), ("swtpm:65536", nil), ("swtpm:", nil), ("swtpm:12a", nil),
            ("dev/tpm0", nil), ("/dev/../tpm0", nil), ("", nil), ("AUTO", nil), ("mssim:2321", nil),
        ]
        for (text, expected) in rows {
            XCTAssertEqual(TPMChoice(name: Array(text.utf8)), expected, text)
            if let expected { XCTAssertEqual(expected.name, Array(text.utf8), text) }
        }
    }

    func testTheOptionIsTheConfigurationFilesAlone() {
        XCTAssertEqual(OptionKey.tpm.setters, .configFile)
        var parser = OptionParser()
        parser.applyArguments([Array("tpm=off".utf8)])
        XCTAssertEqual(parser.options.tpm, .auto)
        XCTAssertFalse(parser.diagnostics.isEmpty)
        var fromFile = OptionParser()
        fromFile.applyConfigFile(Array("tpm = swtpm:700\n".utf8))
        XCTAssertEqual(fromFile.options.tpm, .swtpm(port: 700))
        XCTAssertEqual(fromFile.diagnostics, [])
    }

    func testTheUseFollowsTheOptionAndTheDevice() {
        XCTAssertEqual(TPMUse(.off, deviceExists: true), .off)
        XCTAssertEqual(TPMUse(.auto, deviceExists: false), .missing)
        XCTAssertEqual(TPMUse(.auto, deviceExists: true), .automatic)
        XCTAssertEqual(TPMUse(.swtpm(port: 1), deviceExists: false), .named)
        XCTAssertEqual(TPMUse(.device(Array("/dev/tpm0".utf8)), deviceExists: false), .named)
    }

    typealias Row = (use: TPMUse, sealed: Bool, file: Bool, step: MachineKeyStep)

    static let firstSteps: [Row] = [
        (.off, false, false, .useFile), (.off, true, false, .useFile), (.off, false, true, .useFile), (.off, true, true, .useFile),
        // A sealed key whose TPM is missing at this boot: kept, and refused.
        (.missing, false, false, .useFile), (.missing, true, false, .refuse), (.missing, false, true, .useFile),
        (.missing, true, true, .useFile),
        (.automatic, false, false, .sealNewKey), (.automatic, true, false, .unseal), (.automatic, false, true, .sealFileKey),
        (.automatic, true, true, .unseal),
        (.named, false, false, .sealNewKey), (.named, true, false, .unseal), (.named, false, true, .sealFileKey),
        (.named, true, true, .unseal),
    ]

    func testTheFirstStep() {
        XCTAssertEqual(Self.firstSteps.count, TPMUse.allCases.count * 4)
        for row in Self.firstSteps {
            let facts = MachineKeyFacts(use: row.use, sealedKeyPresent: row.sealed, fileKeyPresent: row.file)
            XCTAssertEqual(MachineKeyPolicy.firstStep(facts), row.step, "\(row)")
        }
    }

    func testWhatFollowsTheUnseal() {
        let rows: [(TPMAnswer, MachineKeyAfterUnseal)] = [
            (.done, .use), (.notItsOwn, .sealNewKey), (.badBlob, .sealNewKey), (.unreachable, .refuse), (.failed, .refuse),
        ]
        XCTAssertEqual(rows.count, TPMAnswer.allCases.count)
        for (answer, next) in rows { XCTAssertEqual(MachineKeyPolicy.afterUnseal(answer), next, "\(answer)") }
    }

    func testASealThatFailsFallsBackOnlyUnderAuto() {
        XCTAssertEqual(MachineKeyPolicy.afterSealFailed(.automatic), .useFile)
        XCTAssertEqual(MachineKeyPolicy.afterSealFailed(.named), .refuse)
    }

    /// The invariant: where a sealed key is on disk and a TPM is used, no
    /// answer but the TPM's own "not mine" (or a file that is no blob)
    /// leads to a new key.
    func testASealedKeyIsReplacedOnlyWhenTheTPMDisownsIt() {
        for row in Self.firstSteps where row.sealed && row.step == .unseal {
            for answer in TPMAnswer.allCases where MachineKeyPolicy.afterUnseal(answer) == .sealNewKey {
                XCTAssertTrue(answer == .notItsOwn || answer == .badBlob, "\(row) \(answer)")
            }
        }
    }
}

import LibcSystem

/// The TPM device check, where the machine has no TPM (a TPM's positive
/// answer is the kernel's class `tpm` or `tpmrm`, which needs one): a
/// character device of another class, a file, a directory and nothing are
/// refused.
final class TPMDeviceCheckTests: XCTestCase {
    func testOnlyATPMsDeviceIsOne() {
        for path in ["/dev/null", "/dev/zero", "/etc/hostname", "/dev", "/nonexistent/tpmrm0"] {
            XCTAssertFalse(Syscalls.isTPMDevice(Array(path.utf8)), path)
        }
    }
}
