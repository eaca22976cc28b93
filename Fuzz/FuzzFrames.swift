// Fuzz target: the helper protocol in both directions. The input is taken
// as a frame header and as the payload of a request (client to helper) and
// of a result (helper to client). A payload that decodes must encode back
// to one that decodes the same.
import LocalAuth

func fuzzOne(_ bytes: [UInt8]) {
    if bytes.count >= 5 { _ = HelperWire.parseHeader(Array(bytes.prefix(5))) }
    _ = HelloFrame.clientVersion(bytes)
    _ = HelloFrame.helperHello(bytes)
    if case .success(let request) = HelperRequest.decode(bytes) {
        fuzzCheck(HelperRequest.decode(request.encoded()) == .success(request), "request round trip")
    }
    if let result = ResultFrame.decode(bytes) {
        fuzzCheck(ResultFrame.decode(result.encoded()) == result, "result round trip")
    }
}
