// `mirror-sim --list-faults` and the `--fault RULE-ID` example of `mirror-sim --help`, as processes.
import Foundation
import JSON
import XCTest
import TestSupport

final class SimulatorFaultTests: XCTestCase {
    /// Each conformance fault is one line (its id, then what it breaks), then the per-characteristic forms.
    func testListFaultsPrintsEveryRuleIdThenTheCharacteristicForms() throws {
        let run = try ToolProcess.run("mirror-sim", ["--list-faults"])
        XCTAssertEqual(run.status, 0, run.stderr)
        let lines = run.stdout.split(separator: "\n").map(String.init)
        let ids = lines.prefix { !$0.isEmpty && !$0.hasPrefix("once,") }.map { String($0.prefix { $0 != " " }) }
        XCTAssertEqual(Array(ids.prefix(3)), ["invalid-handle-zero", "invalid-handle-past-end", "error-echo"])
        XCTAssertTrue(ids.contains("cccd-present") && ids.contains("read-blob-past-end"), "\(ids)")
        XCTAssertTrue(run.stdout.contains("\n  drop:CHAR[@N] "), run.stdout)
        // mirror-sim --help names the option.
        let help = try ToolProcess.run("mirror-sim", ["--help"])
        XCTAssertTrue(help.stdout.contains("--list-faults"), help.stdout)
        XCTAssertTrue(help.stdout.contains("e.g. --fault cccd-present: scanState"), help.stdout)
    }

    /// The help's example: `--fault cccd-present` serves scanState (Read, Notify) without a CCCD; the other notifying
    /// characteristics keep theirs, and without the fault scanState has one.
    func testFaultCCCDPresentAsTheHelpSaysIt() throws {
        func scanStateDescriptors(_ extra: [String]) throws -> (properties: JSONValue?, descriptors: [JSONValue]) {
            let sim = try SimulatorProcess(extra)
            defer { sim.stop() }
            let run = try MirrorProcess.run(["gatt", sim.target, "--json"])
            XCTAssertEqual(run.status, 0, run.stderr)
            guard case .array(let services)? = try run.json()["services"] else { return (nil, []) }
            for s in services {
                guard case .array(let chars)? = s["characteristics"] else { continue }
                for c in chars where c["uuid"] == .string("6d697272-6f72-7369-6d00-000000000001") {
                    guard case .array(let d)? = c["descriptors"] else { return (c["properties"], []) }
                    return (c["properties"], d)
                }
            }
            XCTFail("no scanState in \(run.stdout)")
            return (nil, [])
        }
        let plain = try scanStateDescriptors([])
        let faulty = try scanStateDescriptors(["--fault", "cccd-present"])
        XCTAssertEqual(plain.properties, faulty.properties)
        XCTAssertEqual(plain.properties, .array([.string("read"), .string("notify")]))
        XCTAssertEqual(plain.descriptors.map { $0["uuid"] }, [.string("2902")])
        XCTAssertEqual(faulty.descriptors.count, 0)
    }
}
