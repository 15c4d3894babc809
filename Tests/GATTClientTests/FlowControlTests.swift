import ATTStack
import Synchronization
import XCTest
@testable import GATTClient

/// Write without response with flow control (seed 004): FIFO permits, backpressure, cancellation, deadlines.
final class FlowControlTests: XCTestCase {
    func responder() -> ScriptedPeer {
        let p = ScriptedPeer(label: "sink", responder: { (_: [UInt8]) -> [[UInt8]] in [] })
        return p
    }

    func testFastPathSendsAtOnceWhenTheSocketHasRoom() async throws {
        let peer = responder()
        let client = try await makeClient(peer)
        for i in 0..<10 { try await client.writeWithoutResponse(handle: 0x20, value: [UInt8(i)]) }
        XCTAssertEqual(peer.sent, (0..<10).map { [0x52, 0x20, 0x00, UInt8($0)] })
        XCTAssertEqual(client.engine.state.withLock { $0.permits.count }, 0)
    }

    func testWaitersGetPermitsInFIFOOrderWhenTheSocketDrains() async throws {
        let peer = ScriptedPeer([], capacity: 0)
        peer.state.withLock { $0.strict = false }
        let client = try await makeClient(peer)
        var tasks: [Task<Void, any Error>] = []
        for i in 0..<20 {
            tasks.append(Task { try await client.writeWithoutResponse(handle: 0x20, value: [UInt8(i)]) })
            while client.engine.state.withLock({ $0.permits.count }) < i + 1 { await Task.yield() }
        }
        XCTAssertEqual(peer.sent.count, 0)
        peer.grantWritable(5)
        await peer.waitForSent(5)
        await peer.flush()
        XCTAssertEqual(client.engine.state.withLock { $0.permits.count }, 15)
        peer.grantWritable(100)
        for t in tasks { try await t.value }
        XCTAssertEqual(peer.sent, (0..<20).map { [0x52, 0x20, 0x00, UInt8($0)] }, "permits were not granted in FIFO order")
    }

    func testAWaitingWriterCanBeCancelledAndLeavesTheQueue() async throws {
        let peer = ScriptedPeer([], capacity: 0)
        peer.state.withLock { $0.strict = false }
        let client = try await makeClient(peer)
        let a = Task { try await client.writeWithoutResponse(handle: 0x20, value: [1]) }
        while client.engine.state.withLock({ $0.permits.count }) < 1 { await Task.yield() }
        let b = Task { try await client.writeWithoutResponse(handle: 0x20, value: [2]) }
        while client.engine.state.withLock({ $0.permits.count }) < 2 { await Task.yield() }
        b.cancel()
        do { try await b.value; XCTFail() } catch let e as GATTError {
            XCTAssertEqual(e, .cancelled(operation: "Write Command to handle 0x0020"))
        }
        peer.grantWritable(10)
        try await a.value
        await peer.flush()
        XCTAssertEqual(peer.sent, [[0x52, 0x20, 0x00, 1]], "a cancelled write was sent")
    }

    func testPermitWaitHasANamedDeadline() async throws {
        let clock = ManualClock()
        let peer = ScriptedPeer([], capacity: 0)
        let client = try await makeClient(peer, clock: clock)
        client.setName("wifiSetSSID", for: 0x20)
        let a = Task { try await client.writeWithoutResponse(handle: 0x20, value: [1], timeout: .seconds(2)) }
        while client.engine.state.withLock({ $0.permits.count }) < 1 { await Task.yield() }
        clock.advance(by: .milliseconds(1999))
        XCTAssertEqual(client.engine.state.withLock { $0.permits.count }, 1)
        clock.advance(by: .milliseconds(1))
        do { try await a.value; XCTFail() } catch let e as GATTError {
            XCTAssertEqual(e.description, "timed out after 2 s waiting for a send permit for Write Command on handle 0x0020 (wifiSetSSID)")
        }
        XCTAssertEqual(client.engine.pendingDeadlines, 0)
        XCTAssertFalse(client.isClosed, "a permit timeout is not an ATT timeout: the bearer stays open")
        peer.grantWritable(1)
        await peer.flush()
        XCTAssertEqual(peer.sent, [], "a timed-out write was sent")
    }

    func testManyConcurrentWritersEachKeepTheirOrderAndNothingIsLost() async throws {
        let peer = ScriptedPeer([], capacity: 3)
        peer.state.withLock { $0.strict = false }
        let client = try await makeClient(peer)
        let writers = 8, each = 200
        let refill = Task {
            // The "socket" drains a few PDUs each time the client waits for POLLOUT.
            while !Task.isCancelled {
                await peer.flush()
                peer.grantWritable(7)
                await Task.yield()
            }
        }
        try await within(20) {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for w in 0..<writers {
                    group.addTask {
                        for i in 0..<each {
                            try await client.writeWithoutResponse(handle: 0x20, value: [UInt8(w), UInt8(i & 0xFF), UInt8(i >> 8)])
                        }
                    }
                }
                try await group.waitForAll()
            }
        }
        refill.cancel()
        let sent = peer.sent
        XCTAssertEqual(sent.count, writers * each)
        for w in 0..<writers {
            let mine = sent.filter { $0[3] == UInt8(w) }.map { Int($0[4]) | Int($0[5]) << 8 }
            XCTAssertEqual(mine, Array(0..<each), "writer \(w) lost or reordered PDUs")
        }
    }
}
