// What protects the machine key, the key that wraps every user's secrets key
// for use without the password (docs/DESIGN.md, "Secrets"): a TPM 2.0 it is
// sealed to, or a root-only file. The administrator's `tpm` option chooses
// (never the caller's environment); this decides, from what the helper
// finds, what it does next. Pure: the TPM and the files are the Secrets
// module's.

/// The `tpm` option's value.
public enum TPMChoice: Equatable, Sendable {
    /// The kernel's TPM resource manager, `/dev/tpmrm0`, where there is
    /// one; a root-only file where there is none.
    case auto
    /// Never a TPM: the root-only file.
    case off
    /// The TPM behind this character device (an absolute path).
    case device([UInt8])
    /// A software TPM (swtpm) listening on 127.0.0.1 at this port and the
    /// next (its control channel): for tests, never a real machine's
    /// protection. Both are below 1024, where only root may listen: a TPM
    /// that any user could stand in for would be handed the key.
    case swtpm(port: Int)

    /// The ports `swtpm:` takes.
    public static let swtpmPorts: ClosedRange<Int> = 1...1022

    public static let defaultDevice: StaticString = "/dev/tpmrm0"

    /// `auto`, `off`, an absolute device path or `swtpm:PORT`; nil for
    /// anything else.
    public init?<C: Collection>(name: C) where C.Element == UInt8 {
        let bytes = Array(name)
        if bytesEqual(bytes, "auto") { self = .auto } else if bytesEqual(bytes, "off") { self = .off } else if bytes.first == 0x2F,
            isSafeAbsolutePath(bytes[...]) {
            self = .device(bytes)
        } else if bytes.count > 6, bytesEqual(bytes.prefix(6), "swtpm:"), let port = parseDecimal(bytes.dropFirst(6), limit: 65_535),
                  TPMChoice.swtpmPorts.contains(port) {
            self = .swtpm(port: port)
        } else {
            return nil
        }
    }

    /// The value as written.
    public var name: [UInt8] {
        switch self {
        case .auto: literalBytes("auto")
        case .off: literalBytes("off")
        case .device(let path): path
        case .swtpm(let port): literalBytes("swtpm:") + utf8Bytes(String(port))
        }
    }

}

/// How the TPM answered an unseal (or a seal).
public enum TPMAnswer: Equatable, Sendable, CaseIterable {
    case done
    /// No TPM to ask (no libraries, no device, the connection failed).
    case unreachable
    /// The TPM says the blob is not its own: another TPM's, or this one's
    /// before it was cleared. It will never open here.
    case notItsOwn
    /// The file is not a sealed key of ours.
    case badBlob
    /// Anything else (busy, locked out, no memory): nothing is decided.
    case failed
}

/// Whether a TPM is used, as the option and the machine make it.
public enum TPMUse: Equatable, Sendable, CaseIterable {
    /// `tpm = off`.
    case off
    /// `auto`, and the machine offers no TPM device.
    case missing
    /// `auto`, and the device is there.
    case automatic
    /// A TPM the administrator named (a device path, swtpm).
    case named

    public init(_ choice: TPMChoice, deviceExists: Bool) {
        switch choice {
        case .off: self = .off
        case .auto: self = deviceExists ? .automatic : .missing
        case .device, .swtpm: self = .named
        }
    }
}

/// What the helper found before it decides.
public struct MachineKeyFacts: Equatable, Sendable {
    public var use: TPMUse
    /// A sealed machine key is on disk.
    public var sealedKeyPresent: Bool
    /// A root-only machine key file is on disk.
    public var fileKeyPresent: Bool

    public init(use: TPMUse, sealedKeyPresent: Bool, fileKeyPresent: Bool) {
        self.use = use
        self.sealedKeyPresent = sealedKeyPresent
        self.fileKeyPresent = fileKeyPresent
    }
}

/// What the helper does.
public enum MachineKeyStep: Equatable, Sendable {
    /// Unseal the sealed key.
    case unseal
    /// Read the root-only file (made when missing).
    case useFile
    /// Seal the file's key to the TPM, then remove the file (a TPM added,
    /// or this version installed over one without TPM support).
    case sealFileKey
    /// Seal a new key: the first use.
    case sealNewKey
    /// The key is not to be had now, and nothing is changed: the TPM that
    /// sealed it cannot be reached, or refused for a reason that may pass.
    case refuse
}

public enum MachineKeyPolicy {
    /// The first step. A sealed key whose TPM is not in use now (`auto`
    /// and no device) is refused, not replaced: a TPM missing at one boot
    /// must not cost every user the password's round; the administrator
    /// who removed it for good says `tpm = off`.
    public static func firstStep(_ facts: MachineKeyFacts) -> MachineKeyStep {
        switch facts.use {
        case .off: return .useFile
        case .missing: return facts.sealedKeyPresent && !facts.fileKeyPresent ? .refuse : .useFile
        case .automatic, .named:
            if facts.sealedKeyPresent { return .unseal }
            return facts.fileKeyPresent ? .sealFileKey : .sealNewKey
        }
    }

    /// After the unseal answered: the key is used; a blob that will never
    /// open here is replaced by a new sealed key (the users' machine copies
    /// then stop opening, their password copies do not: the password heals
    /// them); anything else decides nothing.
    public static func afterUnseal(_ answer: TPMAnswer) -> MachineKeyAfterUnseal {
        switch answer {
        case .done: .use
        case .notItsOwn, .badBlob: .sealNewKey
        case .unreachable, .failed: .refuse
        }
    }

    /// What protects the key, for `localauth status`: `tpm` or `file`,
    /// then the sentence.
    public static func protection(_ choice: TPMChoice, use: TPMUse) -> (kind: StaticString, text: String) {
        switch (use, choice) {
        case (.off, _): return ("file", "a root-only file (tpm = off): it stops other users, not root")
        case (.missing, _):
            return ("file", "a root-only file (no TPM at \(literalText(TPMChoice.defaultDevice))): it stops other users, not root")
        case (_, .swtpm(let port)): return ("tpm", "sealed to the software TPM at 127.0.0.1:\(port) (for tests)")
        case (_, .device(let path)): return ("tpm", "sealed to the TPM at \(printableText(path))")
        default:
            return ("tpm", "sealed to the TPM at \(literalText(TPMChoice.defaultDevice)) (a root-only file if it will not seal)")
        }
    }

    /// After a seal failed: `auto` falls back to the root-only file (and
    /// the log and `status` say so); a TPM the administrator named refuses.
    public static func afterSealFailed(_ use: TPMUse) -> MachineKeyStep {
        use == .named ? .refuse : .useFile
    }
}

/// What follows an unseal.
public enum MachineKeyAfterUnseal: Equatable, Sendable {
    case use
    case sealNewKey
    case refuse
}
