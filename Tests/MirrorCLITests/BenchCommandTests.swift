// `mirror bench` against the scripted peer: both modes in one run, the figures' shape, the peer's counts, and the
// ratio to the bare socket loop.
import XCTest
import MirrorCommandLine

final class BenchCommandTests: XCTestCase {
    var peer: ScriptedPeer!

    override func setUpWithError() throws { peer = try ScriptedPeer() }
    override func tearDown() { peer.close() }

    func testBothModesInOneRunAsJSON() throws {
        let run = try MirrorProcess.run(["bench", peer.target, "--handle", peer.hexHandle("sink"), "--count", "300",
                                         "--warmup", "20", "--size", "100", "--counter", peer.hexHandle("writeCount"), "--json"])
        XCTAssertEqual(run.status, 0, run.stderr)
        let json = try run.json()
        XCTAssertEqual(json["size"], 100)
        XCTAssertEqual(json["mtu"], 247)
        let request = json["modes"]?[0]
        let command = json["modes"]?[1]
        XCTAssertEqual(request?["mode"], "with-response")
        XCTAssertEqual(request?["writes"], 300)
        XCTAssertEqual(request?["bytes"], 30000)
        XCTAssertEqual(request?["confirmed"], 300)
        for key in ["p50", "p90", "p99", "max"] {
            guard case .double(let v)? = request?["latencyMicroseconds"]?[key] else { return XCTFail("latency \(key): \(run.stdout)") }
            XCTAssertGreaterThan(v, 0)
        }
        XCTAssertEqual(command?["mode"], "without-response")
        XCTAssertEqual(command?["writes"], 300)
        XCTAssertEqual(command?["confirmed"], 300, "the peer counted every Write Command")
        XCTAssertNotNil(command?["backpressure"]?["seconds"])
        for mode in [request, command] {
            guard case .double(let ratio)? = mode?["ratioToBare"] else { return XCTFail("no ratio: \(run.stdout)") }
            XCTAssertGreaterThan(ratio, 0)
            XCTAssertEqual(mode?["bare"]?["writes"], 300)
        }
        // Everything the CLI and the bare loop sent arrived: warm-ups, measured writes and the bare loop's own.
        XCTAssertEqual(peer.counters.writeCommands, 20 + 300 + 20 + 300)
    }

    func testTextAndDurationAndSingleMode() throws {
        let run = try MirrorProcess.run(["bench", peer.target, "--handle", peer.hexHandle("sink"), "--duration", "0.3",
                                         "--mode", "without-response"])
        XCTAssertEqual(run.status, 0, run.stderr)
        let lines = run.stdout.split(separator: "\n").map(String.init)
        XCTAssertTrue(lines[0].hasPrefix("bench \(peer.target) handle \(peer.hexHandle("sink")): 244-byte values, MTU 247"), run.stdout)
        XCTAssertTrue(lines[1].hasPrefix("without response (Write Command): "), run.stdout)
        XCTAssertFalse(run.stdout.contains("with response (Write Request)"))
        XCTAssertTrue(lines.contains { $0.hasPrefix("  waiting on backpressure: ") }, run.stdout)
        XCTAssertTrue(lines.contains { $0.hasPrefix("  bare socket loop: ") && $0.contains("mirror/bare = ") }, run.stdout)
    }

    func testBenchRefusesAValueOverTheBudget() throws {
        let run = try MirrorProcess.run(["bench", peer.target, "--handle", peer.hexHandle("sink"), "--size", "300", "--mtu", "100"])
        XCTAssertEqual(run.status, 4, run.stderr)
        XCTAssertEqual(run.stderr.split(separator: "\n").first.map(String.init),
                       "mirror: not sent: 300-byte value exceeds the 97-byte budget of MTU 100 (local limit)")
    }
}
