import XCTest
#if canImport(Glibc)
import Glibc
#endif
import LocalAuth
import LocalAuthSystem

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
            ("the disk fails a write, and the filesystem went read-only", .writeFailed(eio), system, true),
            ("the disk fails the lock, and the filesystem went read-only", .lockFailed(eio), system, true),
            ("the disk fails a write, the filesystem still writable (over-committed storage a user filled)",
             .writeFailed(eio), systemWritable, false),
            ("the disk fails a read, the filesystem still writable", .readFailed(eio), systemWritable, false),
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

    /// The superblock's options in /proc/self/mountinfo, not one mount's view.
    func testTheSuperblockDecidesWhetherTheFilesystemIsReadOnly() {
        let table = Array("""
            22 1 0:21 / /proc rw,nosuid - proc proc rw
            66 46 7:0 / /var rw,relatime - ext4 /dev/loop0 rw,errors=remount-ro,emergency_ro
            68 67 0:41 / /mnt ro,relatime - tmpfs none ro,size=1024k
            70 69 0:42 / /srv ro,relatime - tmpfs none rw,size=1024k
            71 1 0:43 / /opt rw shared:5 master:2 - ext4 /dev/sda2 rw,errors=remount-ro
            72 1 0:44 / /x\040y rw - ext4 /dev/sdb1 ro
            """.utf8)
        let rows: [(UInt64, Bool, String)] = [
            (66, true, "ext4 after an error (emergency_ro)"),
            (68, true, "a filesystem mounted read-only"),
            (70, false, "a read-only bind of a writable filesystem"),
            (71, false, "optional fields before the separator, writable"),
            (72, true, "an escaped mount point"),
            (22, false, "procfs"),
            (99, false, "a mount that is not listed"),
        ]
        for (id, readOnly, name) in rows {
            XCTAssertEqual(MountTable.superblockIsReadOnly(table, mountID: id), readOnly, name)
        }
    }
}
