import XCTest
@testable import LocalAuth

/// The secret actions on the helper's wire: their requests and what makes
/// one refused, the SECRET frame's cap, and SECRET_STATUS with its RESULT
/// read back as the one verdict every client maps.
final class SecretProtocolTests: XCTestCase {
    func request(_ action: HelperAction, item: String? = "git/example.org") -> HelperRequest {
        var request = HelperRequest()
        request.action = action
        request.service = bytes("localauth-app")
        if let item { request.item = bytes(item) }
        return request
    }

    func testSecretRequestsRoundTrip() {
        for action in HelperAction.allCases where action.isSecret {
            var sent = request(action, item: action.namesItem ? "git/example.org" : nil)
            if action == .secretStore { sent.access = .matchOfCurrentSet }
            XCTAssertEqual(HelperRequest.decode(sent.encoded()), .success(sent), "\(action)")
        }
        for requirement in SecretRequirement.allCases {
            XCTAssertEqual(SecretRequirement(name: literalBytes(requirement.name)), requirement)
        }
        XCTAssertEqual(HelperAction.allCases.map { "\($0.wireName)" },
                       ["evaluate", "check", "secret-store", "secret-load", "secret-delete", "secret-list"])
    }

    /// What a secret request may not be: refused before anything is read,
    /// asked or charged.
    func testMalformedSecretRequestsAreRefused() {
        let rows: [(String, String)] = [
            ("no item", "action=secret-load\0service=localauth-app"),
            ("an empty item", "action=secret-load\0service=localauth-app\0item="),
            ("a control character in the item", "action=secret-load\0service=localauth-app\0item=a\u{1B}b"),
            ("invalid UTF-8", "action=secret-delete\0service=localauth-app\0item=\u{FFFD}"),
            ("an item for the list", "action=secret-list\0service=localauth-app\0item=x"),
            ("an item for an evaluation", "action=evaluate\0service=localauth-app\0item=x"),
            ("access for a load", "action=secret-load\0service=localauth-app\0item=x\0access=biometry"),
            ("an unknown access", "action=secret-store\0service=localauth-app\0item=x\0access=finger"),
            ("another service", "action=secret-load\0service=sudo\0item=x"),
            ("another user", "action=secret-load\0service=localauth-app\0item=x\0user=bob"),
            ("a reuse window", "action=secret-load\0service=localauth-app\0item=x\0reuse=10"),
        ]
        for (label, payload) in rows {
            var bytes = Array(payload.utf8)
            if label == "invalid UTF-8" { bytes = Array("action=secret-delete\0service=localauth-app\0item=".utf8) + [0xC3, 0x28] }
            XCTAssertEqual(HelperRequest.decode(bytes), .failure(.badSecretRequest), label)
        }
        let long = String(repeating: "x", count: SecretItemFormat.maxIdentifierBytes + 1)
        XCTAssertEqual(HelperRequest.decode(Array("action=secret-load\0service=localauth-app\0item=\(long)".utf8)), .failure(.badSecretRequest))
        XCTAssertEqual(HelperRequest.decode(Array("action=secret-take\0service=localauth-app\0item=x".utf8)), .failure(.malformed))
    }

    func testTheSecretFrameIsCappedAtTheLargestSecret() {
        XCTAssertTrue(FrameType.secret.carriesSecret)
        XCTAssertTrue(FrameType.reply.carriesSecret)
        XCTAssertFalse(FrameType.itemName.carriesSecret)
        guard case .success = HelperWire.parseHeader(HelperWire.header(.secret, length: SecretItemFormat.maxSecretBytes)) else {
            return XCTFail()
        }
        guard case .failure(.oversized(.secret)) = HelperWire.parseHeader(HelperWire.header(.secret, length: SecretItemFormat.maxSecretBytes + 1))
        else { return XCTFail() }
    }

    /// Every status with every outcome it is sent with, encoded, on the
    /// wire and back: the verdict means what the helper meant, and only a
    /// done status with its RESULT's success is done.
    func testEveryStatusReadsBackAsItWasMeant() {
        for status in SecretStatus.allCases {
            let outcomes: [Outcome?] = [nil, .success(.biometry), .success(.passcode)] + LAErrorCode.allCases.map { .failure($0) }
            for outcome in outcomes {
                let label = "\(status) \(String(describing: outcome))"
                let sent = SecretVerdict.result(status, outcome: outcome)
                guard let received = ResultFrame.decode(sent.encoded()) else { XCTFail("\(label): does not decode"); continue }
                let verdict = SecretVerdict(status: status, result: received)
                switch (status, outcome) {
                case (.done, .success(let method)?): XCTAssertEqual(verdict, .done(method), label)
                case (.done, _): XCTAssertEqual(verdict, .done(nil), label)
                case (.denied, .failure(let error)?): XCTAssertEqual(verdict, .denied(error), label)
                case (.denied, _): XCTAssertEqual(verdict, .helper(.failed("its status did not fit its RESULT")), label)
                default: XCTAssertEqual(verdict, .item(status), label)
                }
                XCTAssertFalse(status.sentence.isEmpty)
            }
        }
    }

    /// A RESULT that does not fit its status, or a grant without a status,
    /// is the helper's failure, never a secret action done.
    func testAMismatchIsNeverDone() {
        let grant = ResultFrame(status: .evaluated, pamCode: 0, method: .biometry)
        XCTAssertEqual(SecretVerdict(status: nil, result: grant), .helper(.failed("it granted a secret action without its status")))
        XCTAssertEqual(SecretVerdict(status: .absent, result: grant), .helper(.failed("its status did not fit its RESULT")))
        let denied = ResultFrame(status: .evaluated, pamCode: 7, error: .authenticationFailed)
        XCTAssertEqual(SecretVerdict(status: .done, result: denied), .helper(.failed("its status did not fit its RESULT")))
        XCTAssertEqual(SecretVerdict(status: nil, result: denied), .helper(.denied(.authenticationFailed, failDelay: false)))
        // The helper's own ends stand as they are.
        let refused = ResultFrame(status: .refused, pamCode: 4, error: .invalidContext)
        XCTAssertEqual(SecretVerdict(status: nil, result: refused), .helper(.refused))
        // A handled status claiming success with a method or an error is garbage.
        XCTAssertNil(ResultFrame.decode(ResultFrame(status: .secretHandled, pamCode: 0, method: .biometry).encoded()))
        XCTAssertNil(ResultFrame.decode(ResultFrame(status: .secretHandled, pamCode: 0, error: .userCancel).encoded()))
    }

    /// What an app's rights see: one code per item status (with its
    /// sentence), an evaluation's error as it is, the helper's own ends as
    /// LAContext sees them, and nothing for done.
    func testTheAppsCodeOfEachEnding() {
        let rows: [(SecretStatus, LAErrorCode)] = [
            (.absent, .invalidContext), (.invalidated, .invalidContext), (.quotaReached, .invalidContext),
            (.keyNeedsPassword, .biometryLockout), (.storeFailed, .systemCancel),
        ]
        XCTAssertEqual(rows.count, SecretStatus.allCases.count - 2)
        for (status, code) in rows {
            XCTAssertEqual(SecretVerdict.item(status).appError?.error, code, "\(status)")
            XCTAssertEqual(SecretVerdict.item(status).appError?.message, status.sentence)
        }
        XCTAssertNil(SecretVerdict.done(nil).appError)
        XCTAssertNil(SecretVerdict.done(.biometry).appError)
        for error in LAErrorCode.allCases { XCTAssertEqual(SecretVerdict.denied(error).appError?.error, error) }
        XCTAssertEqual(SecretVerdict.helper(.refused).appError?.error, HelperVerdict.refused.appError?.error)
        XCTAssertEqual(SecretVerdict.helper(.outOfScope).appError?.error, .biometryNotAvailable)
        // A helper that granted without the secret's answer is a failure, never a success.
        XCTAssertEqual(SecretVerdict.helper(.granted(.biometry, domainState: [])).appError?.error, .systemCancel)
    }
}

/// The sentence a secret's load shows: the secret's name first, whatever
/// the caller's reason holds or however long it grows.
final class SecretReasonTests: XCTestCase {
    func shown(_ callerReason: String?, item: String) -> String {
        var options = Options()
        options.reason = UserText.secretReason(callerReason.map { Array($0.utf8) }, item: Array(item.utf8))
        let request = Request(scope: .inScope, userName: Array("alice".utf8), user: UserIdentity(uid: 1001, name: Array("alice".utf8)),
                              service: Array("localauth-app".utf8), mode: .scan)
        return UserText.reason(request, options: options)
    }

    func testTheNameComesFirstAndShowsAsItIs() {
        XCTAssertEqual(shown(nil, item: "git/example.org"), "Your secret \"git/example.org\" is asked for.")
        XCTAssertEqual(shown("Deploy (%u)", item: "100%sure"), "Your secret \"100%sure\": Deploy (alice)")
        let flood = String(repeating: "%s", count: 200)
        XCTAssertTrue(shown(flood, item: "github-token").hasPrefix("Your secret \"github-token\": localauth-app"))
    }
}
