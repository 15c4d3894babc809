// A send that races the peer's close fails with EPIPE (or ECONNRESET) before the reader sees the end of file:
// that is the peer going away, a disconnect, not an unexplained socket error; so is EACCES, the kernel's end of the
// link on an Authentication Failure (HCI 0x05).
import TestSupport
import ATTStack
import LinuxBluetooth
import LinkCore
import Foundation
import GATTClient
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// A transport whose peer has gone: every send fails as send(2) does then; nothing arrives.
final class GoneTransport: ATTTransport, @unchecked Sendable {
    // @unchecked: no mutable state.
    let label = "unix:/gone"
    let code: Int32
    init(_ code: Int32) { self.code = code }
    func start(_ sink: any ATTTransportSink) {}
    func trySend(_ pdu: UnsafeRawBufferPointer) throws(TransportError) -> ATTSendResult {
        throw .socket(SocketError(syscall: "send", errno: Errno(code), context: "sending a \(pdu.count)-byte PDU to unix:/gone",
                                  advice: "the peer closed the connection"))
    }
    func whenWritable(_ callback: @escaping @Sendable () -> Void) {}
    func close(reason: String) {}
}

final class PeerGoneTests: XCTestCase {
    func testASendThatRacesThePeersCloseIsADisconnect() async throws {
        for code in [EPIPE, ECONNRESET, EACCES] {
            let c = try await GATTClient.connect(transport: GoneTransport(code))
            do { _ = try await c.read(handle: 3); XCTFail("read succeeded") } catch {
                guard case .disconnected(let d) = error else { XCTFail("\(error)"); continue }
                XCTAssertEqual(d.during, "Read Request of handle 0x0003")
                XCTAssertTrue(d.reason.contains("send failed with \(Errno(code).name)"), d.reason)
            }
            do { try await c.writeWithoutResponse(handle: 3, value: [1]); XCTFail("write succeeded") } catch {
                XCTAssertTrue(error.isDisconnected, "\(error)")
            }
        }
        // Any other send failure stays a transport error, with its syscall and errno.
        let c = try await GATTClient.connect(transport: GoneTransport(EMSGSIZE))
        do { _ = try await c.read(handle: 3); XCTFail("read succeeded") } catch {
            guard case .transport(.socket(let s), let op) = error else { return XCTFail("\(error)") }
            XCTAssertEqual(s.errnoName, "EMSGSIZE")
            XCTAssertEqual(op, "Read Request of handle 0x0003")
        }
    }
}
