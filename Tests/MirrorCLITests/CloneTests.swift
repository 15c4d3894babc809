// `mirror clone TARGET -o FILE` and `mirror-sim --from FILE` (issue 39, point 1): the device file is private and
// complete by the Database Hash, the clone serves what the device served (the same `gatt --json --read`), a clone of
// the clone is the same file, refusals are served as refused, and a redacted value keeps only its length.
import CaptureReader
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

    // MARK: - From a capture (issue 39 point 2)

    /// A capture of `gatt --read` (every procedure, every value) rebuilds the device the live clone sees, and its
    /// Database Hash proves it complete.
    func testACaptureOfEveryReadRebuildsTheDeviceALiveCloneSees() throws {
        let sim = try SimulatorProcess(["--caching", "yes"])
        defer { sim.stop() }
        let snoop = file("gatt.btsnoop")
        XCTAssertEqual(try MirrorProcess.run(["gatt", sim.target, "--read", "--no-cache", "--btsnoop", snoop]).status, 0)
        let fromCapture = file("from-capture.json"), live = file("live.json")
        let run = try MirrorProcess.run(["clone", "--from", snoop, "-o", fromCapture])
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertTrue(run.stdout.contains("complete: the Database Hash it served is the one computed over what the capture showed"), run.stdout)
        XCTAssertTrue(run.stdout.contains("the capture showed every handle range and every readable value"), run.stdout)
        _ = try clone(sim.target, live)
        let a = try deviceFile(fromCapture), b = try deviceFile(live)
        for key in ["services", "readings", "databaseHash", "characteristics", "names", "unread"] {
            XCTAssertEqual(a[key], b[key], key)
        }
    }

    /// A capture that discovered nothing, and one that read one value: what they never showed, exactly.
    func testAPartialCaptureSaysExactlyWhatItNeverSaw() throws {
        let sim = try SimulatorProcess()
        defer { sim.stop() }
        let byHandle = file("handle.btsnoop"), byName = file("name.btsnoop")
        XCTAssertEqual(try MirrorProcess.run(["read", sim.target, "0x000C", "--btsnoop", byHandle]).status, 0)
        XCTAssertEqual(try MirrorProcess.run(["read", sim.target, "scanState", "--no-cache", "--btsnoop", byName]).status, 0)
        let nothing = try MirrorProcess.run(["clone", "--from", byHandle, "-o", file("nothing.json")])
        XCTAssertEqual(nothing.status, 0, nothing.stderr)
        XCTAssertTrue(nothing.stdout.contains("services never discovered in 0x0001-0xFFFF\n"), nothing.stdout)
        let one = try MirrorProcess.run(["clone", "--from", byName, "-o", file("one.json"), "--json"])
        let json = try one.json()
        XCTAssertEqual(json["notDiscovered"]?["services"], .array([]))
        XCTAssertEqual(json["notRead"], .array([3, 5, 9, 13, 15, 16, 18, 22, 24, 26, 28, 29].map { .int($0) }))
        XCTAssertEqual(try deviceFile(file("one.json"))["readings"], .array([.object([("handle", 12), ("value", "00")])]))
        // In words, each by its name: a descriptor by its type's and its characteristic's.
        let words = try MirrorProcess.run(["clone", "--from", byName, "-o", file("one.json")])
        XCTAssertTrue(words.stdout.contains("values never read: 0x0003 (Device Name), 0x0005 (Appearance), "
                                            + "0x0009 (Client Characteristic Configuration of Service Changed), "
                                            + "0x000D (Client Characteristic Configuration of scanState), 0x000F (scanError), "), words.stdout)
    }

    /// Android's HCI snoop log (H4, datalink 1002) with L2CAP fragmented as a controller with a 27-byte ACL buffer
    /// sends it, and two connections: tshark decodes the file's ATT (an independent reader agrees it is well formed),
    /// the clone asks which connection, and either gives the clone the monitor capture gives.
    func testAnH4CaptureWithFragmentsAndTwoConnections() throws {
        let sim = try SimulatorProcess()
        defer { sim.stop() }
        let monitor = file("monitor.btsnoop")
        XCTAssertEqual(try MirrorProcess.run(["gatt", sim.target, "--read", "--no-cache", "--btsnoop", monitor]).status, 0)
        let capture = try BTSnoopCapture(path: monitor)
        let attCount = LEConnectionTracker.connections(of: capture).first?.pdus.count ?? 0
        XCTAssertGreaterThan(attCount, 20)
        let h4 = file("android.btsnoop")
        try Data(Self.h4(capture, handles: [0x0040, 0x0041])).write(to: URL(fileURLWithPath: h4))
        let reading = try CaptureReading.read(h4)
        XCTAssertEqual(reading.tsharkATT.count, 2 * attCount, "tshark decodes every ATT PDU of both connections: \(reading.tshark.stderr)")
        let ambiguous = try MirrorProcess.run(["clone", "--from", h4, "-o", file("x.json")])
        XCTAssertEqual(ambiguous.status, 2)
        XCTAssertTrue(ambiguous.stderr.contains("the capture has 2 LE connections with ATT: choose one with --connection N or ADDRESS"), ambiguous.stderr)
        XCTAssertTrue(ambiguous.stderr.contains("  2: C2:00:00:00:00:01 (random), handle 0x0041 on index 0"), ambiguous.stderr)
        let second = try MirrorProcess.run(["clone", "--from", h4, "-o", file("second.json"), "--connection", "2"])
        XCTAssertEqual(second.status, 0, second.stderr)
        let first = try MirrorProcess.run(["clone", "--from", monitor, "-o", file("first.json")])
        XCTAssertEqual(first.status, 0, first.stderr)
        let a = try deviceFile(file("first.json")), b = try deviceFile(file("second.json"))
        for key in ["services", "readings", "names", "unread"] { XCTAssertEqual(a[key], b[key], key) }
    }

    // MARK: - Behaviour replayed (issue 39 point 3)

    /// A capture of writes and the notifications they caused, replayed by `mirror-sim --from` at the recorded pace
    /// and fast: the same script gets the same answers and the same notifications in the same order.
    func testAReplayedCaptureAnswersTheSameWritesWithTheSameNotifications() throws {
        let sim = try SimulatorProcess()
        defer { sim.stop() }
        let script = "subscribe scanState\nwrite scannerAction 32\nwait --timeout 5\nwrite scannerAction 36\nwait --timeout 5\nread scanState\n"
        let snoop = file("writes.btsnoop")
        let recorded = try MirrorProcess.run(["shell", sim.target, "--btsnoop", snoop], input: script)
        XCTAssertEqual(recorded.status, 0, recorded.stderr)
        let device = file("writes.json")
        XCTAssertEqual(try MirrorProcess.run(["clone", "--from", snoop, "-o", device]).status, 0)
        XCTAssertEqual(try deviceFile(device)["behaviours"]?[1]?["then"]?[0]?["value"], "09", "initDeviceForScan without a token: ERROR")
        func notifications(_ text: String) -> [String] {
            text.split(separator: "\n").filter { $0.contains("  notification ") }.map { String($0.drop { $0 != " " }) }
        }
        XCTAssertEqual(notifications(recorded.stdout).count, 2, recorded.stdout)
        for pace in ["recorded", "fast"] {
            let replay = try SimulatorProcess(["--from", device, "--pace", pace])
            defer { replay.stop() }
            let again = try MirrorProcess.run(["shell", replay.target], input: script)
            XCTAssertEqual(again.status, 0, again.stderr)
            XCTAssertEqual(notifications(again.stdout), notifications(recorded.stdout), pace)
            XCTAssertTrue(again.stdout.hasSuffix("0x000C scanState: invalid  [00]  (1 byte)\n"), again.stdout)
        }
    }

    /// The mirror's own scan, recorded once against the simulator, replays end to end: `mirror scan` against the
    /// replayed clone completes, with the same states and errors in the same order (the upload, which no capture shows,
    /// made by the clone as the profile says and logged as a guess).
    func testTheMirrorsScanReplaysEndToEnd() throws {
        let sim = try SimulatorProcess()
        defer { sim.stop() }
        let snoop = file("scan.btsnoop"), device = file("scan.json")
        let first = try ToolProcess.run("mirror", ["scan", sim.target, "--upload-port", "0", "--btsnoop", snoop], directory: scratch)
        XCTAssertEqual(first.status, 0, first.stderr)
        XCTAssertEqual(try MirrorProcess.run(["clone", "--from", snoop, "-o", device]).status, 0)
        let replay = try SimulatorProcess(["--from", device, "--pace", "fast"])
        defer { replay.stop() }
        let second = try ToolProcess.run("mirror", ["scan", replay.target, "--upload-port", "0"], directory: scratch)
        XCTAssertEqual(second.status, 0, second.stdout + second.stderr)
        func states(_ text: String) -> [String] {
            text.split(separator: "\n").filter { $0.contains("NOTIFY ") || $0.contains(": complete") }
                .map { String($0.trimmingCharacters(in: .whitespaces).drop { $0 != " " }).replacingOccurrences(of: #"^ [0-9a-f]+: complete$"#, with: " SCAN: complete", options: .regularExpression) }
        }
        XCTAssertEqual(states(second.stdout), states(first.stdout))
        XCTAssertGreaterThanOrEqual(states(first.stdout).count, 9, first.stdout)
    }

    /// `capture` as Android writes its snoop log: H4 records (a type byte; flags bit 0 set on what the controller
    /// sent up), each ACL packet cut into 27-byte fragments (Core Spec 5.4 Vol 4 Part E §5.4.2: the first with packet
    /// boundary 0b10, the rest 0b01), once per handle in `handles`, as successive connections.
    static func h4(_ capture: BTSnoopCapture, handles: [UInt16]) -> [UInt8] {
        func be32(_ v: UInt32) -> [UInt8] { [UInt8(v >> 24), UInt8(v >> 16 & 0xFF), UInt8(v >> 8 & 0xFF), UInt8(v & 0xFF)] }
        var out = Array("btsnoop\0".utf8) + be32(1) + be32(1002)
        func record(_ bytes: [UInt8], received: Bool) {
            out += be32(UInt32(bytes.count)) + be32(UInt32(bytes.count)) + be32(received ? 1 : 0) + be32(0)
            out += [0x00, 0xE0, 0x3B, 0x6F, 0x00, 0x00, 0x00, 0x00] + bytes
        }
        for handle in handles {
            for p in capture.packets {
                switch p.kind {
                case .command: record([0x01] + p.bytes, received: false)
                case .event:
                    var e = p.bytes
                    if e.count >= 5, e[0] == 0x3E, e[2] == 0x01 || e[2] == 0x0A { e[4] = UInt8(handle & 0xFF); e[5] = UInt8(handle >> 8) }
                    if e.count >= 5, e[0] == 0x05 { e[3] = UInt8(handle & 0xFF); e[4] = UInt8(handle >> 8) }
                    record([0x04] + e, received: true)
                case .aclSent, .aclReceived:
                    let data = Array(p.bytes.dropFirst(4))
                    var offset = 0
                    repeat {
                        let part = data[offset..<min(offset + 27, data.count)]
                        let boundary: UInt8 = offset == 0 ? 0b10 : 0b01
                        record([0x02, UInt8(handle & 0xFF), UInt8(handle >> 8) | boundary << 4, UInt8(part.count), 0] + part,
                               received: p.kind == .aclReceived)
                        offset += 27
                    } while offset < data.count
                }
            }
            // The link ends before the next one opens (Disconnection Complete, reason 0x13).
            record([0x04, 0x05, 0x04, 0x00, UInt8(handle & 0xFF), UInt8(handle >> 8), 0x13], received: true)
        }
        return out
    }
}
