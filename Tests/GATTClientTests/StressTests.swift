import TestSupport
import ATTStack
import LinuxBluetooth
import LinkCore
import Synchronization
import XCTest
@testable import GATTClient

/// Thousands of operations from many tasks, with random cancellations, late responses, a timeout and a disconnect
/// in the middle: every operation ends exactly once, with its own result, and nothing hangs.
final class StressTests: XCTestCase {
    enum Outcome: Sendable, Equatable {
        case ok
        case cancelled
        case disconnected
        case timedOut(UInt16)
        case wrong(String)
    }

    /// A small deterministic generator so that a failing run can be replayed.
    struct LCG: RandomNumberGenerator {
        var state: UInt64
        mutating func next() -> UInt64 {
            state = state &* 6364136223846793005 &+ 1442695040888963407
            return state
        }
    }

    static func answer(_ pdu: [UInt8]) -> [[UInt8]] {
        switch pdu[0] {
        case 0x0A: return [[0x1B, pdu[1], pdu[2], 0xEE], [0x0B, pdu[1], pdu[2]]]   // a notification, then the response
        case 0x12: return [[0x13]]
        default: return []
        }
    }

    /// Runs one operation of kind `i % 3` on handle `h` and classifies how it ended.
    static func run(_ client: GATTClient, _ i: Int, _ h: UInt16) async -> Outcome {
        do {
            switch i % 3 {
            case 0:
                let v = try await client.read(handle: h)
                return v == [UInt8(h & 0xFF), UInt8(h >> 8)] ? .ok : .wrong("read of \(h) returned \(v)")
            case 1:
                try await client.write(handle: h, value: [1, 2, 3])
                return .ok
            default:
                try await client.writeWithoutResponse(handle: h, value: [UInt8(i & 0xFF)], timeout: .seconds(60))
                return .ok
            }
        } catch {
            switch error {
            case .cancelled: return .cancelled
            case .disconnected: return .disconnected
            case .timeout(let t):
                return t.handle == h ? .timedOut(h) : .wrong("op on \(h) got the timeout of \(String(describing: t.handle))")
            default: return .wrong("\(error)")
            }
        }
    }

    func testThousandsOfOperationsWithCancellationsLateResponsesAndADisconnect() async throws {
        let seen = Counter()
        let clientBox = Lock<GATTClient?>(nil)
        let peer = ScriptedPeer(label: "stress", stepResponder: { pdu in
            // Every 5th response comes late; every 10th request is cancelled while in flight first (what its
            // caller's task cancellation does), so its response arrives late and must be dropped. The peer
            // closes the connection after 1500 PDUs.
            let n = seen.increment()
            if n == 1500 { return [.serverClose] }
            let replies = Self.answer(pdu).map { Step.server($0) }
            guard pdu[0] & 0x40 == 0, n % 5 == 0 else { return replies }
            let cancelInFlight = Step.run {
                guard n % 10 == 0, let engine = clientBox.withLock({ $0?.engine }),
                      let id = engine.snapshot.inFlight else { return }
                engine.cancel(id)
            }
            return [.delay(200), cancelInFlight] + replies
        })
        let client = try await makeClient(peer, clock: ManualClock())
        clientBox.withLock { $0 = client }
        let total = 4000
        let finished = Counter()
        let stream = try client.engine.addSubscriber(handle: 0x0005).0
        let streamEnd = Task { () -> Bool in
            do { for try await _ in stream {} } catch { return (error as? GATTError).map { if case .disconnected = $0 { return true }; return false } ?? false }
            return false
        }
        let outcomes = try await within(60, "the stress run") {
            await withTaskGroup(of: Outcome.self) { group in
                var rng = LCG(state: 42)
                for i in 0..<total {
                    let h = UInt16(i % 0x0FFF + 1)
                    let cancelAfter = Int.random(in: 0..<10, using: &rng)
                    let cancels = Int.random(in: 0..<5, using: &rng) == 0
                    group.addTask {
                        let op = Task { await Self.run(client, i, h) }
                        if cancels {
                            for _ in 0..<cancelAfter { await Task.yield() }
                            op.cancel()
                        }
                        let r = await op.value
                        _ = finished.increment()
                        return r
                    }
                }
                var out: [Outcome] = []
                for await r in group { out.append(r) }
                return out
            }
        }
        XCTAssertEqual(outcomes.count, total, "an operation did not end")
        let stats0 = await client.statistics
        print("stress outcomes: ok \(outcomes.filter { $0 == .ok }.count), cancelled \(outcomes.filter { $0 == .cancelled }.count), "
              + "disconnected \(outcomes.filter { $0 == .disconnected }.count), finished counter \(finished.current), dropped \(stats0.droppedEvents)")
        let wrong = outcomes.compactMap { if case .wrong(let s) = $0 { return s }; return nil }
        XCTAssertEqual(wrong, [], "operations ended with somebody else's result")
        XCTAssertGreaterThan(outcomes.filter { $0 == .ok }.count, 0)
        XCTAssertGreaterThan(outcomes.filter { $0 == .disconnected }.count, 0)
        XCTAssertGreaterThan(outcomes.filter { $0 == .cancelled }.count, 0)
        XCTAssertTrue(outcomes.allSatisfy { if case .timedOut = $0 { return false }; return true })
        let ended = try await within(10, "the subscription stream to end") { await streamEnd.value }
        XCTAssertTrue(ended, "the subscription stream did not end with a disconnect error")
        XCTAssertEqual(client.engine.snapshot.pendingDeadlines, 0)
        XCTAssertEqual(client.engine.snapshot.queuedRequests, 0)
        let stats1 = await client.statistics
        XCTAssertGreaterThan(stats1.droppedEvents, 0, "no late response (to a cancelled request) was exercised")
    }

    func testALostResponseTimesOutOnlyItsOwnRequestAndEveryOtherOperationEnds() async throws {
        let clock = ManualClock()
        let lost = Counter()
        let peer = ScriptedPeer(label: "lossy") { (pdu: [UInt8]) -> [[UInt8]] in
            // The 300th request's response is lost.
            if pdu[0] & 0x40 == 0, lost.increment() == 300 { return [] }
            return Self.answer(pdu)
        }
        let client = try await makeClient(peer, clock: clock)
        let total = 1500
        let done = Counter()
        let driver = Task {
            // Time moves on while the operations run: one simulated second per turn.
            while done.current == 0 && !Task.isCancelled {
                clock.advance(by: .seconds(1))
                await Task.yield()
            }
        }
        // Ended on every path: a run that times out below must not leave it spinning.
        defer { driver.cancel() }
        let outcomes = try await within(60, "the timeout stress run") {
            await withTaskGroup(of: Outcome.self) { group in
                var rng = LCG(state: 7)
                for i in 0..<total {
                    let h = UInt16(i % 0x0FFF + 1)
                    let cancels = Int.random(in: 0..<8, using: &rng) == 0
                    group.addTask {
                        let op = Task { await Self.run(client, i, h) }
                        if cancels { await Task.yield(); op.cancel() }
                        return await op.value
                    }
                }
                var out: [Outcome] = []
                for await r in group { out.append(r) }
                return out
            }
        }
        _ = done.increment()
        await driver.value
        XCTAssertEqual(outcomes.count, total)
        let wrong = outcomes.compactMap { if case .wrong(let s) = $0 { return s }; return nil }
        XCTAssertEqual(wrong, [])
        let timeouts = outcomes.filter { if case .timedOut = $0 { return true }; return false }
        XCTAssertLessThanOrEqual(timeouts.count, 1, "more than one request timed out on one bearer")
        XCTAssertTrue(client.isClosed, "the lost response did not end in an ATT timeout")
        XCTAssertTrue(peer.isClosed)
    }
}
