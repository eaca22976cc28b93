// A secret to and from a descriptor (`localauth secret`'s standard input
// and output) straight from and into the SecretBuffer that owns it, never
// through an ordinary array.
import CLibc
import LocalAuth

extension Syscalls {
    /// Reads `fd` to its end straight into `secret`; more than its limit is
    /// an error (EFBIG), and leaves it empty.
    public static func readAll(_ fd: Int32, into secret: SecretBuffer) throws(Errno) {
        var failure: Errno? = nil
        let fitted = secret.fillUpToLimit { pointer, room in
            var total = 0
            while total < room {
                let got = retryingInterrupted { CLibc.read(fd, pointer + total, room - total) }
                if got < 0 {
                    failure = Errno.current
                    return nil
                }
                if got == 0 { break }
                total += got
            }
            return total
        }
        if let failure { throw failure }
        if !fitted { throw Errno(EFBIG) }
    }

    /// Writes all of a secret from its own memory.
    public static func writeAll(_ fd: Int32, _ secret: SecretBuffer) throws(Errno) {
        var failure: Errno? = nil
        secret.withBytes { pointer, count in
            var written = 0
            while written < count {
                let result = retryingInterrupted { CLibc.write(fd, pointer + written, count - written) }
                if result <= 0 {
                    failure = result < 0 ? Errno.current : Errno(EIO)
                    return
                }
                written += result
            }
        }
        if let failure { throw failure }
    }
}
