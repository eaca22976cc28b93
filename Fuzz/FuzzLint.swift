// Fuzz target: the PAM stack lint. The input is a set of files: the service
// "sudo" first, then each further one after a line "%%file NAME" (a service
// name or an absolute path; "localauth-passcode" is the passcode service the
// lint also checks). A name the input does not give is a missing file, as an
// include of one is to libpam; files that include each other (or themselves)
// exercise includes, substacks, loops and the lint's caps.
import StackLint

/// The files an input gives, by name: "sudo" is everything before the first
/// "%%file" line; a name given twice keeps its first contents.
func lintFiles(_ bytes: [UInt8]) -> [[UInt8]: [UInt8]] {
    let marker = Array("%%file ".utf8)
    var files: [[UInt8]: [UInt8]] = [:]
    var name = Array("sudo".utf8)
    var contents: [UInt8] = []
    func close() { if files[name] == nil { files[name] = contents } }
    let lines = bytes.split(separator: 0x0A, omittingEmptySubsequences: false)
    for (index, line) in lines.enumerated() {
        if line.starts(with: marker) {
            close()
            name = Array(line.dropFirst(marker.count))
            contents = []
        } else {
            contents += line
            // The input's last line keeps its end as given: a file may end
            // without a newline, or in a continued line.
            if index < lines.count - 1 { contents.append(0x0A) }
        }
    }
    close()
    return files
}

func fuzzOne(_ bytes: [UInt8]) {
    let files = lintFiles(bytes)
    let lint = StackLint(read: { name in files[Array(name.utf8)] })
    _ = lint.serviceFindings("sudo")
    _ = lint.passcodeServiceFindings("localauth-passcode")
}
