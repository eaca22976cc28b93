import XCTest
#if canImport(Glibc)
import Glibc
#endif
import LocalAuth

/// When a store failure suspends counting: only a read-only filesystem or a
/// failing disk, and only for a process no unprivileged user set up.
final class CountingSuspensionTests: XCTestCase {
    func testTheErrnosAreLinuxs() {
        XCTAssertEqual(CountingSuspension.readOnlyFilesystem, Errno(EROFS))
        XCTAssertEqual(CountingSuspension.deviceError, Errno(EIO))
    }

    func testTheTable() {
        let system = StorageFacts(readOnlyFilesystem: true, systemPrivileged: true)
        let systemWritable = StorageFacts(readOnlyFilesystem: false, systemPrivileged: true)
        let userMade = StorageFacts(readOnlyFilesystem: true, systemPrivileged: false)
        let rofs = CountingSuspension.readOnlyFilesystem, eio = CountingSuspension.deviceError
        let rows: [(String, StoreFailure, StorageFacts, Bool)] = [
            ("lock on a read-only filesystem", .lockFailed(rofs), system, true),
            ("write on a read-only filesystem", .writeFailed(rofs), system, true),
            ("making the state directory on a read-only filesystem", .directoryUnusable(.cannotOpen(rofs)), system, true),
            ("EROFS while the filesystem is not read-only (a forged errno)", .writeFailed(rofs), systemWritable, false),
            ("the disk fails a write", .writeFailed(eio), systemWritable, true),
            ("the disk fails a read", .readFailed(eio), systemWritable, true),
            ("the disk fails the lock", .lockFailed(eio), system, true),
            ("read-only, in namespaces a user set up", .lockFailed(rofs), userMade, false),
            ("failing disk, in namespaces a user set up", .writeFailed(eio), userMade, false),
            ("nothing known", .lockFailed(rofs), .unknown, false),
            ("no space", .writeFailed(Errno(ENOSPC)), system, false),
            ("quota", .writeFailed(Errno(EDQUOT)), system, false),
            ("permission", .lockFailed(Errno(EACCES)), system, false),
            ("no memory", .readFailed(Errno(ENOMEM)), system, false),
            ("no descriptors", .lockFailed(Errno(EMFILE)), system, false),
            ("file size limit", .fileSizeLimited, system, false),
            ("an unsafe state directory", .directoryUnusable(.unsafeDirectory), system, false),
            ("an unsafe path", .directoryUnusable(.unsafeAncestor), system, false),
            ("a missing path", .directoryUnusable(.missingAncestor), system, false),
            ("opening the directory refused", .directoryUnusable(.cannotOpen(Errno(EACCES))), system, false),
        ]
        for (name, failure, facts, suspends) in rows {
            XCTAssertEqual(CountingSuspension.applies(to: failure, facts: facts), suspends, name)
        }
    }
}
