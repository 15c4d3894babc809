// --trace's order: a request's line precedes its response's even when the answer arrives (on the reader's thread)
// before the send returns, which a fast peer makes likely and this transport makes certain.
import Foundation
import LinuxBluetooth
import LinkCore
import GATTPeer
@testable import MirrorCommandLine
import XCTest

/// A transport whose peer answers each PDU during its send: trySend hands the answer to the sink on another thread
/// and waits (up to `answerWait`) for that delivery to finish before it returns.
private final class AnswersDuringSend: ATTTransport, @unchecked Sendable {
    // @unchecked: `sink` is written by start and read by trySend, both under `state`.
    private let state = Lock<(any ATTTransportSink)?>(nil)
    let answer: [UInt8]
    let answerWait: DispatchTimeInterval
    init(answer: [UInt8], answerWait: DispatchTimeInterval) {
        self.answer = answer
        self.answerWait = answerWait
    }
    var label: String { "answers-during-send" }
    func start(_ sink: any ATTTransportSink) { state.withLock { $0 = sink } }
    func trySend(_ pdu: UnsafeRawBufferPointer) throws(TransportError) -> ATTSendResult {
        guard let sink = state.withLock({ $0 }) else { return .sent }
        let delivered = DispatchSemaphore(value: 0)
        let answer = self.answer
        Thread.detachNewThread {
            sink.transport(didReceive: answer)
            delivered.signal()
        }
        _ = delivered.wait(timeout: .now() + answerWait)
        return .sent
    }
    func whenWritable(_ callback: @escaping @Sendable () -> Void) { callback() }
    func close(reason: String) {}
}

private final class IgnoringSink: ATTTransportSink {
    func transport(didReceive pdu: [UInt8]) {}
    func transport(didCloseWith reason: TransportError) {}
}

final class TraceOrderTests: XCTestCase {
    func testARequestsLineComesBeforeItsResponseAnsweredDuringTheSend() throws {
        let pipe = Pipe()
        let console = Console(outFD: 1, errFD: pipe.fileHandleForWriting.fileDescriptor)
        // Read Response [01 02] answers the Read Request handle 0x0003.
        let inner = AnswersDuringSend(answer: [0x0B, 0x01, 0x02], answerWait: .milliseconds(200))
        let traced = ObservedTransport(inner, tracing: true) { console.err($0) }
        traced.start(IgnoringSink())
        let request: [UInt8] = [0x0A, 0x03, 0x00]
        let result = try request.withUnsafeBytes { b throws(TransportError) in try traced.trySend(b) }
        XCTAssertEqual(result, .sent)
        // The answer's line is printed once the send's line is (at most the transport's 200 ms wait later).
        let lines = readLines(pipe.fileHandleForReading, count: 2, within: 5)
        XCTAssertEqual(lines.map { String($0.dropFirst(16)) }, ["> Read Request handle 0x0003", "< Read Response [01 02]"],
                       lines.joined(separator: "\n"))
    }
}
