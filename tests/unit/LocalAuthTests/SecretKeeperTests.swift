import XCTest
import Glibc
@testable import LocalAuth
@testable import Secrets

/// The helper's work on a user's secrets after a verdict, on real files in
/// the store tests' world: store then load; an enrollment change deletes
/// the items bound to it and no other; a machine key made anew loses
/// nothing once the password comes; another user's key opens nothing.
final class SecretKeeperTests: StoreFixture {
    let digest = [UInt8](repeating: 1, count: 32)
    let changed = [UInt8](repeating: 2, count: 32)

    func keeper(_ uid: UInt32 = 1001) -> SecretKeeper {
        SecretKeeper(items: ItemStore(stateDirectory: bytes(directory), uid: uid, trustedOwner: geteuid(), tpm: .off))
    }

    func secret(_ text: String) -> SecretBuffer {
        let buffer = SecretBuffer(limit: SecretItemFormat.maxSecretBytes)
        let bytes = Array(text.utf8)
        bytes.withUnsafeBufferPointer { buffer.assign(from: $0.baseAddress!, length: $0.count) }
        return buffer
    }

    func load(_ identifier: String, digest: [UInt8]? = nil, password: String? = nil, uid: UInt32 = 1001) throws -> (SecretKeeper.Loaded, String) {
        let out = SecretBuffer(limit: SecretItemFormat.maxSecretBytes)
        let result = try keeper(uid).load(Array(identifier.utf8), enrollmentDigest: digest ?? self.digest, password: password.map(secret), into: out)
        return (result, out.withBytes { String(decoding: UnsafeBufferPointer(start: $0, count: $1), as: UTF8.self) })
    }

    func testAStoredSecretLoadsBack() throws {
        try keeper().store(secret("token-1"), identifier: Array("git/example.org".utf8), requirement: .matchOrPassword,
                           enrollmentDigest: digest, wallSeconds: 1)
        XCTAssertEqual(try load("git/example.org").0, .opened)
        XCTAssertEqual(try load("git/example.org").1, "token-1")
        XCTAssertEqual(try load("nothing").0, .absent)
        var info = stat()
        XCTAssertEqual(lstat(path("secrets/machine.key"), &info), 0)
        XCTAssertEqual(info.st_mode & 0o777, 0o600)
        XCTAssertEqual(lstat(path("secrets/1001/key.machine"), &info), 0)
        XCTAssertNotEqual(lstat(path("secrets/1001/key.password"), &info), 0, "no password came")
    }

    /// An enrollment change: the item bound to it is deleted and says so;
    /// an item of `.biometry` still opens.
    func testAnEnrollmentChangeInvalidatesOnlyTheCurrentSetsItems() throws {
        try keeper().store(secret("bound"), identifier: Array("bound".utf8), requirement: .matchOfCurrentSet, enrollmentDigest: digest, wallSeconds: 1)
        try keeper().store(secret("any"), identifier: Array("any".utf8), requirement: .match, enrollmentDigest: digest, wallSeconds: 1)
        XCTAssertEqual(try load("bound", digest: changed).0, .invalidated)
        XCTAssertEqual(try load("bound").0, .absent, "deleted")
        XCTAssertEqual(try load("any", digest: changed).1, "any")
    }

    /// Another user's key is another key: a copy of one user's item in
    /// another's directory opens nothing (it is not even that uid's item).
    func testAnotherUsersKeyOpensNothing() throws {
        try keeper().store(secret("mine"), identifier: Array("x".utf8), requirement: .match, enrollmentDigest: digest, wallSeconds: 1)
        try keeper(1002).store(secret("theirs"), identifier: Array("x".utf8), requirement: .match, enrollmentDigest: digest, wallSeconds: 1)
        XCTAssertNotEqual(readFile("secrets/1001/key.machine"), readFile("secrets/1002/key.machine"))
        XCTAssertEqual(try load("x", uid: 1002).1, "theirs")
        XCTAssertEqual(try load("x").1, "mine")
    }

    /// A machine key made anew (a restored system; a cleared TPM later):
    /// without the password nothing opens and nothing is lost; with it the
    /// items open and the machine's copy is made again.
    func testTheMachineKeyMadeAnewLosesNothingOnceThePasswordComes() throws {
        let keeper = keeper()
        try keeper.store(secret("kept"), identifier: Array("x".utf8), requirement: .matchOrPassword, enrollmentDigest: digest, wallSeconds: 1,
                         password: secret("alice-secret"))
        XCTAssertEqual(readFile("secrets/1001/key.password")?.count, SecretKeyFile.fileSize)
        unlink(path("secrets/machine.key"))
        XCTAssertEqual(try load("x").0, .unopenable)
        XCTAssertThrowsError(try keeper.store(secret("new"), identifier: Array("y".utf8), requirement: .match, enrollmentDigest: digest,
                                              wallSeconds: 1)) { XCTAssertEqual($0 as? ItemStore.Failure, .keyUnavailable) }
        XCTAssertEqual(try load("x", password: "wrong").0, .unopenable)
        XCTAssertEqual(try load("x", password: "alice-secret").1, "kept")
        XCTAssertEqual(try load("x").1, "kept", "the machine's copy made again")
    }

    /// The password's copy is written when missing or made with another
    /// password, and left alone when it opens with this one.
    func testThePasswordsCopyFollowsThePassword() throws {
        let keeper = keeper()
        try keeper.rememberPassword(secret("alice-secret"))
        XCTAssertNil(readFile("secrets/1001/key.password"), "no key, nothing to remember")
        try keeper.store(secret("kept"), identifier: Array("x".utf8), requirement: .match, enrollmentDigest: digest, wallSeconds: 1)
        try keeper.rememberPassword(secret("alice-secret"))
        let first = try XCTUnwrap(readFile("secrets/1001/key.password"))
        try keeper.rememberPassword(secret("alice-secret"))
        XCTAssertEqual(readFile("secrets/1001/key.password"), first, "not stale: not rewritten")
        try keeper.rememberPassword(secret("a-new-password"))
        XCTAssertNotEqual(readFile("secrets/1001/key.password"), first)
        unlink(path("secrets/machine.key"))
        XCTAssertEqual(try load("x", password: "alice-secret").0, .unopenable, "the old password no longer opens it")
        XCTAssertEqual(try load("x", password: "a-new-password").1, "kept")
    }

    /// Where the key stands before anything is asked: none, opens, needs
    /// the password once the machine key is made anew, lost without a
    /// password's copy; and a password that passes heals the machine's copy.
    func testTheKeysStateAndThePasswordHealingIt() throws {
        let keeper = keeper()
        XCTAssertEqual(try keeper.keyState(), .none)
        XCTAssertFalse(try keeper.hasKey())
        XCTAssertNil(readFile("secrets/1001"), "a look makes nothing")
        try keeper.store(secret("kept"), identifier: Array("x".utf8), requirement: .match, enrollmentDigest: digest, wallSeconds: 1,
                         password: secret("alice-secret"))
        XCTAssertEqual(try keeper.keyState(), .opens)
        unlink(path("secrets/machine.key"))
        XCTAssertEqual(try keeper.keyState(), .needsPassword)
        try keeper.rememberPassword(secret("wrong"))
        XCTAssertEqual(try keeper.keyState(), .needsPassword, "a wrong password heals nothing and replaces nothing")
        try keeper.rememberPassword(secret("alice-secret"))
        XCTAssertEqual(try keeper.keyState(), .opens, "the machine's copy made again")
        XCTAssertEqual(try load("x").1, "kept")
        unlink(path("secrets/1001/key.password"))
        unlink(path("secrets/machine.key"))
        XCTAssertEqual(try keeper.keyState(), .lost)
    }

    /// Every write of a user's items and key copies is made under the
    /// user's lock (so two first stores cannot make two keys): while
    /// another holds it, a store waits its bound, then fails having
    /// written nothing.
    func testAStoreWaitsForTheUsersLockThenGivesUp() throws {
        try keeper().store(secret("first"), identifier: Array("x".utf8), requirement: .match, enrollmentDigest: digest, wallSeconds: 1)
        let holder = open(path("secrets/1001"), O_RDONLY | O_DIRECTORY)
        XCTAssertGreaterThanOrEqual(holder, 0)
        defer { close(holder) }
        XCTAssertEqual(flock(holder, LOCK_EX | LOCK_NB), 0)
        var waiting = keeper()
        var items = waiting.items
        items.lockWaitMilliseconds = 50
        waiting = SecretKeeper(items: items)
        XCTAssertThrowsError(try waiting.store(secret("second"), identifier: Array("x".utf8), requirement: .match, enrollmentDigest: digest,
                                               wallSeconds: 1)) { XCTAssertEqual($0 as? ItemStore.Failure, .io(.tryAgain)) }
        XCTAssertThrowsError(try waiting.rememberPassword(secret("alice-secret"))) { XCTAssertEqual($0 as? ItemStore.Failure, .io(.tryAgain)) }
        flock(holder, LOCK_UN)
        XCTAssertEqual(try load("x").1, "first")
        XCTAssertNil(readFile("secrets/1001/key.password"))
        try waiting.store(secret("second"), identifier: Array("x".utf8), requirement: .match, enrollmentDigest: digest, wallSeconds: 1)
        XCTAssertEqual(try load("x").1, "second")
    }

    /// The marker of the account's password hash says, without Argon2id,
    /// that nothing is stale; a changed hash (`passwd`) or a machine key
    /// made anew runs it again, and mends what is stale.
    func testTheMarkerSparesArgon2UntilSomethingIsStale() throws {
        let keeper = keeper()
        let hash = Array("$y$j9T$salt$hash-one".utf8)
        try keeper.store(secret("kept"), identifier: Array("x".utf8), requirement: .match, enrollmentDigest: digest, wallSeconds: 1,
                         password: secret("alice-secret"))
        XCTAssertTrue(try keeper.rememberPassword(secret("alice-secret"), accountHash: hash), "no marker yet")
        XCTAssertEqual(readFile("secrets/1001/key.password.for")?.count, KeyWrapping.markerSize)
        XCTAssertFalse(try keeper.rememberPassword(secret("alice-secret"), accountHash: hash), "current: nothing runs")
        XCTAssertTrue(try keeper.rememberPassword(secret("a-new-password"), accountHash: Array("$y$j9T$salt$hash-two".utf8)))
        unlink(path("secrets/machine.key"))
        XCTAssertEqual(try load("x", password: "a-new-password").1, "kept", "the copy was rewritten with the new password")
        XCTAssertTrue(try keeper.rememberPassword(secret("a-new-password"), accountHash: Array("$y$j9T$salt$hash-two".utf8)),
                      "the machine copy no longer opened: checked")
        XCTAssertFalse(try keeper.rememberPassword(secret("a-new-password"), accountHash: Array("$y$j9T$salt$hash-two".utf8)))
        XCTAssertFalse(readFile("secrets/1001/key.password.for").map { String(decoding: $0, as: UTF8.self).contains("hash") } ?? true)
    }

    /// A key file that is there but not as the store makes it (a second
    /// link, as `cp -al` makes; another mode) is refused, never replaced:
    /// nothing is written, and the items open again once it is mended.
    func testAnOddKeyFileIsRefusedNeverReplaced() throws {
        let keeper = keeper()
        try keeper.store(secret("kept"), identifier: Array("x".utf8), requirement: .match, enrollmentDigest: digest, wallSeconds: 1,
                         password: secret("alice-secret"))
        let machineKey = try XCTUnwrap(readFile("secrets/machine.key"))
        let machineCopy = try XCTUnwrap(readFile("secrets/1001/key.machine"))
        XCTAssertEqual(link(path("secrets/machine.key"), path("machine.key.backup")), 0)
        XCTAssertThrowsError(try keeper.keyState()) { XCTAssertEqual($0 as? ItemStore.Failure, .oddFile(Array("machine.key".utf8))) }
        XCTAssertThrowsError(try keeper.store(secret("new"), identifier: Array("y".utf8), requirement: .match, enrollmentDigest: digest,
                                              wallSeconds: 1)) { XCTAssertEqual($0 as? ItemStore.Failure, .oddFile(Array("machine.key".utf8))) }
        XCTAssertEqual(readFile("secrets/machine.key"), machineKey, "not made anew")
        unlink(path("machine.key.backup"))
        chmod(path("secrets/1001/key.machine"), 0o644)
        XCTAssertThrowsError(try load("x")) { XCTAssertEqual($0 as? ItemStore.Failure, .oddFile(Array("key.machine".utf8))) }
        XCTAssertThrowsError(try keeper.store(secret("new"), identifier: Array("y".utf8), requirement: .match, enrollmentDigest: digest,
                                              wallSeconds: 1, password: secret("alice-secret")))
        XCTAssertEqual(readFile("secrets/1001/key.machine"), machineCopy, "not replaced by a new key")
        chmod(path("secrets/1001/key.machine"), 0o600)
        XCTAssertEqual(try load("x").1, "kept")
    }

    /// A uid a new account reuses: the former account's directory is moved
    /// aside, so the new one starts with none and never opens its key; the
    /// same account under another of its names keeps its own.
    func testAReusedUIDStartsWithNoSecrets() throws {
        var items = keeper().items
        items.accountName = Array("alice".utf8)
        let keeper = SecretKeeper(items: items)
        XCTAssertNil(try keeper.items.settleOwner(Array("alice".utf8)), "nothing there: nothing to settle")
        try keeper.store(secret("alices"), identifier: Array("x".utf8), requirement: .match, enrollmentDigest: digest, wallSeconds: 1)
        XCTAssertEqual(readFile("secrets/1001/account"), Array("alice".utf8), "named before anything was written into it")
        XCTAssertNil(try keeper.items.settleOwner(Array("alice".utf8)))
        XCTAssertNil(try keeper.items.settleOwner(Array("alice".utf8)))
        XCTAssertEqual(try keeper.items.settleOwner(Array("newbie".utf8)), Array("alice".utf8))
        XCTAssertEqual(try keeper.items.identifiers(), [])
        XCTAssertEqual(try keeper.keyState(), .none)
        let aside = try FileManager.default.contentsOfDirectory(atPath: path("secrets")).filter { $0.hasPrefix("1001.former-") }
        XCTAssertEqual(aside.count, 1)
        XCTAssertNotNil(readFile("secrets/\(aside[0])/key.machine"), "kept for root, not deleted")
        // A directory that holds secrets and names no account cannot be
        // told whose it is: moved aside too; an empty one is named.
        let unnamed = self.keeper()
        try unnamed.store(secret("whose"), identifier: Array("y".utf8), requirement: .match, enrollmentDigest: digest, wallSeconds: 1)
        XCTAssertNotNil(try unnamed.items.settleOwner(Array("newbie".utf8)))
        XCTAssertEqual(try unnamed.items.identifiers(), [])
        XCTAssertEqual(mkdir(path("secrets/1001"), 0o700), 0)
        let fd = open(path("secrets/1001/.new-account"), O_WRONLY | O_CREAT, 0o600)
        close(fd)
        XCTAssertNil(try unnamed.items.settleOwner(Array("newbie".utf8)), "nothing but a killed write's temporary: named, not moved")
        XCTAssertEqual(readFile("secrets/1001/account"), Array("newbie".utf8))
        // Only the very name is the account's: no name service decides it
        // (a stale cache would adopt a former account's directory).
        XCTAssertNotNil(try unnamed.items.settleOwner(Array("newbie@example.org".utf8)))
        XCTAssertThrowsError(try unnamed.items.settleOwner([]))
    }

    /// A key copy that is there and of the right size but not one this
    /// build reads (a damaged header) is refused, never replaced by a new key.
    func testAKeyCopyThatDoesNotParseIsNeverReplaced() throws {
        let keeper = keeper()
        try keeper.store(secret("kept"), identifier: Array("x".utf8), requirement: .match, enrollmentDigest: digest, wallSeconds: 1)
        var copy = try XCTUnwrap(readFile("secrets/1001/key.machine"))
        copy[0] ^= 0xFF
        let fd = open(path("secrets/1001/key.machine"), O_WRONLY | O_TRUNC)
        XCTAssertEqual(write(fd, copy, copy.count), copy.count)
        close(fd)
        XCTAssertThrowsError(try keeper.store(secret("new"), identifier: Array("y".utf8), requirement: .match, enrollmentDigest: digest,
                                              wallSeconds: 1)) { XCTAssertEqual($0 as? ItemStore.Failure, .oddFile(Array("key.machine".utf8))) }
        XCTAssertEqual(readFile("secrets/1001/key.machine"), copy)
    }

    /// The password's key is derived from what the password check saw: PAM
    /// reads a C string, so bytes after a NUL are not part of it.
    func testBytesAfterANulAreNotPartOfThePasswordsKey() throws {
        let keeper = keeper()
        let typed = SecretBuffer()
        let bytes = Array("alice-secret".utf8) + [0] + Array("junk".utf8)
        bytes.withUnsafeBufferPointer { typed.assign(from: $0.baseAddress!, length: $0.count) }
        try keeper.store(secret("kept"), identifier: Array("x".utf8), requirement: .matchOrPassword, enrollmentDigest: digest,
                         wallSeconds: 1, password: typed)
        unlink(path("secrets/machine.key"))
        XCTAssertEqual(try load("x", password: "alice-secret").1, "kept")
    }

    /// An odd entry where a file is written (a directory at the temporary's
    /// name or the item's) is repaired under the user's own lock, which the
    /// writer holds: the store goes through.
    func testAnOddEntryIsRepairedUnderTheUsersLock() throws {
        let keeper = keeper()
        try keeper.store(secret("one"), identifier: Array("x".utf8), requirement: .match, enrollmentDigest: digest, wallSeconds: 1)
        let name = String(decoding: ItemStore.fileName(Array("x".utf8)), as: UTF8.self)
        XCTAssertEqual(mkdir(path("secrets/1001/.new-\(name)"), 0o700), 0)
        XCTAssertEqual(mkdir(path("secrets/1001/.new-\(name)/inside"), 0o700), 0)
        try keeper.store(secret("two"), identifier: Array("x".utf8), requirement: .match, enrollmentDigest: digest, wallSeconds: 1)
        XCTAssertEqual(try load("x").1, "two")
    }
}
