// What the fakes need of a secret buffer, kept out of the product.
import LocalAuth

extension SecretBuffer {
    /// Replaces the content with bytes.
    func assign(_ bytes: [UInt8]) {
        bytes.withUnsafeBufferPointer { buffer in
            if let base = buffer.baseAddress { assign(from: base, length: buffer.count) } else { wipe() }
        }
    }

    /// Whether the content equals `bytes`.
    func equals(_ bytes: [UInt8]) -> Bool {
        guard !overflowed else { return false }
        return withBytes { pointer, length in
            length == bytes.count && (0..<length).allSatisfy { pointer[$0] == bytes[$0] }
        }
    }
}
