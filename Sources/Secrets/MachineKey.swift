// The machine key (docs/DESIGN.md, "Secrets"): what wraps every user's
// secrets key for use without the password. Sealed to the TPM the
// administrator's `tpm` option names (`secrets/machine.key.tpm`), or a
// root-only file (`secrets/machine.key`) where there is none.
// MachineKeyPolicy decides; this performs, under the secrets directory's
// lock whenever it writes.
import CTPM
import LocalAuth
import LibcSystem

/// What one request found: the key the TPM gave (asked once per request,
/// as a real TPM takes a good part of a second; a file is read each time),
/// and what the log should say about how it was had.
final class MachineKeyFound {
    var key: SecretBuffer? = nil
    var notice: MachineKeyNotice? = nil
}

/// Something the administrator should hear about the machine key.
public enum MachineKeyNotice: Equatable {
    /// The TPM no longer opens the sealed key (cleared, or another
    /// machine's): a new one is sealed; each user's next password heals
    /// their secrets.
    case sealedAnew
    /// `auto`: the TPM is there but would not seal; the key is a root-only
    /// file.
    case sealFailedUsingFile
    /// A root-only key was sealed to the TPM, and its file removed.
    case fileKeySealed
    /// The file beside the sealed key holds the same key and could not be
    /// removed: the key is on the disk in the clear.
    case fileKeyNotRemoved
    /// A root-only key made while `tpm = off` lies beside the sealed key;
    /// users whose copies it wraps need their password once (or `tpm =
    /// off` again). It is kept.
    case fileKeyDiffers
}

extension ItemStore {
    static let fileKeyName = Array("machine.key".utf8)
    static let sealedKeyName = Array("machine.key.tpm".utf8)
    /// A sealed key the TPM disowned, kept aside (the last one) while the
    /// key is a root-only file: an administrator may still want it.
    static let disownedKeyName = Array("machine.key.tpm.disowned".utf8)

    /// What the log should say about this request's machine key, if anything.
    public var machineKeyNotice: MachineKeyNotice? { found.notice }

    /// The machine key, made at the first use. Two first requests must not
    /// make two: anything that writes runs under the secrets directory's
    /// lock, and looks again there first.
    public func machineKey() throws(Failure) -> SecretBuffer {
        if let key = found.key { return key }
        guard let parts = TrustedPath.parts(stateDirectory) else { throw .unsafeDirectory }
        let state = try openTrustedPath(parts)
        let secrets: Int32
        do { secrets = try privateDirectory(in: state, Array("secrets".utf8), create: true) } catch {
            Syscalls.close(state)
            throw error
        }
        Syscalls.close(state)
        defer { Syscalls.close(secrets) }
        if let key = try machineKey(in: secrets, mayWrite: false) { return key }
        try lock(secrets)
        defer { Syscalls.unlock(secrets) }
        guard let key = try machineKey(in: secrets, mayWrite: true) else { throw .io(.tryAgain) }
        return key
    }

    /// The key as the files and the TPM have it; nil when having it would
    /// write and `mayWrite` is false.
    func machineKey(in secrets: Int32, mayWrite: Bool) throws(Failure) -> SecretBuffer? {
        // A device must be a TPM's (the kernel's class of its number): a
        // file, a socket or a terminal someone put at that path would be
        // handed the key. A software TPM must listen where only root may
        // (both its ports below the unprivileged start, read each time:
        // containers lower it).
        if case .device(let path) = tpm, !Syscalls.isTPMDevice(path) { throw .tpmUnreachable }
        if case .swtpm(let port) = tpm {
            guard let start = Syscalls.unprivilegedPortStart(), port + 1 < start else { throw .tpmUnreachable }
        }
        let deviceExists = tpm == .auto && Syscalls.isTPMDevice(literalBytes(TPMChoice.defaultDevice))
        let use = TPMUse(tpm, deviceExists: deviceExists)
        let sealed = try readOwnFile(secrets, ItemStore.sealedKeyName, sizes: 8...Int(LA_TPM_BLOB_MAX))
        let file = try readFileKey(secrets)
        let facts = MachineKeyFacts(use: use, sealedKeyPresent: sealed != nil, fileKeyPresent: file != nil)
        switch MachineKeyPolicy.firstStep(facts) {
        case .refuse:
            throw .tpmUnreachable
        case .useFile:
            if let file { return file }
            return mayWrite ? try makeFileKey(secrets) : nil
        case .unseal:
            let key = SecretBuffer(limit: SecretKeyFile.keySize)
            let answer = TPMSealing.unseal(sealed ?? [], with: tpm, into: key)
            switch MachineKeyPolicy.afterUnseal(answer) {
            case .use:
                guard key.count == SecretKeyFile.keySize else { throw .tpmFailed }
                // A file left beside its sealed copy (a crash between the
                // two writes) is removed under the lock: the key must not
                // stay on the disk in the clear. Only the same key: another
                // (made while `tpm = off`) still opens some users' copies,
                // and is kept for the administrator (the log says so).
                if let file {
                    if Sealing.sameBytes(file, key) {
                        guard mayWrite else { return nil }
                        do { try removeFileKey(secrets) } catch { found.notice = .fileKeyNotRemoved }
                    } else {
                        found.notice = .fileKeyDiffers
                    }
                }
                found.key = key
                return key
            case .refuse:
                throw answer == .unreachable ? .tpmUnreachable : .tpmFailed
            case .sealNewKey:
                guard mayWrite else { return nil }
                found.notice = .sealedAnew
                // A root-only key beside the disowned blob (this TPM would
                // not seal before) is the one the users' copies were healed
                // with since: sealed as it is.
                return try seal(file, in: secrets, use: use, fileKey: file, disowned: true)
            }
        case .sealFileKey:
            guard mayWrite else { return nil }
            return try seal(file, in: secrets, use: use, fileKey: file)
        case .sealNewKey:
            guard mayWrite else { return nil }
            return try seal(nil, in: secrets, use: use, fileKey: nil)
        }
    }

    /// `existing` (or a new key) sealed and written; the file key removed
    /// once its sealed copy is on disk. A seal that fails falls back as
    /// MachineKeyPolicy says.
    func seal(_ existing: SecretBuffer?, in secrets: Int32, use: TPMUse, fileKey: SecretBuffer?,
              disowned: Bool = false) throws(Failure) -> SecretBuffer {
        guard let key = existing ?? KeyWrapping.newKey() else { throw .io(.tryAgain) }
        let (answer, blob) = TPMSealing.seal(key, with: tpm)
        if answer == .done {
            try ItemStore.writeWhole(blob, in: secrets, as: ItemStore.sealedKeyName, directoryLocked: true)
            if fileKey != nil {
                do {
                    try removeFileKey(secrets)
                    found.notice = .fileKeySealed
                } catch {
                    found.notice = .fileKeyNotRemoved
                }
            }
            found.key = key
            return key
        }
        guard MachineKeyPolicy.afterSealFailed(use) == .useFile else {
            throw answer == .unreachable ? .tpmUnreachable : .tpmFailed
        }
        found.notice = .sealFailedUsingFile
        // The blob the TPM disowned goes aside, so that the next request
        // does not unseal it, fail, and make yet another key.
        if disowned {
            do throws(Errno) {
                try Syscalls.rename(in: secrets, from: ItemStore.sealedKeyName, to: ItemStore.disownedKeyName)
                try Syscalls.sync(secrets)
            } catch {
                throw .io(error)
            }
        }
        if let fileKey { return fileKey }
        return try makeFileKey(secrets)
    }

    func readFileKey(_ secrets: Int32) throws(Failure) -> SecretBuffer? {
        guard var bytes = try readOwnFile(secrets, ItemStore.fileKeyName, size: SecretKeyFile.keySize) else { return nil }
        defer { ItemStore.wipe(&bytes) }
        let key = SecretBuffer(limit: SecretKeyFile.keySize)
        bytes.withUnsafeBufferPointer { key.assign(from: $0.baseAddress!, length: $0.count) }
        return key
    }

    /// A new root-only key file. The users' machine copies made with
    /// another key then open no more; their password copies still do.
    func makeFileKey(_ secrets: Int32) throws(Failure) -> SecretBuffer {
        guard let key = KeyWrapping.newKey() else { throw .io(.tryAgain) }
        var bytes = key.withBytes { Array(UnsafeBufferPointer(start: $0, count: $1)) }
        defer { ItemStore.wipe(&bytes) }
        try ItemStore.writeWhole(bytes, in: secrets, as: ItemStore.fileKeyName, directoryLocked: true)
        return key
    }

    func removeFileKey(_ secrets: Int32) throws(Failure) {
        do throws(Errno) {
            try Syscalls.unlink(in: secrets, ItemStore.fileKeyName)
            try Syscalls.sync(secrets)
        } catch {
            throw .io(error)
        }
    }
}
