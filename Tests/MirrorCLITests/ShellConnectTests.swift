// `mirror shell`'s connect [TARGET] [connection options]: the options parsed by the one parser, laid over the
// shell's for that connection; a bare connect connects as the last one did; a bad option leaves the connection.
import Foundation
import JSON
import MirrorCommandLine
import TestSupport
import XCTest

extension ShellTests {
    func testConnectTakesTheConnectionOptionsForThatConnection() throws {
        // The peer's server Rx MTU is 247: the MTU is the client's offer wherever it is lower.
        let script = """
            mtu
            connect --mtu 100
            mtu
            disconnect
            connect
            mtu
            connect \(peer.target)
            mtu
            connect --mtu 5
            mtu
            connect --json --mtu 64

            """
        let run = try MirrorProcess.run(["shell", peer.target, "--mtu", "200", "--keep-going"], input: script)
        XCTAssertEqual(run.status, 2, "the bad --mtu is bad usage: \(run.stderr)")
        let mtus = run.stdout.split(separator: "\n").filter { $0.hasPrefix("client Rx MTU ") }.map(String.init)
        XCTAssertEqual(mtus, ["client Rx MTU 200, server Rx MTU 247: MTU 200", "client Rx MTU 100, server Rx MTU 247: MTU 100",
                              "client Rx MTU 100, server Rx MTU 247: MTU 100", "client Rx MTU 200, server Rx MTU 247: MTU 200",
                              "client Rx MTU 200, server Rx MTU 247: MTU 200"],
                       "the line's --mtu for its connection; a bare connect as the last; a TARGET with the shell's; a bad one changes nothing")
        XCTAssertTrue(run.stdout.contains("> connect --mtu 100\nconnected to \(peer.target): MTU 100\n"), run.stdout)
        let oneShot = try MirrorProcess.run(["read", peer.target, "3", "--mtu", "5"])
        XCTAssertEqual(oneShot.status, 2)
        XCTAssertTrue(run.stderr.contains(oneShot.stderr.replacingOccurrences(of: "see: mirror read --help", with: "see: help connect")),
                      "the one parser's error: \(oneShot.stderr) in \(run.stderr)")
        let json = try parseJSON(String(run.stdout.split(separator: "\n").last ?? ""))
        XCTAssertEqual(json["connected"], .string(peer.target))
        XCTAssertEqual(json["mtu"], 64)
        XCTAssertEqual(peer.counters.connections, 5)
    }

    func testConnectsLinkTraceAndBTSnoopOptions() throws {
        let dir = try scratchDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let snoop = dir + "/connect.btsnoop"
        let run = try MirrorProcess.run(["shell", peer.target], input: "connect --interval 7.5 --trace --btsnoop \(snoop)\nread 0x0003\n")
        XCTAssertEqual(run.status, 0, run.stderr)
        // As one-shot says of link options over unix:, on stderr; --trace from the connect's first PDU.
        let oneShot = try MirrorProcess.run(["mtu", peer.target, "--interval", "7.5"])
        let linkLine = try XCTUnwrap(oneShot.stderr.split(separator: "\n").first { $0.hasPrefix("link: --interval 7.5: not asked: ") })
        XCTAssertTrue(run.stderr.contains(linkLine + "\n"), run.stderr)
        XCTAssertTrue(run.stderr.contains("> Exchange MTU Request client Rx MTU 517"), run.stderr)
        XCTAssertTrue(run.stderr.contains("> Read Request handle 0x0003"), "trace stays on: \(run.stderr)")
        XCTAssertEqual(try tsharkATT(snoop).map { $0[1] }, ["0x02", "0x03", "0x0a", "0x0b"], "the capture from the connect on")
        try assertReadersOpen(snoop)
        let bad = try MirrorProcess.run(["shell", peer.target], input: "connect --phy 3m\n")
        XCTAssertEqual(bad.status, 2)
        XCTAssertTrue(bad.stderr.contains("mirror: --phy: invalid PHY \"3m\""), bad.stderr)
    }

    func testALinesGivenOptionsAreLaidOverTheShellsEvenAtTheirDefaults() throws {
        let connect = CommandSpec(name: "connect", summary: "", positionals: [PositionalSpec("TARGET", optional: true, help: "")],
                                  globals: GlobalOptionName.connection, examples: [])
        guard case .run(_, let args, let line) = try parseCommandLine(["connect", "--timeout", "30", "--phy", "2m", "--json"], commands: [connect]) else {
            return XCTFail("not a command to run")
        }
        XCTAssertEqual(args.givenGlobals, [.timeout, .phy, .json])
        var shell = GlobalOptions(adapter: "hci1", timeout: 5, mtu: 100, trace: true)
        shell.link.latency = 4
        let merged = shell.overlaid(by: line, given: args.givenGlobals)
        XCTAssertEqual(merged.timeout, 30, "--timeout 30 was given, though 30 is the default")
        XCTAssertEqual(merged.link.phy, .le2M)
        XCTAssertEqual(merged.link.latency, 4)
        XCTAssertEqual(merged.adapter, "hci1")
        XCTAssertEqual(merged.mtu, 100)
        XCTAssertTrue(merged.trace && merged.json)
    }

    func testAConnectLinesProfileIsTheOneItsCommandsUse() throws {
        let sim = try simulator()
        defer { sim.stop() }
        let dir = try scratchDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        // The bundled profile with a cloudToken limit too small for any upload URL.
        let bundled = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../profiles/mirror-sim.json")
        let small = dir + "/small.json"
        let text = try String(contentsOf: bundled, encoding: .utf8)
        try text.replacingOccurrences(of: "\"cloudTokenMaxLength\": 40", with: "\"cloudTokenMaxLength\": 10")
            .write(toFile: small, atomically: true, encoding: .utf8)
        let scan = "scan --upload-dir \(dir) --upload-port 0 --settle 0.05"
        let run = try MirrorProcess.run(["shell", sim.target], input: "connect --profile \(small)\n\(scan)\n", timeout: 60)
        XCTAssertEqual(run.status, 4, "refused locally, as one-shot with that profile: \(run.stdout)")
        XCTAssertTrue(run.stdout.contains("over the profile's cloudTokenMaxLength 10"), run.stdout)
        let oneShot = try MirrorProcess.run(["scan", sim.target, "--profile", small, "--upload-dir", dir, "--upload-port", "0"])
        XCTAssertEqual(oneShot.status, 4, oneShot.stdout)
    }
}
