// Opening files that decide security: the configuration file and the state
// directory. Every directory on the way from / is opened without following
// symlinks and checked before anything below it is trusted, so nobody but
// root can swap a part of the path.
import LocalAuth

/// Why a trusted path could not be opened.
public enum TrustedPathFailure: Error, Equatable {
    case notAbsolute
    /// A directory on the way failed the check.
    case untrustedDirectory
    /// A directory on the way does not exist.
    case missingDirectory
    /// A part of the path is a symlink or not a directory.
    case symlinkOrNotDirectory
    case cannotOpen(Errno)
}

public enum TrustedPath {
    /// The parts of an absolute path, without empty ones; nil when relative.
    public static func parts(_ path: [UInt8]) -> [[UInt8]]? {
        guard path.first == 0x2F else { return nil }
        return splitBytes(path.dropFirst(), on: 0x2F).filter { !$0.isEmpty }.map { Array($0) }
    }

    /// Opens `/` and then each directory of `directories` in turn, checking
    /// every one (the last included) with `trusted` before going on.
    /// Returns the last one's descriptor.
    public static func openDirectory(_ directories: [[UInt8]], trusted: (FileFacts) -> Bool) -> Result<Int32, TrustedPathFailure> {
        var current: Int32
        do {
            current = try Syscalls.open(at: nil, literalBytes("/"), .directory)
        } catch {
            return .failure(.cannotOpen(error))
        }
        for part in directories {
            guard isTrusted(current, trusted) else { Syscalls.close(current); return .failure(.untrustedDirectory) }
            let next: Int32
            do {
                next = try Syscalls.open(at: current, part, .directory)
            } catch {
                Syscalls.close(current)
                if error == .noEntry { return .failure(.missingDirectory) }
                if error == .symlinkLoop || error == .notDirectory { return .failure(.symlinkOrNotDirectory) }
                return .failure(.cannotOpen(error))
            }
            Syscalls.close(current)
            current = next
        }
        guard isTrusted(current, trusted) else { Syscalls.close(current); return .failure(.untrustedDirectory) }
        return .success(current)
    }

    static func isTrusted(_ fd: Int32, _ trusted: (FileFacts) -> Bool) -> Bool {
        guard let facts = try? Syscalls.facts(fd), facts.isDirectory else { return false }
        return trusted(facts)
    }

    /// Root's, and not writable by group or others unless sticky (as /tmp,
    /// whose entries others cannot move).
    public static func rootsOrSticky(_ facts: FileFacts) -> Bool {
        facts.owner == 0 && (facts.mode & 0o022 == 0 || facts.mode & 0o1000 != 0)
    }

    /// Reads a small configuration file that must be a regular file owned by
    /// root and not writable by group or others, below directories that pass
    /// `rootsOrSticky`. A missing file is (nil, nil); otherwise nil with the
    /// reason.
    public static func readFile(_ path: [UInt8], limit: Int) -> (contents: [UInt8]?, problem: String?) {
        guard let parts = parts(path) else { return (nil, "not an absolute path") }
        guard let fileName = parts.last, path.last != 0x2F else { return (nil, "not a file path") }
        let directory: Int32
        switch openDirectory(Array(parts.dropLast()), trusted: rootsOrSticky) {
        case .success(let fd): directory = fd
        case .failure(.missingDirectory): return (nil, nil)
        case .failure(.untrustedDirectory): return (nil, "a directory on its path is not owned by root or is writable by others")
        case .failure(.symlinkOrNotDirectory): return (nil, "a directory on its path is a symbolic link or not a directory")
        case .failure(.notAbsolute): return (nil, "not an absolute path")
        case .failure(.cannotOpen(let error)): return (nil, "cannot open a directory on its path (errno \(error.code))")
        }
        defer { Syscalls.close(directory) }
        let fd: Int32
        do {
            fd = try Syscalls.open(at: directory, fileName, .readFile)
        } catch {
            if error == .noEntry { return (nil, nil) }
            return (nil, "cannot open (errno \(error.code))")
        }
        defer { Syscalls.close(fd) }
        guard let facts = try? Syscalls.facts(fd) else { return (nil, "cannot stat") }
        guard facts.isRegular else { return (nil, "not a regular file") }
        guard facts.owner == 0, facts.mode & 0o022 == 0 else { return (nil, "not owned by root or writable by group/others") }
        guard facts.size <= limit else { return (nil, "larger than \(limit) bytes") }
        do {
            return (try Syscalls.readAll(fd, limit: limit), nil)
        } catch {
            return (nil, "cannot read (errno \(error.code))")
        }
    }
}

extension TrustedPath {
    /// Root's, and writable by nobody else (no sticky exception).
    public static func rootsOnly(_ facts: FileFacts) -> Bool {
        facts.owner == 0 && facts.mode & 0o022 == 0
    }

    /// Why the setuid program at `path` must not be started, or nil when it
    /// may: a regular file owned by root with the setuid bit, writable by
    /// nobody else, below directories only root can change.
    public static func setuidProgramProblem(_ path: [UInt8]) -> String? {
        guard let parts = parts(path), let name = parts.last else { return "not an absolute path" }
        let directory: Int32
        switch openDirectory(Array(parts.dropLast()), trusted: rootsOnly) {
        case .success(let fd): directory = fd
        case .failure(.missingDirectory): return "not installed"
        case .failure(.untrustedDirectory): return "a directory on its path is not root's alone"
        case .failure(.symlinkOrNotDirectory): return "a directory on its path is a symbolic link or not a directory"
        case .failure(.notAbsolute): return "not an absolute path"
        case .failure(.cannotOpen(let error)): return "cannot open a directory on its path (errno \(error.code))"
        }
        defer { Syscalls.close(directory) }
        let facts: FileFacts
        do {
            facts = try Syscalls.facts(at: directory, name)
        } catch {
            return error == .noEntry ? "not installed" : "cannot stat (errno \(error.code))"
        }
        guard facts.isRegular else { return "not a regular file" }
        guard rootsOnly(facts) else { return "not owned by root or writable by group/others" }
        guard facts.mode & 0o4000 != 0 else { return "not setuid root" }
        return nil
    }
}
