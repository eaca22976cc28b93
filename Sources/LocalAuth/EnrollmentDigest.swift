// The domain state (Apple's `evaluatedPolicyDomainState`): an opaque digest
// that changes whenever the user's enrolled prints change, also when a
// finger is re-enrolled under the same name. It covers the device, the
// finger names and, when readable, fprintd's stored print files.

/// fprintd's print files as the digest reads them (the system layer gives
/// the disk's; the digest itself touches no file).
public protocol PrintFiles {
    /// A directory's entries, or nil when it cannot be read.
    func entries(_ path: [UInt8]) -> [(name: [UInt8], isDirectory: Bool)]?
    /// A regular file's bytes up to `limit`, or nil.
    func contents(_ path: [UInt8], limit: Int) -> [UInt8]?
}

public enum EnrollmentDigest {
    /// Where fprintd keeps prints: `<root>/<user>/<driver>/<device>/<finger>`.
    public static let defaultPrintRoot: StaticString = "/var/lib/fprint"
    static let maxFiles = 64
    static let maxFileSize = 1 << 20

    public static func compute<Files: PrintFiles>(device: [UInt8], fingers: [[UInt8]], userName: [UInt8], printRoot: [UInt8],
                                                  files reader: Files) -> [UInt8] {
        var hasher = SHA256()
        hasher.update(literalBytes("localauth-domain-state-1"))
        field(&hasher, device)
        for finger in fingers.sorted(by: { $0.lexicographicallyPrecedes($1) }) { field(&hasher, finger) }
        guard !userName.isEmpty, !userName.contains(0x2F), !bytesEqual(userName, "."), !bytesEqual(userName, "..") else {
            return hasher.finish()
        }
        var files = 0
        walk(&hasher, printRoot + [0x2F] + userName, depth: 0, files: &files, reader)
        field(&hasher, utf8Bytes("files \(files)"))
        return hasher.finish()
    }

    /// Length-prefixed, so that field boundaries cannot be confused.
    static func field(_ hasher: inout SHA256, _ bytes: [UInt8]) {
        let count = UInt32(truncatingIfNeeded: bytes.count)
        hasher.update([UInt8(truncatingIfNeeded: count >> 24), UInt8(truncatingIfNeeded: count >> 16),
                       UInt8(truncatingIfNeeded: count >> 8), UInt8(truncatingIfNeeded: count)])
        hasher.update(bytes)
    }

    static func walk<Files: PrintFiles>(_ hasher: inout SHA256, _ path: [UInt8], depth: Int, files: inout Int, _ reader: Files) {
        guard depth <= 3, let entries = reader.entries(path) else { return }
        for entry in entries where files < maxFiles {
            let child = path + [0x2F] + entry.name
            if entry.isDirectory {
                field(&hasher, literalBytes("dir"))
                field(&hasher, entry.name)
                walk(&hasher, child, depth: depth + 1, files: &files, reader)
            } else if let contents = reader.contents(child, limit: maxFileSize) {
                files += 1
                field(&hasher, literalBytes("file"))
                field(&hasher, entry.name)
                field(&hasher, contents)
            }
        }
    }
}
