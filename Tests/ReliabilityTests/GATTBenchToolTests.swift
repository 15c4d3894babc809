// The built `gatt-bench`: its JSON says how its ratios are measured and how far its own baseline moved, and the
// client it measures is never reported faster than a tenth of the bare loop (the defect of the unpinned method).
import JSON
import TestSupport
import XCTest

final class GATTBenchToolTests: XCTestCase {
    func testJSONSaysTheMethodAndTheBaselineSpread() throws {
        let run = try ToolProcess.run("gatt-bench", ["--json", "--requests", "1000", "--commands", "4000", "--rounds", "2"], timeout: 120)
        XCTAssertEqual(run.status, 0, run.stderr)
        let json = try parseJSON(run.stdout)
        let method = try XCTUnwrap(json["method"]?.string, run.stdout)
        XCTAssertTrue(method.contains("alternates the bare and the client Write Request loops"), method)
        XCTAssertTrue(method.hasSuffix("median of 2 rounds"), method)
        if let cpu = json["pinnedCPU"]?.integer { XCTAssertTrue(method.contains("pinned to CPU \(cpu)"), method) }
        let spread = try XCTUnwrap(json["bareWriteRequestRoundsSpread"]?.number, run.stdout)
        XCTAssertGreaterThanOrEqual(spread, 0)
        let bare = try XCTUnwrap(json["bareWriteRequestMicroseconds"]?.number)
        let client = try XCTUnwrap(json["clientWriteRequestMicroseconds"]?.number)
        let ratio = try XCTUnwrap(json["writeRequestRatio"]?.number)
        XCTAssertEqual(ratio, client / bare, accuracy: 0.01, "the ratio is the two medians' quotient")
        // The client does more than the bare loop on the same socket: ten times faster would be a broken method.
        XCTAssertGreaterThan(ratio, 0.5, run.stdout)
        XCTAssertEqual(json["requests"], 1000)
    }
}
