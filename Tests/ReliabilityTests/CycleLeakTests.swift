// Thousands of connect / operate / close cycles over unix: sockets: the process's open file descriptors come back
// to where they started and its resident memory stays within a small bound.
import TestSupport
import ATTStack
import LinuxBluetooth
import LinkCore
import Foundation
import GATTClient
import HostilePeer
import XCTest

/// Forwards to a bearer and signals when its reader has ended (after the bearer released its fds).
final class ClosingWatch: ATTTransport, ATTTransportSink, @unchecked Sendable {
    // @unchecked: `sink` is set once in `start` before the bearer's reader thread starts, then only read there.
    let bearer: ATTBearer
    let ended = DispatchSemaphore(value: 0)
    var sink: (any ATTTransportSink)?

    init(_ bearer: ATTBearer) { self.bearer = bearer }
    var label: String { bearer.label }
    func start(_ sink: any ATTTransportSink) {
        self.sink = sink
        bearer.start(self)
    }
    func trySend(_ pdu: UnsafeRawBufferPointer) throws(TransportError) -> ATTSendResult { try bearer.trySend(pdu) }
    func whenWritable(_ callback: @escaping @Sendable () -> Void) { bearer.whenWritable(callback) }
    func close(reason: String) { bearer.close(reason: reason) }
    func transport(didReceive pdu: [UInt8]) { sink?.transport(didReceive: pdu) }
    func transport(didCloseWith reason: TransportError) {
        sink?.transport(didCloseWith: reason)
        sink = nil
        ended.signal()
    }
}

final class CycleLeakTests: XCTestCase {
    /// One cycle: connect, exchange MTU, read, write, subscribe and take a notification, close; returns once the
    /// bearer's reader thread has released its fds.
    func cycle(_ peer: HostilePeer) async throws {
        let watch = ClosingWatch(try ATTBearer.connect(unixPath: peer.path))
        var configuration = GATTClient.Configuration()
        // A cancelled Dispatch timer stays queued until its deadline: a short timeout keeps that queue short, so
        // that what is measured is what the cycles leave behind, not timers waiting to expire.
        configuration.transactionTimeout = .seconds(1)
        var client: GATTClient? = try await GATTClient.connect(transport: watch, configuration: configuration)
        try await operate(client!)
        XCTAssertEqual(watch.ended.wait(timeout: .now() + 10), .success, "the bearer's reader did not end")
        weak let weakClient = client
        client = nil
        XCTAssertNil(weakClient, "the client outlived its connection (a reference cycle)")
    }

    func operate(_ c: GATTClient) async throws {
        _ = try await c.exchangeMTU()
        _ = try await c.read(handle: HostilePeer.deviceNameHandle)
        try await c.write(handle: HostilePeer.shortValueHandle, value: [1, 2, 3])
        try await c.writeWithoutResponse(handle: HostilePeer.shortValueHandle, value: [4])
        _ = try await c.readLong(handle: HostilePeer.longValueHandle)
        c.close(reason: "cycle done")
    }

    func testThousandsOfCyclesLeaveFileDescriptorsAndMemoryWhereTheyWere() async throws {
        let peer = try startPeer(HostileOptions(.wellBehaved))
        defer { peer.close() }
        // Warm up for longer than the timeout: the runtime's pools, the dispatch threads, the allocator's arenas and
        // the queue of expired timers reach their steady size.
        var warmup = 0
        let warming = Date()
        while warmup < 500 || Date().timeIntervalSince(warming) < 2 {
            try await cycle(peer)
            warmup += 1
        }
        XCTAssertTrue(peer.wait(timeout: 10) { $0.closedConnections == warmup })
        // Both counts are taken once the cancelled timers have passed their deadlines (1 s): what is left is held.
        try await Task.sleep(for: .seconds(1.5))
        XCTAssertTrue(EventLoop.waitForStoppingLoops(seconds: 10), "a released event loop's thread did not end")
        let fds = openFileDescriptorTable()
        let rss = residentKiB()
        let heap = heapInUseKiB()
        let cycles = Scale.cycles
        let start = Date()
        for _ in 0..<cycles { try await cycle(peer) }
        // The peer's connection threads close their ends when they see ours close.
        XCTAssertTrue(peer.wait(timeout: 10) { $0.closedConnections == warmup + cycles }, "\(peer.stats)")
        let took = Date().timeIntervalSince(start)
        try await Task.sleep(for: .seconds(1.5))
        XCTAssertTrue(EventLoop.waitForStoppingLoops(seconds: 10), "a released event loop's thread did not end")
        let fdsAfter = openFileDescriptorTable()
        let rssAfter = residentKiB()
        let heapAfter = heapInUseKiB()
        // Compared by entry, not by count: a descriptor another test's thread closes meanwhile is not the cycles' doing.
        let kept = descriptorsOpened(between: fds, and: fdsAfter)
        XCTAssertEqual(kept, [], "\(kept.count) descriptors opened over \(cycles) cycles are still open")
        // A leak of one small object per cycle would be visible: 1,000 bearers, clients, closures and buffers of a
        // few hundred bytes each are more than 256 KiB of heap.
        XCTAssertLessThan(heapAfter - heap, 256, "heap in use went from \(heap) KiB to \(heapAfter) KiB over \(cycles) cycles")
        // RSS also counts thread stacks and the allocator's cached pages. Under ThreadSanitizer it grows with every
        // thread made (the runtime keeps each dead thread's record and history), so there the heap count above is the measure.
        if !underSanitizer {
            XCTAssertLessThan(rssAfter - rss, 4 * 1024, "RSS went from \(rss) KiB to \(rssAfter) KiB over \(cycles) cycles")
        }
        print("cycles: \(cycles) in \(String(format: "%.1f", took)) s; fds \(fds.count) -> \(fdsAfter.count); RSS \(rss) -> \(rssAfter) KiB; heap \(heap) -> \(heapAfter) KiB\(underSanitizer ? " (under a sanitizer)" : "")")
    }

    func testCyclesAgainstAPeerThatClosesMidProcedureLeaveNoFileDescriptors() async throws {
        let peer = try startPeer(HostileOptions(.close, victims: [0x0C], nth: nil))
        defer { peer.close() }
        let n = max(100, Scale.cycles / 10)
        // Each client's loop ends once its last reference goes, a moment after its bearer ended: the counts wait for that.
        XCTAssertTrue(EventLoop.waitForStoppingLoops(seconds: 10))
        let loopsBefore = EventLoop.liveLoops
        // A warm-up first: when this is the first test of the process, the first timers and threads open the
        // runtime's own descriptors (libdispatch's timerfds are made on first use), which are not the cycles' leaks.
        let warmup = 20
        var fds = Set<String>()
        for i in 0..<(warmup + n) {
            if i == warmup {
                XCTAssertTrue(peer.wait(timeout: 10) { $0.closedConnections == warmup })
                XCTAssertTrue(EventLoop.waitForLiveLoops(atMost: loopsBefore, seconds: 10), "a client's event loop did not end")
                fds = openFileDescriptorTable()
            }
            let watch = ClosingWatch(try ATTBearer.connect(unixPath: peer.path))
            let c = try await GATTClient.connect(transport: watch)
            do { _ = try await c.readLong(handle: HostilePeer.longValueHandle); XCTFail("read succeeded") } catch {
                XCTAssertTrue(error.isDisconnected, "\(error)")
            }
            c.close()
            XCTAssertEqual(watch.ended.wait(timeout: .now() + 10), .success)
        }
        XCTAssertTrue(peer.wait(timeout: 10) { $0.closedConnections == warmup + n })
        XCTAssertTrue(EventLoop.waitForLiveLoops(atMost: loopsBefore, seconds: 10), "a client's event loop did not end")
        XCTAssertEqual(descriptorsOpened(between: fds, and: openFileDescriptorTable()), [])
    }
}
