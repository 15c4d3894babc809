import TestSupport
import ATTStack
import LinuxBluetooth
import LinkCore
import Synchronization
import XCTest
@testable import GATTClient

/// Several ATT bearers on one client (Core Spec 5.4 Vol 3 Part F §3.2.11): each its own slot, deadline and FIFO;
/// one notification path; a timeout closes only its bearer.
final class BearerSetTests: XCTestCase {
    /// A client on `primary` with one enhanced bearer on `enhanced` (MTU 64, the ECRED minimum).
    func makePair(clock: ManualClock = ManualClock(), log: EventLog? = nil) async throws
        -> (GATTClient, ScriptedPeer, ScriptedPeer) {
        let primary = ScriptedPeer(unscripted: "cid4")
        let enhanced = ScriptedPeer(unscripted: "eatt1")
        let client = try await makeClient(primary, clock: clock, log: log)
        let index = try client.addEnhancedBearer(transport: enhanced, mtu: 64)
        XCTAssertEqual(index, 1)
        return (client, primary, enhanced)
    }

    func testTwoReadsInParallelGoOutOnTwoBearersAndEachResponseResolvesOnlyItsOwn() async throws {
        let log = EventLog()
        let (client, primary, enhanced) = try await makePair(log: log)
        XCTAssertEqual(client.bearers.map(\.mtu), [23, 64])
        XCTAssertEqual(client.openBearerCount, 2)
        let a = Task { try await client.read(handle: 0x0021) }
        await primary.waitForSent(1)
        let b = Task { try await client.read(handle: 0x0022) }
        await enhanced.waitForSent(1)
        XCTAssertEqual(primary.sent, [hex("0a 21 00")])
        XCTAssertEqual(enhanced.sent, [hex("0a 22 00")])
        // The enhanced bearer's answer resolves the read on it; the read on CID 4 still waits.
        enhanced.inject(hex("0b bb"))
        let bValue = try await b.value
        XCTAssertEqual(bValue, [0xBB])
        // A second response on the enhanced bearer finds no request there: a violation, never the CID 4 read.
        enhanced.inject(hex("0b cc"))
        await enhanced.flush()
        let stats0 = await client.statistics
        XCTAssertEqual(stats0.protocolViolations, 1)
        XCTAssertTrue(log.all.contains { if case .protocolViolation(let v, _) = $0 { return v.problem == "an unsolicited Read Response" }; return false },
                      "\(log.all)")
        primary.inject(hex("0b aa"))
        let aValue = try await a.value
        XCTAssertEqual(aValue, [0xAA])
        XCTAssertEqual(client.bearers.map(\.requestsAnswered), [1, 1])
        XCTAssertEqual(client.engine.snapshot.pendingDeadlines, 0)
    }

    func testATimeoutClosesOnlyItsBearerAndItsQueuedRequestMovesToTheUnenhancedBearer() async throws {
        let clock = ManualClock()
        let (client, primary, enhanced) = try await makePair(clock: clock)
        client.setName("scanState", for: 0x0022)
        let e1 = client.enhanced.withLock { $0[0] }
        let a = Task { try await client.read(handle: 0x0021) }              // CID 4, in flight
        await primary.waitForSent(1)
        let b = Task { try await client.read(handle: 0x0022) }              // EATT 1, in flight, never answered
        await enhanced.waitForSent(1)
        let c = Task { try await client.write(handle: 0x0030, value: [3]) } // CID 4's queue (both hold one)
        try await waitUntil("C queued on CID 4") { client.engine.snapshot.queuedRequests == 1 }
        let d = Task { try await client.write(handle: 0x0031, value: [4]) } // EATT 1's queue (it holds fewer)
        try await waitUntil("D queued on EATT 1") { e1.snapshot.queuedRequests == 1 }
        clock.advance(by: .seconds(29))
        primary.inject(hex("0b aa"))                                         // A answered: C goes out on CID 4
        _ = try await a.value
        await primary.waitForSent(2)
        clock.advance(by: .seconds(1))                                       // B's 30 s: EATT 1 closes
        do {
            _ = try await b.value
            XCTFail("expected B to time out")
        } catch let e as GATTError {
            XCTAssertEqual(e.description, "timed out after 30 s waiting for Read Response on handle 0x0022 (scanState)")
        }
        XCTAssertTrue(enhanced.isClosed, "the timed-out bearer must close (§3.3.3)")
        XCTAssertFalse(primary.isClosed, "a timeout on an enhanced bearer closed the unenhanced one")
        XCTAssertFalse(client.isClosed)
        XCTAssertEqual(client.openBearerCount, 1)
        XCTAssertEqual(client.bearers.map(\.isClosed), [false, true])
        primary.inject(hex("13"))                                            // C answered; D now goes out on CID 4
        try await c.value
        await primary.waitForSent(3)
        XCTAssertEqual(primary.sent, [hex("0a 21 00"), hex("12 30 00 03"), hex("12 31 00 04")])
        XCTAssertEqual(enhanced.sent, [hex("0a 22 00")], "D was written on the closed bearer")
        primary.inject(hex("13"))
        try await d.value
        // New requests avoid the closed bearer.
        let e = Task { try await client.read(handle: 0x0040) }
        await primary.waitForSent(4)
        primary.inject(hex("0b ee"))
        let eValue = try await e.value
        XCTAssertEqual(eValue, [0xEE])
    }

    func testNotificationsFromEveryBearerReachTheOnePathAndMultipleNotificationsAreSplitInOrder() async throws {
        let (client, primary, enhanced) = try await makePair()
        var it = client.notifications.makeAsyncIterator()
        let sub = try await within(5, "the subscription") { () -> GATTNotificationStream in
            let t = Task { try await client.subscribe(valueHandle: 0x0016, cccdHandle: 0x0017, readValue: false) }
            await primary.waitForSent(1)
            primary.inject(hex("13"))
            return try await t.value.notifications
        }
        // Multiple Handle Value Notification (0x23, §3.4.7.4): handle, length, value; split in order.
        enhanced.inject(hex("23 15 00 02 00 aa bb 16 00 01 00 cc"))
        await enhanced.flush()
        primary.inject(hex("1b 17 00 dd"))
        await primary.flush()
        enhanced.inject(hex("1d 18 00 ee"))                                  // an indication on the enhanced bearer
        await enhanced.flush()
        var got: [GATTNotification] = []
        for _ in 0..<4 { if let n = try await it.next() { got.append(n) } }
        XCTAssertEqual(got, [GATTNotification(handle: 0x15, value: [0xAA, 0xBB], kind: .notification),
                             GATTNotification(handle: 0x16, value: [0xCC], kind: .notification),
                             GATTNotification(handle: 0x17, value: [0xDD], kind: .notification),
                             GATTNotification(handle: 0x18, value: [0xEE], kind: .indication)])
        var subIt = sub.makeAsyncIterator()
        let one = try await subIt.next()
        XCTAssertEqual(one?.value, [0xCC], "the per-handle stream missed an enhanced bearer's value")
        XCTAssertEqual(enhanced.sent, [hex("1e")], "the indication was not confirmed on its own bearer (§3.4.7.2)")
        let stats1 = await client.statistics
        XCTAssertEqual(stats1.notificationsReceived, 4)
    }

    func testAPrepareWriteQueueStaysOnOneBearer() async throws {
        let (client, primary, enhanced) = try await makePair()
        // The enhanced peer echoes every Prepare Write and answers Execute Write.
        let echo = ScriptedPeer(label: "eatt2") { pdu in
            switch pdu.first {
            case 0x16: return [[0x17] + pdu.dropFirst()]
            case 0x18: return [[0x19]]
            default: return [[0x01, pdu[0], 0, 0, 0x06]]
            }
        }
        _ = enhanced
        enhanced.close(reason: "test: replaced by an echoing peer")
        try await waitUntil("the first enhanced bearer closed") { client.bearers[1].isClosed }
        XCTAssertEqual(try client.addEnhancedBearer(transport: echo, mtu: 64), 2)
        let a = Task { try await client.read(handle: 0x0021) }               // CID 4 busy: the queue goes to EATT 2
        await primary.waitForSent(1)
        let value = [UInt8](repeating: 0x5A, count: 150)                     // 3 parts of at most 59 (MTU 64 - 5)
        let w = Task { try await client.writeLong(handle: 0x0040, value: value) }
        await echo.waitForSent(1)
        primary.inject(hex("0b aa"))                                         // CID 4 free again mid-queue
        _ = try await a.value
        try await w.value
        XCTAssertEqual(echo.sent.map { $0[0] }, [0x16, 0x16, 0x16, 0x18], "\(echo.sent.map { show($0) })")
        XCTAssertEqual(echo.sent.dropLast().map { $0.count - 5 }, [59, 59, 32])
        XCTAssertEqual(primary.sent, [hex("0a 21 00")], "a part of the queue went out on another bearer")
    }

    /// Found by fuzz-engine: a Prepare Write queued behind a request that timed out moved to CID 4, mid-value.
    func testAPrepareWriteQueuedOnABearerThatTimesOutFailsWithItAndNeverMoves() async throws {
        let clock = ManualClock()
        let (client, primary, enhanced) = try await makePair(clock: clock)
        let e1 = client.enhanced.withLock { $0[0] }
        let a = Task { try await client.read(handle: 0x0021) }               // CID 4, in flight
        await primary.waitForSent(1)
        let value = [UInt8](repeating: 0x5A, count: 150)                     // 3 parts of at most 59 (MTU 64 - 5)
        let w = Task { try await client.writeLong(handle: 0x0040, value: value) }
        await enhanced.waitForSent(1)                                        // part 1 on EATT 1
        let c = Task { try await client.read(handle: 0x0022) }              // CID 4's queue (both hold one)
        try await waitUntil("C queued on CID 4") { client.engine.snapshot.queuedRequests == 1 }
        let d = Task { try await client.read(handle: 0x0023) }              // EATT 1's queue (it holds fewer)
        try await waitUntil("D queued on EATT 1") { e1.snapshot.queuedRequests == 1 }
        enhanced.inject([0x17] + enhanced.sent[0].dropFirst())             // part 1 echoed: D in flight, part 2 queued
        await enhanced.waitForSent(2)
        try await waitUntil("part 2 queued on EATT 1") { e1.snapshot.queuedRequests == 1 }
        primary.inject(hex("0b aa"))
        _ = try await a.value
        await primary.waitForSent(2)
        primary.inject(hex("0b cc"))
        _ = try await c.value
        clock.advance(by: .seconds(30))                                      // D's 30 s: EATT 1 closes
        do {
            _ = try await d.value
            XCTFail("expected D to time out")
        } catch let e as GATTError {
            guard case .timeout = e else { return XCTFail("D: \(e)") }
        }
        await primary.flush()
        XCTAssertEqual(primary.sent, [hex("0a 21 00"), hex("0a 22 00")], "a Prepare Write moved to CID 4")
        XCTAssertEqual(enhanced.sent.map { $0[0] }, [0x16, 0x0A])
        do {
            try await within(5, "the long write's failure") { try await w.value }
            XCTFail("expected the long write to fail with its bearer")
        } catch let e as GATTError {
            guard case .disconnected(let d) = e else { return XCTFail("the long write: \(e)") }
            XCTAssertEqual(d.during, "Prepare Write Request to handle 0x0040", e.description)
        }
    }

    func testAnEnhancedBearerRefusesExchangeMTUAndKeepsTheChannelMTU() async throws {
        let (client, _, enhanced) = try await makePair()
        enhanced.inject(hex("02 00 02"))
        await enhanced.waitForSent(1)
        XCTAssertEqual(enhanced.sent, [hex("01 02 00 00 06")], "§3.4.2: no Exchange MTU on an enhanced bearer")
        XCTAssertEqual(client.bearers[1].mtu, 64)
    }

    func testClosingTheClientClosesEveryBearer() async throws {
        let (client, primary, enhanced) = try await makePair()
        client.close(reason: "test")
        XCTAssertTrue(primary.isClosed)
        XCTAssertTrue(enhanced.isClosed)
        XCTAssertEqual(client.openBearerCount, 0)
        do {
            try client.addEnhancedBearer(transport: ScriptedPeer(unscripted: "late"), mtu: 64)
            XCTFail("a closed client took a bearer")
        } catch {
            XCTAssertEqual(error.description, "disconnected during adding an Enhanced ATT bearer (late): the unenhanced bearer is closed")
        }
    }
}

/// Server Supported Features (Part G §7.4) and the Client Supported Features bits (§7.2).
final class FeatureTests: XCTestCase {
    func testServerSupportedFeaturesEATTBit() async throws {
        let peer = ScriptedPeer(raw("08 01 00 ff ff 3a 2b", "09 03 05 00 01") + raw("08 06 00 ff ff 3a 2b", "01 08 06 00 0a"))
        let client = try await makeClient(peer)
        let eatt = try await client.serverSupportsEnhancedATT()
        XCTAssertEqual(eatt, true)
        peer.assertScriptDone()
    }

    func testServerWithoutTheCharacteristicOrTheBitOffersNoEATT() async throws {
        let none = ScriptedPeer(raw("08 01 00 ff ff 3a 2b", "01 08 01 00 0a"))
        let a = try await makeClient(none).serverSupportsEnhancedATT()
        XCTAssertNil(a)
        none.assertScriptDone()
        let cleared = ScriptedPeer(raw("08 01 00 ff ff 3a 2b", "09 03 05 00 00") + raw("08 06 00 ff ff 3a 2b", "01 08 06 00 0a"))
        let b = try await makeClient(cleared).serverSupportsEnhancedATT()
        XCTAssertEqual(b, false)
        cleared.assertScriptDone()
    }

    func testClientSupportedFeaturesBits() {
        XCTAssertEqual(GATTClientFeatures([.robustCaching, .enhancedATTBearer, .multipleHandleValueNotifications]).bytes, [0x07])
        XCTAssertEqual(GATTClientFeatures.robustCaching.bytes, [0x01])
    }
}

/// Two bearers over two real AF_UNIX SOCK_SEQPACKET socketpairs (the socket bearer, its reader threads).
final class BearerSetSocketPairTests: XCTestCase {
    func testTwoReadsInParallelOverTwoSocketPairs() async throws {
        let (a0, b0) = try ATTBearer.pair(labels: ("cid4:client", "cid4:peer"))
        let (a1, b1) = try ATTBearer.pair(labels: ("eatt1:client", "eatt1:peer"))
        // The unenhanced bearer's peer holds its answer until told, so the second read finds it busy and goes to the other one.
        let slow = SocketScriptPeer(bearer: b0, steps: raw("0a 21 00", "0b aa"), holdingReplies: true)
        let fast = SocketScriptPeer(bearer: b1, steps: raw("0a 22 00", "0b bb", "1b 30 00 01"))
        slow.start()
        fast.start()
        let client = try await GATTClient.connect(transport: a0)
        try client.addEnhancedBearer(transport: a1, mtu: 100)
        try await within {
            var it = client.notifications.makeAsyncIterator()
            let first = Task { try await client.read(handle: 0x21) }
            await slow.waitForReceived(1)
            let second = try await client.read(handle: 0x22)
            XCTAssertEqual(second, [0xBB])
            XCTAssertEqual(client.bearers.map(\.requestsAnswered), [0, 1], "the CID 4 read answered before its reply was sent")
            slow.releaseReplies()
            let one = try await first.value
            XCTAssertEqual(one, [0xAA])
            let n = try await it.next()
            XCTAssertEqual(n, GATTNotification(handle: 0x30, value: [0x01], kind: .notification))
        }
        slow.assertScriptDone()
        XCTAssertEqual(client.bearers.map(\.mtu), [23, 100])
        XCTAssertEqual(client.bearers.map(\.label), ["cid4:client", "eatt1:client"])
        client.close()
        XCTAssertEqual(client.openBearerCount, 0)
    }
}
