// What the engine and the ledger need from a state store, free of any I/O:
// the store protocol, what can go wrong, and the errno a failure carries
// (its words, the system's message, come from the store).

/// A failed system call's errno. Its words (the system's message) come
/// from the store that met it: `StateStore.describe`.
public struct Errno: Error, Equatable {
    public var code: Int32
    public init(_ code: Int32) { self.code = code }
}

/// Why the store could not do its work. The engine refuses the attempt.
public indirect enum StoreFailure: Error, Equatable {
    /// The state directory is missing and cannot be made, or is unsafe.
    case directoryUnusable(DirectoryProblem)
    case lockFailed(Errno)
    /// Another prompt held the record's lock for the whole bounded wait
    /// (one its user stopped or froze while it was writing): this attempt
    /// is refused uncounted rather than left hanging.
    case lockHeld(milliseconds: Int)
    case writeFailed(Errno)
    /// Opening or reading the record failed for want of descriptors or
    /// memory: the record may be sound, so it is neither trusted nor replaced.
    case readFailed(Errno)
    /// `ulimit -f` forbids writing a record and cannot be raised.
    case fileSizeLimited
    /// The state directory is read-only, and counting in /run failed too
    /// (full, read-only, unsafe): the attempt is refused, never uncounted.
    case runtimeUnusable(StoreFailure)
}

/// What is wrong with the state directory or the way to it.
public enum DirectoryProblem: Equatable, Sendable {
    case notAbsolute
    /// A directory on the way is a symlink, not a directory, not root's, or
    /// writable by group or others without being sticky.
    case unsafeAncestor
    case missingAncestor
    /// Missing, and its parent is writable by others (a sticky /tmp).
    case missingInWritableParent
    /// Not a directory, a symlink, not the trusted owner's, or not 0700.
    case unsafeDirectory
    /// Opening it failed for a reason that says nothing about its safety
    /// (EACCES under a security module, EIO, ENOMEM...).
    case cannotOpen(Errno)
}

/// What the store found before handing the record over.
public enum LoadStatus: Equatable {
    case absent
    case loaded
    case damaged(RecordDamage)
}

/// Persistent attempt state, one record per uid (docs/DESIGN.md, "The state store").
public protocol StateStore {
    /// Runs `body` on the user's record under that user's exclusive lock and
    /// writes the record back when `body` changed it: on disk before
    /// returning whenever losing the change could lower what is charged
    /// (`StateRecord.mustBeDurable`). `body` gets nil
    /// for an absent or damaged record. The lock is released on return, so
    /// `body` must never wait for a person or a device.
    mutating func withRecord<Result>(uid: UInt32, userName: [UInt8],
                                     _ body: (inout StateRecord?, LoadStatus) -> Result) throws(StoreFailure) -> Result
    /// The user's record as stored, read without a lock and without making
    /// or mending anything: what a read-only disk still gives (the record
    /// the counting in /run starts from), and what /run holds to fold back.
    /// `.absent` when there is none, or no directory. A shortage of
    /// descriptors or memory is thrown: what it hides may hold more.
    func peek(uid: UInt32, userName: [UInt8]) throws(StoreFailure) -> (record: StateRecord?, status: LoadStatus)
    /// Removes the user's record, under the user's lock, if it is still
    /// `record`: false when another prompt changed it since (it stays).
    mutating func remove(uid: UInt32, userName: [UInt8], ifStill record: StateRecord) throws(StoreFailure) -> Bool
    /// An errno for a log line: the system's message and the number.
    func describe(_ errno: Errno) -> String
    /// What the system says, now, about the state directory's filesystem
    /// and this process (looked at only after a failure: RuntimeCounting).
    func storageFacts() -> StorageFacts
}

extension StateStore {
    public func describe(_ errno: Errno) -> String { "errno " + String(errno.code) }
    public func storageFacts() -> StorageFacts { .unknown }
}

