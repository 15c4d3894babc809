import TestSupport
import Dispatch
#if canImport(Glibc)
import Glibc
#endif
import Foundation
import XCTest
@testable import ATTStack
@testable import LinuxBluetooth
import LinkCore

/// A sink that records what a bearer delivers and lets a test wait for it (semaphores, no sleeps).
final class RecordingSink: ATTTransportSink {
    private struct State {
        var pdus: [[UInt8]] = []
        var closes: [TransportError] = []
        var threads: Set<String> = []
        var onPDU: (@Sendable ([UInt8]) -> Void)?
    }
    // Guards everything the reader thread records.
    private let state = Lock(State())
    private let pduSignal = DispatchSemaphore(value: 0)
    private let closeSignal = DispatchSemaphore(value: 0)

    init(onPDU: (@Sendable ([UInt8]) -> Void)? = nil) {
        state.withLock { $0.onPDU = onPDU }
    }

    func transport(didReceive pdu: [UInt8]) {
        let handler = state.withLock { s in
            s.pdus.append(pdu)
            s.threads.insert(currentThreadName())
            return s.onPDU
        }
        handler?(pdu)
        pduSignal.signal()
    }

    func transport(didCloseWith reason: TransportError) {
        state.withLock { $0.closes.append(reason) }
        closeSignal.signal()
    }

    var pdus: [[UInt8]] { state.withLock { $0.pdus } }
    var closes: [TransportError] { state.withLock { $0.closes } }
    var threadNames: Set<String> { state.withLock { $0.threads } }

    /// Waits until `count` PDUs have arrived in total (or fails after `seconds`).
    func waitForPDUs(_ count: Int, seconds: Double = 10, file: StaticString = #filePath, line: UInt = #line) {
        while state.withLock({ $0.pdus.count }) < count {
            if pduSignal.wait(timeout: .now() + seconds) == .timedOut {
                XCTFail("waited \(seconds) s for \(count) PDUs, got \(pdus.count)", file: file, line: line)
                return
            }
        }
    }

    /// Waits for the close and returns its reason.
    @discardableResult
    func waitForClose(seconds: Double = 10, file: StaticString = #filePath, line: UInt = #line) -> TransportError? {
        if let first = closes.first { return first }
        if closeSignal.wait(timeout: .now() + seconds) == .timedOut {
            XCTFail("waited \(seconds) s for the bearer to close", file: file, line: line)
            return nil
        }
        return closes.first
    }
}

/// Sends bytes through a transport.
func send(_ t: any ATTTransport, _ bytes: [UInt8]) throws(TransportError) -> ATTSendResult {
    let result = bytes.withUnsafeBytes { b in Result { () throws(TransportError) in try t.trySend(b) } }
    return try result.get()
}

/// The calling thread's kernel name.
func currentThreadName() -> String {
    let comm = (try? String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8)) ?? "?"
    return comm.trimmingCharacters(in: .whitespacesAndNewlines)
}

/// Two connected UDP sockets on the loopback: datagrams like SEQPACKET, but not AF_UNIX, so a bearer over one waits
/// in epoll (the L2CAP path) while AF_UNIX bearers wait in a blocking recvmsg.
func connectedUDPSockets() throws -> (Int32, Int32) {
    func udp() -> (fd: Int32, port: UInt16) {
        let fd = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
        XCTAssertGreaterThanOrEqual(fd, 0)
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &addr) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, len) == 0 && getsockname(fd, $0, &len) == 0 }
        }
        XCTAssertTrue(bound)
        return (fd, UInt16(bigEndian: addr.sin_port))
    }
    func connectTo(_ fd: Int32, _ port: UInt16) {
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        addr.sin_port = port.bigEndian
        let r = withUnsafePointer(to: &addr) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        XCTAssertEqual(r, 0)
    }
    let (x, xPort) = udp()
    let (y, yPort) = udp()
    connectTo(x, yPort)
    connectTo(y, xPort)
    return (x, y)
}

/// Two bearers over connected UDP sockets (a datagram family that is not AF_UNIX, as L2CAP is not).
func udpBearerPair() throws -> (ATTBearer, ATTBearer) {
    let (x, y) = try connectedUDPSockets()
    return (try ATTBearer(adoptingConnected: x, label: "udp-a"), try ATTBearer(adoptingConnected: y, label: "udp-b"))
}
