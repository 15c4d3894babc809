// `mirror clone TARGET -o FILE` and `mirror-sim --from FILE` (issue 39, point 1): the device file is private and
// complete by the Database Hash, the clone serves what the device served (the same `gatt --json --read`), a clone of
// the clone is the same file, refusals are served as refused, and a redacted value keeps only its length.
import Foundation
import JSON
import TestSupport
import XCTest

final class CloneTests: XCTestCase {
    var scratch: URL!

    override func setUpWithError() throws {
        scratch = FileManager.default.temporaryDirectory.appendingPathComponent("clone-tests-\(getpid())-\(UInt32.random(in: 0...UInt32.max))")
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
    }

    override func tearDown() { try? FileManager.default.removeItem(at: scratch) }

    private func file(_ name: String) -> String { scratch.appendingPathComponent(name).path }

    private func clone(_ target: String, _ output: String, _ extra: [String] = []) throws -> MirrorRun {
        let run = try MirrorProcess.run(["clone", target, "-o", output] + extra)
        XCTAssertEqual(run.status, 0, run.stderr)
        return run
    }

    private func deviceFile(_ path: String) throws -> JSONValue {
        try parseJSON(String(decoding: try Data(contentsOf: URL(fileURLWithPath: path)), as: UTF8.self))
    }

    func testTheSimulatorsCloneIsCompletePrivateAndServesTheSameDatabase() throws {
        let sim = try SimulatorProcess(["--caching", "yes"])
        defer { sim.stop() }
        let first = file("sim.json")
        let run = try clone(sim.target, first)
        XCTAssertTrue(run.stdout.contains("complete: the Database Hash it serves is the one computed over what was found"), run.stdout)
        let mode = try FileManager.default.attributesOfItem(atPath: first)[.posixPermissions] as? Int
        XCTAssertEqual(mode, 0o600, "the device file is private")
        let json = try deviceFile(first)
        XCTAssertEqual(json["databaseHash"]?["complete"], .bool(true))
        XCTAssertNotNil(json["databaseHash"]?["served"]?.string)
        XCTAssertEqual(json["characteristics"]?["scanState"], "6d697272-6f72-7369-6d00-000000000001", "a superset of the profile schema")
        XCTAssertEqual(json["unread"], .array([]))

        let served = try SimulatorProcess(["--from", first])
        defer { served.stop() }
        let original = try MirrorProcess.run(["gatt", sim.target, "--json", "--read", "--no-cache"])
        let replica = try MirrorProcess.run(["gatt", served.target, "--json", "--read", "--no-cache"])
        XCTAssertEqual(replica.status, 0, replica.stderr)
        XCTAssertEqual(try original.json(), try replica.json(), "gatt --json --read against the clone is what it is against the device")

        // The clone of the clone: the same file but for where it came from.
        let second = file("clone-of-clone.json")
        _ = try clone(served.target, second)
        func withoutSource(_ v: JSONValue) -> [(String, JSONValue)] { (v.fields ?? []).filter { $0.0 != "source" } }
        let a = withoutSource(try deviceFile(first)), b = withoutSource(try deviceFile(second))
        XCTAssertEqual(a.map(\.0), b.map(\.0))
        XCTAssertEqual(a.map(\.1), b.map(\.1))
    }

    func testARedactedValueKeepsOnlyItsLength() throws {
        let sim = try SimulatorProcess()
        defer { sim.stop() }
        XCTAssertEqual(try MirrorProcess.run(["write", sim.target, "cloudToken", "text:top-secret-token"]).status, 0)
        let path = file("redacted.json")
        _ = try clone(sim.target, path, ["--redact", "cloudToken"])
        let text = String(decoding: try Data(contentsOf: URL(fileURLWithPath: path)), as: UTF8.self)
        XCTAssertFalse(text.contains(Array("top-secret-token".utf8).map { String(format: "%02x", $0) }.joined()), "the secret's bytes are not in the file")
        XCTAssertTrue(text.contains("\"redacted\": true"), text)
        let served = try SimulatorProcess(["--from", path])
        defer { served.stop() }
        let read = try MirrorProcess.run(["read", served.target, "0x0012"])
        XCTAssertTrue(read.stdout.contains("(16 bytes)"), read.stdout)
        XCTAssertTrue(read.stdout.contains(String(repeating: "00 ", count: 15) + "00"), read.stdout)
    }

    func testARefusalIsKeptAndServedAsTheDeviceAnsweredIt() throws {
        // cloudToken asks for an encrypted link; a unix: connection plays an unencrypted one: 0x0F.
        let sim = try SimulatorProcess(["--secure", "cloudToken:encrypted"])
        defer { sim.stop() }
        let path = file("refused.json")
        let run = try clone(sim.target, path)
        XCTAssertTrue(run.stdout.contains("(1 refused)"), run.stdout)
        XCTAssertTrue(run.stdout.contains("completeness unknown: it serves no Database Hash"), run.stdout)
        XCTAssertEqual(try deviceFile(path)["databaseHash"]?["complete"], .null)
        let served = try SimulatorProcess(["--from", path])
        defer { served.stop() }
        let read = try MirrorProcess.run(["read", served.target, "0x0012"])
        XCTAssertEqual(read.status, 3, read.stderr)
        XCTAssertTrue(read.stderr.contains("ATT error 0x0F Insufficient Encryption from the peer"), read.stderr)
    }

    func testUsageAndRefusedOptions() throws {
        let sim = try SimulatorProcess()
        defer { sim.stop() }
        let noOutput = try MirrorProcess.run(["clone", sim.target])
        XCTAssertEqual(noOutput.status, 2)
        XCTAssertTrue(noOutput.stderr.contains("needs -o FILE"), noOutput.stderr)
        let withMirrorOption = try ToolProcess.run("mirror-sim", ["unix:" + file("x.sock"), "--from", file("none.json"), "--scale", "misaligned"])
        XCTAssertEqual(withMirrorOption.status, 2)
        XCTAssertTrue(withMirrorOption.stderr.contains("--scale is not taken with it"), withMirrorOption.stderr)
        let missing = try ToolProcess.run("mirror-sim", ["unix:" + file("y.sock"), "--from", file("none.json")])
        XCTAssertEqual(missing.status, 2)
        XCTAssertTrue(missing.stderr.contains("cannot read the device file"), missing.stderr)
    }

    /// `--diff FILE TARGET`: nothing against the device the clone was made of; a written value by name, against the
    /// device now and against a second clone; a property change between two clones.
    func testDiffNamesWhatChangedAgainstADeviceOrAnotherClone() throws {
        let sim = try SimulatorProcess()
        defer { sim.stop() }
        let before = file("before.json")
        _ = try clone(sim.target, before)
        let same = try MirrorProcess.run(["clone", "--diff", before, sim.target])
        XCTAssertEqual(same.status, 0, same.stderr)
        XCTAssertTrue(same.stdout.hasPrefix("no difference between \(before)"), same.stdout)
        XCTAssertEqual(try MirrorProcess.run(["write", sim.target, "cloudToken", "text:hello"]).status, 0)
        let live = try MirrorProcess.run(["clone", "--diff", before, sim.target])
        XCTAssertEqual(live.stdout, "value of 0x0012 (cloudToken): [] -> [68 65 6c 6c 6f]\n")
        let after = file("after.json")
        _ = try clone(sim.target, after)
        let files = try MirrorProcess.run(["clone", "--diff", before, after, "--json"])
        XCTAssertEqual(try files.json()["values"]?[0]?["name"], "cloudToken")
        // A characteristic's properties changed: scanState (0x000C) without notify (0x12 -> 0x02).
        var json = try deviceFile(after)
        json = rewrite(json) { path, v in path.hasSuffix("valueHandle=12/properties") ? .int(2) : v }
        let third = file("third.json")
        try (json.pretty + "\n").write(toFile: third, atomically: true, encoding: .utf8)
        let props = try MirrorProcess.run(["clone", "--diff", after, third])
        XCTAssertEqual(props.status, 0, props.stderr)
        XCTAssertTrue(props.stdout.contains("properties of 0x000C (scanState): read, notify -> read"), props.stdout)
        let both = try MirrorProcess.run(["clone", "--diff", before, sim.target, "-o", third])
        XCTAssertEqual(both.status, 2, "--diff writes nothing: -o is refused with it")
    }

    /// `v` with each value replaced by `change(path, value)`; a characteristic's path names its valueHandle.
    private func rewrite(_ v: JSONValue, path: String = "", _ change: (String, JSONValue) -> JSONValue) -> JSONValue {
        switch v {
        case .object(let fields):
            let here = fields.first { $0.0 == "valueHandle" }.flatMap { $0.1.integer }.map { path + "/valueHandle=\($0)" } ?? path
            return .object(fields.map { ($0.0, rewrite($0.1, path: here + "/" + $0.0, change)) })
        case .array(let items): return .array(items.map { rewrite($0, path: path, change) })
        default: return change(path, v)
        }
    }
}
