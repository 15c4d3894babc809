// mirror doctor and mirror adapters, run as the built binary. On a kernel without Bluetooth (these build
// machines) both must say so with EAFNOSUPPORT and exit 7; on one with Bluetooth (the VM) they must list.
import TestSupport
import XCTest
import Foundation

final class DoctorCommandTests: XCTestCase {
    private var kernelHasBluetooth: Bool { FileManager.default.fileExists(atPath: "/sys/module/bluetooth") }

    func testDoctorReportsKernelCapabilitiesAndDaemon() throws {
        let run = try MirrorProcess.run(["doctor", "--json"])
        let json = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(run.stdout.utf8)) as? [String: Any])
        let findings = try XCTUnwrap(json["findings"] as? [[String: Any]])
        let checks = findings.compactMap { $0["check"] as? String }
        XCTAssertTrue(checks.contains("kernel"), "\(checks)")
        XCTAssertTrue(checks.contains("capabilities"), "\(checks)")
        XCTAssertTrue(checks.contains("bluetoothd"), "\(checks)")
        let healthy = try XCTUnwrap(json["healthy"] as? Bool)
        XCTAssertEqual(run.status, healthy ? 0 : 7)
        if !kernelHasBluetooth {
            let kernel = try XCTUnwrap(findings.first { $0["check"] as? String == "kernel" })
            XCTAssertEqual(kernel["status"] as? String, "problem")
            XCTAssertTrue((kernel["detail"] as? String ?? "").contains("EAFNOSUPPORT"), "\(kernel)")
            XCTAssertNotNil(kernel["action"] as? String, "a problem says what to do")
            XCTAssertFalse(healthy)
        }
        let text = try MirrorProcess.run(["doctor"])
        XCTAssertEqual(text.status, run.status)
        XCTAssertTrue(text.stdout.contains("bluetoothd"), text.stdout)
    }

    func testAdaptersListsOrSaysWhyNot() throws {
        let run = try MirrorProcess.run(["adapters", "--json"])
        let json = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(run.stdout.utf8)) as? [String: Any])
        XCTAssertNotNil(json["adapters"] as? [Any])
        if kernelHasBluetooth {
            XCTAssertEqual(run.status, 0, run.stdout)
        } else {
            XCTAssertEqual(run.status, 7)
            XCTAssertTrue((json["error"] as? String ?? "").contains("EAFNOSUPPORT"), run.stdout)
            XCTAssertTrue((json["error"] as? String ?? "").contains("no Bluetooth support"), run.stdout)
        }
    }

    func testDoctorRefusesATarget() throws {
        let run = try MirrorProcess.run(["doctor", "unix:/tmp/x"])
        XCTAssertEqual(run.status, 2, run.stderr)
    }
}
