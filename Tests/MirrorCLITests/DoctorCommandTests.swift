// mirror doctor and mirror adapters, run as the built binary. On a kernel without Bluetooth (these build
// machines) both must say so with EAFNOSUPPORT and exit 7; on one with Bluetooth (the VM) they must list.
import TestSupport
import Foundation
import JSON
import XCTest

final class DoctorCommandTests: XCTestCase {
    private var kernelHasBluetooth: Bool { FileManager.default.fileExists(atPath: "/sys/module/bluetooth") }

    func testDoctorReportsKernelCapabilitiesAndDaemon() throws {
        let run = try MirrorProcess.run(["doctor", "--json"])
        let json = try run.json()
        let findings = try XCTUnwrap(json["findings"]?.items)
        let checks = findings.compactMap { $0["check"]?.string }
        XCTAssertTrue(checks.contains("kernel"), "\(checks)")
        XCTAssertTrue(checks.contains("capabilities"), "\(checks)")
        XCTAssertTrue(checks.contains("bluetoothd"), "\(checks)")
        let healthy = try XCTUnwrap(json["healthy"].flatMap { if case .bool(let b) = $0 { b } else { nil } })
        XCTAssertEqual(run.status, healthy ? 0 : 7)
        if !kernelHasBluetooth {
            let kernel = try XCTUnwrap(findings.first { $0["check"]?.string == "kernel" })
            XCTAssertEqual(kernel["status"]?.string, "problem")
            XCTAssertTrue((kernel["detail"]?.string ?? "").contains("EAFNOSUPPORT"), kernel.compact)
            XCTAssertNotNil(kernel["action"]?.string, "a problem says what to do")
            XCTAssertFalse(healthy)
        }
        let text = try MirrorProcess.run(["doctor"])
        XCTAssertEqual(text.status, run.status)
        XCTAssertTrue(text.stdout.contains("bluetoothd"), text.stdout)
    }

    func testAdaptersListsOrSaysWhyNot() throws {
        let run = try MirrorProcess.run(["adapters", "--json"])
        let json = try run.json()
        XCTAssertNotNil(json["adapters"]?.items)
        if kernelHasBluetooth {
            XCTAssertEqual(run.status, 0, run.stdout)
        } else {
            XCTAssertEqual(run.status, 7)
            XCTAssertTrue((json["error"]?.string ?? "").contains("EAFNOSUPPORT"), run.stdout)
            XCTAssertTrue((json["error"]?.string ?? "").contains("no Bluetooth support"), run.stdout)
        }
    }

    func testDoctorRefusesATarget() throws {
        let run = try MirrorProcess.run(["doctor", "unix:/tmp/x"])
        XCTAssertEqual(run.status, 2, run.stderr)
    }
}
