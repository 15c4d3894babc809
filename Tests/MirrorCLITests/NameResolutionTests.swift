// Names wherever a handle goes (issue 14, point 4): `read`, `write`, `listen`, `bench --handle/--counter` take a
// HANDLE, a UUID or a characteristic name (the profile's, or the User Description 0x2901), against the CLI's peer.
import ATTStack
import Foundation
import GATTServer
import JSON
import Mirror
import MirrorCommandLine
import TestSupport
import XCTest

extension AttributeDatabase {
    /// Characteristics named by User Descriptions: one name each, two sharing a UUID and a description ("twin"),
    /// one whose description reads as a UUID ("beef"), and the sink / writeCount / counter the peer's hooks know.
    static func named() -> AttributeDatabase {
        AttributeDatabase { db in
            db.service(.genericAccess)
            db.characteristic(.deviceName, [.read], value: Array("Names Peer".utf8), name: "deviceName")
            db.service(uuid(1))
            db.characteristic(uuid(2), [.read, .write], value: [0xA1], name: "alpha")
            db.descriptor(.characteristicUserDescription, value: Array("alpha".utf8))
            db.characteristic(uuid(3), [.read, .write, .notify], value: [0xB1], name: "twinA")
            db.descriptor(.characteristicUserDescription, value: Array("twin".utf8))
            db.characteristic(uuid(3), [.read, .write, .notify], value: [0xB2], name: "twinB")
            db.descriptor(.characteristicUserDescription, value: Array("twin".utf8))
            db.characteristic(uuid(9), [.read], value: [0xBE], name: "beefValue")
            db.descriptor(.characteristicUserDescription, value: Array("beef".utf8))
            db.characteristic(uuid(6), [.read, .writeWithoutResponse, .write], name: "sink")
            db.descriptor(.characteristicUserDescription, value: Array("sink".utf8))
            db.characteristic(uuid(8), [.read], value: [0, 0, 0, 0], name: "writeCount")
            db.descriptor(.characteristicUserDescription, value: Array("writeCount".utf8))
            db.characteristic(uuid(7), [.read, .notify, .indicate], value: [0], name: "counter")
            db.descriptor(.characteristicUserDescription, value: Array("counter".utf8))
        }
    }

    /// 6e40000N-b5a3-f393-e0a9-e50e24dcca9e
    static func uuid(_ n: Int) -> BluetoothUUID { BluetoothUUID(string: "6e40000\(n)-b5a3-f393-e0a9-e50e24dcca9e")! }
}

final class NameResolutionTests: XCTestCase {
    var peer: GATTPeer!

    override func setUpWithError() throws { peer = try GATTPeer(database: .named()) }
    override func tearDown() { peer.close() }

    /// The discovery requests (Part G §4.4-4.7): Find Information, Find By Type Value, Read By Type, Read By Group Type.
    var discoveryPDUs: Int {
        let seen = peer.counters.opcodes
        return [ATTOpcode.findInformationRequest, .findByTypeValueRequest, .readByTypeRequest, .readByGroupTypeRequest]
            .reduce(0) { $0 + (seen[$1.rawValue] ?? 0) }
    }

    static let knownNames = "names known: alpha, twin, beef, sink, writeCount, counter"

    func usageError(_ run: MirrorRun, file: StaticString = #filePath, line: UInt = #line) -> String {
        XCTAssertEqual(run.status, ExitStatus.usage.rawValue, run.stderr, file: file, line: line)
        XCTAssertEqual(run.stdout, "", file: file, line: line)
        return run.stderr
    }

    // MARK: - a raw handle costs no discovery

    func testARawHandleSendsNoDiscovery() throws {
        var run = try MirrorProcess.run(["read", peer.target, peer.hexHandle("alpha")])
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertEqual(run.stdout, "\(peer.hexHandle("alpha")): a1  \".\"  (1 byte)\n")
        run = try MirrorProcess.run(["write", peer.target, String(peer.handle("alpha")), "0102"])
        XCTAssertEqual(run.status, 0, run.stderr)
        run = try MirrorProcess.run(["bench", peer.target, "--handle", peer.hexHandle("sink"), "--counter", peer.hexHandle("writeCount"),
                                     "--count", "20", "--warmup", "2", "--rounds", "1", "--bare-loop", "none", "--json"])
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertEqual(discoveryPDUs, 0, "\(peer.counters.opcodes)")
        // The same read by name discovers.
        run = try MirrorProcess.run(["read", peer.target, "alpha"])
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertGreaterThan(discoveryPDUs, 0)
    }

    // MARK: - resolution by User Description and by profile name

    func testReadByUserDescriptionIsTheReadByHandle() throws {
        let byName = try MirrorProcess.run(["read", peer.target, "alpha"])
        XCTAssertEqual(byName.status, 0, byName.stderr)
        XCTAssertEqual(byName.stdout, "\(peer.hexHandle("alpha")) alpha: a1  \".\"  (1 byte)\n")
        // Exact first, else ignoring case; a JSON read of a name is the one object of a handle's read.
        let json = try MirrorProcess.run(["read", peer.target, "ALPHA", "--json"])
        XCTAssertEqual(json.status, 0, json.stderr)
        XCTAssertEqual(try json.json().compact, #"{"handle":\#(peer.handle("alpha")),"value":"a1","text":".","length":1,"name":"alpha"}"#)
        // "beef" is the UUID 0xbeef (Read By Type: the peer has none); "name:beef" is the User Description.
        let uuid = try MirrorProcess.run(["read", peer.target, "beef"])
        XCTAssertEqual(uuid.status, ExitStatus.peerError.rawValue, uuid.stderr)
        let named = try MirrorProcess.run(["read", peer.target, "name:beef"])
        XCTAssertEqual(named.status, 0, named.stderr)
        XCTAssertEqual(named.stdout, "\(peer.hexHandle("beefValue")) beef: be  \".\"  (1 byte)\n")
    }

    func testReadByUUIDStillReadsEveryValueOfIt() throws {
        let run = try MirrorProcess.run(["read", peer.target, AttributeDatabase.uuid(3).description])
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertEqual(run.stdout, "\(peer.hexHandle("twinA")): b1  \".\"  (1 byte)\n\(peer.hexHandle("twinB")): b2  \".\"  (1 byte)\n")
    }

    func testWriteByUserDescriptionAndByUUID() throws {
        var run = try MirrorProcess.run(["write", peer.target, "alpha", "0102"])
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertEqual(run.stdout, "wrote 2 bytes to \(peer.hexHandle("alpha")) (Write Request, confirmed)\n")
        XCTAssertEqual(peer.value("alpha"), [1, 2])
        run = try MirrorProcess.run(["write", peer.target, AttributeDatabase.uuid(2).description, "03", "--no-response", "--json"])
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertEqual(try run.json()["handle"], .int(Int(peer.handle("alpha"))))
    }

    func testProfileNamesResolveWithProfile() throws {
        // A profile that calls the peer's uuid(2) "cloudToken" and uuid(6) "scannerAction".
        var text = MirrorProfile.bundledJSON
        text = text.replacingOccurrences(of: "6d697272-6f72-7369-6d00-000000000003", with: AttributeDatabase.uuid(2).description)
        text = text.replacingOccurrences(of: "6d697272-6f72-7369-6d00-000000000004", with: AttributeDatabase.uuid(6).description)
        text = text.replacingOccurrences(of: "6d697272-6f72-7369-6d00-000000000001", with: AttributeDatabase.uuid(7).description)
        let path = NSTemporaryDirectory() + "mirror-names-\(getpid()).json"
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: path) }
        var run = try MirrorProcess.run(["read", peer.target, "cloudToken", "--profile", path])
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertEqual(run.stdout, "\(peer.hexHandle("alpha")) cloudToken: a1  \".\"  (1 byte)\n")
        run = try MirrorProcess.run(["write", peer.target, "scannerAction", "36", "--profile", path])
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertEqual(peer.value("sink"), [0x36])
        // The profile's name comes first in output ("notification 0x0017 scanState: 01 ...").
        run = try MirrorProcess.run(["listen", peer.target, "scanState", "--count", "1", "--profile", path])
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertTrue(run.stdout.contains("  notification \(peer.hexHandle("counter")) scanState: 01 74 69 63 6b 20 31"), run.stdout)
        // The profile's names join the user descriptions in the list of names known.
        run = try MirrorProcess.run(["read", peer.target, "gamma", "--profile", path])
        XCTAssertTrue(usageError(run).contains("names known: cloudToken, alpha, twin, beef, scannerAction, sink, writeCount, scanState, counter\n"), run.stderr)
    }

    // MARK: - ambiguity

    func testAmbiguousNamesAndUUIDsListTheCandidates() throws {
        let a = peer.hexHandle("twinA"), b = peer.hexHandle("twinB"), uuid = AttributeDatabase.uuid(3).description
        let byName = "mirror: \"twin\" names 2 characteristics of \(peer.target): \(a) \(uuid) twin, \(b) \(uuid) twin; give one by its value handle\n"
        XCTAssertEqual(usageError(try MirrorProcess.run(["read", peer.target, "twin"])), byName + "see: mirror read --help\n")
        XCTAssertEqual(usageError(try MirrorProcess.run(["write", peer.target, "twin", "01"])), byName + "see: mirror write --help\n")
        XCTAssertEqual(usageError(try MirrorProcess.run(["listen", peer.target, "twin", "--count", "1"])), byName + "see: mirror listen --help\n")
        XCTAssertEqual(usageError(try MirrorProcess.run(["bench", peer.target, "--handle", "twin", "--count", "5"])), byName + "see: mirror bench --help\n")
        let byUUID = "mirror: UUID \(uuid) names 2 characteristics of \(peer.target): \(a) \(uuid) twin, \(b) \(uuid) twin; give one by its value handle\n"
        XCTAssertEqual(usageError(try MirrorProcess.run(["write", peer.target, uuid, "01"])), byUUID + "see: mirror write --help\n")
        XCTAssertEqual(usageError(try MirrorProcess.run(["listen", peer.target, uuid])), byUUID + "see: mirror listen --help\n")
        XCTAssertEqual(usageError(try MirrorProcess.run(["bench", peer.target, "--handle", "sink", "--counter", uuid])), byUUID + "see: mirror bench --help\n")
        // Nothing was written to either.
        XCTAssertEqual(peer.value("twinA"), [0xB1])
        XCTAssertEqual(peer.value("twinB"), [0xB2])
        XCTAssertEqual(peer.counters.writeRequests, 0)
        // As JSON: a usage error with the token.
        let json = try MirrorProcess.run(["--json", "read", peer.target, "twin"])
        XCTAssertEqual(json.status, 2)
        XCTAssertEqual(try json.json()["error"]?["kind"], "usage")
        XCTAssertEqual(try json.json()["error"]?["token"], "twin")
    }

    // MARK: - unknown names

    func testUnknownNamesListTheNamesKnown() throws {
        let unknown = "mirror: no characteristic of \(peer.target) is named \"nosuch\"; \(Self.knownNames)\n"
        XCTAssertEqual(usageError(try MirrorProcess.run(["read", peer.target, "nosuch"])), unknown + "see: mirror read --help\n")
        XCTAssertEqual(usageError(try MirrorProcess.run(["write", peer.target, "nosuch", "01"])), unknown + "see: mirror write --help\n")
        XCTAssertEqual(usageError(try MirrorProcess.run(["listen", peer.target, "counter", "nosuch"])), unknown + "see: mirror listen --help\n")
        XCTAssertEqual(usageError(try MirrorProcess.run(["bench", peer.target, "--handle", "nosuch"])), unknown + "see: mirror bench --help\n")
        XCTAssertEqual(usageError(try MirrorProcess.run(["bench", peer.target, "--handle", "sink", "--counter", "nosuch"])), unknown + "see: mirror bench --help\n")
        // A name the profile gives to a UUID this peer does not have says so.
        let profileName = try MirrorProcess.run(["write", peer.target, "cloudToken", "01"])
        XCTAssertEqual(usageError(profileName),
                       "mirror: \"cloudToken\" is the profile's name for \(MirrorProfile.bundled.cloudToken), and no characteristic of \(peer.target) has that UUID; \(Self.knownNames)\nsee: mirror write --help\n")
        // A UUID the peer does not have, where one characteristic is needed.
        XCTAssertEqual(usageError(try MirrorProcess.run(["write", peer.target, "2a19", "01"])),
                       "mirror: no characteristic of \(peer.target) has UUID 2a19\nsee: mirror write --help\n")
        XCTAssertEqual(peer.counters.writeRequests, 0)
    }

    // MARK: - output names what it can

    func testListenByNameNamesEachLine() throws {
        let counter = peer.hexHandle("counter")
        var run = try MirrorProcess.run(["listen", peer.target, "counter", "--count", "3"])
        XCTAssertEqual(run.status, 0, run.stderr)
        let lines = run.stdout.split(separator: "\n")
        XCTAssertEqual(lines.count, 3, run.stdout)
        for (i, line) in lines.enumerated() {
            XCTAssertTrue(line.contains("  notification \(counter) counter: 0\(i + 1) 74 69 63 6b"), String(line))
        }
        XCTAssertTrue(run.stderr.contains("subscribed to \(counter) \(AttributeDatabase.uuid(7)) counter (notifications), current value: 00"), run.stderr)
        // By handle the line is named too (its User Description), and JSON carries "name".
        run = try MirrorProcess.run(["listen", peer.target, counter, "--count", "3", "--json"])
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertEqual(try run.jsonLines().dropFirst().dropLast().map { $0["name"] }, ["counter", "counter", "counter"],
                       "between the subscribed event and the last line")
    }

    func testBenchByName() throws {
        let run = try MirrorProcess.run(["bench", peer.target, "--handle", "sink", "--counter", "writeCount", "--count", "30",
                                         "--warmup", "2", "--rounds", "1", "--mode", "with-response", "--bare-loop", "none", "--json"])
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertEqual(try run.json()["handle"], .int(Int(peer.handle("sink"))))
        XCTAssertEqual(peer.counters.sinkWrites, 32)
    }

    // MARK: - parsing

    func testParseCharacteristicReference() throws {
        XCTAssertEqual(try parseCharacteristicReference("18"), .handle(18))
        XCTAssertEqual(try parseCharacteristicReference("0x0012"), .handle(0x12))
        XCTAssertEqual(try parseCharacteristicReference("2a00"), .uuid(.bit16(0x2A00)))
        XCTAssertEqual(try parseCharacteristicReference("uuid:1234"), .uuid(.bit16(0x1234)))
        XCTAssertEqual(try parseCharacteristicReference("6e400002-b5a3-f393-e0a9-e50e24dcca9e"), .uuid(AttributeDatabase.uuid(2)))
        XCTAssertEqual(try parseCharacteristicReference("cloudToken"), .name("cloudToken"))
        XCTAssertEqual(try parseCharacteristicReference("name:beef"), .name("beef"))
        XCTAssertEqual(try parseCharacteristicReference("Heart Rate"), .name("Heart Rate"))
        XCTAssertThrowsError(try parseCharacteristicReference("0x12g"))
        XCTAssertThrowsError(try parseCharacteristicReference("0"))
        XCTAssertThrowsError(try parseCharacteristicReference(""))
        XCTAssertThrowsError(try parseCharacteristicReference("name:"))
    }
}
