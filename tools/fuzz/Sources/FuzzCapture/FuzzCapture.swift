// libFuzzer target for the capture reader (`mirror clone --from`): any bytes read as a btsnoop capture either parse or
// throw a CaptureError naming what is wrong, never trap and never allocate what a record's length claims; what
// parses is followed into LE connections and L2CAP frames, and each ATT PDU goes through ATTStack's decoder.
import ATTStack
import CaptureReader

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzCapture(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let input = Array(UnsafeBufferPointer(start: data, count: size))
    let capture: BTSnoopCapture
    do {
        capture = try BTSnoopCapture(bytes: input)
    } catch {
        guard !error.description.isEmpty else { fatalError("an error with no words for \(input.prefix(32))") }
        if let record = error.record, record < 1 { fatalError("record \(record) named for \(input.prefix(32))") }
        return 0
    }
    guard capture.packets.count <= capture.records else { fatalError("more packets than records") }
    for connection in LEConnectionTracker.connections(of: capture) {
        for pdu in connection.pdus {
            guard pdu.bytes.count <= BTSnoopCapture.largestRecord else { fatalError("a frame larger than a record") }
            _ = try? ATTPDU.decode(pdu.bytes)
        }
    }
    return 0
}
