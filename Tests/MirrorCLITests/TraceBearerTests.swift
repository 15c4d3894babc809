// --trace names an Enhanced ATT bearer on each of its lines; the unenhanced bearer's lines stay as they were.
import Foundation
import LinuxBluetooth
import LinkCore
import GATTPeer
import GATTPeer
@testable import MirrorCommandLine
import XCTest

/// Answers a Read Request with a Read Response from within the send (the reader's side of a fast peer).
private final class EchoingTransport: ATTTransport, @unchecked Sendable {
    // @unchecked: `sink` is written by start and read by trySend, both under `state`.
    private let state = Lock<(any ATTTransportSink)?>(nil)
    var label: String { "echoing" }
    func start(_ sink: any ATTTransportSink) { state.withLock { $0 = sink } }
    func trySend(_ pdu: UnsafeRawBufferPointer) throws(TransportError) -> ATTSendResult { .sent }
    func deliver(_ pdu: [UInt8]) { state.withLock { $0 }?.transport(didReceive: pdu) }
    func whenWritable(_ callback: @escaping @Sendable () -> Void) { callback() }
    func close(reason: String) { state.withLock { $0 }?.transport(didCloseWith: .closedLocally(reason: reason)) }
}

private final class QuietSink: ATTTransportSink {
    func transport(didReceive pdu: [UInt8]) {}
    func transport(didCloseWith reason: TransportError) {}
}

final class TraceBearerTests: XCTestCase {
    func testTheBearerNameFollowsTheDirectionOnlyWhenGiven() {
        XCTAssertEqual(ObservedTransport.bearerName(index: 1, localCID: 0x0041), "b1 cid 0x0041")
        XCTAssertEqual(ObservedTransport.bearerName(index: 2, localCID: nil), "b2")
        let plain = traceLine(direction: ">", bytes: [0x0A, 0x03, 0x00], at: 0)
        let named = traceLine(direction: ">", bytes: [0x0A, 0x03, 0x00], at: 0, bearer: "b1 cid 0x0041")
        XCTAssertEqual(String(plain.dropFirst(16)), "> Read Request handle 0x0003")
        XCTAssertEqual(String(named.dropFirst(16)), "> [b1 cid 0x0041] Read Request handle 0x0003")
        XCTAssertEqual(plain.prefix(16), named.prefix(16))
    }

    func testAnEnhancedBearersTraceLinesNameItAndTheUnenhancedOnesDoNot() throws {
        let pipe = Pipe()
        let console = Console(outFD: 1, errFD: pipe.fileHandleForWriting.fileDescriptor)
        let cid4 = EchoingTransport(), eatt = EchoingTransport()
        let plain = ObservedTransport(cid4, tracing: true) { console.err($0) }
        let named = ObservedTransport(eatt, tracing: true,
                                      bearer: ObservedTransport.bearerName(index: 1, localCID: 0x0041)) { console.err($0) }
        plain.start(QuietSink())
        named.start(QuietSink())
        let request: [UInt8] = [0x0A, 0x03, 0x00]
        _ = try request.withUnsafeBytes { b throws(TransportError) in try plain.trySend(b) }
        cid4.deliver([0x0B, 0x01])
        _ = try request.withUnsafeBytes { b throws(TransportError) in try named.trySend(b) }
        eatt.deliver([0x0B, 0x02])
        named.close(reason: "test over")
        let lines = readLines(pipe.fileHandleForReading, count: 5, within: 5)
        XCTAssertEqual(lines.map { String($0.dropFirst(16)) }, [
            "> Read Request handle 0x0003",
            "< Read Response [01]",
            "> [b1 cid 0x0041] Read Request handle 0x0003",
            "< [b1 cid 0x0041] Read Response [02]",
            "- [b1 cid 0x0041] closed: closed by this host: test over",
        ], lines.joined(separator: "\n"))
    }
}
