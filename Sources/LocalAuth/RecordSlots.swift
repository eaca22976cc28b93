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
        var best: (index: Int, header: RecordFormat.SlotHeader)? = nil
        var firstDamage: RecordDamage? = nil
        for index in 0..<2 {
            switch RecordFormat.header(file, at: index * RecordFormat.size) {
            case .success(let header) where header.version == RecordFormat.version:
                if best == nil || header.generation > best!.header.generation { best = (index, header) }
            case .success:
                if firstDamage == nil { firstDamage = .unsupportedVersion }
            case .failure(let error):
                if firstDamage == nil { firstDamage = error.damage }
            }
        }
        guard let best else { return RecordSlots(current: nil, header: nil, damage: firstDamage, isLegacy: false) }
        let mark = Array(file[RecordFormat.syncMarkOffset..<(RecordFormat.syncMarkOffset + RecordFormat.syncMarkSize)])
        return RecordSlots(current: best.index, header: best.header, syncedGeneration: RecordFormat.syncedGeneration(mark),
                           damage: nil, isLegacy: false)
    }

    /// The bytes of slot `index` of a two-slot file.
    public static func slot(_ file: [UInt8], _ index: Int) -> [UInt8] {
        Array(file[(index * RecordFormat.size)..<((index + 1) * RecordFormat.size)])
    }

    /// The slot the next write in place overwrites. Never the newest copy
    /// known to be on disk: when the sync mark names the current copy, the
    /// other slot; otherwise (a write that did not wait for the disk, a
    /// sync that failed, a writer killed before its sync returned) the
    /// current slot again, so the copy on disk before it stays whole.
    public var nextSlot: Int {
        guard let current, let header else { return 0 }
        return syncedGeneration == header.generation ? 1 - current : current
    }

    public var nextGeneration: UInt64 { (header?.generation ?? 0) &+ 1 }

    /// A new file holding `record` in its first slot; it is written whole
    /// and synced before its name appears, so its mark names that copy.
    public static func newFile(_ record: StateRecord) -> [UInt8] {
        RecordFormat.encode(record, generation: 1) + [UInt8](repeating: 0, count: RecordFormat.size) + RecordFormat.syncMark(1)
    }
}
