import XCTest
import LocalAuth

/// The record is versioned, checksummed and of fixed size; any
/// damage is detected (and then handled by R12).
final class RecordTests: XCTestCase {
    // The layout, as documented in Record.swift; restated here so that a
    // silent layout change breaks the tests.
    let size = 2048
    let checksumOffset = 2048 - 8
    let nameOffset = 24
    let fieldsOffset = 280
    let failuresOffset = 408
    let failureSize = 8 + 8 + 8 + 32 + 32 + 64

    func fullRecord() -> StateRecord {
        var record = StateRecord(uid: 1000, userName: bytes("alice"), createdWallSeconds: 1_700_000_000)
        record.fingerprintFailures = 4
        record.passcodeFailures = 6
        record.backoffRemainingMilliseconds = 299_500
        record.backoffAnchorBootNanoseconds = 123_456_789_012
        record.backoffBootID = (0..<16).map { UInt8($0 + 1) }
        record.lastPasscodeSuccessWallSeconds = 1_700_000_500
        record.lastPasscodeSuccessBootID = (0..<16).map { UInt8(0xF0 - $0) }
        record.lastPasscodeSuccessDigest = (0..<32).map { UInt8($0 * 7 & 0xFF) }
        record.lastFingerprintSuccessWallSeconds = 1_700_000_600
        _ = record.appendFailure(kind: .fingerprint, wallSeconds: 1_700_001_000, service: bytes("sudo"), tty: bytes("/dev/pts/1"),
                                 remoteHost: [])
        _ = record.appendFailure(kind: .passcode, wallSeconds: 1_700_001_001, service: bytes("swaylock"), tty: [],
                                 remoteHost: bytes("localhost"))
        return record
    }

    /// FNV-1a 64 over everything before the checksum (the documented algorithm).
    func reseal(_ bytes: inout [UInt8]) {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in bytes[0..<checksumOffset] {
            hash ^= UInt64(byte)
            hash = hash &* 0x0000_0100_0000_01B3
        }
        for index in 0..<8 { bytes[checksumOffset + index] = UInt8(truncatingIfNeeded: hash >> (8 * UInt64(index))) }
    }

    func put(_ value: UInt64, bytes count: Int, at offset: Int, in data: inout [UInt8]) {
        for index in 0..<count { data[offset + index] = UInt8(truncatingIfNeeded: value >> (8 * UInt64(index))) }
    }

    func decode(_ data: [UInt8], uid: UInt32 = 1000, name: String = "alice") -> Result<StateRecord, RecordDamageError> {
        RecordFormat.decode(data, uid: uid, userName: bytes(name))
    }

    func damage(of data: [UInt8], uid: UInt32 = 1000, name: String = "alice") -> RecordDamage? {
        if case .failure(let error) = decode(data, uid: uid, name: name) { return error.damage }
        return nil
    }

    func testRoundTrip() {
        let record = fullRecord()
        let data = RecordFormat.encode(record)
        XCTAssertEqual(data.count, RecordFormat.size)
        XCTAssertEqual(data.count, size)
        XCTAssertEqual(Array(data[0..<8]), bytes("LOCALAUT"))
        XCTAssertEqual(decode(data), .success(record))
        XCTAssertEqual(try decode(data).get().recentFailures.map(\.kind), [.fingerprint, .passcode])
        XCTAssertEqual(try decode(data).get().recentFailures.map(\.sequence), [1, 2])
        XCTAssertEqual(try decode(data).get().nextSequence, 3)
        // Deterministic: the same record encodes to the same bytes.
        XCTAssertEqual(RecordFormat.encode(record), data)
    }

    func testTheLastUnlockRoundTripsAndIsAbsentInOlderRecords() {
        var record = fullRecord()
        record.lastUnlockBootNanoseconds = 123_456_789_000
        record.lastUnlockBootID = [UInt8](repeating: 0xAB, count: 16)
        record.lastUnlockMethod = .passcode
        record.lastUnlockSession = bytes("c12")
        var data = RecordFormat.encode(record)
        XCTAssertEqual(decode(data), .success(record))
        // A record written before the block existed has zeros there: none.
        for index in 1632..<(1632 + 26 + 3) { data[index] = 0 }
        reseal(&data)
        let older = try? decode(data).get()
        XCTAssertNil(older?.lastUnlockMethod)
        XCTAssertEqual(older?.lastUnlockSession, [])
        // A method or a session length out of range is damage.
        for (index, value) in [(1632 + 24, UInt8(3)), (1632 + 25, UInt8(65))] {
            var bad = RecordFormat.encode(record)
            bad[index] = value
            reseal(&bad)
            XCTAssertEqual(decode(bad), .failure(RecordDamageError(.malformed)))
        }
    }

    func testSettledEntriesRoundTrip() {
        var record = fullRecord()
        record.settleFailures()
        let data = RecordFormat.encode(record)
        XCTAssertEqual(decode(data), .success(record))
        XCTAssertEqual(try decode(data).get().recentFailures.map(\.settled), [true, true])
        XCTAssertEqual(try decode(data).get().recentFailures.map(\.kind), [.fingerprint, .passcode])
    }

    func testRoundTripAtTheLimits() {
        let longName = [UInt8](repeating: 0x7A, count: RecordFormat.maxNameLength)
        var record = StateRecord(uid: UInt32.max, userName: longName, createdWallSeconds: -5)
        record.fingerprintFailures = 1_000_000
        record.passcodeFailures = 1_000_000
        record.backoffRemainingMilliseconds = Int64.max
        record.backoffAnchorBootNanoseconds = Int64.min
        record.nextSequence = UInt64.max
        for index in 0..<(RecordFormat.maxFailures + 3) {
            _ = record.appendFailure(kind: index % 2 == 0 ? .fingerprint : .passcode, wallSeconds: Int64(index),
                                     service: [UInt8](repeating: 0x73, count: 40), tty: [UInt8](repeating: 0x74, count: 40),
                                     remoteHost: [UInt8](repeating: 0xFF, count: 70))
        }
        XCTAssertEqual(record.recentFailures.count, RecordFormat.maxFailures, "oldest dropped")
        XCTAssertEqual(record.recentFailures.first?.wallSeconds, 3)
        XCTAssertEqual(record.recentFailures.first?.service.count, RecordFormat.serviceLength, "fields truncated to fit")
        XCTAssertEqual(record.recentFailures.first?.remoteHost.count, RecordFormat.remoteHostLength)
        XCTAssertEqual(record.nextSequence, 10, "the sequence wraps instead of trapping")
        let data = RecordFormat.encode(record)
        XCTAssertEqual(data.count, RecordFormat.size)
        XCTAssertEqual(RecordFormat.decode(data, uid: UInt32.max, userName: longName), .success(record))
    }

    func testEmptyRecordRoundTrip() {
        let record = StateRecord(uid: 0, userName: bytes("root"), createdWallSeconds: 0)
        XCTAssertEqual(decode(RecordFormat.encode(record), uid: 0, name: "root"), .success(record))
    }

    func testRefundRemovesExactlyItsEntry() {
        var record = fullRecord()
        let sequence = record.appendFailure(kind: .fingerprint, wallSeconds: 9, service: [], tty: [], remoteHost: [])
        XCTAssertEqual(record.recentFailures.count, 3)
        record.removeFailure(sequence: 1)
        XCTAssertEqual(record.recentFailures.map(\.sequence), [2, sequence])
        record.removeFailure(sequence: 99)
        XCTAssertEqual(record.recentFailures.count, 2)
    }

    func testWrongSize() {
        let data = RecordFormat.encode(fullRecord())
        XCTAssertEqual(damage(of: []), .wrongSize)
        XCTAssertEqual(damage(of: Array(data.dropLast())), .wrongSize)
        XCTAssertEqual(damage(of: data + [0]), .wrongSize)
        XCTAssertEqual(damage(of: Array(data[0..<1024])), .wrongSize)
        XCTAssertEqual(damage(of: data + data), .wrongSize)
    }

    func testBadMagic() {
        var data = RecordFormat.encode(fullRecord())
        data[0] = 0x6C
        reseal(&data)
        XCTAssertEqual(damage(of: data), .badMagic)
        XCTAssertEqual(damage(of: [UInt8](repeating: 0, count: size)), .badMagic)
    }

    func testUnsupportedVersion() {
        var data = RecordFormat.encode(fullRecord())
        put(3, bytes: 2, at: 8, in: &data)
        reseal(&data)
        XCTAssertEqual(damage(of: data), .unsupportedVersion)
        data = RecordFormat.encode(fullRecord())
        put(4096, bytes: 4, at: 12, in: &data)
        reseal(&data)
        XCTAssertEqual(damage(of: data), .unsupportedVersion, "the size field is part of the version check")
    }

    /// Flipping any single byte (or bit) anywhere is detected.
    func testEveryByteFlipIsDetected() {
        let original = RecordFormat.encode(fullRecord())
        var counts: [RecordDamage: Int] = [:]
        for offset in 0..<size {
            for mask: UInt8 in [0x01, 0x80, 0xFF] {
                var data = original
                data[offset] ^= mask
                guard let found = damage(of: data) else {
                    XCTFail("flip \(mask) at \(offset) accepted")
                    continue
                }
                let expected: RecordDamage
                switch offset {
                case 0..<8: expected = .badMagic
                case 8..<10, 12..<16: expected = .unsupportedVersion
                default: expected = .badChecksum
                }
                XCTAssertEqual(found, expected, "flip \(mask) at \(offset)")
                counts[found, default: 0] += 1
            }
        }
        // Every region was exercised: header, name, fields, failures, padding, checksum.
        XCTAssertEqual(counts[.badChecksum], (size - 14) * 3)
    }

    func testForeignRecords() {
        let data = RecordFormat.encode(fullRecord())
        XCTAssertEqual(damage(of: data, uid: 1001), .foreign, "another uid")
        XCTAssertEqual(damage(of: data, name: "alicf"), .foreign, "a reused uid with another name")
        XCTAssertEqual(damage(of: data, name: "alice2"), .foreign)
        XCTAssertEqual(damage(of: data, name: "alic"), .foreign)
        XCTAssertEqual(damage(of: data, name: ""), .foreign)
        // Names compare as bytes: lenient UTF-8 decoding must not merge them.
        let odd = StateRecord(uid: 7, userName: [0x72, 0x6F, 0xFF, 0x74], createdWallSeconds: 1)
        XCTAssertEqual(RecordFormat.decode(RecordFormat.encode(odd), uid: 7, userName: [0x72, 0x6F, 0xFE, 0x74]),
                       .failure(RecordDamageError(.foreign)))
        XCTAssertEqual(RecordFormat.decode(RecordFormat.encode(odd), uid: 7, userName: [0x72, 0x6F, 0xFF, 0x74]), .success(odd))
    }

    /// Well-checksummed records with impossible contents.
    func testMalformedCounts() {
        let original = RecordFormat.encode(fullRecord())
        let failureCountOffset = fieldsOffset + 8 + 4 + 4 + 8 + 8 + 16 + 8 + 16 + 32 + 8 + 8
        let cases: [(String, (inout [UInt8]) -> Void)] = [
            ("name longer than 255", { self.put(256, bytes: 2, at: 20, in: &$0) }),
            ("name length 65535", { self.put(0xFFFF, bytes: 2, at: 20, in: &$0) }),
            ("F above a million", { self.put(1_000_001, bytes: 4, at: self.fieldsOffset + 8, in: &$0) }),
            ("F = UInt32.max", { self.put(0xFFFF_FFFF, bytes: 4, at: self.fieldsOffset + 8, in: &$0) }),
            ("P above a million", { self.put(1_000_001, bytes: 4, at: self.fieldsOffset + 12, in: &$0) }),
            ("negative back-off", { self.put(UInt64(bitPattern: -1), bytes: 8, at: self.fieldsOffset + 16, in: &$0) }),
            ("9 well-formed failures", {
                self.put(9, bytes: 1, at: failureCountOffset, in: &$0)
                for index in 2..<9 { self.put(1, bytes: 1, at: self.failuresOffset + index * self.failureSize + 16, in: &$0) }
            }),
            ("255 failures", { self.put(255, bytes: 1, at: failureCountOffset, in: &$0) }),
            ("failure kind 0", { self.put(0, bytes: 1, at: self.failuresOffset + 16, in: &$0) }),
            ("failure kind 3", { self.put(3, bytes: 1, at: self.failuresOffset + 16, in: &$0) }),
            ("service length 33", { self.put(33, bytes: 1, at: self.failuresOffset + 17, in: &$0) }),
            ("tty length 33", { self.put(33, bytes: 1, at: self.failuresOffset + 18, in: &$0) }),
            ("host length 65", { self.put(65, bytes: 1, at: self.failuresOffset + self.failureSize + 19, in: &$0) }),
        ]
        XCTAssertEqual(original[failureCountOffset], 2, "layout: the failure count byte")
        for (label, change) in cases {
            var data = original
            change(&data)
            reseal(&data)
            XCTAssertEqual(damage(of: data), .malformed, label)
        }
        // At the limits: still valid.
        var data = original
        put(1_000_000, bytes: 4, at: fieldsOffset + 8, in: &data)
        put(8, bytes: 1, at: failureCountOffset, in: &data)
        for index in 2..<8 { put(1, bytes: 1, at: failuresOffset + index * failureSize + 16, in: &data) }
        reseal(&data)
        let record = try? decode(data).get()
        XCTAssertEqual(record?.fingerprintFailures, 1_000_000)
        XCTAssertEqual(record?.recentFailures.count, 8)
    }

    func testDamageTexts() {
        let all: [RecordDamage] = [.wrongSize, .badMagic, .unsupportedVersion, .badChecksum, .malformed, .foreign, .unsafeFile, .unreadable]
        var texts = Set<String>()
        for damage in all {
            let text = "\(damage.text)"
            XCTAssertFalse(text.isEmpty)
            texts.insert(text)
        }
        XCTAssertEqual(texts.count, all.count)
    }
}
