// The simulator serving Enhanced ATT bearers (`--eatt yes`, Core Spec 5.4 Vol 3 Part F §3.2.11) over unix:
// (PATH.eatt, the ECRED equivalent): Server Supported Features (Part G §7.4), handles that move only with the
// option, one database over several bearers with every write counted, the client's state shared, refusals.
import TestSupport
import ATTStack
import LinuxBluetooth
import LinkCore
import Dispatch
import Foundation
import GATTClient
import GATTServer
import Mirror
@testable import MirrorSimulator
import XCTest

final class SimulatorEATTTests: XCTestCase {
    func handles(caching: Bool, eatt: Bool) -> (scanState: UInt16?, ssf: UInt16?) {
        var o = SimOptions()
        o.caching = caching
        o.eatt = eatt
        let sim = SimulatedMirror(options: o)
        return (sim.valueHandle("scanState"), sim.database.handle(AttributeDatabase.serverSupportedFeaturesName))
    }

    func testServerSupportedFeaturesMovesHandlesOnlyWithTheOption() {
        XCTAssertEqual(handles(caching: false, eatt: false).scanState, 0x000C, "the README's handle, by default")
        XCTAssertNil(handles(caching: false, eatt: false).ssf)
        XCTAssertEqual(handles(caching: true, eatt: false).scanState, 0x0010)
        // GATT: Service Changed 0x07-0x09, Client Supported Features 0x0A-0x0B, Server Supported Features 0x0C-0x0D.
        XCTAssertEqual(handles(caching: false, eatt: true).ssf, 0x000D)
        XCTAssertEqual(handles(caching: false, eatt: true).scanState, 0x0010)
        // With caching the Database Hash comes first (0x0C-0x0D), then Server Supported Features.
        XCTAssertEqual(handles(caching: true, eatt: true).ssf, 0x000F)
        XCTAssertEqual(handles(caching: true, eatt: true).scanState, 0x0012)
    }

    func testTheOptionsParse() throws {
        var o = SimOptions()
        try o.set("eatt", "yes")
        try o.set("eatt-refuse", "0x0004")
        XCTAssertTrue(o.eatt)
        XCTAssertEqual(o.eattRefusal, .noResourcesAvailable)
        try o.set("eatt-refuse", "5")
        XCTAssertEqual(o.eattRefusal, .insufficientAuthentication)
        XCTAssertThrowsError(try o.set("eatt-refuse", "0")) { error in
            XCTAssertTrue((error as? SimOptionsError)?.problem.hasPrefix("--eatt-refuse: expected an L2CAP result code other than 0") == true, "\(error)")
        }
        XCTAssertThrowsError(try o.set("eatt", "maybe"))
    }

    func testTheClientFindsTheEATTBitOnlyWithTheOption() async throws {
        for eatt in [false, true] {
            let h = try SimHarness { $0.eatt = eatt }
            defer { h.stop() }
            let client = try await h.connect()
            defer { client.close(reason: "test over") }
            let supported = try await client.serverSupportsEnhancedATT()
            XCTAssertEqual(supported, eatt ? true : nil, "eatt \(eatt)")
        }
    }

    func testParallelWritesSpreadOverBearersAndEveryOneIsCountedAtThePeer() async throws {
        // The first Write Request's answer is held 300 ms, so the bearer it went on stays busy while the rest are
        // placed: on a fast machine each write could otherwise be answered before the next is submitted, and the
        // least busy bearer would always be the unenhanced one (CI saw all 60 there).
        let h = try SimHarness { $0.eatt = true; $0.faults = [SimFault(.delay(milliseconds: 300), "cloudToken")] }
        defer { h.stop() }
        let client = try await h.connect()
        for _ in 0..<2 {
            let b = try ATTBearer.connectEnhanced(unixPath: h.path, mtu: 247, timeout: 5)
            try client.addEnhancedBearer(transport: b, mtu: try b.enhancedMTU())
        }
        XCTAssertEqual(client.openBearerCount, 3)
        XCTAssertEqual(client.bearers.map(\.mtu), [517, 247, 247])
        XCTAssertEqual(client.bearers.map(\.label).dropFirst().map { $0.hasSuffix(".eatt.1") || $0.hasSuffix(".eatt.2") }, [true, true])
        let token = try XCTUnwrap(h.sim.valueHandle("cloudToken"))
        let total = 60
        try await withThrowingTaskGroup(of: Void.self) { group in
            for i in 0..<total { group.addTask { try await client.write(handle: token, value: Array("t\(i)".utf8)) } }
            try await group.waitForAll()
        }
        XCTAssertEqual(h.sim.snapshot.writeRequests, total, "every Write Request reached the one database")
        XCTAssertEqual(client.bearers.map(\.requestsAnswered).reduce(0, +), total + 1, "and the Exchange MTU on CID 4")
        XCTAssertGreaterThan(client.bearers[1].requestsAnswered + client.bearers[2].requestsAnswered, 0,
                             "some went out on the enhanced bearers: \(client.bearers)")
        XCTAssertEqual(h.sim.snapshot.connections, 1, "one client")
        client.close(reason: "test over")
        // Each bearer's count is logged as it closes; together they are every write.
        var counted = 0
        for _ in 0..<500 {
            let lines = h.logLines.all.filter { $0.contains(" closed: ") }
            if lines.count == 3 {
                counted = lines.compactMap { line -> Int? in
                    guard let r = line.range(of: "received ") else { return nil }
                    return Int(line[r.upperBound...].prefix { $0.isNumber })
                }.reduce(0, +)
                break
            }
            usleep(10_000)
        }
        XCTAssertEqual(counted, total, h.logLines.all.joined(separator: "\n"))
    }

    func testClientSupportedFeaturesWrittenOnABearerIsTheClientsAndExchangeMTUIsNotSupportedThere() async throws {
        let h = try SimHarness { $0.eatt = true }
        defer { h.stop() }
        let client = try await h.connect()
        defer { client.close(reason: "test over") }
        let b = try ATTBearer.connectEnhanced(unixPath: h.path, mtu: 100, timeout: 5)
        let engine = try await GATTClient.connect(transport: b, configuration: {
            var c = GATTClient.Configuration()
            c.exchangeMTUOnConnect = false
            return c
        }())
        defer { engine.close(reason: "test over") }
        let csf = try XCTUnwrap(h.sim.database.handle(AttributeDatabase.clientSupportedFeaturesName))
        try await engine.write(handle: csf, value: [0x02])
        let seen = try await client.read(handle: csf)
        XCTAssertEqual(seen, [0x02], "the EATT bit written on the bearer is the client's")
        // Exchange MTU is not used on an Enhanced ATT bearer (§3.4.2.1): Request Not Supported, so this client keeps 23.
        let mtu = try await engine.exchangeMTU()
        XCTAssertEqual(mtu, 23)
        XCTAssertNil(engine.serverRxMTU, "answered with an Error Response")
        XCTAssertTrue(h.logLines.all.contains { $0.contains("Enhanced ATT bearers") }, h.logLines.all.joined(separator: "\n"))
    }

    func testRefusalsAndTheBearersCloseWithTheClient() async throws {
        let refusing = try SimHarness { $0.eatt = true; $0.eattRefusal = .insufficientAuthorization }
        defer { refusing.stop() }
        let c1 = try await refusing.connect()
        defer { c1.close(reason: "test over") }
        XCTAssertThrowsError(try ATTBearer.connectEnhanced(unixPath: refusing.path, timeout: 5)) { error in
            XCTAssertEqual(error as? TransportError, .enhancedBearerRefused(peer: "unix:\(refusing.path).eatt", result: .insufficientAuthorization))
        }

        let h = try SimHarness { $0.eatt = true }
        defer { h.stop() }
        XCTAssertThrowsError(try ATTBearer.connectEnhanced(unixPath: h.path, timeout: 5)) { error in
            XCTAssertEqual(error as? TransportError, .enhancedBearerRefused(peer: "unix:\(h.path).eatt", result: .noResourcesAvailable),
                           "no client connected at PATH")
        }
        let client = try await h.connect()
        var opened: [ATTBearer] = []
        for _ in 0..<SimulatedMirror.enhancedBearerLimit { opened.append(try ATTBearer.connectEnhanced(unixPath: h.path, timeout: 5)) }
        XCTAssertEqual(opened.last?.channelIDs?.local, 0x0040 + UInt16(SimulatedMirror.enhancedBearerLimit))
        XCTAssertThrowsError(try ATTBearer.connectEnhanced(unixPath: h.path, timeout: 5)) { error in
            XCTAssertEqual(error as? TransportError, .enhancedBearerRefused(peer: "unix:\(h.path).eatt", result: .noResourcesAvailable),
                           "past the limit")
        }
        // Closing the client's CID 4 connection closes its bearers at the simulator (the link is gone).
        let sinks = opened.map { b -> CloseSink in
            let sink = CloseSink()
            b.start(sink)
            return sink
        }
        client.close(reason: "the client leaves")
        for sink in sinks { XCTAssertEqual(sink.wait(), .closedByPeer) }
    }
}

/// Records how a bearer ended.
final class CloseSink: ATTTransportSink {
    private let reason = Lock<TransportError?>(nil)
    private let closed = DispatchSemaphore(value: 0)
    func transport(didReceive pdu: [UInt8]) {}
    func transport(didCloseWith reason: TransportError) {
        self.reason.withLock { $0 = reason }
        closed.signal()
    }
    /// The reason, within 5 s.
    func wait() -> TransportError? {
        _ = closed.wait(timeout: .now() + 5)
        return reason.withLock { $0 }
    }
}
