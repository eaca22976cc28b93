// The per-user attempt record (docs/DESIGN.md, "The state store"): fixed size, versioned,
// checksummed, kept twice in one file so that a write in place that is cut
// short leaves the other copy. The checksum detects damage; integrity
// against tampering comes from the store's ownership and mode checks.

/// One recent failure, for `localauth status`.
public struct FailureEntry: Equatable {
    public enum Kind: UInt8 {
        case fingerprint = 1
        case passcode = 2
    }
    /// Identifies the attempt so a refund removes exactly its own entry.
    public var sequence: UInt64
    public var wallSeconds: Int64
    public var kind: Kind
    public var service: [UInt8]
    public var tty: [UInt8]
    public var remoteHost: [UInt8]
    /// Set when a success reset the counts after this charge: the attempt can
    /// no longer be refunded (its count is gone). Bit 7 of the kind byte.
    public var settled = false

    public init(sequence: UInt64, wallSeconds: Int64, kind: Kind, service: [UInt8], tty: [UInt8], remoteHost: [UInt8]) {
        self.sequence = sequence
        self.wallSeconds = wallSeconds
        self.kind = kind
        self.service = Array(service.prefix(RecordFormat.serviceLength))
        self.tty = Array(tty.prefix(RecordFormat.ttyLength))
        self.remoteHost = Array(remoteHost.prefix(RecordFormat.remoteHostLength))
    }
}

public struct StateRecord: Equatable {
    /// The uid under which the look-alike record of unknown names is kept
    /// (no account has it).
    public static let lookAlikeUID = UInt32.max

    public var uid: UInt32
    public var userName: [UInt8]
    /// Wall-clock creation time; with the name, tells a reused uid apart.
    public var createdWallSeconds: Int64
    /// `F`: consecutive failed fingerprint attempts.
    public var fingerprintFailures: Int = 0
    /// `P`: consecutive wrong passcodes.
    public var passcodeFailures: Int = 0
    /// The passcode wait still to run, as of `backoffAnchorBootNanoseconds`
    /// in boot `backoffBootID` (R13).
    public var backoffRemainingMilliseconds: Int64 = 0
    public var backoffAnchorBootNanoseconds: Int64 = 0
    public var backoffBootID: [UInt8] = RecordFormat.zeroID
    public var lastPasscodeSuccessWallSeconds: Int64 = 0
    public var lastPasscodeSuccessBootID: [UInt8] = RecordFormat.zeroID
    public var lastPasscodeSuccessDigest: [UInt8] = RecordFormat.zeroDigest
    public var lastFingerprintSuccessWallSeconds: Int64 = 0
    /// The boot-clock times of the last correct passcode (in boot
    /// `lastPasscodeSuccessBootID`) and the last match (in boot
    /// `lastFingerprintSuccessBootID`): what the passcode-required rules
    /// measure, never the wall clock.
    public var lastPasscodeSuccessBootNanoseconds: Int64 = 0
    public var lastFingerprintSuccessBootNanoseconds: Int64 = 0
    public var lastFingerprintSuccessBootID: [UInt8] = RecordFormat.zeroID
    public var nextSequence: UInt64 = 1
    /// The last success (any service) on the boot clock of boot
    /// `lastUnlockBootID`, the method that won it, and the logind session
    /// it happened in (empty: none): what an app's reuse window asks about.
    public var lastUnlockBootNanoseconds: Int64 = 0
    public var lastUnlockBootID: [UInt8] = RecordFormat.zeroID
    public var lastUnlockMethod: AuthenticationMethod? = nil
    public var lastUnlockSession: [UInt8] = []
    /// Newest last; at most `RecordFormat.maxFailures`.
    public var recentFailures: [FailureEntry] = []

    public init(uid: UInt32, userName: [UInt8], createdWallSeconds: Int64) {
        self.uid = uid
        self.userName = userName
        self.createdWallSeconds = createdWallSeconds
    }

    /// Appends a failure, dropping the oldest beyond the cap; returns its sequence.
    public mutating func appendFailure(kind: FailureEntry.Kind, wallSeconds: Int64, service: [UInt8], tty: [UInt8], remoteHost: [UInt8]) -> UInt64 {
        let sequence = nextSequence
        nextSequence &+= 1
        recentFailures.append(FailureEntry(sequence: sequence, wallSeconds: wallSeconds, kind: kind, service: service, tty: tty, remoteHost: remoteHost))
        if recentFailures.count > RecordFormat.maxFailures { recentFailures.removeFirst(recentFailures.count - RecordFormat.maxFailures) }
        return sequence
    }

    /// A correct password at `moment`, with the enrollment it saw.
    /// A correct password at `moment`, when fprintd said `enrollment` was
    /// enrolled (the empty digest: no prints). With nil (fprintd not
    /// asked, not answering, or answering with an error) the digest of the
    /// last password success that read it is kept: an error is never
    /// taken for an enrollment, so it cannot make the next touch read as
    /// a changed enrollment.
    public mutating func notePasscodeSuccess(_ moment: Moment, enrollment: [UInt8]?) {
        lastPasscodeSuccessWallSeconds = moment.wall
        lastPasscodeSuccessBootID = moment.bootID
        lastPasscodeSuccessBootNanoseconds = moment.boot
        if let enrollment { lastPasscodeSuccessDigest = RecordFormat.storedDigest(enrollment) }
    }

    /// Removes the failure entry of a refunded or won attempt.
    public mutating func removeFailure(sequence: UInt64) {
        recentFailures.removeAll { $0.sequence == sequence }
    }

    /// Whether losing this change in a crash could leave less charged than
    /// was charged, or a shorter wait than was earned (R3): then it must be
    /// on disk before anything goes on. Every other change (a reset after a
    /// success, a refund, a wait's progress) only lowers what is owed, and
    /// losing it leaves a count too high, never too low.
    public func mustBeDurable(replacing previous: StateRecord) -> Bool {
        fingerprintFailures > previous.fingerprintFailures || passcodeFailures > previous.passcodeFailures
            || nextSequence != previous.nextSequence || backoffRemainingMilliseconds > previous.backoffRemainingMilliseconds
            || uid != previous.uid || userName != previous.userName || createdWallSeconds != previous.createdWallSeconds
    }

    /// After a reset of the counts: attempts still in flight can no longer
    /// be refunded, since their counts are gone.
    public mutating func settleFailures() {
        for index in recentFailures.indices { recentFailures[index].settled = true }
    }
}

/// Why a stored record was not accepted.
public enum RecordDamage: Equatable, Sendable {
    case wrongSize
    case badMagic
    case unsupportedVersion
    case badChecksum
    case malformed
    /// The record belongs to another user name or uid: a reused uid.
    case foreign
    /// A symlink, not a regular file, or wrong owner or mode.
    case unsafeFile
    /// The file exists but could not be read.
    case unreadable
    /// The lock file beside it was not the store's (a symlink, FIFO,
    /// directory, or another owner's file) and was replaced.
    case unsafeLock

    public var text: StaticString {
        switch self {
        case .wrongSize: return "wrong size"
        case .badMagic: return "not a localauth record"
        case .unsupportedVersion: return "unsupported version"
        case .badChecksum: return "checksum mismatch"
        case .malformed: return "malformed fields"
        case .foreign: return "belongs to another user (reused uid)"
        case .unsafeFile: return "unsafe file (symlink, not regular, wrong owner or mode)"
        case .unreadable: return "unreadable"
        case .unsafeLock: return "its lock file was not the store's and was replaced"
        }
    }
}

/// The on-disk layout of one copy of the record (a slot). All integers little-endian.
public enum RecordFormat {
    /// The size of one slot; the file holds two, then the sync mark.
    public static let size = 2048
    /// After the slots: the generation last seen on disk, written only
    /// after its `fdatasync` returned (8 bytes), and its complement.
    public static let syncMarkOffset = 2 * size
    public static let syncMarkSize = 16
    public static let fileSize = 2 * size + syncMarkSize
    public static let version: UInt16 = 2
    /// The single-slot file of earlier releases: read, and rewritten in the
    /// two-slot layout on its first change.
    public static let legacyVersion: UInt16 = 1
    public static let maxNameLength = 255
    public static let maxFailures = 8
    public static let serviceLength = 32
    public static let ttyLength = 32
    public static let remoteHostLength = 64
    // Computed, not stored: see KnownServices.table.
    public static var zeroID: [UInt8] { [UInt8](repeating: 0, count: 16) }
    public static var zeroDigest: [UInt8] { [UInt8](repeating: 0, count: 32) }
    /// A domain state as the record keeps it: cut or zero-padded to 32 bytes.
    public static func storedDigest(_ domainState: [UInt8]) -> [UInt8] {
        var digest = zeroDigest
        for index in 0..<min(digest.count, domainState.count) { digest[index] = domainState[index] }
        return digest
    }
    static let magic: StaticString = "LOCALAUT"
    static let nameOffset = 24
    static let fieldsOffset = 280
    static let failuresOffset = 408
    static let failureSize = 8 + 8 + 8 + serviceLength + ttyLength + remoteHostLength
    /// After the failure entries: the last unlock (zero in records written
    /// before it existed, which reads as "none").
    static let unlockOffset = 1632
    public static let maxSessionLength = 64
    /// After the last unlock: the boot-clock times of the last passcode and
    /// the last match (zero in older records: "at the start of that boot").
    static let successClockOffset = 1728
    /// Which copy is newer, and whether it raised what is owed (bit 0 of
    /// the flags: its writer syncs it; a copy without it only lowered
    /// what was owed, so losing it is safe).
    static let generationOffset = 1760
    static let flagsOffset = 1768
    static let checksumOffset = size - 8

    /// One slot holding `record`, numbered `generation`; `durable` when the
    /// change raised what is owed and is synced.
    public static func encode(_ record: StateRecord, generation: UInt64 = 1, durable: Bool = true) -> [UInt8] {
        var writer = ByteWriter(size: size)
        writer.put(literalBytes(magic), at: 0)
        writer.putInteger(UInt64(version), bytes: 2, at: 8)
        writer.putInteger(UInt64(size), bytes: 4, at: 12)
        writer.putInteger(UInt64(record.uid), bytes: 4, at: 16)
        let name = record.userName.prefix(maxNameLength)
        writer.putInteger(UInt64(name.count), bytes: 2, at: 20)
        writer.put(Array(name), at: nameOffset)
        var offset = fieldsOffset
        writer.putInteger(UInt64(bitPattern: record.createdWallSeconds), bytes: 8, at: offset); offset += 8
        writer.putInteger(UInt64(clamping: record.fingerprintFailures), bytes: 4, at: offset); offset += 4
        writer.putInteger(UInt64(clamping: record.passcodeFailures), bytes: 4, at: offset); offset += 4
        writer.putInteger(UInt64(bitPattern: record.backoffRemainingMilliseconds), bytes: 8, at: offset); offset += 8
        writer.putInteger(UInt64(bitPattern: record.backoffAnchorBootNanoseconds), bytes: 8, at: offset); offset += 8
        writer.put(record.backoffBootID, at: offset); offset += 16
        writer.putInteger(UInt64(bitPattern: record.lastPasscodeSuccessWallSeconds), bytes: 8, at: offset); offset += 8
        writer.put(record.lastPasscodeSuccessBootID, at: offset); offset += 16
        writer.put(record.lastPasscodeSuccessDigest, at: offset); offset += 32
        writer.putInteger(UInt64(bitPattern: record.lastFingerprintSuccessWallSeconds), bytes: 8, at: offset); offset += 8
        writer.putInteger(record.nextSequence, bytes: 8, at: offset); offset += 8
        let failures = record.recentFailures.suffix(maxFailures)
        writer.putInteger(UInt64(failures.count), bytes: 1, at: offset)
        offset = failuresOffset
        for entry in failures {
            writer.putInteger(entry.sequence, bytes: 8, at: offset)
            writer.putInteger(UInt64(bitPattern: entry.wallSeconds), bytes: 8, at: offset + 8)
            writer.putInteger(UInt64(entry.kind.rawValue | (entry.settled ? 0x80 : 0)), bytes: 1, at: offset + 16)
            writer.putInteger(UInt64(entry.service.count), bytes: 1, at: offset + 17)
            writer.putInteger(UInt64(entry.tty.count), bytes: 1, at: offset + 18)
            writer.putInteger(UInt64(entry.remoteHost.count), bytes: 1, at: offset + 19)
            writer.put(entry.service, at: offset + 24)
            writer.put(entry.tty, at: offset + 24 + serviceLength)
            writer.put(entry.remoteHost, at: offset + 24 + serviceLength + ttyLength)
            offset += failureSize
        }
        writer.putInteger(UInt64(bitPattern: record.lastUnlockBootNanoseconds), bytes: 8, at: unlockOffset)
        writer.put(record.lastUnlockBootID, at: unlockOffset + 8)
        let methodByte: UInt64
        switch record.lastUnlockMethod {
        case nil: methodByte = 0
        case .biometry?: methodByte = 1
        case .passcode?: methodByte = 2
        }
        writer.putInteger(methodByte, bytes: 1, at: unlockOffset + 24)
        let session = record.lastUnlockSession.count <= maxSessionLength ? record.lastUnlockSession : []
        writer.putInteger(UInt64(session.count), bytes: 1, at: unlockOffset + 25)
        writer.put(session, at: unlockOffset + 26)
        writer.putInteger(UInt64(bitPattern: record.lastPasscodeSuccessBootNanoseconds), bytes: 8, at: successClockOffset)
        writer.putInteger(UInt64(bitPattern: record.lastFingerprintSuccessBootNanoseconds), bytes: 8, at: successClockOffset + 8)
        writer.put(record.lastFingerprintSuccessBootID, at: successClockOffset + 16)
        writer.putInteger(generation, bytes: 8, at: generationOffset)
        writer.putInteger(durable ? 1 : 0, bytes: 1, at: flagsOffset)
        writer.putInteger(checksum(writer.bytes, from: 0), bytes: 8, at: checksumOffset)
        return writer.bytes
    }

    /// What a slot's header says, when the slot is whole: its number and
    /// format. Nothing about whose record it is.
    public struct SlotHeader: Equatable {
        public var generation: UInt64
        /// The change raised what is owed (its writer synced it).
        public var durable: Bool
        public var version: UInt16
    }

    /// The sync mark for `generation`.
    public static func syncMark(_ generation: UInt64) -> [UInt8] {
        var writer = ByteWriter(size: syncMarkSize)
        writer.putInteger(generation, bytes: 8, at: 0)
        writer.putInteger(~generation, bytes: 8, at: 8)
        return writer.bytes
    }

    /// The generation a sync mark names; nil for a cut or damaged one.
    public static func syncedGeneration(_ mark: [UInt8]) -> UInt64? {
        guard mark.count == syncMarkSize else { return nil }
        let reader = ByteReader(bytes: mark)
        let generation = reader.integer(at: 0, bytes: 8)
        return reader.integer(at: 8, bytes: 8) == ~generation ? generation : nil
    }

    /// Checks a slot's magic, version, size and checksum.
    public static func header(_ bytes: [UInt8]) -> Result<SlotHeader, RecordDamageError> {
        guard bytes.count == size else { return .failure(RecordDamageError(.wrongSize)) }
        return header(bytes, at: 0)
    }

    /// The same for the slot at `offset` of a whole file, read in place.
    static func header(_ file: [UInt8], at offset: Int) -> Result<SlotHeader, RecordDamageError> {
        guard file.count >= offset + size else { return .failure(RecordDamageError(.wrongSize)) }
        guard bytesEqual(file[offset..<(offset + 8)], magic) else { return .failure(RecordDamageError(.badMagic)) }
        let reader = ByteReader(bytes: file)
        let stored = UInt16(truncatingIfNeeded: reader.integer(at: offset + 8, bytes: 2))
        guard stored == version || stored == legacyVersion, reader.integer(at: offset + 12, bytes: 4) == UInt64(size) else {
            return .failure(RecordDamageError(.unsupportedVersion))
        }
        guard reader.integer(at: offset + checksumOffset, bytes: 8) == checksum(file, from: offset) else {
            return .failure(RecordDamageError(.badChecksum))
        }
        // Version 1 had no slots and no generation.
        guard stored == version else { return .success(SlotHeader(generation: 0, durable: true, version: stored)) }
        return .success(SlotHeader(generation: reader.integer(at: offset + generationOffset, bytes: 8),
                                   durable: reader.integer(at: offset + flagsOffset, bytes: 1) & 1 != 0, version: stored))
    }

    /// Decodes a slot and checks that it belongs to `uid` and `userName`.
    /// A record is the uid's; its name tells a reused uid apart. A record
    /// made under another name of the same account (an alias, a local and a
    /// directory entry sharing the uid) is still this account's when
    /// `sameAccount` says the stored name leads to this uid today: it is
    /// read as it is, under the name it was made with.
    public static func decode(_ bytes: [UInt8], uid: UInt32, userName: [UInt8],
                              sameAccount: ([UInt8]) -> Bool = { _ in false }) -> Result<StateRecord, RecordDamageError> {
        if case .failure(let damage) = header(bytes) { return .failure(damage) }
        return decodeChecked(bytes, uid: uid, userName: userName, sameAccount: sameAccount)
    }

    /// `decode` of a slot whose magic, version, size and checksum were
    /// checked on these very bytes (`RecordSlots.readCurrent`, the only
    /// caller besides `decode`): not checked again.
    static func decodeChecked(_ bytes: [UInt8], uid: UInt32, userName: [UInt8],
                              sameAccount: ([UInt8]) -> Bool) -> Result<StateRecord, RecordDamageError> {
        guard bytes.count == size else { return .failure(RecordDamageError(.wrongSize)) }
        let reader = ByteReader(bytes: bytes)
        let nameLength = Int(reader.integer(at: 20, bytes: 2))
        guard nameLength <= maxNameLength else { return .failure(RecordDamageError(.malformed)) }
        let storedUID = UInt32(truncatingIfNeeded: reader.integer(at: 16, bytes: 4))
        let storedName = Array(bytes[nameOffset..<(nameOffset + nameLength)])
        guard storedUID == uid, storedName == userName || sameAccount(storedName) else { return .failure(RecordDamageError(.foreign)) }
        var offset = fieldsOffset
        var record = StateRecord(uid: storedUID, userName: storedName, createdWallSeconds: Int64(bitPattern: reader.integer(at: offset, bytes: 8)))
        offset += 8
        record.fingerprintFailures = Int(reader.integer(at: offset, bytes: 4)); offset += 4
        record.passcodeFailures = Int(reader.integer(at: offset, bytes: 4)); offset += 4
        record.backoffRemainingMilliseconds = Int64(bitPattern: reader.integer(at: offset, bytes: 8)); offset += 8
        record.backoffAnchorBootNanoseconds = Int64(bitPattern: reader.integer(at: offset, bytes: 8)); offset += 8
        record.backoffBootID = Array(bytes[offset..<(offset + 16)]); offset += 16
        record.lastPasscodeSuccessWallSeconds = Int64(bitPattern: reader.integer(at: offset, bytes: 8)); offset += 8
        record.lastPasscodeSuccessBootID = Array(bytes[offset..<(offset + 16)]); offset += 16
        record.lastPasscodeSuccessDigest = Array(bytes[offset..<(offset + 32)]); offset += 32
        record.lastFingerprintSuccessWallSeconds = Int64(bitPattern: reader.integer(at: offset, bytes: 8)); offset += 8
        record.nextSequence = reader.integer(at: offset, bytes: 8); offset += 8
        let failureCount = Int(reader.integer(at: offset, bytes: 1))
        guard failureCount <= maxFailures, record.backoffRemainingMilliseconds >= 0,
              record.fingerprintFailures <= 1_000_000, record.passcodeFailures <= 1_000_000 else {
            return .failure(RecordDamageError(.malformed))
        }
        offset = failuresOffset
        for _ in 0..<failureCount {
            let serviceCount = Int(reader.integer(at: offset + 17, bytes: 1))
            let ttyCount = Int(reader.integer(at: offset + 18, bytes: 1))
            let hostCount = Int(reader.integer(at: offset + 19, bytes: 1))
            let kindByte = UInt8(reader.integer(at: offset + 16, bytes: 1))
            guard let kind = FailureEntry.Kind(rawValue: kindByte & 0x7F),
                  serviceCount <= serviceLength, ttyCount <= ttyLength, hostCount <= remoteHostLength else {
                return .failure(RecordDamageError(.malformed))
            }
            let serviceStart = offset + 24
            let ttyStart = serviceStart + serviceLength
            let hostStart = ttyStart + ttyLength
            var entry = FailureEntry(
                sequence: reader.integer(at: offset, bytes: 8),
                wallSeconds: Int64(bitPattern: reader.integer(at: offset + 8, bytes: 8)), kind: kind,
                service: Array(bytes[serviceStart..<(serviceStart + serviceCount)]),
                tty: Array(bytes[ttyStart..<(ttyStart + ttyCount)]),
                remoteHost: Array(bytes[hostStart..<(hostStart + hostCount)]))
            entry.settled = kindByte & 0x80 != 0
            record.recentFailures.append(entry)
            offset += failureSize
        }
        record.lastUnlockBootNanoseconds = Int64(bitPattern: reader.integer(at: unlockOffset, bytes: 8))
        record.lastUnlockBootID = Array(bytes[(unlockOffset + 8)..<(unlockOffset + 24)])
        let sessionLength = Int(reader.integer(at: unlockOffset + 25, bytes: 1))
        switch reader.integer(at: unlockOffset + 24, bytes: 1) {
        case 0: record.lastUnlockMethod = nil
        case 1: record.lastUnlockMethod = .biometry
        case 2: record.lastUnlockMethod = .passcode
        default: return .failure(RecordDamageError(.malformed))
        }
        guard sessionLength <= maxSessionLength else { return .failure(RecordDamageError(.malformed)) }
        record.lastUnlockSession = Array(bytes[(unlockOffset + 26)..<(unlockOffset + 26 + sessionLength)])
        record.lastPasscodeSuccessBootNanoseconds = Int64(bitPattern: reader.integer(at: successClockOffset, bytes: 8))
        record.lastFingerprintSuccessBootNanoseconds = Int64(bitPattern: reader.integer(at: successClockOffset + 8, bytes: 8))
        record.lastFingerprintSuccessBootID = Array(bytes[(successClockOffset + 16)..<(successClockOffset + 32)])
        return .success(record)
    }

    /// FNV-1a, 64 bit, of the slot at `offset` up to its checksum: detects
    /// torn or damaged records. Read through a buffer pointer: it runs over
    /// both slots at every read.
    static func checksum(_ bytes: [UInt8], from offset: Int) -> UInt64 {
        bytes.withUnsafeBufferPointer { buffer -> UInt64 in
            var hash: UInt64 = 0xcbf2_9ce4_8422_2325
            for index in offset..<(offset + checksumOffset) {
                hash ^= UInt64(buffer[index])
                hash = hash &* 0x0000_0100_0000_01B3
            }
            return hash
        }
    }
}

/// A `RecordDamage` as an `Error` for `Result`.
public struct RecordDamageError: Error, Equatable {
    public var damage: RecordDamage
    public init(_ damage: RecordDamage) { self.damage = damage }
}

struct ByteWriter {
    var bytes: [UInt8]
    init(size: Int) { bytes = [UInt8](repeating: 0, count: size) }
    mutating func put(_ source: [UInt8], at offset: Int) {
        for index in 0..<source.count { bytes[offset + index] = source[index] }
    }
    mutating func putInteger(_ value: UInt64, bytes count: Int, at offset: Int) {
        for index in 0..<count { bytes[offset + index] = UInt8(truncatingIfNeeded: value >> (8 * UInt64(index))) }
    }
}

struct ByteReader {
    let bytes: [UInt8]
    func integer(at offset: Int, bytes count: Int) -> UInt64 {
        var value: UInt64 = 0
        for index in 0..<count { value |= UInt64(bytes[offset + index]) << (8 * UInt64(index)) }
        return value
    }
}
