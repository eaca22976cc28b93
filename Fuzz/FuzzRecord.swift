// Fuzz target: the record file as read from disk (both slots, the sync
// mark, the one-slot file of the first release) and the slot decoder. A
// decoded record must encode to a slot that decodes to the same record,
// and the current slot decodes alike with the header read checked.
import LocalAuth

func fuzzOne(_ bytes: [UInt8]) {
    let slots = RecordSlots.read(bytes)
    _ = slots.plan
    _ = slots.nextSlot
    guard let current = slots.current else {
        fuzzCheck(slots.damage != nil, "no current slot and no damage")
        return
    }
    let slot = slots.isLegacy ? bytes : RecordSlots.slot(bytes, current)
    for (uid, name) in [(UInt32(1000), literalBytes("alice")), (storedUID(slot), storedName(slot))] {
        let decoded = RecordFormat.decode(slot, uid: uid, userName: name)
        // The store's read: the slot checked once by RecordSlots, the same answer.
        let read = RecordSlots.readCurrent(bytes, uid: uid, userName: name)
        fuzzCheck(read.slots == slots && read.record == decoded, "readCurrent differs from read and decode")
        guard case .success(let record) = decoded else { continue }
        let again = RecordFormat.encode(record, generation: slots.header?.generation ?? 1)
        fuzzCheck(RecordFormat.decode(again, uid: uid, userName: name) == .success(record), "encode/decode round trip")
    }
}

func storedUID(_ slot: [UInt8]) -> UInt32 {
    slot.count >= 20 ? UInt32(slot[16]) | UInt32(slot[17]) << 8 | UInt32(slot[18]) << 16 | UInt32(slot[19]) << 24 : 0
}

func storedName(_ slot: [UInt8]) -> [UInt8] {
    guard slot.count >= 24 + 255 else { return [] }
    let length = min(Int(slot[20]) | Int(slot[21]) << 8, 255)
    return Array(slot[24..<(24 + length)])
}
