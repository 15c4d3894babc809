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
            // Whatever this process holds, nothing Bluetooth works on this kernel: the capabilities line says so.
            let capabilities = try XCTUnwrap(findings.first { $0["check"]?.string == "capabilities" })
            let detail = capabilities["detail"]?.string ?? ""
            XCTAssertFalse(detail.contains("adapter up work"), detail)
            XCTAssertFalse(detail.contains("ATT connections work"), detail)
            XCTAssertTrue(detail.contains("this kernel has no Bluetooth"), detail)
        }
        let text = try MirrorProcess.run(["doctor"])
        XCTAssertEqual(text.status, run.status)
        XCTAssertTrue(text.stdout.contains("bluetoothd"), text.stdout)
    }

    func testAdaptersListsOrSaysWhyNot() throws {
        let run = try MirrorProcess.run(["adapters", "--json"])
        let json = try run.json()
        if kernelHasBluetooth {
            XCTAssertEqual(run.status, 0, run.stdout)
            XCTAssertNotNil(json["adapters"]?.items)
        } else {
            // The error in the shape every command's error has: {"error": {"kind", "message", ..., "exitStatus"}}.
            XCTAssertEqual(run.status, 7)
            let error = try XCTUnwrap(json["error"]?.fields.map { JSONValue.object($0) }, run.stdout)
            XCTAssertEqual(error["kind"], "unsupported", run.stdout)
            XCTAssertEqual(error["exitStatus"], 7, run.stdout)
            XCTAssertEqual(error["errnoName"], "EAFNOSUPPORT", run.stdout)
            XCTAssertTrue((error["message"]?.string ?? "").contains("no Bluetooth support"), run.stdout)
            XCTAssertEqual(json.fields?.map(\.0), ["error"], "nothing beside the error: \(run.stdout)")
            let text = try MirrorProcess.run(["adapters"])
            XCTAssertEqual(text.status, 7)
            XCTAssertTrue(text.stderr.hasPrefix("mirror: listing Bluetooth adapters: "), text.stderr)
        }
    }

    func testDoctorRefusesATarget() throws {
        let run = try MirrorProcess.run(["doctor", "unix:/tmp/x"])
        XCTAssertEqual(run.status, 2, run.stderr)
    }
}
