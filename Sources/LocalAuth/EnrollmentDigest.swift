// The domain state (Apple's `evaluatedPolicyDomainState`): an opaque digest
// that changes whenever the user's enrolled prints change, also when a
// finger is re-enrolled under the same name. It covers the device, the
// finger names and, when readable, fprintd's stored print files.

public enum EnrollmentDigest {
    /// Where fprintd keeps prints: `<root>/<user>/<driver>/<device>/<finger>`.
    public static let defaultPrintRoot: StaticString = "/var/lib/fprint"
    static let maxFiles = 64
    static let maxFileSize = 1 << 20

    public static func compute(device: [UInt8], fingers: [[UInt8]], userName: [UInt8], printRoot: [UInt8]) -> [UInt8] {
        var hasher = SHA256()
        hasher.update(literalBytes("localauth-domain-state-1"))
        field(&hasher, device)
        for finger in fingers.sorted(by: { $0.lexicographicallyPrecedes($1) }) { field(&hasher, finger) }
        guard !userName.isEmpty, !userName.contains(0x2F), !bytesEqual(userName, "."), !bytesEqual(userName, "..") else {
            return hasher.finish()
        }
        var files = 0
        walk(&hasher, printRoot + [0x2F] + userName, depth: 0, files: &files)
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

    static func walk(_ hasher: inout SHA256, _ path: [UInt8], depth: Int, files: inout Int) {
        guard depth <= 3, let entries = Syscalls.directoryEntries(at: nil, path) else { return }
        for entry in entries where files < maxFiles {
            let child = path + [0x2F] + entry.name
            if entry.isDirectory {
                field(&hasher, literalBytes("dir"))
                field(&hasher, entry.name)
                walk(&hasher, child, depth: depth + 1, files: &files)
            } else if let contents = Syscalls.readRegularFile(at: nil, child, limit: maxFileSize) {
                files += 1
                field(&hasher, literalBytes("file"))
                field(&hasher, entry.name)
                field(&hasher, contents)
            }
        }
    }
}
