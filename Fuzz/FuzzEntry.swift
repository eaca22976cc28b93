// The libFuzzer entry point shared by every target: each target's file
// defines `fuzzOne`, which must return normally for any input; a trap or a
// sanitizer report is the finding.
@_cdecl("LLVMFuzzerTestOneInput")
public func llvmFuzzerTestOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let bytes = data.map { Array(UnsafeBufferPointer(start: $0, count: size)) } ?? []
    fuzzOne(bytes)
    return 0
}

/// Stops the run with a message libFuzzer records with the input.
func fuzzCheck(_ condition: Bool, _ message: @autoclosure () -> String) {
    if !condition { fatalError(message()) }
}
