// GATTPeer's SharedNotifications (`mirror shell`'s background subscriptions and its listen's claim) in-process
// against the simulator: each value handed once, to the claim while it holds, else to its subscription; a second
// subscribe of one characteristic refused; unsubscribe and endAll end them. The CLI's ShellTests cover what it prints.
import GATTPeer
import LinkCore
import TestSupport
import Mirror
import MirrorSimulator
import XCTest

final class SharedNotificationsTests: XCTestCase {
    /// The first `count` values of `stream`, waiting at most `seconds` (fewer when the limit came first).
    func first(_ count: Int, of stream: AsyncStream<[UInt8]>, within seconds: Int = 10) async -> [[UInt8]] {
        await withTaskGroup(of: [[UInt8]]?.self) { group in
            group.addTask {
                var values: [[UInt8]] = []
                for await v in stream {
                    values.append(v)
                    if values.count == count { break }
                }
                return values
            }
            group.addTask {
                try? await Task.sleep(for: .seconds(seconds))
                return nil
            }
            let values = await group.next() ?? nil
            group.cancelAll()
            return values ?? []
        }
    }

    /// What a test gets: the peer, its SharedNotifications with scanState subscribed in the background, what
    /// subscribe said, and the values handed on.
    struct Subscribed {
        var peer: Peer
        var shared: SharedNotifications
        var entry: CharacteristicCatalog.Entry
        var said: SharedNotifications.Subscribed?
        var values: AsyncStream<[UInt8]>
    }

    /// Runs `body` with scanState subscribed in the background on a simulator of its own; each value goes to `also`
    /// (when given) before it is in `values`.
    func withScanStateSubscribed(also: (@Sendable ([UInt8]) -> Void)? = nil, _ body: (Subscribed) async throws -> Void) async throws {
        let h = try SimHarness()
        defer { h.stop() }
        let peer = try await h.peer()
        defer { peer.close() }
        let shared = SharedNotifications(client: peer.client)
        let entry = try await peer.characteristic(.name("scanState"))
        let (values, delivered) = AsyncStream.makeStream(of: [UInt8].self)
        let said = try await shared.subscribe(entry, preferIndications: false, deliver: { also?($0.value); delivered.yield($0.value) },
                                              dropped: { _, _ in XCTFail("nothing dropped") })
        try await body(Subscribed(peer: peer, shared: shared, entry: entry, said: said, values: values))
    }

    /// Starts the simulator's scan, whose scanState notifications (0x01, 0x02, 0x03...) follow.
    func startScan(_ peer: Peer) async throws {
        try await peer.write(.name("cloudToken"), Array("http://127.0.0.1:9/shared".utf8))
        try await peer.write(.name("scannerAction"), [MirrorProfile.bundled.initDeviceForScanCommand])
    }

    func testABackgroundSubscriptionHandsEachValueAndEndsWithUnsubscribe() async throws {
        try await withScanStateSubscribed { s in
            let (peer, shared, entry, subscribed, values) = (s.peer, s.shared, s.entry, s.said, s.values)
            XCTAssertEqual(subscribed?.mode, .notify)
            XCTAssertEqual(subscribed?.value, [0x00], "the value read after the CCCD write")
            let again = try await shared.subscribe(entry, preferIndications: false, deliver: { _ in XCTFail("subscribed once") }, dropped: { _, _ in })
            XCTAssertNil(again, "a characteristic subscribed already is not subscribed again")
            XCTAssertEqual(shared.subscribedHandles, [0x000C])
            XCTAssertTrue(shared.isSubscribed)
            try await startScan(peer)
            let seen = await first(3, of: values)
            XCTAssertEqual(seen, [[0x01], [0x02], [0x03]])
            let ended = try await shared.unsubscribe(valueHandle: 0x000C)
            XCTAssertEqual(ended?.label, "scanState")
            XCTAssertEqual(ended?.characteristic.valueHandle, 0x000C)
            XCTAssertFalse(shared.isSubscribed)
            let none = try await shared.unsubscribe(valueHandle: 0x000C)
            XCTAssertNil(none, "nothing left to end")
        }
    }

    /// unsubscribe returns only once the values received before its CCCD write's answer were handed on: a consumer
    /// still handing one on (held 300 ms here, a slow terminal) holds it, so a shell that prints "unsubscribed" and
    /// ends loses none (ShellTests' script-mode subscribe lost its notification that way on a loaded machine).
    func testUnsubscribeReturnsOnceEveryValueReceivedBeforeItWasHandedOn() async throws {
        let counts = Lock((started: 0, finished: 0))
        try await withScanStateSubscribed(also: { _ in
            counts.withLockBroadcasting { $0.started += 1 }
            usleep(300_000)
            counts.withLockBroadcasting { $0.finished += 1 }
        }) { s in
            try await startScan(s.peer)
            XCTAssertNotNil(counts.wait(until: { $0.started > 0 ? () : nil }, timeoutNanoseconds: 5_000_000_000), "a value is being handed on")
            _ = try await s.shared.unsubscribe(valueHandle: 0x000C)
            let c = counts.withLock { $0 }
            XCTAssertEqual(c.finished, c.started, "unsubscribe returned while a value was still being handed on")
        }
    }

    /// A listen's claim (count 2) takes the next two values whichever handle; the third is the subscription's.
    func testAListensClaimTakesItsValuesAndTheSubscriptionTheOnesAfter() async throws {
        try await withScanStateSubscribed { s in
            let (peer, shared, values) = (s.peer, s.shared, s.values)
            let stream = try shared.listenStream(count: 2)
            try await startScan(peer)
            // The listen's reader ends when endListen finishes its stream.
            let (claimedValues, claimedSink) = AsyncStream.makeStream(of: [UInt8].self)
            let reader = Task {
                do { for try await n in stream { claimedSink.yield(n.value) } } catch {}
                claimedSink.finish()
            }
            let claimed = await first(2, of: claimedValues)
            shared.endListen(stream)
            await reader.value
            XCTAssertEqual(claimed, [[0x01], [0x02]])
            let routed = await first(1, of: values)
            XCTAssertEqual(routed, [[0x03]], "the value after the claim let go is the subscription's, and only its")
            let all = shared.endAll()
            XCTAssertEqual(all.map(\.characteristic.valueHandle), [0x000C])
            XCTAssertFalse(shared.isSubscribed)
            for sub in all { sub.task.cancel() }
        }
    }

    /// A raise of the link's security needs this process's pairing agent (none over unix:).
    func testRaisingSecurityWithoutAnAgentIsRefused() async throws {
        let h = try SimHarness()
        defer { h.stop() }
        let peer = try await h.peer()
        defer { peer.close() }
        do {
            _ = try await peer.raiseSecurity(to: .medium)
            XCTFail("no agent, no raise")
        } catch let e as PairingUnavailableError {
            XCTAssertTrue(e.description.contains("needs this process's pairing agent"), e.description)
        }
    }

    /// The shell's `wait` count: values taken before a wait count for it, each once; a wait short of its count ends
    /// at its limit with the values left uncounted; one that begins before the values comes back as they come.
    func testATallyCountsEachValueTakenForOneWaitAndAShortWaitEndsAtItsLimit() async {
        let tally = DeliveryTally()
        tally.add()
        tally.add()
        let first = await tally.awaitValues(1, within: .seconds(5))
        XCTAssertTrue(first.arrived)
        XCTAssertEqual(first.uncounted, 1, "one taken and not yet counted")
        let started = ContinuousClock.now
        let short = await tally.awaitValues(2, within: .milliseconds(100))
        XCTAssertFalse(short.arrived)
        XCTAssertEqual(short.uncounted, 1, "a wait that timed out counts nothing")
        XCTAssertGreaterThanOrEqual(ContinuousClock.now - started, .milliseconds(100))
        let waiting = Task { await tally.awaitValues(3, within: .seconds(10)) }
        tally.add()
        tally.add()
        let late = await waiting.value
        XCTAssertTrue(late.arrived)
        XCTAssertEqual(late.uncounted, 0)
        let cancelled = Task { await tally.awaitValues(1, within: .seconds(10)) }
        cancelled.cancel()
        let ended = await cancelled.value
        XCTAssertFalse(ended.arrived, "a cancelled wait counts nothing")
        XCTAssertEqual(tally.uncounted, 0)
    }

    /// The wait's limit is the one deadline (withDeadline) on the caller's clock: it passes when the clock says so,
    /// with nothing counted, and a value taken after it is left for the next wait.
    func testAWaitEndsWhenItsClockPassesTheLimitAndLeavesLateValuesUncounted() async throws {
        let tally = DeliveryTally()
        let clock = ManualClock()
        let waiting = Task { await tally.awaitValues(1, within: .seconds(30), clock: clock) }
        while clock.pendingWakeups == 0 { try await Task.sleep(for: .milliseconds(5)) }
        clock.advance(by: .seconds(30))
        let ended = await waiting.value
        XCTAssertFalse(ended.arrived, "the limit passed on the wait's clock")
        tally.add()
        XCTAssertEqual(tally.uncounted, 1, "a value after the limit is the next wait's")
        let next = await tally.awaitValues(1, within: .seconds(30), clock: clock)
        XCTAssertTrue(next.arrived)
        XCTAssertEqual(next.uncounted, 0)
    }

    /// Where a procedure reads (GATTPeer's ProcedureNotifications): shared, a stream of its own that `end` finishes;
    /// one-shot, the connection's catch-all, which `end` leaves open until the connection ends.
    func testAProcedureReadsAStreamOfItsOwnWhenSharedAndTheCatchAllOneShot() async throws {
        let h = try SimHarness()
        defer { h.stop() }
        let peer = try await h.peer()
        let shared = ProcedureNotifications(client: peer.client, shared: SharedNotifications(client: peer.client))
        let own = try shared.stream()
        shared.end(own)
        var values = 0
        for try await _ in own { values += 1 }
        XCTAssertEqual(values, 0, "finished by end(): the procedure's own stream")
        let oneShot = ProcedureNotifications(client: peer.client, shared: nil)
        let catchAll = try oneShot.stream()
        oneShot.end(catchAll)
        let ended = Lock(false)
        let reader = Task {
            do { for try await _ in catchAll {} } catch {}
            ended.withLock { $0 = true }
        }
        try await Task.sleep(for: .milliseconds(200))
        XCTAssertFalse(ended.current, "the catch-all is the connection's: end() leaves it open")
        peer.close()
        await reader.value
        XCTAssertTrue(ended.current)
    }
}
