// Byte-level helpers. User names, service names and secrets are compared as
// bytes: Swift strings decode invalid UTF-8 leniently, so two different
// names could compare equal as `String`s.
import CMemory

/// Compares bytes with an ASCII literal, without going through `String`.
@inlinable
public func bytesEqual<C: Collection>(_ bytes: C, _ literal: StaticString) -> Bool where C.Element == UInt8 {
    guard bytes.count == literal.utf8CodeUnitCount else { return false }
    var index = 0
    let base = literal.utf8Start
    for byte in bytes {
        if byte != base[index] { return false }
        index += 1
    }
    return true
}

/// A literal as a String (Embedded Swift has no `String(describing:)`).
public func literalText(_ literal: StaticString) -> String {
    String(decoding: UnsafeBufferPointer(start: literal.utf8Start, count: literal.utf8CodeUnitCount), as: UTF8.self)
}

/// The bytes of an ASCII literal.
public func literalBytes(_ literal: StaticString) -> [UInt8] {
    copiedBytes(UnsafeBufferPointer(start: literal.utf8Start, count: literal.utf8CodeUnitCount))
}

/// `bytes[range]` as an array of its own, copied as one block (an
/// `Array(slice)` copies byte by byte in Embedded Swift).
public func copiedBytes(_ bytes: [UInt8], _ range: Range<Int>) -> [UInt8] {
    precondition(range.lowerBound >= 0 && range.upperBound <= bytes.count, "copiedBytes: range out of bounds")
    return bytes.withUnsafeBufferPointer { copiedBytes(UnsafeBufferPointer(rebasing: $0[range])) }
}

func copiedBytes(_ source: UnsafeBufferPointer<UInt8>) -> [UInt8] {
    [UInt8](unsafeUninitializedCapacity: source.count) { buffer, initialized in
        // A raw copy is one memmove; a typed one loops byte by byte here.
        UnsafeMutableRawBufferPointer(buffer).copyMemory(from: UnsafeRawBufferPointer(source))
        initialized = source.count
    }
}

/// Bytes trimmed of ASCII spaces and tabs on both ends.
public func trimmedSpaces(_ bytes: ArraySlice<UInt8>) -> ArraySlice<UInt8> {
    var slice = bytes
    while let first = slice.first, first == 0x20 || first == 0x09 || first == 0x0D { slice = slice.dropFirst() }
    while let last = slice.last, last == 0x20 || last == 0x09 || last == 0x0D { slice = slice.dropLast() }
    return slice
}

/// Splits on one separator byte, keeping empty pieces.
public func splitBytes(_ bytes: ArraySlice<UInt8>, on separator: UInt8) -> [ArraySlice<UInt8>] {
    var pieces: [ArraySlice<UInt8>] = []
    var start = bytes.startIndex
    var index = bytes.startIndex
    while index < bytes.endIndex {
        if bytes[index] == separator {
            pieces.append(bytes[start..<index])
            start = index + 1
        }
        index += 1
    }
    pieces.append(bytes[start..<bytes.endIndex])
    return pieces
}

/// Parses a non-negative decimal number; nil for anything else or for values
/// beyond `limit` (so huge input cannot overflow).
public func parseDecimal(_ bytes: ArraySlice<UInt8>, limit: Int = 1_000_000_000) -> Int? {
    guard !bytes.isEmpty, bytes.count <= 12 else { return nil }
    var value = 0
    for byte in bytes {
        guard byte >= 0x30, byte <= 0x39 else { return nil }
        value = value * 10 + Int(byte - 0x30)
        if value > limit { return nil }
    }
    return value
}

/// Text for people built from bytes that may not be UTF-8: control bytes and
/// invalid sequences become `?`, so a hostile name cannot forge log lines.
public func printableText<C: Collection>(_ bytes: C, limit: Int = 128) -> String where C.Element == UInt8 {
    var cleaned: [UInt8] = []
    for byte in bytes.prefix(limit) {
        cleaned.append(byte < 0x20 || byte == 0x7F || byte >= 0x80 ? 0x3F : byte)
    }
    return String(decoding: cleaned, as: UTF8.self)
}

/// The UTF-8 bytes of a string.
public func utf8Bytes(_ text: String) -> [UInt8] {
    var result: [UInt8] = []
    result.reserveCapacity(text.utf8.count)
    for byte in text.utf8 { result.append(byte) }
    return result
}

/// Lends two byte strings as NUL-terminated C strings.
/// Lends `bytes` as a NUL-terminated C string for the duration of `body`.
@inline(__always)
public func withCString<R>(_ bytes: [UInt8], _ body: (UnsafePointer<CChar>) -> R) -> R {
    var terminated = bytes
    terminated.append(0)
    return terminated.withUnsafeBufferPointer { body(UnsafeRawPointer($0.baseAddress!).assumingMemoryBound(to: CChar.self)) }
}

public func withCStrings<R>(_ first: [UInt8], _ second: [UInt8], _ body: (UnsafePointer<CChar>, UnsafePointer<CChar>) -> R) -> R {
    var a = first, b = second
    a.append(0)
    b.append(0)
    return a.withUnsafeBufferPointer { aBuffer in
        b.withUnsafeBufferPointer { bBuffer in
            body(UnsafeRawPointer(aBuffer.baseAddress!).assumingMemoryBound(to: CChar.self),
                 UnsafeRawPointer(bBuffer.baseAddress!).assumingMemoryBound(to: CChar.self))
        }
    }
}

/// A buffer for one secret (a passcode, a stored secret) that this code
/// owns from the moment it is read until it is wiped. Never converted to
/// `String`; wiped with `explicit_bzero` by `wipe()` and again on deinit.
public final class SecretBuffer {
    /// The most bytes a passcode may have; longer input is rejected as a whole.
    public static let capacity = 1024

    /// The most bytes this buffer holds (`capacity` for a passcode).
    public let limit: Int
    private let storage: UnsafeMutablePointer<UInt8>
    /// Bytes in use.
    public private(set) var count: Int = 0
    /// True when the input did not fit; the content is then empty.
    public private(set) var overflowed = false

    public init(limit: Int = SecretBuffer.capacity) {
        self.limit = limit
        storage = UnsafeMutablePointer<UInt8>.allocate(capacity: limit + 1)
        storage.initialize(repeating: 0, count: limit + 1)
    }

    deinit {
        wipe()
        storage.deallocate()
    }

    public var isEmpty: Bool { count == 0 && !overflowed }

    /// Replaces the content with `length` bytes from `source`.
    public func assign(from source: UnsafePointer<UInt8>, length: Int) {
        wipe()
        guard length <= limit else {
            overflowed = true
            return
        }
        storage.update(from: source, count: length)
        storage[length] = 0
        count = length
    }

    /// Replaces the content with `length` bytes that `fill` writes into
    /// this buffer's own memory (so they are never copied elsewhere);
    /// false, and empty, when `length` does not fit or `fill` fails.
    public func fill(length: Int, _ fill: (UnsafeMutablePointer<UInt8>) -> Bool) -> Bool {
        wipe()
        guard length >= 0, length <= limit else { return false }
        guard fill(storage) else {
            wipe()
            return false
        }
        storage[length] = 0
        count = length
        return true
    }

    /// Replaces the content with what `fill` writes into this buffer's own
    /// memory: it is given room for `limit + 1` bytes (so that a longer
    /// input shows) and returns how many it wrote. False, and empty, when
    /// it fails or wrote more than `limit`.
    public func fillUpToLimit(_ fill: (UnsafeMutablePointer<UInt8>, Int) -> Int?) -> Bool {
        wipe()
        guard let length = fill(storage, limit + 1), length >= 0, length <= limit else {
            wipe()
            return false
        }
        storage[length] = 0
        count = length
        return true
    }

    /// Adds one byte typed into a password line. Past the capacity the
    /// content is wiped and the buffer stays overflowed (rejected as a whole).
    public func append(_ byte: UInt8) {
        guard !overflowed else { return }
        guard count < limit else {
            wipe()
            overflowed = true
            return
        }
        storage[count] = byte
        count += 1
        storage[count] = 0
    }

    /// Removes the last character typed (Backspace): one byte, or with
    /// `utf8` (the terminal's IUTF8) its UTF-8 continuation bytes and its
    /// first byte.
    public func removeLastCharacter(utf8: Bool) {
        while count > 0 {
            count -= 1
            let byte = storage[count]
            storage[count] = 0
            if !utf8 || byte & 0xC0 != 0x80 { break }
        }
    }

    /// Moves the content into `other` (wiping what it held) and wipes this one.
    public func move(into other: SecretBuffer) {
        if overflowed {
            other.wipe()
            other.overflowed = true
        } else {
            other.assign(from: UnsafePointer(storage), length: count)
        }
        wipe()
    }

    /// Lends the NUL-terminated content for the duration of `body`.
    public func withCString<R>(_ body: (UnsafePointer<CChar>) -> R) -> R {
        storage.withMemoryRebound(to: CChar.self, capacity: limit + 1) { body(UnsafePointer($0)) }
    }

    /// Lends the content as bytes for the duration of `body`.
    public func withBytes<R>(_ body: (UnsafePointer<UInt8>, Int) -> R) -> R {
        body(UnsafePointer(storage), count)
    }

    /// Overwrites every byte with zero in a way the compiler cannot drop.
    public func wipe() {
        la_wipe(storage, limit + 1)
        count = 0
        overflowed = false
    }
}
