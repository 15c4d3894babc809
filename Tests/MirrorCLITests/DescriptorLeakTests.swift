// The test helpers that run tools close every descriptor they open: the suite once leaked two pipe ends per run,
// over 1,000 by the end, which pushed later sockets past FD_SETSIZE (CI's sanitizer stage).
import Foundation
import TestSupport
import XCTest

final class DescriptorLeakTests: XCTestCase {
    func openDescriptors() throws -> Int {
        try FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").count
    }

    func testToolRunsAndBackgroundToolsLeaveNoDescriptorOpen() throws {
        _ = try ToolProcess.run("mirror", ["--version"])  // warm-up: Foundation's own one-time descriptors
        let before = try openDescriptors()
        for _ in 0..<5 { _ = try ToolProcess.run("mirror", ["--version"]) }
        for _ in 0..<3 { _ = try ToolProcess.run("mirror", ["shell"], input: "help\n") }
        for _ in 0..<3 {
            let socket = temporarySocketPath("leak")
            let sim = try BackgroundTool("mirror-sim", ["unix:\(socket)"], readyWhen: "listening on unix:\(socket)", stderrToo: true)
            sim.stop()
            unlink(socket)
        }
        XCTAssertLessThanOrEqual(try openDescriptors(), before + 1, "descriptors left open by 11 tool runs")
    }
}
