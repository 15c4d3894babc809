// Issue 37: errors that point the right way, each as a new user meets it from the command line.
import Foundation
import Glibc
import XCTest

final class ErrorAdviceTests: XCTestCase {
    /// `wifi join SSID TARGET`, the order the README's table once gave: the swap is named with the command that works
    /// (before: `invalid target "mirror-lab": character 1: 'm' is not a hexadecimal digit`).
    func testSwappedWiFiJoinArgumentsAreNamed() throws {
        let run = try MirrorProcess.run(["wifi", "join", "mirror-lab", "unix:/tmp/nowhere.sock"])
        XCTAssertEqual(run.status, 2, run.stderr)
        XCTAssertTrue(run.stderr.contains("the TARGET comes before the SSID: mirror wifi join unix:/tmp/nowhere.sock mirror-lab"), run.stderr)
        let readme = try String(contentsOfFile: #filePath.components(separatedBy: "/Tests/")[0] + "/README.md", encoding: .utf8)
        XCTAssertTrue(readme.contains("`wifi list\\|status\\|join TARGET [SSID]`"), "the README's table gives the order the tool takes")
    }

    /// `listen` on a characteristic that neither notifies nor indicates: bad usage (exit 2, before: 1), named as typed
    /// (before: its UUID), with those that do.
    func testListenOnACharacteristicThatCannotNotifyNamesItAndThoseThatCan() throws {
        let sim = try SimulatorProcess()
        defer { sim.stop() }
        let run = try MirrorProcess.run(["listen", sim.target, "cloudToken"])
        XCTAssertEqual(run.status, 2, run.stderr)
        XCTAssertTrue(run.stderr.hasPrefix("mirror: cloudToken (0x0012) neither notifies nor indicates (properties: read|write); those that do: "), run.stderr)
        XCTAssertTrue(run.stderr.contains("scanState (0x000C), scanError (0x000F), wifiConnectionStatus (0x001C)"), run.stderr)
        XCTAssertTrue(run.stderr.hasSuffix("see: mirror listen --help\n"), run.stderr)
    }

    /// A unix: target that is a regular file, or a stream socket, is named as such (before: "exists but nobody
    /// listens on it", and a bare EPROTOTYPE).
    func testAUnixTargetThatIsAFileOrAStreamSocketIsNamed() throws {
        let dir = NSTemporaryDirectory() + "advice-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let file = dir + "/plain"
        XCTAssertTrue(FileManager.default.createFile(atPath: file, contents: Data("x".utf8)))
        let plain = try MirrorProcess.run(["read", "unix:" + file, "scanState"])
        XCTAssertEqual(plain.status, 6, plain.stderr)
        XCTAssertTrue(plain.stderr.contains("\(file) is a regular file, not a socket: a unix: TARGET is the socket a simulator or listener listens on"), plain.stderr)

        let path = dir + "/stream.sock"
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        XCTAssertGreaterThanOrEqual(fd, 0)
        defer { close(fd) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (i, b) in path.utf8.enumerated() { raw[i] = b }
        }
        let bound = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) } }
        XCTAssertEqual(bound, 0)
        XCTAssertEqual(listen(fd, 4), 0)
        let stream = try MirrorProcess.run(["read", "unix:" + path, "scanState"])
        XCTAssertEqual(stream.status, 6, stream.stderr)
        XCTAssertTrue(stream.stderr.contains("\(path) is a stream or datagram socket: mirror speaks ATT over SOCK_SEQPACKET"), stream.stderr)
    }
}
