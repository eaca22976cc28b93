import Foundation
import XCTest
import Glibc
@testable import LocalAuth
@testable import LibcSystem

/// The store tests' one world: the real `FileStateStore` in a private
/// temporary directory owned by the user running the tests, and what the
/// tests look at in it.
class StoreFixture: XCTestCase {
    var directory = ""

    override func setUp() {
        super.setUp()
        var template = Array("/tmp/localauth-store-test.XXXXXX".utf8CString)
        template.withUnsafeMutableBufferPointer { buffer in _ = mkdtemp(buffer.baseAddress!) }
        directory = String(decoding: template.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        chmod(directory, 0o700)
    }

    override func tearDown() {
        // The secrets' tests make directories below it too.
        try? FileManager.default.removeItem(atPath: directory)
        super.tearDown()
    }

    func store() -> FileStateStore { FileStateStore(directoryPath: bytes(directory), trustedOwner: geteuid()) }

    func path(_ name: String) -> String { directory + "/" + name }

    func writeFile(_ name: String, _ data: [UInt8], mode: mode_t = 0o600) {
        let fd = open(path(name), O_WRONLY | O_CREAT | O_TRUNC, mode)
        XCTAssertGreaterThanOrEqual(fd, 0)
        data.withUnsafeBytes { _ = write(fd, $0.baseAddress, $0.count) }
        fchmod(fd, mode)
        close(fd)
    }

    func readFile(_ name: String) -> [UInt8]? { readFile(absolute: path(name)) }

    func readFile(absolute: String) -> [UInt8]? {
        let fd = open(absolute, O_RDONLY)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var result: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let got = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if got <= 0 { break }
            result += buffer[0..<got]
        }
        return result
    }

    /// What the store hands to the body, without changing anything.
    func peek(_ uid: UInt32 = 1000, _ name: String = "alice") -> (StateRecord?, LoadStatus)? {
        var s = store()
        return try? s.withRecord(uid: uid, userName: bytes(name)) { record, status in (record, status) }
    }

    func names() -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []).sorted()
    }


    func chargeLookAlike(_ name: String) {
        var s = store()
        _ = try? s.withRecord(uid: FileStateStore.lookAlikeUID, userName: bytes(name)) { record, _ in
            var current = record ?? StateRecord(uid: FileStateStore.lookAlikeUID, userName: bytes(name), createdWallSeconds: 1)
            current.passcodeFailures += 1
            record = current
        }
    }

    func inode(_ name: String) -> UInt64? {
        var info = stat()
        return lstat(path(name), &info) == 0 ? UInt64(info.st_ino) : nil
    }
}
