// Issue 23 point 2 through `mirror scan`: a body that is not the result ZIP is exit 8 (outcome badUpload), a host
// name with no bind address is bad usage rather than a listener on 0.0.0.0, and a refused request's method and
// path reach the terminal escaped.
import TestSupport
import Foundation
import JSON
import ATTStack
@testable import Mirror
@testable import MirrorCommandLine
import XCTest

final class ScanUploadCommandTests: XCTestCase {
    var directory = ""

    override func setUpWithError() throws {
        directory = NSTemporaryDirectory() + "scan-upload-cli-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
    }
    override func tearDown() { try? FileManager.default.removeItem(atPath: directory) }

    func testAnUploadThatIsNotTheResultZIPExitsEightNamingWhy() throws {
        for (kind, problem) in [("junk", "no end-of-central-directory record"), ("partial", "missing the expected entry measurements.json")] {
            let sim = try SimulatorProcess(["--result", kind])
            defer { sim.stop() }
            let run = try MirrorProcess.run(["scan", sim.target, "--json", "--upload-dir", directory, "--upload-port", "0",
                                             "--settle", "0.05", "--scan-id", "0\(kind.prefix(5))"], timeout: 60)
            XCTAssertEqual(run.status, 8, "\(kind): \(run.stdout) \(run.stderr)")
            let result = try XCTUnwrap(try run.jsonLines().last)
            XCTAssertEqual(result["outcome"], "badUpload")
            guard case .string(let failure)? = result["failure"] else { return XCTFail("no failure: \(result.compact)") }
            XCTAssertTrue(failure.contains("is not the expected result ZIP: not a readable ZIP archive: \(problem)"), failure)
            if kind == "junk" { XCTAssertTrue(failure.contains("the upload (42 bytes, "), failure) }
        }
    }

    func testAHostNameWithoutUploadBindIsBadUsageNotAListenerOnEveryAddress() throws {
        let run = try MirrorProcess.run(["scan", "unix:/nonexistent/mirror-sim.sock", "--upload-host", "mirror-host.local",
                                         "--upload-dir", directory], timeout: 30)
        XCTAssertEqual(run.status, 2, run.stderr)
        XCTAssertTrue(run.stderr.contains("--upload-host mirror-host.local is not a numeric address: give --upload-bind ADDR"), run.stderr)
        let bad = try MirrorProcess.run(["scan", "unix:/nonexistent/mirror-sim.sock", "--upload-bind", "localhost",
                                         "--upload-dir", directory], timeout: 30)
        XCTAssertEqual(bad.status, 2, bad.stderr)
        XCTAssertTrue(bad.stderr.contains("--upload-bind localhost: expected a numeric IPv4 or IPv6 address"), bad.stderr)
    }

    func testARefusedRequestsMethodAndPathAndTheZIPsNamesAreEscapedForTheTerminal() {
        let hostile = "\u{1B}]0;x\u{07}\u{1B}[2J\r\u{9B}31m"
        let refused = MirrorEvent(time: 1, kind: .upload(.rejected(method: "P" + hostile, path: "/" + hostile, status: 404, reason: "not found")),
                                  characteristic: nil, value: nil, decoded: nil, purpose: nil, detail: nil)
        let received = MirrorEvent(time: 1, kind: .upload(.received(ReceivedUpload(
            scanID: "abc", path: "/d/scan-abc.zip", bytes: 9, sha256: "", entries: [ZIPEntry(name: hostile, method: 0, crc32: 0,
            compressedSize: 0, uncompressedSize: 0, localHeaderOffset: 0)], zipProblem: nil, framing: "content-length"))),
                                   characteristic: nil, value: nil, decoded: nil, purpose: nil, detail: nil)
        for event in [refused, received] {
            let text = mirrorEventText(event)
            XCTAssertFalse(text.unicodeScalars.contains { TerminalText.isUnsafe($0) }, text.debugDescription)
            XCTAssertTrue(text.contains(#"\x1b]0;x\x07\x1b[2J\x0d\x9b31m"#), text)
        }
    }
}
