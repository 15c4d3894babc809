// The built `mirror` against the mirror simulator `mirror-sim` (a separate process) on a unix: socket.
import Foundation
import JSON
import XCTest
import MirrorCommandLine
import TestSupport

/// A running `mirror-sim`, started on a fresh socket path; ready once it says it listens.
final class SimulatorProcess {
    let path: String
    let tool: BackgroundTool

    /// `path`: the socket (default: a fresh one), so that a test can restart a simulator where another was.
    init(_ extra: [String] = [], path: String = temporarySocketPath("mirror-cli-sim")) throws {
        self.path = path
        tool = try BackgroundTool("mirror-sim", ["unix:\(path)"] + extra, readyWhen: "listening on unix:\(path)", stderrToo: true)
    }

    var target: String { "unix:\(path)" }

    func stop() {
        tool.stop()
        try? FileManager.default.removeItem(atPath: path)
    }
}

final class SimulatorTests: XCTestCase {
    var sim: SimulatorProcess!

    // A mirror whose own cloudToken limit is 40 bytes, as in the issue that fixed the error's wording.
    override func setUpWithError() throws { sim = try SimulatorProcess(["--token-limit", "40"]) }
    override func tearDown() { sim.stop() }

    /// The value handle of a mirror characteristic, from `mirror gatt --json` and the bundled profile's UUIDs.
    func valueHandle(_ uuid: String) throws -> Int {
        let json = try MirrorProcess.run(["gatt", sim.target, "--json"]).json()
        guard case .array(let services)? = json["services"] else {
            XCTFail("no services in \(json.compact)")
            return 0
        }
        for s in services {
            guard case .array(let chars)? = s["characteristics"] else { continue }
            for c in chars where c["uuid"] == .string(uuid) {
                if case .int(let h)? = c["valueHandle"] { return h }
            }
        }
        XCTFail("no characteristic \(uuid)")
        return 0
    }

    func testGATTShowsTheMirrorServiceWithProfileNames() throws {
        let run = try MirrorProcess.run(["gatt", sim.target])
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertTrue(run.stdout.contains(" mirror service  handles "), run.stdout)
        for name in ["scanState", "scanError", "cloudToken", "scannerAction"] {
            XCTAssertTrue(run.stdout.contains(" \(name)  handle 0x"), "\(name) in \(run.stdout)")
        }
        let json = try MirrorProcess.run(["gatt", sim.target, "--json"]).json()
        XCTAssertEqual(json["mtu"], 517)
        XCTAssertEqual(json["services"]?[0]?["uuid"], "1800")
    }

    func testTheIssuesExactCloudTokenError() throws {
        let cloudToken = try valueHandle("6d697272-6f72-7369-6d00-000000000003")
        let handle = String(format: "0x%04X", cloudToken)
        let run = try MirrorProcess.run(["write", sim.target, handle, String(repeating: "41", count: 41), "--mtu", "247"])
        XCTAssertEqual(run.status, 3)
        XCTAssertEqual(run.stderr.split(separator: "\n").first.map(String.init),
                       "mirror: ATT error 0x0D Invalid Attribute Value Length from the peer, on Write Request to handle \(handle) (cloudToken): 41-byte value, within the 244-byte budget of MTU 247, so the peripheral rejected it at the application layer")
        let local = try MirrorProcess.run(["write", sim.target, handle, String(repeating: "41", count: 600), "--mtu", "247"])
        XCTAssertEqual(local.status, 4)
        XCTAssertEqual(local.stderr.split(separator: "\n").first.map(String.init),
                       "mirror: not sent: 600-byte value exceeds the 244-byte budget of MTU 247 (local limit)")
    }

    /// mirror-sim --secure: the peer's refusal as `mirror` prints it (0x05, 0x0F); --unix-security: the link a unix:
    /// connection plays, enough to be served.
    func testSecureRefusesUntilTheLinkAUnixConnectionPlaysIsEnough() throws {
        let secured = try SimulatorProcess(["--secure", "cloudToken:authenticated", "--secure", "deviceName"])
        defer { secured.stop() }
        let token = try MirrorProcess.run(["read", secured.target, "cloudToken"])
        XCTAssertEqual(token.status, 3)
        XCTAssertTrue(token.stderr.hasPrefix("mirror: ATT error 0x05 Insufficient Authentication from the peer, on Read Request to handle "), token.stderr)
        let name = try MirrorProcess.run(["read", secured.target, "0x0003"])
        XCTAssertEqual(name.status, 3)
        XCTAssertTrue(name.stderr.hasPrefix("mirror: ATT error 0x0F Insufficient Encryption from the peer, on Read Request to handle 0x0003"), name.stderr)
        let played = try SimulatorProcess(["--secure", "cloudToken:authenticated:16", "--unix-security", "authenticated"])
        defer { played.stop() }
        let served = try MirrorProcess.run(["write", played.target, "cloudToken", "text:http://h/"])
        XCTAssertEqual(served.status, 0, served.stderr)
        let bad = try ToolProcess.run("mirror-sim", ["unix:/tmp/never.sock", "--secure", "cloudToken:secret"])
        XCTAssertEqual(bad.status, 2)
        XCTAssertTrue(bad.stderr.hasPrefix("mirror-sim: --secure cloudToken:secret: secret is neither encrypted or authenticated nor a key size (7...16)"), bad.stderr)
    }

    func testProfileNamesWhereverAHandleGoes() throws {
        let cloudToken = String(format: "0x%04X", try valueHandle("6d697272-6f72-7369-6d00-000000000003"))
        let scanState = String(format: "0x%04X", try valueHandle("6d697272-6f72-7369-6d00-000000000001"))
        let scannerAction = String(format: "0x%04X", try valueHandle("6d697272-6f72-7369-6d00-000000000004"))
        // The issue's error, by name: the same sentence as by handle.
        let write = try MirrorProcess.run(["write", sim.target, "cloudToken", String(repeating: "41", count: 41), "--mtu", "247"])
        XCTAssertEqual(write.status, 3)
        XCTAssertEqual(write.stderr.split(separator: "\n").first.map(String.init),
                       "mirror: ATT error 0x0D Invalid Attribute Value Length from the peer, on Write Request to handle \(cloudToken) (cloudToken): 41-byte value, within the 244-byte budget of MTU 247, so the peripheral rejected it at the application layer")
        let byName = try MirrorProcess.run(["read", sim.target, "scanState"])
        XCTAssertEqual(byName.status, 0, byName.stderr)
        XCTAssertEqual(byName.stdout, "\(scanState) scanState: invalid  [00]  (1 byte)\n", "named and decoded")
        // A raw handle discovers nothing, so it has no name to decode by: the same value, as bytes.
        XCTAssertEqual(try MirrorProcess.run(["read", sim.target, scanState]).stdout, "\(scanState): 00  \".\"  (1 byte)\n")
        let cancel = try MirrorProcess.run(["write", sim.target, "scannerAction", "36"])
        XCTAssertEqual(cancel.status, 0, cancel.stderr)
        XCTAssertEqual(cancel.stdout, "wrote 1 byte to \(scannerAction) (Write Request, confirmed)\n")
        let bench = try MirrorProcess.run(["bench", sim.target, "--handle", "cloudToken", "--size", "20", "--count", "50", "--rounds", "1",
                                           "--warmup", "5", "--bare-loop", "none", "--json"])
        XCTAssertEqual(bench.status, 0, bench.stderr)
        XCTAssertEqual(try bench.json()["handle"], .int(Int(cloudToken.dropFirst(2), radix: 16)!))
        // The simulator has no user descriptions: the names known are the profile's, in handle order.
        let unknown = try MirrorProcess.run(["read", sim.target, "scanStat"])
        XCTAssertEqual(unknown.status, 2)
        XCTAssertEqual(unknown.stderr, "mirror: no characteristic of \(sim.target) is named \"scanStat\"; names known: scanState, scanError, cloudToken, scannerAction, wifiNumNetworks, wifiNetworkSSIDEnum, wifiSetSSID, wifiConnectionStatus\nsee: mirror read --help\n")
    }

    func testReadMTUAndBench() throws {
        let read = try MirrorProcess.run(["read", sim.target, "2a00", "--json"])
        XCTAssertEqual(read.status, 0, read.stderr)
        XCTAssertNotNil(try read.json()["values"]?[0]?["text"])
        let mtu = try MirrorProcess.run(["mtu", sim.target, "--mtu", "247", "--json"])
        XCTAssertEqual(try mtu.json()["serverRxMTU"], 517)
        XCTAssertEqual(try mtu.json()["mtu"], 247)
        let cloudToken = try valueHandle("6d697272-6f72-7369-6d00-000000000003")
        let bench = try MirrorProcess.run(["bench", sim.target, "--handle", String(cloudToken), "--size", "20", "--count", "500", "--rounds", "1", "--json"])
        XCTAssertEqual(bench.status, 0, bench.stderr)
        let json = try bench.json()
        XCTAssertEqual(json["modes"]?[0]?["mode"], "with-response")
        XCTAssertEqual(json["modes"]?[0]?["confirmed"], 500)
        XCTAssertEqual(json["modes"]?[1]?["mode"], "without-response")
        XCTAssertEqual(json["modes"]?[1]?["writes"], 500)
        XCTAssertNotNil(json["modes"]?[1]?["ratioToBare"])
    }
}
