// A btsnoop capture that cannot be written (full disk, file size limit) is said at the first failed write, naming
// the syscall, errno and file, and the command exits 1 instead of 0 with a truncated file.
import Foundation
import TestSupport
import XCTest

final class CaptureFailureTests: XCTestCase {
    var sim: SimulatorProcess!
    var directory = ""

    override func setUpWithError() throws {
        sim = try SimulatorProcess()
        directory = NSTemporaryDirectory() + "mirror-capture-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    }
    override func tearDown() {
        sim.stop()
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// The mirror these tests limit: a sanitized build cannot start under a file size limit of a few hundred bytes
    /// (ThreadSanitizer's runtime dies with SIGBUS at start), so under the sanitizer stage it is the plain debug
    /// build of the same sources (tools/test.sh builds it first).
    var limitedMirror: URL {
        guard underSanitizer else { return MirrorProcess.executable }
        return repositoryRoot.appendingPathComponent(".build/debug/mirror")
    }

    /// `mirror ARGUMENTS` with files limited to `bytes` (RLIMIT_FSIZE, through prlimit(1)), the cache kept here.
    func mirror(_ arguments: [String], fileSizeLimit bytes: Int, input: String? = nil) throws -> ToolRun {
        try ToolProcess.run(executable: URL(fileURLWithPath: "/usr/bin/prlimit"),
                            ["--fsize=\(bytes)", limitedMirror.path] + arguments, input: input,
                            environment: ["XDG_CACHE_HOME": directory], timeout: 60)
    }

    func testAFullDeviceIsAFailureNamingTheFile() throws {
        let run = try ToolProcess.run("mirror", ["gatt", sim.target, "--btsnoop", "/dev/full"],
                                      environment: ["XDG_CACHE_HOME": directory], timeout: 60)
        XCTAssertEqual(run.status, 1, run.stderr)
        XCTAssertTrue(run.stderr.contains("/dev/full: write failed with ENOSPC (No space left on device)"), run.stderr)
    }

    func testAFileSizeLimitMidRunIsSaidAtOnceAndExitsOne() throws {
        let file = directory + "/limited.btsnoop"
        let run = try mirror(["gatt", sim.target, "--btsnoop", file], fileSizeLimit: 1000)
        XCTAssertEqual(run.status, 1, run.stderr)
        XCTAssertEqual(run.stderr.components(separatedBy: "writing a btsnoop record").count - 1, 1, "said once: \(run.stderr)")
        XCTAssertTrue(run.stderr.contains("mirror: writing a btsnoop record to \(file): write failed with EFBIG (File too large)"), run.stderr)
        XCTAssertTrue(run.stdout.contains("Generic Access"), "the command itself went on: \(run.stdout)")
        let size = try FileManager.default.attributesOfItem(atPath: file)[.size] as? NSNumber
        XCTAssertEqual(size?.intValue, 1000, "written up to the limit")
        // Without the limit the same command succeeds: the failure is the capture's.
        let unlimited = try mirror(["gatt", sim.target, "--btsnoop", file], fileSizeLimit: 1 << 30)
        XCTAssertEqual(unlimited.status, 0, unlimited.stderr)
    }

    func testTheShellsCaptureFailingMakesItsStatusOne() throws {
        let file = directory + "/shell.btsnoop"
        let run = try mirror(["shell", sim.target], fileSizeLimit: 600, input: "btsnoop \(file)\ngatt\nread 3\n")
        XCTAssertEqual(run.status, 1, run.stderr)
        XCTAssertTrue(run.stderr.contains("mirror: writing a btsnoop record to \(file): write failed with EFBIG (File too large)"), run.stderr)
        XCTAssertTrue(run.stdout.contains("0x0003 Device Name:"), "the lines after it still ran (named from the database gatt found): \(run.stdout)")
    }
}
