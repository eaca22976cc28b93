// The configuration in force: the file (read by `Configuration.load` in the
// system layer, trusted only as root's), then the module arguments. One
// loader for the module, the helper, the command-line tool and the lint.

/// The options in force, and what was found on the way.
public struct Configuration {
    public var options: Options
    /// The file that was (or would have been) read.
    public var path: [UInt8]
    /// The file exists and was read.
    public var fileRead: Bool
    /// Why the file was ignored, when it was.
    public var fileProblem: String?
    /// Bad lines, bad arguments and clamped values, each a sentence.
    public var diagnostics: [String]
    /// Keys set by a valid line of the file.
    public var keysFromFile: [String]

    /// The options from a configuration file's `contents` (nil: not read,
    /// for `problem` or because it does not exist) at `path`, then
    /// `arguments` over it. Never fails: what cannot be used is described and
    /// safe values stay. (`Configuration.load` reads the file.)
    public static func make(path: [UInt8], contents: [UInt8]?, problem: String?, arguments: [[UInt8]]) -> Configuration {
        var parser = OptionParser()
        if let contents { parser.applyConfigFile(contents) }
        let keys = parser.keysFromConfigFile.map { printableText($0) }
        parser.applyArguments(arguments)
        parser.finish()
        return Configuration(options: parser.options, path: path, fileRead: contents != nil, fileProblem: problem,
                             diagnostics: parser.diagnostics, keysFromFile: keys)
    }

    /// Logs why the file was ignored and every bad line or argument, as
    /// warnings (the module and the helper alike).
    public func report<Log: EventLog>(to log: inout Log) {
        if let fileProblem {
            log.log(.warning, "configuration file \(printableText(path)) ignored: \(fileProblem)")
        }
        for message in diagnostics { log.log(.warning, message) }
    }
}
