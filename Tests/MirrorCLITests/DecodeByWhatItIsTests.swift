// Issue 37 point 2: a value is named and decoded by what it is, not by how it was asked for: by UUID as by name, a
// descriptor with its characteristic, a raw handle from the GATT cache's copy (no discovery sent) or raw with a note
// saying why; `gatt --json` carries "name" where the text shows one.
import Foundation
import JSON
import TestSupport
import XCTest

final class DecodeByWhatItIsTests: XCTestCase {
    var sim: SimulatorProcess!
    var home = ""

    override func setUpWithError() throws {
        sim = try SimulatorProcess()
        home = NSTemporaryDirectory() + "mirror-decode-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: home, withIntermediateDirectories: true)
    }
    override func tearDown() {
        sim.stop()
        try? FileManager.default.removeItem(atPath: home)
    }

    /// `mirror` with the GATT cache under this test's directory.
    func mirror(_ arguments: [String]) throws -> ToolRun {
        try ToolProcess.run("mirror", arguments, environment: ["XDG_CACHE_HOME": home], timeout: 60)
    }

    /// Before: `0x000C: 00  "."  (1 byte)` by UUID, and Device Name, the CCCDs bare.
    func testAReadByUUIDIsNamedAndDecodedAsAReadByName() throws {
        let byName = try mirror(["read", sim.target, "scanState"])
        XCTAssertEqual(byName.stdout, "0x000C scanState: invalid  [00]  (1 byte)\n", byName.stderr)
        let byUUID = try mirror(["read", sim.target, "6d697272-6f72-7369-6d00-000000000001"])
        XCTAssertEqual(byUUID.status, 0, byUUID.stderr)
        XCTAssertEqual(byUUID.stdout, byName.stdout)
        XCTAssertEqual(byUUID.stderr, "")
        let deviceName = try mirror(["read", sim.target, "2a00"])
        XCTAssertEqual(deviceName.stdout, "0x0003 Device Name: \"mirror-sim\"  [6d 69 72 72 6f 72 2d 73 69 6d]  (10 bytes)\n")
        let cccds = try mirror(["read", sim.target, "uuid:2902"])
        XCTAssertEqual(cccds.status, 0, cccds.stderr)
        XCTAssertEqual(cccds.stdout, """
            0x0009 Client Characteristic Configuration of Service Changed: notifications off, indications off  [00 00]  (2 bytes)
            0x000D Client Characteristic Configuration of scanState: notifications off, indications off  [00 00]  (2 bytes)
            0x0010 Client Characteristic Configuration of scanError: notifications off, indications off  [00 00]  (2 bytes)
            0x001D Client Characteristic Configuration of wifiConnectionStatus: notifications off, indications off  [00 00]  (2 bytes)

            """)
        let json = try mirror(["read", sim.target, "6d697272-6f72-7369-6d00-000000000001", "--json"]).json()
        XCTAssertEqual(json.compact, #"{"values":[{"handle":12,"value":"00","text":".","length":1,"decoded":"invalid","name":"scanState"}]}"#)
    }

    /// A raw handle with nothing known stays raw, and a note says why and what would name it.
    func testARawHandleWithNothingKnownIsRawWithANote() throws {
        let run = try mirror(["read", sim.target, "0x000C"])
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertEqual(run.stdout, "0x000C: 00  \".\"  (1 byte)\n")
        XCTAssertEqual(run.stderr, "note: 0x000C not named or decoded: a handle is read with no discovery, and no database of this peer is known "
                       + "or cached; read it by name or UUID, or cache the database with `mirror gatt` (a peer with a Database Hash)\n")
    }

    /// With the GATT cache's copy (a peer with a Database Hash), a raw handle is named and decoded as by name, and the
    /// read still sends no discovery: the one request is the Read Request.
    func testARawHandleIsDecodedFromTheCachedDatabaseWithNoDiscovery() throws {
        let caching = try SimulatorProcess(["--caching", "yes"])
        defer { caching.stop() }
        XCTAssertEqual(try mirror(["gatt", caching.target]).status, 0)
        let byName = try mirror(["read", caching.target, "scanState"])
        XCTAssertEqual(byName.status, 0, byName.stderr)
        let handle = try XCTUnwrap(byName.stdout.split(separator: " ").first.map(String.init))
        let byHandle = try mirror(["read", caching.target, handle, "--trace"])
        XCTAssertEqual(byHandle.status, 0, byHandle.stderr)
        XCTAssertEqual(byHandle.stdout, byName.stdout)
        for discovery in ["Read By Group Type Request", "Read By Type Request", "Find Information Request", "Find By Type Value Request"] {
            XCTAssertFalse(byHandle.stderr.contains(discovery), byHandle.stderr)
        }
        XCTAssertTrue(byHandle.stderr.contains("Read Request"), byHandle.stderr)
        // A descriptor by handle, named with its characteristic; a declaration's handle is raw, the note says why.
        let cccd = String(format: "0x%04X", Int(handle.dropFirst(2), radix: 16)! + 1)
        XCTAssertEqual(try mirror(["read", caching.target, cccd]).stdout,
                       "\(cccd) Client Characteristic Configuration of scanState: notifications off, indications off  [00 00]  (2 bytes)\n")
        let declaration = String(format: "0x%04X", Int(handle.dropFirst(2), radix: 16)! - 1)
        let raw = try mirror(["read", caching.target, declaration])
        XCTAssertEqual(raw.stderr, "note: \(declaration) not named or decoded: the cached database of this peer has no characteristic value or descriptor there\n")
    }

    /// `gatt --json` has "name" wherever the text shows a name, and "decoded" with --read.
    func testGATTJSONCarriesNamesAndDecodedValues() throws {
        let json = try mirror(["gatt", sim.target, "--read", "--json"]).json()
        guard case .array(let services)? = json["services"] else { return XCTFail(json.compact) }
        XCTAssertEqual(services.map { $0["name"] }, ["Generic Access", "Generic Attribute", "mirror service"])
        let mirror = try XCTUnwrap(services[2]["characteristics"]?.items)
        XCTAssertEqual(mirror[0]["name"], "scanState")
        XCTAssertEqual(mirror[0]["decoded"], "invalid")
        XCTAssertEqual(mirror[0]["descriptors"]?[0]?["name"], "Client Characteristic Configuration")
        XCTAssertEqual(mirror[0]["descriptors"]?[0]?["decoded"], "notifications off, indications off")
        XCTAssertEqual(services[0]["characteristics"]?[0]?["name"], "Device Name")
    }
}
