// `mirror link` and the link options against a unix: peer (no radio): every value unknown with that reason, the
// options reported as not asked, exit 0; out-of-range options are bad usage. The LE link itself is the VM's
// (tools/vm/scenarios/link.sh).
import TestSupport
import JSON
import XCTest

final class LinkCommandTests: XCTestCase {
    var peer: GATTPeer!

    override func setUpWithError() throws { peer = try GATTPeer() }
    override func tearDown() { peer.close() }

    func testLinkOverAUnixSocketSaysThereIsNoRadioLink() throws {
        let run = try MirrorProcess.run(["link", peer.target])
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertEqual(run.stdout, "link to \(peer.target): none (a unix socket has no radio link)\n  ATT MTU             247\n")

        let json = try MirrorProcess.run(["link", peer.target, "--json", "--interval", "7.5", "--phy", "2m"])
        XCTAssertEqual(json.status, 0, json.stderr)
        let j = try json.json()
        XCTAssertEqual(j["target"]?.string, peer.target)
        let link = try XCTUnwrap(j["link"])
        for key in ["handle", "role", "intervalMs", "peripheralLatency", "supervisionTimeoutMs", "txPHY", "rxPHY",
                    "dataLength", "securityLevel", "encrypted", "adapterLEBuffers"] {
            XCTAssertEqual(link[key]?["unknown"]?.string, "not an LE link (\(peer.target) has no radio)", key)
        }
        XCTAssertEqual(link["attMTU"]?["value"], 247)
        let requests = try XCTUnwrap(link["requests"])
        XCTAssertEqual(requests[0]?["asked"], "--interval 7.5")
        XCTAssertEqual(requests[0]?["result"], "notAsked")
        XCTAssertEqual(requests[0]?["detail"]?.string, "\(peer.target) is a unix socket, with no radio link")
        XCTAssertEqual(requests[1]?["asked"], "--phy 2m")
        XCTAssertEqual(json.stderr, "", "--json carries the requests in the link object, not on stderr")
    }

    /// Any connecting command takes the options; what they came to is on stderr, and the command goes on.
    func testOtherCommandsReportTheLinkOptionsAndGoOn() throws {
        let run = try MirrorProcess.run(["read", peer.target, peer.hexHandle("sink"), "--data-length", "251"])
        XCTAssertEqual(run.status, 0, run.stderr)
        // And the note that a raw handle with no database known is not decoded (issue 37).
        XCTAssertEqual(run.stderr, "link: --data-length 251: not asked: \(peer.target) is a unix socket, with no radio link\n"
                       + "note: \(peer.hexHandle("sink")) not named or decoded: a handle is read with no discovery, and no database of this peer is known or "
                       + "cached; read it by name or UUID, or cache the database with `mirror gatt` (a peer with a Database Hash)\n")
        let bench = try MirrorProcess.run(["bench", peer.target, "--handle", peer.hexHandle("sink"), "--count", "20",
                                           "--warmup", "2", "--rounds", "1", "--bare-loop", "none", "--json"])
        XCTAssertEqual(bench.status, 0, bench.stderr)
        XCTAssertEqual(try bench.json()["link"]?["attMTU"]?["value"], 247)
    }

    func testOutOfRangeLinkOptionsAreBadUsageNamingTheRange() throws {
        for (args, message) in [
            (["--interval", "5"], "mirror: --interval: invalid connection interval \"5\": 5 ms is outside 7.5-4000 ms in steps of 1.25 ms"),
            (["--data-length", "300"], "mirror: --data-length: invalid data length \"300\": must be 27-251"),
            (["--supervision-timeout", "50"], "mirror: --supervision-timeout: invalid supervision timeout \"50\": must be 100-32000"),
        ] {
            let run = try MirrorProcess.run(["link", peer.target] + args)
            XCTAssertEqual(run.status, 2, run.stderr)
            XCTAssertEqual(run.stderr.split(separator: "\n").first.map(String.init), message)
        }
    }
}
