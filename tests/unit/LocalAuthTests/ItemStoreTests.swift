import XCTest
import Glibc
@testable import LocalAuth
@testable import Secrets

/// The helper's store of sealed items, on real files in the store tests'
/// world: each item whole under a name its identifier cannot choose, one
/// user's directory private to the owner, the quota, and files that are not
/// an item of this uid never read as one.
final class ItemStoreTests: StoreFixture {
    func items(_ uid: UInt32 = 1001) -> ItemStore { ItemStore(stateDirectory: bytes(directory), uid: uid, trustedOwner: geteuid(), tpm: .off) }

    func item(_ identifier: String, secret: [UInt8] = [1, 2, 3], uid: UInt32 = 1001) -> [UInt8] {
        SecretItemFormat.authenticatedPart(requirement: .matchOrPassword, uid: uid, createdWallSeconds: 1,
                                           nonce: [UInt8](repeating: 9, count: SecretItemFormat.nonceSize),
                                           identifier: Array(identifier.utf8), secretLength: secret.count)!
            + secret + [UInt8](repeating: 0, count: SecretItemFormat.tagSize)
    }

    func testSavedItemsLoadListAndGo() throws {
        let store = items()
        XCTAssertEqual(try store.identifiers(), [])
        XCTAssertNil(try store.load(Array("a".utf8)), "nothing made by a look")
        XCTAssertNil(readFile("secrets"))
        try store.save(item("git/example.org"))
        try store.save(item("a"))
        try store.save(item("a", secret: [7]))   // replaced
        XCTAssertEqual(try store.identifiers(), [Array("a".utf8), Array("git/example.org".utf8)])
        XCTAssertEqual(try store.load(Array("a".utf8))?.sealed.first, 7)
        var info = stat()
        XCTAssertEqual(lstat(path("secrets/1001"), &info), 0)
        XCTAssertEqual(info.st_mode & 0o777, 0o700)
        XCTAssertEqual(lstat(path("secrets"), &info), 0)
        XCTAssertEqual(info.st_mode & 0o777, 0o700)
        XCTAssertTrue(try store.remove(Array("a".utf8)))
        XCTAssertFalse(try store.remove(Array("a".utf8)))
        XCTAssertEqual(try store.identifiers(), [Array("git/example.org".utf8)])
        XCTAssertEqual(try items(1002).identifiers(), [], "another user's directory holds nothing of this one's")
    }

    func testWhatIsNotAnItemOfThisUIDIsNeitherSavedNorRead() throws {
        let store = items()
        XCTAssertThrowsError(try store.save(item("x", uid: 1002))) { XCTAssertEqual($0 as? ItemStore.Failure, .notAnItem) }
        XCTAssertThrowsError(try store.save([1, 2, 3])) { XCTAssertEqual($0 as? ItemStore.Failure, .notAnItem) }
        try store.save(item("x"))
        let name = String(decoding: ItemStore.fileName(Array("x".utf8)), as: UTF8.self)
        // Another uid's item, or one filed under another identifier's name,
        // put there by hand: never read as this one.
        writeFile("secrets/1001/" + name, item("x", uid: 1002))
        XCTAssertNil(try store.load(Array("x".utf8)))
        writeFile("secrets/1001/" + name, item("y"))
        XCTAssertNil(try store.load(Array("x".utf8)))
        XCTAssertEqual(try store.identifiers(), [])
        // A second name (a hard link) or a mode open to others: not the store's.
        writeFile("secrets/1001/" + name, item("x"), mode: 0o644)
        XCTAssertNil(try store.load(Array("x".utf8)))
        writeFile("secrets/1001/" + name, item("x"))
        XCTAssertEqual(link(path("secrets/1001/" + name), path("secrets/1001/other")), 0)
        XCTAssertNil(try store.load(Array("x".utf8)))
        unlink(path("secrets/1001/other"))
        XCTAssertNotNil(try store.load(Array("x".utf8)))
    }

    func testADirectoryOpenToOthersOrASymlinkIsRefused() throws {
        try items().save(item("x"))
        chmod(path("secrets/1001"), 0o750)
        XCTAssertThrowsError(try items().identifiers()) { XCTAssertEqual($0 as? ItemStore.Failure, .unsafeDirectory) }
        chmod(path("secrets/1001"), 0o700)
        XCTAssertEqual(mkdir(path("elsewhere"), 0o700), 0)
        XCTAssertEqual(symlink(path("elsewhere"), path("secrets/1002")), 0)
        XCTAssertThrowsError(try items(1002).save(item("x", uid: 1002))) { XCTAssertEqual($0 as? ItemStore.Failure, .unsafeDirectory) }
        unlink(path("secrets/1002"))
        rmdir(path("elsewhere"))
    }

    /// The quota counts items, not bytes written: the thousandth item is
    /// taken, the next new one refused, a replacement of one kept still taken.
    func testTheQuotaRefusesANewItemPastTheLimit() throws {
        let store = items()
        for index in 0..<SecretItemFormat.maxItemsPerUser { try store.save(item("item-\(index)")) }
        XCTAssertThrowsError(try store.save(item("one-more"))) { XCTAssertEqual($0 as? ItemStore.Failure, .quotaReached) }
        XCTAssertNoThrow(try store.save(item("item-0", secret: [9])))
        XCTAssertEqual(try store.identifiers().count, SecretItemFormat.maxItemsPerUser)
    }

    /// A temporary file a crash left beside an item is not an item, and the
    /// next save of that item goes through it.
    func testALeftoverTemporaryFileIsNoItem() throws {
        let store = items()
        try store.save(item("x"))
        let name = String(decoding: ItemStore.fileName(Array("x".utf8)), as: UTF8.self)
        writeFile("secrets/1001/.new-" + name, [1, 2])
        XCTAssertEqual(try store.identifiers(), [Array("x".utf8)])
        try store.save(item("x", secret: [5]))
        XCTAssertEqual(try store.load(Array("x".utf8))?.sealed.first, 5)
        XCTAssertNil(readFile("secrets/1001/.new-" + name))
    }
}
