// A test double of a transport pair: the simulator gets one end, the test drives the other with raw
// PDU bytes and waits for what comes back (byte-exact checks of the server's answers).
import Mirror
import ATTStack
import LinuxBluetooth
import GATTClient
import Dispatch
import Foundation
import XCTest

/// The simulator's end: `trySend` hands the PDU to the test's inbox; `close` ends the connection.
final class TestTransport: ATTTransport {
    let label = "test-double"
    // Guards the sink, the closed flag and the inbox of PDUs the simulator sent.
    private let state = Lock<(sink: (any ATTTransportSink)?, closed: String?, inbox: [[UInt8]])>((nil, nil, []))
    private let arrived = DispatchSemaphore(value: 0)
    /// Deliveries to the simulator run on one serial queue, like a bearer's one reader thread.
    private let reader = DispatchQueue(label: "test-transport.reader")

    func start(_ sink: any ATTTransportSink) { state.withLock { $0.sink = sink } }

    func trySend(_ pdu: UnsafeRawBufferPointer) throws(TransportError) -> ATTSendResult {
        let closed = state.withLock { s -> Bool in
            if s.closed != nil { return true }
            s.inbox.append(Array(pdu))
            return false
        }
        if closed { throw .closedLocally(reason: "closed") }
        arrived.signal()
        return .sent
    }

    func whenWritable(_ callback: @escaping @Sendable () -> Void) { reader.async(execute: callback) }

    func close(reason: String) {
        let sink = state.withLock { s -> (any ATTTransportSink)? in
            guard s.closed == nil else { return nil }
            s.closed = reason
            return s.sink
        }
        arrived.signal()
        reader.async { sink?.transport(didCloseWith: .closedLocally(reason: reason)) }
    }

    var closedReason: String? { state.withLock { $0.closed } }

    /// The test sends a PDU to the simulator.
    func deliver(_ bytes: [UInt8]) {
        let sink = state.withLock { $0.sink }
        reader.async { sink?.transport(didReceive: bytes) }
    }

    /// The next PDU the simulator sent, or nil after `timeout` (or when closed with nothing left).
    func next(timeout: Double = 2) -> [UInt8]? {
        let deadline = DispatchTime.now() + timeout
        while true {
            let (pdu, closed) = state.withLock { s -> ([UInt8]?, Bool) in
                if !s.inbox.isEmpty { return (s.inbox.removeFirst(), false) }
                return (nil, s.closed != nil)
            }
            if let pdu { return pdu }
            if closed { return nil }
            if arrived.wait(timeout: deadline) == .timedOut { return nil }
        }
    }

    /// Sends a request and returns the next PDU that is not a notification (notifications go to `notes`).
    func request(_ bytes: [UInt8], notes: inout [[UInt8]], timeout: Double = 2) -> [UInt8]? {
        deliver(bytes)
        while let pdu = next(timeout: timeout) {
            if pdu.first == 0x1B { notes.append(pdu); continue }
            return pdu
        }
        return nil
    }

    func request(_ bytes: [UInt8], timeout: Double = 2) -> [UInt8]? {
        var notes: [[UInt8]] = []
        return request(bytes, notes: &notes, timeout: timeout)
    }
}

func le16(_ v: UInt16) -> [UInt8] { [UInt8(v & 0xFF), UInt8(v >> 8)] }
func hexOf(_ bytes: [UInt8]?) -> String { bytes.map { $0.map { String(format: "%02x", $0) }.joined(separator: " ") } ?? "nil" }
