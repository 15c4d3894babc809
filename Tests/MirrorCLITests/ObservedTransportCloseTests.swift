// The shell learns that its connection ended even when the link ended before the shell asked to be told: a pairing
// the kernel failed just after Exchange MTU closed the bearer between the connect and the shell's whenClosed.
import GATTPeer
import LinkCore
import XCTest

/// A transport whose close the test makes happen, as the bearer would report it.
private final class ClosingTransport: ATTTransport, @unchecked Sendable {
    // @unchecked: `sink` is written by start and read by endLink, both under the lock.
    private let sink = Lock<(any ATTTransportSink)?>(nil)
    var label: String { "closing" }
    func start(_ sink: any ATTTransportSink) { self.sink.withLock { $0 = sink } }
    func trySend(_ pdu: UnsafeRawBufferPointer) throws(TransportError) -> ATTSendResult { .sent }
    func whenWritable(_ callback: @escaping @Sendable () -> Void) { callback() }
    func close(reason: String) {}
    func endLink(_ reason: TransportError) { sink.withLock { $0 }?.transport(didCloseWith: reason) }
}

private final class QuietSink: ATTTransportSink {
    func transport(didReceive pdu: [UInt8]) {}
    func transport(didCloseWith reason: TransportError) {}
}

final class ObservedTransportCloseTests: XCTestCase {
    func testAnObserverAfterTheCloseLearnsItsReasonAtOnceAndIsNeverCalled() {
        let inner = ClosingTransport()
        let observed = ObservedTransport(inner, tracing: false) { _ in }
        observed.start(QuietSink())
        inner.endLink(.closedByPeer)
        let calls = Lock(0)
        let reason = observed.whenClosed { _ in calls.withLock { $0 += 1 } }
        XCTAssertEqual(reason.map { "\($0)" }, "\(TransportError.closedByPeer)")
        inner.endLink(.closedByPeer)
        XCTAssertEqual(calls.withLock { $0 }, 0)
    }

    func testAnObserverBeforeTheCloseIsToldOnce() {
        let inner = ClosingTransport()
        let observed = ObservedTransport(inner, tracing: false) { _ in }
        observed.start(QuietSink())
        let told = Lock<[String]>([])
        XCTAssertNil(observed.whenClosed { reason in told.withLock { $0.append("\(reason)") } })
        inner.endLink(.closedByPeer)
        inner.endLink(.closedByPeer)
        XCTAssertEqual(told.withLock { $0 }, ["\(TransportError.closedByPeer)"])
        XCTAssertNotNil(observed.whenClosed { _ in XCTFail("told after the close") })
    }
}
