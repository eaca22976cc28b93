// What the policy library's pure types need from the disk: the
// configuration file (through TrustedPath) and fprintd's print files for
// the enrollment digest.
import LocalAuth

extension Configuration {
    /// Reads `path` (or the `conf=` argument, or the default file) and then
    /// applies `arguments` over it. Never fails: what cannot be used is
    /// described and safe values stay.
    public static func load(path given: [UInt8]? = nil, arguments: [[UInt8]] = []) -> Configuration {
        let path = given ?? OptionParser.configPath(in: arguments) ?? literalBytes(Options.defaultConfigPath)
        let (contents, problem) = TrustedPath.readFile(path, limit: OptionParser.maxConfigSize)
        return make(path: path, contents: contents, problem: problem, arguments: arguments)
    }
}

/// The print files on disk.
public struct DiskPrintFiles: PrintFiles {
    public init() {}
    public func entries(_ path: [UInt8]) -> [(name: [UInt8], isDirectory: Bool)]? {
        Syscalls.directoryEntries(at: nil, path)
    }
    public func contents(_ path: [UInt8], limit: Int) -> [UInt8]? {
        Syscalls.readRegularFile(at: nil, path, limit: limit)
    }
}
