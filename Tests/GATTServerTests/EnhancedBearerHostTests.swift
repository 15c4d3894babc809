// The GATT server host serving Enhanced ATT bearers over unix: (PATH.eatt, the ECRED equivalent): one database,
// a session per bearer (its MTU, no Exchange MTU), the client's CCCDs shared, the refusals, closing with the client.
import ATTStack
import Dispatch
import LinuxBluetooth
import LinkCore
import GATTClient
import GATTServer
import TestSupport
import XCTest

final class EnhancedBearerHostTests: XCTestCase {
    /// 0x0001 GAP, 0x0002-0x0003 Device Name, 0x0004 service 0xFFF0, 0x0005-0x0006 "a" (read, write, notify; CCCD 0x0007).
    let database = AttributeDatabase { db in
        db.service(.genericAccess)
        db.characteristic(.deviceName, [.read], value: Array("dev".utf8))
        db.service(.bit16(0xFFF0))
        db.characteristic(.bit16(0xFFF1), [.read, .write, .notify], value: [1, 2, 3], name: "a")
    }

    /// A host listening at PATH (CID 4) and PATH.eatt, with one accept loop each on their own threads.
    final class Served: Sendable {
        let path: String
        let host: GATTServerHost
        let cid4: ATTBearerListener
        let eatt: ATTBearerListener
        /// Every Enhanced ATT bearer outcome so far, in order.
        let outcomes = Lock<[String]>([])

        init(host: GATTServerHost, tag: String) throws {
            path = temporarySocketPath(tag)
            self.host = host
            cid4 = try ATTBearerListener.unix(path: path)
            eatt = try ATTBearerListener.unixEnhanced(forUnixPath: path)
        }

        /// Accepts one CID 4 connection, then Enhanced ATT bearers until closed.
        func start() {
            let (host, cid4, eatt, outcomes) = (self.host, self.cid4, self.eatt, self.outcomes)
            host.acceptConnections(on: cid4)
            DispatchQueue.global().async {
                while true {
                    do {
                        switch try host.acceptEnhancedBearer(on: eatt) {
                        case .opened(let c, let n): outcomes.withLock { $0.append("opened \(n) \(c.transport.label)") }
                        case .refused(let r): outcomes.withLock { $0.append("refused \(r)") }
                        }
                    } catch {
                        if case TransportError.closedLocally = error { return }
                    }
                }
            }
        }

        /// The outcomes once there are `count` of them (the answer reaches the client before the loop records it), within 5 s.
        func outcomes(count: Int) -> [String] {
            for _ in 0..<500 where outcomes.withLock({ $0.count }) < count { usleep(10_000) }
            return outcomes.withLock { $0 }
        }

        func stop() {
            cid4.close()
            eatt.close()
        }
    }

    func testABearerReadsAndWritesTheOneDatabaseWithTheChannelsMTUAndTheClientsCCCDs() async throws {
        // Armed before "many at once" below: the next Read Request is answered 300 ms late, so the bearer it went on
        // stays busy while the rest are placed (on a fast machine each read could be answered before the next is sent).
        let holdNextRead = Lock<Bool>(false)
        var hooks = GATTServerHost.Hooks()
        hooks.inbound = { bytes, _ in
            holdNextRead.withLock { hold in
                guard hold, bytes.first == ATTOpcode.readRequest.rawValue else { return .serve }
                hold = false
                return .delay(milliseconds: 300)
            }
        }
        let served = try Served(host: GATTServerHost(database: database, serverRxMTU: 200, hooks: hooks), tag: "host-eatt")
        served.start()
        defer { served.stop() }
        let client = try await GATTClient.connect(transport: try ATTBearer.connect(unixPath: served.path))
        defer { client.close() }
        let before = try await client.read(handle: 0x0006)
        XCTAssertEqual(before, [1, 2, 3])
        let bearer = try ATTBearer.connectEnhanced(unixPath: served.path, mtu: 150, timeout: 5)
        XCTAssertEqual(try bearer.enhancedMTU(), 150, "the smaller of 150 and the server's 200")
        try client.addEnhancedBearer(transport: bearer, mtu: try bearer.enhancedMTU())
        XCTAssertEqual(served.outcomes(count: 1), ["opened 1 unix:\(served.path).eatt.1 (accepted)"])

        // Reads in parallel over both bearers, and the enhanced one alone while CID 4 is busy: the one database.
        async let one = client.read(handle: 0x0006)
        async let two = client.read(handle: 0x0003)
        let (v1, v2) = try await (one, two)
        XCTAssertEqual(v1, [1, 2, 3])
        XCTAssertEqual(v2, Array("dev".utf8))
        // A write on either bearer changes the one database.
        try await client.write(handle: 0x0006, value: [9, 9])
        XCTAssertEqual(served.host.database.attribute(0x0006)?.value, [9, 9])
        XCTAssertEqual(client.bearers.map(\.mtu), [23, 150])
        // Many at once: some go out on the enhanced bearer (CID 4 is busy with the others, the first held 300 ms).
        holdNextRead.withLock { $0 = true }
        try await withThrowingTaskGroup(of: [UInt8].self) { group in
            for _ in 0..<20 { group.addTask { try await client.read(handle: 0x0006) } }
            for try await v in group { XCTAssertEqual(v, [9, 9]) }
        }
        XCTAssertGreaterThan(client.bearers[1].requestsAnswered, 0, "\(client.bearers)")
    }

    func testExchangeMTUIsNotSupportedOnAnEnhancedBearerAndCCCDsAreTheClients() throws {
        let served = try Served(host: GATTServerHost(database: database), tag: "host-cccd")
        served.start()
        defer { served.stop() }
        let cid4 = try ATTBearer.connect(unixPath: served.path)
        let cid4Sink = PDUSink()
        cid4.start(cid4Sink)
        defer { cid4.close(reason: "done") }
        cid4Sink.send(cid4, "0a 03 00")                 // answered: the host has attached CID 4
        XCTAssertEqual(cid4Sink.next(), "0b 64 65 76")
        let eatt = try ATTBearer.connectEnhanced(unixPath: served.path, mtu: 100, timeout: 5)
        let eattSink = PDUSink()
        eatt.start(eattSink)
        defer { eatt.close(reason: "done") }
        eattSink.send(eatt, "02 00 02")                 // Exchange MTU on the enhanced bearer
        XCTAssertEqual(eattSink.next(), "01 02 00 00 06") // Request Not Supported (Vol 3 Part F §3.4.2.1)
        eattSink.send(eatt, "12 07 00 01 00")           // notifications on, written over the enhanced bearer
        XCTAssertEqual(eattSink.next(), "13")
        cid4Sink.send(cid4, "0a 07 00")                 // read over CID 4: the client's one CCCD value
        XCTAssertEqual(cid4Sink.next(), "0b 01 00")
        served.host.notifySubscribers(handle: 0x0006, value: [5])
        XCTAssertEqual(cid4Sink.next(), "1b 06 00 05", "the notification goes once, on the client's CID 4")
        XCTAssertNil(eattSink.next(timeout: 0.1))
        // Closing CID 4 (the link) closes the client's enhanced bearers.
        cid4.close(reason: "link gone")
        XCTAssertEqual(eattSink.waitForClose(), .closedByPeer)
    }

    func testRefusalsNameTheirResults() throws {
        var hooks = GATTServerHost.Hooks()
        let refuseNext = Lock(false)
        hooks.enhancedRequest = { _ in refuseNext.withLock { $0 } ? .insufficientAuthentication : nil }
        let served = try Served(host: GATTServerHost(database: database, hooks: hooks, enhancedBearerLimit: 1), tag: "host-refuse")
        served.start()
        defer { served.stop() }
        let peer = "unix:\(served.path).eatt"
        // No client connected at PATH yet: no resources.
        XCTAssertThrowsError(try ATTBearer.connectEnhanced(unixPath: served.path, timeout: 5)) { error in
            XCTAssertEqual(error as? TransportError, .enhancedBearerRefused(peer: peer, result: .noResourcesAvailable))
        }
        let cid4 = try ATTBearer.connect(unixPath: served.path)
        let sink = PDUSink()
        cid4.start(sink)
        defer { cid4.close(reason: "done") }
        sink.send(cid4, "0a 03 00")
        XCTAssertEqual(sink.next(), "0b 64 65 76", "answered: the host has attached CID 4")
        let first = try ATTBearer.connectEnhanced(unixPath: served.path, timeout: 5)
        defer { first.close(reason: "done") }
        XCTAssertEqual(first.channelIDs?.local, 0x0041)
        XCTAssertThrowsError(try ATTBearer.connectEnhanced(unixPath: served.path, timeout: 5)) { error in
            XCTAssertEqual(error as? TransportError, .enhancedBearerRefused(peer: peer, result: .noResourcesAvailable),
                           "past the limit of one bearer")
        }
        refuseNext.withLock { $0 = true }
        XCTAssertThrowsError(try ATTBearer.connectEnhanced(unixPath: served.path, timeout: 5)) { error in
            XCTAssertEqual(error as? TransportError, .enhancedBearerRefused(peer: peer, result: .insufficientAuthentication))
        }
        XCTAssertEqual(served.outcomes(count: 4), ["refused 0x0004 no resources available", "opened 1 unix:\(served.path).eatt.1 (accepted)",
                                                         "refused 0x0004 no resources available", "refused 0x0005 insufficient authentication"])
    }


    func testAnAcceptedChannelJoinsTheClientAttachedLastUpToTheLimit() throws {
        let host = GATTServerHost(database: database, enhancedBearerLimit: 1)
        let (client, served) = try ATTBearer.pair(labels: ("cid4:client", "cid4:server"))
        host.attach(served)
        let clientSink = PDUSink()
        client.start(clientSink)
        defer { client.close(reason: "done") }
        // A channel the kernel accepted (here a socketpair standing for one: not an LE bearer, so no link to match).
        let (near, far) = try ATTBearer.pair(labels: ("eatt:client", "eatt:server"))
        guard case .opened(_, let n) = host.attachEnhanced(far) else { return XCTFail("not opened") }
        XCTAssertEqual(n, 1)
        let sink = PDUSink()
        near.start(sink)
        defer { near.close(reason: "done") }
        sink.send(near, "0a 03 00")
        XCTAssertEqual(sink.next(), "0b 64 65 76", "served from the one database")
        let (_, third) = try ATTBearer.pair()
        guard case .refused(let r) = host.attachEnhanced(third) else { return XCTFail("past the limit, opened") }
        XCTAssertEqual(r, .noResourcesAvailable)
    }
}

/// The far end of a bearer for these tests: its PDUs as hex, one at a time.
final class PDUSink: ATTTransportSink {
    private let pdus = Lock<[[UInt8]]>([])
    private let closes = Lock<[TransportError]>([])
    private let signal = DispatchSemaphore(value: 0)
    private let closed = DispatchSemaphore(value: 0)

    func transport(didReceive pdu: [UInt8]) {
        pdus.withLock { $0.append(pdu) }
        signal.signal()
    }

    func transport(didCloseWith reason: TransportError) {
        closes.withLock { $0.append(reason) }
        closed.signal()
    }

    func send(_ bearer: ATTBearer, _ text: String) {
        let bytes = hex(text)
        _ = bytes.withUnsafeBytes { try? bearer.trySend($0) }
    }

    /// The next PDU as "0b 01 00", or nil after `timeout` seconds.
    func next(timeout: Double = 5) -> String? {
        guard signal.wait(timeout: .now() + timeout) == .success else { return nil }
        return show(pdus.withLock { $0.removeFirst() })
    }

    func waitForClose(seconds: Double = 5) -> TransportError? {
        guard closed.wait(timeout: .now() + seconds) == .success else { return nil }
        return closes.withLock { $0.first }
    }
}
