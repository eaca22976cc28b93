import XCTest
#if canImport(Glibc)
import Glibc
#endif
import LocalAuth
import LibcSystem

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

    /// mountinfo is read as a stream up to the mount's line; a line too long
    /// for any mount of the state directory is skipped whole, so no tail of
    /// a user's long mount point is ever read as a line of its own.
    func testTheMountsLineIsFoundInAStreamAndALongLineNeverSplitsIntoAFakeOne() {
        func chunks(_ text: [UInt8], size: Int) -> () -> [UInt8]? {
            var offset = 0
            return {
                let end = min(offset + size, text.count)
                defer { offset = end }
                return Array(text[offset..<end])
            }
        }
        let table = utf8Bytes("22 1 0:21 / /proc rw - proc proc rw\n66 46 7:0 / /var rw - ext4 /dev/sda1 rw,emergency_ro\n")
        for size in [1, 7, 64, 65536] {
            XCTAssertEqual(MountTable.line(startingWith: utf8Bytes("66 "), chunks(table, size: size)),
                           utf8Bytes("66 46 7:0 / /var rw - ext4 /dev/sda1 rw,emergency_ro"), "chunks of \(size)")
        }
        XCTAssertNil(MountTable.line(startingWith: utf8Bytes("6 "), chunks(table, size: 5)))
        XCTAssertNil(MountTable.line(startingWith: utf8Bytes("66 "), { nil }))
        // A user's mount point of over 1 MiB whose tail looks like the line.
        let fake = utf8Bytes("66 46 7:0 / /var rw - ext4 /dev/sda1 ro")
        let long = utf8Bytes("90 1 0:50 / /home/u/") + [UInt8](repeating: 0x61, count: (1 << 20) + 10) + fake + [0x0A]
        let real = utf8Bytes("66 46 7:0 / /var rw - ext4 /dev/sda1 rw\n")
        XCTAssertEqual(MountTable.line(startingWith: utf8Bytes("66 "), chunks(long + real, size: 65536)), Array(real.dropLast()))
        XCTAssertNil(MountTable.line(startingWith: utf8Bytes("66 "), chunks(long, size: 4096)))
    }

    /// The superblock's options in /proc/self/mountinfo, not one mount's view.
    func testTheSuperblockDecidesWhetherTheFilesystemIsReadOnly() {
        let table = Array("""
            22 1 0:21 / /proc rw,nosuid - proc proc rw
            66 46 7:0 / /var rw,relatime - ext4 /dev/loop0 rw,errors=remount-ro,emergency_ro
            68 67 0:41 / /mnt ro,relatime - tmpfs none ro,size=1024k
            70 69 0:42 / /srv ro,relatime - tmpfs none rw,size=1024k
            71 1 0:43 / /opt rw shared:5 master:2 - ext4 /dev/sda2 rw,errors=remount-ro
            72 1 0:44 / /x\\040y rw - ext4 /dev/sdb1 ro
            73 1 0:45 / /empty rw - tmpfs  ro,size=1024k
            """.utf8)
        let rows: [(UInt64, Bool, String)] = [
            (66, true, "ext4 after an error (emergency_ro)"),
            (68, true, "a filesystem mounted read-only"),
            (70, false, "a read-only bind of a writable filesystem"),
            (71, false, "optional fields before the separator, writable"),
            (72, true, "an escaped mount point"),
            (73, true, "an empty source"),
            (22, false, "procfs"),
            (99, false, "a mount that is not listed"),
        ]
        for (id, readOnly, name) in rows {
            var chunks = [table, []].makeIterator()
            let line = MountTable.line(startingWith: utf8Bytes("\(id) ")) { chunks.next() }
            XCTAssertEqual(line.map(MountTable.superblockIsReadOnly) ?? false, readOnly, name)
        }
    }
}
