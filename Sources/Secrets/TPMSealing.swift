// The machine key sealed to and unsealed from a TPM 2.0 (CTPM, over
// tpm2-tss): the connection the administrator's `tpm` option names, the key
// only ever in SecretBuffers.
import CTPM
import LocalAuth

public enum TPMSealing {
    /// The transport and its configuration for `choice`: nil for `off`.
    /// `auto` is the kernel's resource manager.
    static func connection(_ choice: TPMChoice) -> (tcti: [UInt8], config: [UInt8])? {
        switch choice {
        case .off: return nil
        case .auto: return (literalBytes("device"), literalBytes(TPMChoice.defaultDevice))
        case .device(let path): return (literalBytes("device"), path)
        case .swtpm(let port): return (literalBytes("swtpm"), literalBytes("host=127.0.0.1,port=") + utf8Bytes(String(port)))
        }
    }

    static func answer(_ code: Int32) -> TPMAnswer {
        switch code {
        case Int32(LA_TPM_DONE): .done
        case Int32(LA_TPM_UNREACHABLE): .unreachable
        case Int32(LA_TPM_NOT_ITS_OWN): .notItsOwn
        case Int32(LA_TPM_BAD_BLOB): .badBlob
        default: .failed
        }
    }

    /// `key` sealed to the TPM: the blob to keep, or how it failed.
    public static func seal(_ key: SecretBuffer, with choice: TPMChoice) -> (TPMAnswer, [UInt8]) {
        guard let connection = connection(choice) else { return (.unreachable, []) }
        var blob = [UInt8](repeating: 0, count: Int(LA_TPM_BLOB_MAX))
        var length = 0
        let code = withCStrings(connection.tcti, connection.config) { tcti, config in
            key.withBytes { bytes, count in
                blob.withUnsafeMutableBufferPointer { out in
                    la_tpm_seal(tcti, config, bytes, count, out.baseAddress!, out.count, &length)
                }
            }
        }
        let answer = answer(code)
        guard answer == .done, length > 0, length <= blob.count else { return (answer == .done ? .failed : answer, []) }
        return (.done, Array(blob[0..<length]))
    }

    /// The key a blob holds, into `key`; how the TPM answered.
    public static func unseal(_ blob: [UInt8], with choice: TPMChoice, into key: SecretBuffer) -> TPMAnswer {
        key.wipe()
        guard let connection = connection(choice) else { return .unreachable }
        var code = Int32(LA_TPM_FAILED)
        let filled = key.fillUpToLimit { out, room in
            var length = 0
            code = withCStrings(connection.tcti, connection.config) { tcti, config in
                blob.withUnsafeBufferPointer { la_tpm_unseal(tcti, config, $0.baseAddress!, $0.count, out, room, &length) }
            }
            return code == Int32(LA_TPM_DONE) ? length : nil
        }
        let answer = answer(code)
        if answer == .done && !filled { return .badBlob }
        return answer
    }
}
