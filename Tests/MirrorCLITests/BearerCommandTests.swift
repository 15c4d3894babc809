// --bearers N against a unix: peer that serves Enhanced ATT bearers at PATH.eatt (GATTServerHost's acceptor):
// the bearers listed by mtu and link (text and JSON), each refusal a note on stderr with the command going on over
// CID 4, --bearers 1 sending nothing new, the shell's connect --bearers; and in-process, two reads in parallel on
// two bearers and a long write's Prepare Write queue on one.
import ATTStack
import Foundation
import GATTClient
import GATTServer
import JSON
import LinuxBluetooth
import LinkCore
import TestSupport
import XCTest

/// A GATT server at unix:PATH with Generic Attribute's Client and Server Supported Features (Core Spec 5.4 Vol 3
/// Part G §7.2, §7.4), listening for Enhanced ATT bearers at PATH.eatt unless `listening` is false.
final class EATTPeer: Sendable {
    let path = temporarySocketPath("mirror-eatt-peer")
    let host: GATTServerHost
    let listener: ATTBearerListener
    let enhancedListener: ATTBearerListener?
    /// Guards what the server received: each PDU's opcode with the connection it came on.
    let received = Lock<[(connection: ObjectIdentifier, opcode: UInt8)]>([])
    /// Read Requests of `slowHandle` on the unenhanced connection wait for `release` (at most 10 s).
    let release = DispatchSemaphore(value: 0)
    let handles: [String: UInt16]

    static func database(serverFeatures: UInt8?) -> AttributeDatabase {
        AttributeDatabase { db in
            db.service(.genericAccess)
            db.characteristic(.deviceName, [.read], value: Array("EATT Peer".utf8), name: "deviceName")
            db.service(.genericAttribute)
            db.characteristic(.clientSupportedFeatures, [.read, .write], value: [0], name: "clientFeatures")
            if let serverFeatures { db.characteristic(.serverSupportedFeatures, [.read], value: [serverFeatures], name: "serverFeatures") }
            db.service(.batteryService)
            db.characteristic(.bit16(0x2A19), [.read], value: [87], name: "slow")
            db.characteristic(.bit16(0x2A1A), [.read, .write], value: [1], name: "fast")
        }
    }

    init(serverFeatures: UInt8? = 0x01, limit: Int = 4, listening: Bool = true) throws {
        let database = Self.database(serverFeatures: serverFeatures)
        handles = database.handles
        let slow = database.handles["slow"]!
        var hooks = GATTServerHost.Hooks()
        let received = self.received, release = self.release
        hooks.inbound = { bytes, connection in
            received.withLock { $0.append((ObjectIdentifier(connection), bytes.first ?? 0)) }
            if bytes == [0x0A] + le16(slow) { _ = release.wait(timeout: .now() + 10) }
            return .serve
        }
        host = GATTServerHost(database: database, serverRxMTU: 247, hooks: hooks, enhancedBearerLimit: limit)
        listener = try ATTBearerListener.unix(path: path)
        enhancedListener = listening ? try ATTBearerListener.unixEnhanced(forUnixPath: path) : nil
        let host = self.host, listener = self.listener
        host.acceptConnections(on: listener)
        if let enhanced = enhancedListener {
            Thread {
                while true {
                    do throws(TransportError) { _ = try host.acceptEnhancedBearer(on: enhanced) } catch {
                        if case .closedLocally = error { return }
                    }
                }
            }.start()
        }
    }

    var target: String { "unix:\(path)" }
    func hexHandle(_ name: String) -> String { String(format: "0x%04X", handles[name]!) }
    var opcodes: [UInt8] { received.withLock { $0.map(\.opcode) } }
    func close() {
        listener.close()
        enhancedListener?.close()
    }
}

final class BearerCommandTests: XCTestCase {
    let credits4 = "credits none: the ATT fixed channel has no credit-based flow control"
    let creditsE = "credits not reported: no socket option gives an ECRED channel's credits"

    func testMTUListsTheBearersInTextAndJSON() throws {
        let peer = try EATTPeer()
        defer { peer.close() }
        let run = try MirrorProcess.run(["mtu", peer.target, "--bearers", "3"])
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertEqual(run.stderr, "")
        // Exchange MTU, Server Supported Features and Client Supported Features by type (each answered, then
        // Attribute Not Found past it), the write of the EATT bit: six answers on CID 4.
        XCTAssertEqual(run.stdout, """
            client Rx MTU 517, server Rx MTU 247: MTU 247
            budgets: write/notify 244 bytes, prepare write part 242, read blob part 246
            bearers: 3 open of 3 asked
              0 ATT  CID 0x0004 (peer 0x0004)   MTU 247  open, 6 answered, \(credits4)
              1 EATT CID 0x0041 (peer 0x0041)   MTU 247  open, 0 answered, \(creditsE)
              2 EATT CID 0x0042 (peer 0x0042)   MTU 247  open, 0 answered, \(creditsE)

            """)
        XCTAssertEqual(peer.host.database.attribute(peer.handles["clientFeatures"]!)?.value, [0x02], "the EATT bit was not written")

        let json = try MirrorProcess.run(["mtu", peer.target, "--bearers", "2", "--mtu", "100", "--json"])
        XCTAssertEqual(json.status, 0, json.stderr)
        guard case .object(let fields) = try json.json() else { return XCTFail(json.stdout) }
        XCTAssertEqual(fields.map(\.0), ["clientRxMTU", "serverRxMTU", "mtu", "writeBudget", "prepareWriteBudget", "readBlobBudget", "link", "bearers"])
        let bearers = try XCTUnwrap(fields.last?.1)
        XCTAssertEqual(bearers.compact, #"{"asked":2,"open":2,"list":["#
                       + #"{"index":0,"enhanced":false,"cid":4,"peerCID":4,"mtu":100,"open":true,"requestsAnswered":6,"credits":{"unknown":"none: the ATT fixed channel has no credit-based flow control"}},"#
                       + #"{"index":1,"enhanced":true,"cid":65,"peerCID":65,"mtu":100,"open":true,"requestsAnswered":0,"credits":{"unknown":"not reported: no socket option gives an ECRED channel's credits"}}"#
                       + #"],"notes":[]}"#)
    }

    func testLinkListsTheBearers() throws {
        let peer = try EATTPeer()
        defer { peer.close() }
        let run = try MirrorProcess.run(["link", peer.target, "--bearers", "2"])
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertEqual(run.stdout, """
            link to \(peer.target): none (a unix socket has no radio link)
              ATT MTU             247
            bearers: 2 open of 2 asked
              0 ATT  CID 0x0004 (peer 0x0004)   MTU 247  open, 6 answered, \(credits4)
              1 EATT CID 0x0041 (peer 0x0041)   MTU 247  open, 0 answered, \(creditsE)

            """)
        let json = try MirrorProcess.run(["link", peer.target, "--bearers", "2", "--json"])
        XCTAssertEqual(json.status, 0, json.stderr)
        let j = try json.json()
        XCTAssertEqual(j["target"]?.string, peer.target)
        XCTAssertEqual(j["bearers"]?["open"], 2)
        XCTAssertEqual(j["bearers"]?["list"]?[1]?["cid"], 0x41)
    }

    /// --bearers 1 (the default) reads and writes nothing for EATT and lists nothing: the output is as before.
    func testOneBearerSendsAndListsNothingNew() throws {
        let peer = try EATTPeer()
        defer { peer.close() }
        for args in [[], ["--bearers", "1"]] {
            let before = peer.opcodes.count
            let run = try MirrorProcess.run(["mtu", peer.target] + args)
            XCTAssertEqual(run.status, 0, run.stderr)
            XCTAssertEqual(run.stdout, "client Rx MTU 517, server Rx MTU 247: MTU 247\nbudgets: write/notify 244 bytes, prepare write part 242, read blob part 246\n")
            XCTAssertEqual(Array(peer.opcodes.dropFirst(before)), [0x02], "only Exchange MTU")
            let json = try MirrorProcess.run(["mtu", peer.target, "--json"] + args)
            XCTAssertNil(try json.json()["bearers"])
        }
        XCTAssertEqual(peer.host.database.attribute(peer.handles["clientFeatures"]!)?.value, [0x00])
    }

    /// A peer without EATT: a note on stderr saying why, and the command's own work and exit status as without it.
    func testAPeerWithoutEATTIsANoteAndTheCommandGoesOnOverCID4() throws {
        for (features, why) in [
            (UInt8?.none, "the server has no Server Supported Features (0x2B3A): it offers no Enhanced ATT bearer"),
            (0x00, "the server's Server Supported Features (0x2B3A) has no EATT Supported bit (bit 0)"),
        ] {
            let peer = try EATTPeer(serverFeatures: features)
            defer { peer.close() }
            let run = try MirrorProcess.run(["read", peer.target, peer.hexHandle("fast"), "--bearers", "3"])
            XCTAssertEqual(run.status, 0, run.stderr)
            // And the note that a raw handle with no database known is not decoded (issue 37).
            XCTAssertEqual(run.stderr, "mirror: --bearers 3: bearers 1-2: \(why); going on over CID 4 alone\n"
                           + "note: \(peer.hexHandle("fast")) not named or decoded: a handle is read with no discovery, and no database of this peer is known or "
                       + "cached; read it by name or UUID, or cache the database with `mirror gatt` (a peer with a Database Hash)\n")
            let plain = try MirrorProcess.run(["read", peer.target, peer.hexHandle("fast")])
            XCTAssertEqual(run.stdout, plain.stdout)
            XCTAssertEqual(peer.host.database.attribute(peer.handles["clientFeatures"]!)?.value, [0x00], "0x2B29 written without EATT")
            let listed = try MirrorProcess.run(["mtu", peer.target, "--bearers", "3", "--json"])
            XCTAssertEqual(listed.status, 0, listed.stderr)
            XCTAssertEqual(try listed.json()["bearers"]?["open"], 1)
            XCTAssertEqual(try listed.json()["bearers"]?["notes"]?[0]?.string, "--bearers 3: bearers 1-2: \(why); going on over CID 4 alone")
        }
    }

    /// The peer refuses the second bearer (no resources: it takes one), and a peer with the EATT bit and nothing
    /// listening at PATH.eatt: each named, the command goes on over what opened.
    func testARefusedBearerIsNamedAndTheCommandGoesOn() throws {
        let one = try EATTPeer(limit: 1)
        defer { one.close() }
        let run = try MirrorProcess.run(["mtu", one.target, "--bearers", "3"])
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertEqual(run.stderr, "mirror: --bearers 3: bearer 2: the ECRED connection (PSM 0x0027) failed: unix:\(one.path).eatt refused the Enhanced ATT bearer: "
                       + "L2CAP result 0x0004 no resources available; going on over 2 bearers (CID 4 and 1 Enhanced ATT bearer)\n")
        XCTAssertTrue(run.stdout.contains("bearers: 2 open of 3 asked\n"), run.stdout)
        XCTAssertTrue(run.stdout.hasSuffix("  not opened: bearer 2: the ECRED connection (PSM 0x0027) failed: unix:\(one.path).eatt refused the Enhanced ATT bearer: "
                                           + "L2CAP result 0x0004 no resources available\n"), run.stdout)

        let deaf = try EATTPeer(listening: false)
        defer { deaf.close() }
        let write = try MirrorProcess.run(["write", deaf.target, deaf.hexHandle("fast"), "07", "--bearers", "2"])
        XCTAssertEqual(write.status, 0, write.stderr)
        XCTAssertTrue(write.stderr.hasPrefix("mirror: --bearers 2: bearer 1: the ECRED connection (PSM 0x0027) failed: "), write.stderr)
        XCTAssertTrue(write.stderr.contains("connect failed with ENOENT"), write.stderr)
        XCTAssertTrue(write.stderr.hasSuffix("; going on over CID 4 alone\n"), write.stderr)
        XCTAssertEqual(deaf.host.database.attribute(deaf.handles["fast"]!)?.value, [0x07])
    }

    func testTheShellConnectTakesBearers() throws {
        let peer = try EATTPeer()
        defer { peer.close() }
        let run = try MirrorProcess.run(["shell", peer.target], input: "connect --bearers 2\nmtu\nconnect --bearers 1\nmtu\n")
        XCTAssertEqual(run.status, 0, run.stderr)
        let mtuOutputs = run.stdout.components(separatedBy: "> mtu\n").dropFirst().map { $0.components(separatedBy: "> ")[0] }
        XCTAssertEqual(mtuOutputs.count, 2, run.stdout)
        XCTAssertTrue(mtuOutputs[0].contains("bearers: 2 open of 2 asked\n"), run.stdout)
        XCTAssertTrue(mtuOutputs[0].contains("  1 EATT CID 0x0041 (peer 0x0041)"), run.stdout)
        XCTAssertFalse(mtuOutputs[1].contains("bearers:"), "connect --bearers 1 listed bearers: \(run.stdout)")
    }

    /// Against mirror-sim: with --eatt yes every bearer opens and the listen's robust caching keeps the EATT bit;
    /// --eatt-refuse names the L2CAP result; without --eatt the note says the simulator offers none.
    func testAgainstTheSimulator() throws {
        let sim = try SimulatorProcess(["--eatt", "yes"])
        defer { sim.stop() }
        let run = try MirrorProcess.run(["mtu", sim.target, "--bearers", "3", "--json"])
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertEqual(run.stderr, "")
        XCTAssertEqual(try run.json()["bearers"]?["open"], 3)
        XCTAssertEqual(try run.json()["bearers"]?["list"]?[2]?["mtu"], 517)

        let refusing = try SimulatorProcess(["--eatt", "yes", "--eatt-refuse", "0x0004"])
        defer { refusing.stop() }
        let refused = try MirrorProcess.run(["read", refusing.target, "scanState", "--bearers", "2"])
        XCTAssertEqual(refused.status, 0, refused.stderr)
        XCTAssertEqual(refused.stderr, "mirror: --bearers 2: bearer 1: the ECRED connection (PSM 0x0027) failed: unix:\(refusing.path).eatt refused the Enhanced ATT bearer: "
                       + "L2CAP result 0x0004 no resources available; going on over CID 4 alone\n")
        XCTAssertTrue(refused.stdout.hasPrefix("0x"), refused.stdout)

        let plain = try SimulatorProcess()
        defer { plain.stop() }
        let none = try MirrorProcess.run(["read", plain.target, "scanState", "--bearers", "2"])
        XCTAssertEqual(none.status, 0, none.stderr)
        XCTAssertEqual(none.stderr, "mirror: --bearers 2: bearer 1: the server has no Server Supported Features (0x2B3A): it offers no Enhanced ATT bearer; going on over CID 4 alone\n")
    }

    /// gatt --read with three bearers reads the values as many at once as bearers are open: Read Requests go out on
    /// every bearer (the trace names each enhanced bearer), and what it prints is what one bearer prints, but for
    /// Client Supported Features, which holds the EATT bit this client wrote.
    func testGATTReadSpreadsTheReadsOverTheBearers() throws {
        let sim = try SimulatorProcess(["--eatt", "yes"])
        defer { sim.stop() }
        let three = try MirrorProcess.run(["gatt", sim.target, "--read", "--bearers", "3", "--trace", "--json"])
        XCTAssertEqual(three.status, 0, three.stderr)
        let reads = three.stderr.split(separator: "\n").filter { $0.contains("Read Request") && $0.contains(" > ") }
        let onCID4 = reads.filter { !$0.contains("[b") }.count
        let onB1 = reads.filter { $0.contains("[b1 cid") }.count, onB2 = reads.filter { $0.contains("[b2 cid") }.count
        XCTAssertGreaterThan(onCID4, 0, three.stderr)
        XCTAssertGreaterThan(onB1, 0, "no read went out on bearer 1:\n\(three.stderr)")
        XCTAssertGreaterThan(onB2, 0, "no read went out on bearer 2:\n\(three.stderr)")
        let one = try MirrorProcess.run(["gatt", sim.target, "--read", "--json"])
        XCTAssertEqual(one.status, 0, one.stderr)
        // The same database and values, in the same order; only Client Supported Features (0x2B29) differs.
        func values(_ run: MirrorRun) throws -> [String] {
            var out: [String] = []
            for service in try run.json()["services"]?.items ?? [] {
                for c in service["characteristics"]?.items ?? [] {
                    let uuid = c["uuid"]?.string ?? "?"
                    out.append("\(uuid)=\(uuid == "2b29" ? "(client's own)" : c["value"]?.string ?? c["readError"]?.compact ?? "-")")
                }
            }
            return out
        }
        XCTAssertEqual(try values(three), try values(one))
        XCTAssertGreaterThan(try values(one).count, 10)
    }

    // MARK: in-process: the GATT client over the peer's real sockets

    func client(_ peer: EATTPeer, bearers: Int) async throws -> GATTClient {
        let bearer = try ATTBearer.connect(unixPath: peer.path)
        let client = try await GATTClient.connect(transport: bearer)
        _ = try await client.exchangeMTU()
        let outcome = await client.openEnhancedBearers(bearers) { _ throws(TransportError) in
            try EnhancedBearerChannel(ATTBearer.connectEnhanced(unixPath: peer.path, timeout: 5))
        }
        XCTAssertEqual(outcome.opened.count, bearers - 1, "\(outcome.problems)")
        return client
    }

    /// Two reads in parallel go out on two bearers: CID 4 holds the first (its answer held back), so the second
    /// takes the enhanced bearer and is answered first; `requestsAnswered` says which bearer served which.
    func testTwoReadsInParallelGoOutOnTwoBearers() async throws {
        let peer = try EATTPeer()
        defer { peer.close() }
        let client = try await client(peer, bearers: 2)
        let before = client.bearers.map(\.requestsAnswered)
        let slow = Task { try await client.read(handle: peer.handles["slow"]!) }
        let seen = peer.received.withLock { $0.count }
        let deadline = Date().addingTimeInterval(5)
        while peer.received.withLock({ $0.count }) == seen, Date() < deadline { try await Task.sleep(for: .milliseconds(2)) }
        let fast = try await client.read(handle: peer.handles["fast"]!)
        XCTAssertEqual(fast, [1])
        XCTAssertEqual(client.bearers.map(\.requestsAnswered), [before[0], before[1] + 1], "the second read did not take the free bearer")
        peer.release.signal()
        let slowValue = try await slow.value
        XCTAssertEqual(slowValue, [87])
        XCTAssertEqual(client.bearers.map(\.requestsAnswered), [before[0] + 1, before[1] + 1])
        let connections = peer.received.withLock { r in r.filter { $0.opcode == 0x0A }.map(\.connection) }
        XCTAssertEqual(Set(connections).count, 2, "both reads came on one connection")
        client.close()
    }

    /// A long write keeps its Prepare Write queue on one bearer (Part G §4.9.4) while reads run on the others.
    func testALongWriteKeepsItsPrepareWriteQueueOnOneBearer() async throws {
        let peer = try EATTPeer()
        defer { peer.close() }
        let client = try await client(peer, bearers: 3)
        let value = (0..<500).map { UInt8($0 & 0xFF) }                        // 3 Prepare Writes at MTU 247 (242 a part)
        async let write: Void = client.writeLong(handle: peer.handles["fast"]!, value: value)
        async let reads = withThrowingTaskGroup(of: [UInt8].self) { group in
            for _ in 0..<6 { group.addTask { try await client.read(handle: peer.handles["deviceName"]!) } }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        try await write
        let readValues = try await reads
        XCTAssertEqual(readValues, Array(repeating: Array("EATT Peer".utf8), count: 6))
        XCTAssertEqual(peer.host.database.attribute(peer.handles["fast"]!)?.value, value)
        let queue = peer.received.withLock { r in r.filter { $0.opcode == 0x16 || $0.opcode == 0x18 } }
        XCTAssertEqual(queue.map(\.opcode), [0x16, 0x16, 0x16, 0x18])
        XCTAssertEqual(Set(queue.map(\.connection)).count, 1, "the Prepare Write queue was split across bearers")
        client.close()
    }
}
