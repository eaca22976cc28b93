// The record file's two slots and its sync mark (docs/DESIGN.md, "The
// state store"): which copy is current, and which one the next write in
// place may overwrite, so that a write cut short at any byte leaves a whole
// copy at least as new as the last one known to be on disk.

/// What a record file holds: the current copy (the whole slot with the
/// highest generation) and where the next write goes.
public struct RecordSlots: Equatable {
    /// The index of the current slot; nil when no slot is whole.
    public var current: Int?
    /// The current slot's header.
    public var header: RecordFormat.SlotHeader?
    /// The generation the sync mark names: known to be on disk.
    public var syncedGeneration: UInt64? = nil
    /// The generation of the other slot, when it is whole.
    public var otherGeneration: UInt64? = nil
    /// Why no slot is whole: the damage found in the first one.
    public var damage: RecordDamage?
    /// A one-slot file of an earlier release: the next change rewrites the
    /// whole file in the two-slot layout rather than writing in place.
    public var isLegacy: Bool

    /// Reads the slots of a whole record file.
    public static func read(_ file: [UInt8]) -> RecordSlots {
        if file.count == RecordFormat.size {
            switch RecordFormat.header(file) {
            case .success(let header) where header.version == RecordFormat.legacyVersion:
                return RecordSlots(current: 0, header: header, damage: nil, isLegacy: true)
            case .success: return RecordSlots(current: nil, header: nil, damage: .wrongSize, isLegacy: true)
            case .failure(let error): return RecordSlots(current: nil, header: nil, damage: error.damage, isLegacy: true)
            }
        }
        guard file.count == RecordFormat.fileSize else {
            return RecordSlots(current: nil, header: nil, damage: .wrongSize, isLegacy: false)
        }
        var whole: [(index: Int, header: RecordFormat.SlotHeader)] = []
        var firstDamage: RecordDamage? = nil
        for index in 0..<2 {
            switch RecordFormat.header(file, at: index * RecordFormat.size) {
            case .success(let header) where header.version == RecordFormat.version:
                whole.append((index, header))
            case .success:
                if firstDamage == nil { firstDamage = .unsupportedVersion }
            case .failure(let error):
                if firstDamage == nil { firstDamage = error.damage }
            }
        }
        guard let best = whole.max(by: { $0.header.generation < $1.header.generation || ($0.header.generation == $1.header.generation && $0.index > $1.index) }) else {
            return RecordSlots(current: nil, header: nil, damage: firstDamage, isLegacy: false)
        }
        let mark = copiedBytes(file, RecordFormat.syncMarkOffset..<(RecordFormat.syncMarkOffset + RecordFormat.syncMarkSize))
        return RecordSlots(current: best.index, header: best.header, syncedGeneration: RecordFormat.syncedGeneration(mark),
                           otherGeneration: whole.first { $0.index != best.index }?.header.generation,
                           damage: nil, isLegacy: false)
    }

    /// Reads the slots of a whole record file and decodes the current copy
    /// (nil when no slot is whole) for `uid` and `userName`: the slot is
    /// checked once, here, and decoded from the same bytes.
    public static func readCurrent(_ file: [UInt8], uid: UInt32, userName: [UInt8], sameAccount: ([UInt8]) -> Bool = { _ in false })
        -> (slots: RecordSlots, record: Result<StateRecord, RecordDamageError>?) {
        let slots = read(file)
        guard let current = slots.current else { return (slots, nil) }
        let bytes = slots.isLegacy ? file : slot(file, current)
        return (slots, RecordFormat.decodeChecked(bytes, uid: uid, userName: userName, sameAccount: sameAccount))
    }

    /// The bytes of slot `index` of a two-slot file.
    public static func slot(_ file: [UInt8], _ index: Int) -> [UInt8] {
        copiedBytes(file, (index * RecordFormat.size)..<((index + 1) * RecordFormat.size))
    }

    /// Where the next write in place goes.
    public enum WritePlan: Equatable {
        /// The other slot: the mark names the current copy, it is on disk.
        case otherSlot
        /// The current slot again: it only lowered what was owed (losing
        /// it is safe), and the mark names the other copy, on disk.
        case currentSlot
        /// Not known which copy is on disk (the mark was lost, cut or not
        /// yet written: a writer killed or failing between its sync and its
        /// mark, a power cut): sync first, mark the current copy, then the
        /// other slot.
        case otherSlotAfterSync
    }

    /// Never over the newest copy that may be the only one on disk.
    public var plan: WritePlan {
        guard let header else { return .otherSlotAfterSync }
        if syncedGeneration == header.generation { return .otherSlot }
        if !header.durable, let otherGeneration, syncedGeneration == otherGeneration { return .currentSlot }
        return .otherSlotAfterSync
    }

    /// The slot index the plan writes.
    public var nextSlot: Int {
        guard let current else { return 0 }
        return plan == .currentSlot ? current : 1 - current
    }

    public var nextGeneration: UInt64 { (header?.generation ?? 0) &+ 1 }

    /// A new file holding `record` in its first slot; it is written whole
    /// and synced before its name appears, so its mark names that copy.
    public static func newFile(_ record: StateRecord) -> [UInt8] {
        RecordFormat.encode(record, generation: 1) + [UInt8](repeating: 0, count: RecordFormat.size) + RecordFormat.syncMark(1)
    }
}
