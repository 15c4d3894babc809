// Least privilege: a setcap'd copy of `mirror`, run as an unprivileged user, holds no capability on any thread
// while it waits on a silent peer (Privilege; the VM's `caps` scenario checks the LE path, where a keeper thread
// holds them until the connect). Needs root here to setcap the copy and to run it as nobody.
import Foundation
import JSON
import MirrorCommandLine
import TestSupport
import XCTest

/// Thrown (a failure, never a skip) where the test cannot set file capabilities.
struct NeedsRoot: Error, CustomStringConvertible {
    var description: String { "this test needs root: it gives a copy of mirror file capabilities (setcap) and runs it as nobody" }
}

final class CapabilityDropTests: XCTestCase {
    /// A copy of the built mirror carrying cap_net_raw,cap_net_admin+ep, in a directory nobody can enter.
    private func cappedCopy() throws -> URL {
        guard getuid() == 0 else {
            throw NeedsRoot()
        }
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("caps-\(getpid())-\(UInt32.random(in: 0...UInt32.max))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o755])
        addTeardownBlock { try? FileManager.default.removeItem(at: dir) }
        let copy = dir.appendingPathComponent("mirror")
        try FileManager.default.copyItem(at: MirrorProcess.executable, to: copy)
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: copy.path)
        let setcap = try ToolProcess.run(executable: URL(fileURLWithPath: "/usr/bin/env"), ["setcap", "cap_net_raw,cap_net_admin+ep", copy.path], timeout: 20)
        XCTAssertEqual(setcap.status, 0, "setcap failed: \(setcap.stderr)")
        let getcap = try ToolProcess.run(executable: URL(fileURLWithPath: "/usr/bin/env"), ["getcap", copy.path], timeout: 20)
        XCTAssertTrue(getcap.stdout.contains("cap_net_admin,cap_net_raw"), "the copy carries no file capabilities: \(getcap.stdout)")
        return copy
    }

    /// `setpriv` as nobody, as the VM's caps scenario runs it.
    private static let asNobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all"]

    /// The capability lines of every thread of `pid`: [(tid, "CapEff", value)].
    private func threadCapabilities(_ pid: Int32) throws -> [(tid: String, field: String, value: String)] {
        let tasks = try FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")
        var out: [(String, String, String)] = []
        for tid in tasks {
            let status = try String(contentsOfFile: "/proc/\(pid)/task/\(tid)/status", encoding: .utf8)
            for line in status.split(separator: "\n") {
                let parts = line.split(separator: ":", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
                if parts.count == 2, ["CapEff", "CapPrm", "CapInh", "CapAmb", "NoNewPrivs"].contains(parts[0]) {
                    out.append((tid, parts[0], parts[1]))
                }
            }
        }
        return out
    }

    func testACommandThatNeedsNoneHoldsNoCapabilityOnAnyThreadWhileItWaitsOnASilentPeer() throws {
        let copy = try cappedCopy()
        // A silent peer: accepts the ATT connection and never answers.
        let path = temporarySocketPath("silent")
        let listener = socket(AF_UNIX, Int32(SOCK_SEQPACKET.rawValue), 0)
        XCTAssertGreaterThanOrEqual(listener, 0)
        defer { close(listener); unlink(path) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (i, b) in path.utf8.enumerated() { raw[i] = b }
        }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        XCTAssertEqual(bound, 0)
        XCTAssertEqual(chmod(path, 0o777), 0)
        XCTAssertEqual(listen(listener, 4), 0)

        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = Self.asNobody + [copy.path, "read", "unix:\(path)", "0x0003", "--timeout", "30"]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        defer { if process.isRunning { process.terminate() }; process.waitUntilExit() }

        // Wait (bounded) until it has connected: it is then past its start and waiting for the Exchange MTU
        // Response that never comes.
        var pfd = pollfd(fd: listener, events: Int16(POLLIN), revents: 0)
        XCTAssertEqual(poll(&pfd, 1, 20_000), 1, "mirror did not connect to the silent peer within 20 s")
        let peer = accept(listener, nil, nil)
        XCTAssertGreaterThanOrEqual(peer, 0)
        defer { close(peer) }
        // One PDU in from mirror (its Exchange MTU Request) says the connection is being used.
        var buffer = [UInt8](repeating: 0, count: 600)
        pfd = pollfd(fd: peer, events: Int16(POLLIN), revents: 0)
        XCTAssertEqual(poll(&pfd, 1, 20_000), 1, "mirror sent nothing within 20 s")
        XCTAssertGreaterThan(recv(peer, &buffer, buffer.count, 0), 0)
        XCTAssertTrue(process.isRunning, "mirror ended before it could be inspected")

        let lines = try threadCapabilities(process.processIdentifier)
        let threads = Set(lines.map(\.tid))
        XCTAssertGreaterThanOrEqual(threads.count, 2, "expected the main thread and the bearer's reader at least")
        for (tid, field, value) in lines {
            if field == "NoNewPrivs" {
                XCTAssertEqual(value, "1", "thread \(tid): PR_SET_NO_NEW_PRIVS is not set")
            } else {
                XCTAssertEqual(value, "0000000000000000", "thread \(tid) still holds \(field) \(value)")
            }
        }
    }

    func testDoctorSaysTheCapabilitiesWereHeldAndDropped() throws {
        let copy = try cappedCopy()
        let run = try ToolProcess.run(executable: URL(fileURLWithPath: "/usr/bin/env"), Self.asNobody + [copy.path, "doctor", "--json"], timeout: 30)
        let json = try parseJSON(run.stdout)
        let finding = try XCTUnwrap(json["findings"]?.items?.first { $0["check"]?.string == "capabilities" }, run.stdout)
        XCTAssertEqual(finding["status"]?.string, "ok", finding.compact)
        let detail = finding["detail"]?.string ?? ""
        XCTAssertTrue(detail.contains("started with cap_net_admin,cap_net_raw"), detail)
        XCTAssertTrue(detail.contains("dropped every capability at start"), detail)
    }

    func testOnlyCommandsThatMayNeedRawHCIKeepTheirCapabilitiesPastTheStart() {
        let keep: [[String]] = [["discover"], ["discover", "--duration", "3"], ["read", "00:AA:01:01:00:01", "0x0003"],
                                ["link", "00:AA:01:01:00:01", "--interval", "7.5"], ["shell", "00:AA:01:01:00:01"],
                                ["pair", "00:AA:01:01:00:01"], ["pair", "00:AA:01:01:00:01", "--io", "keyboard"],
                                ["bonds", "remove", "00:AA:01:01:00:01"]]
        let drop: [[String]] = [["pair", "unix:/tmp/s.sock"], ["pair", "--help"], ["read", "unix:/tmp/s.sock", "0x0003"],
                                ["shell", "unix:/tmp/s.sock"], ["cache", "list"], ["bonds", "list"], ["bonds", "remove", "--help"],
                                ["doctor"], ["adapters"], ["read", "--help"], ["--help"], [], ["nonsense", "00:AA:01:01:00:01"]]
        for a in keep { XCTAssertTrue(MirrorMain.mayNeedRawHCI(a, commands: commandTable), "\(a)") }
        for a in drop { XCTAssertFalse(MirrorMain.mayNeedRawHCI(a, commands: commandTable), "\(a)") }
    }
}
