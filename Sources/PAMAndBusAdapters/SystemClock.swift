// The machine's clocks, as the engine's Clock.
import LocalAuth
import LibcSystem

/// CLOCK_BOOTTIME for waits (monotonic, counts suspend), the wall clock for
/// display only, and the kernel's boot id, read once.
public struct SystemClock: Clock {
    private var cachedBootID: [UInt8]? = nil
    public init() {}
    public mutating func bootNanoseconds() -> Int64 { Syscalls.bootTimeNanoseconds() }
    public mutating func wallSeconds() -> Int64 { Syscalls.wallSeconds() }
    public mutating func bootID() -> [UInt8] {
        if let cachedBootID { return cachedBootID }
        let id = Syscalls.bootID()
        cachedBootID = id
        return id
    }
}
