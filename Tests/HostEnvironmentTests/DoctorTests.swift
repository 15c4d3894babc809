// The doctor's findings (what this machine offers for raw ATT, and what to do about each gap).
import Foundation
import Glibc
import JSON
import TestSupport
import XCTest
@testable import HostEnvironment
@testable import LinuxBluetooth
import LinkCore

final class DoctorTests: XCTestCase {
    private let adapter = HCIAdapter(index: 1, name: "hci1", address: BluetoothAddress(bytes: [0, 0xAA, 1, 1, 0, 1])!, isUp: false,
                                     supportsLE: true, supportsBREDR: false, aclMTU: 192, aclPackets: 1, bus: "virtual")

    func testKernelFindings() {
        let none = BluetoothDoctor.kernelFinding(socketErrno: EAFNOSUPPORT, moduleLoaded: false)
        XCTAssertEqual(none.status, .problem)
        XCTAssertEqual(none.detail, "this kernel has no Bluetooth support: socket(AF_BLUETOOTH) fails with EAFNOSUPPORT (/sys/module/bluetooth is absent)")
        XCTAssertEqual(BluetoothDoctor.kernelFinding(socketErrno: 0, moduleLoaded: true).status, .ok)
        let other = BluetoothDoctor.kernelFinding(socketErrno: EMFILE, moduleLoaded: true)
        XCTAssertTrue(other.detail.contains("EMFILE"), other.detail)
    }

    func testAdapterFindings() {
        let down = BluetoothDoctor.adapterFindings(.success([adapter]))
        XCTAssertEqual(down, [DoctorFinding(check: "adapter hci1", status: .warning, detail: "down (00:AA:01:01:00:01, LE, ACL 192x1, virtual)",
                                            action: "`sudo btmgmt -i hci1 power on` (or `sudo hciconfig hci1 up`)")])
        var up = adapter
        up.isUp = true
        XCTAssertEqual(BluetoothDoctor.adapterFindings(.success([up])).first?.status, .ok)
        var classic = up
        classic.supportsLE = false
        classic.supportsBREDR = true
        XCTAssertEqual(BluetoothDoctor.adapterFindings(.success([classic])).first?.status, .warning)
        XCTAssertEqual(BluetoothDoctor.adapterFindings(.success([])).first?.status, .problem)
        var fresh = adapter
        fresh.featuresKnown = false
        fresh.supportsLE = false
        XCTAssertEqual(BluetoothDoctor.adapterFindings(.success([fresh])).first?.detail,
                       "down (00:AA:01:01:00:01, LE support unknown until powered, ACL 192x1, virtual)")
        fresh.isUp = true
        XCTAssertEqual(BluetoothDoctor.adapterFindings(.success([fresh])).first?.status, .ok)
        XCTAssertEqual(fresh.radioDescription, "LE unknown")
        XCTAssertEqual(BluetoothDoctor.adapterFindings(.failure(.adapterDown("hci0"))).first?.status, .problem)
        XCTAssertTrue(AdaptersReport(adapters: [adapter], error: nil).text.contains("hci1   00:AA:01:01:00:01 down  LE          acl 192x1    virtual\n"))
    }

    func testDaemonCapabilityAndRFKillFindings() {
        let d = BluetoothDoctor.daemonFinding(pid: 4242)
        XCTAssertEqual(d.status, .warning)
        XCTAssertTrue(d.detail.contains("pid 4242") && d.detail.contains("EBUSY") && d.detail.contains("Exchange MTU"), d.detail)
        XCTAssertTrue(d.action?.contains("sudo systemctl stop bluetooth") == true)
        XCTAssertEqual(BluetoothDoctor.daemonFinding(pid: nil).status, .ok)

        let lacking = CapabilityCheck(required: .rawHCI, effective: CapabilitySet(rawValue: 0), fileCapabilities: nil, executable: "/usr/bin/mirror")
        let f = BluetoothDoctor.capabilityFinding(lacking)
        XCTAssertEqual(f.status, .info)
        XCTAssertEqual(f.action, "`sudo setcap cap_net_raw,cap_net_admin+ep /usr/bin/mirror`, or run as root")
        XCTAssertTrue(f.detail.contains("lacks cap_net_admin,cap_net_raw"), f.detail)
        let half = CapabilityCheck(required: .rawHCI, effective: .netRaw, fileCapabilities: .netRaw, executable: "/x")
        XCTAssertEqual(half.missing, .netAdmin)
        XCTAssertTrue(BluetoothDoctor.capabilityFinding(half).detail.contains("lacks cap_net_admin (the binary carries cap_net_raw)"))
        // Without Bluetooth in the kernel, held capabilities make nothing work: the finding must not say they do.
        let held = CapabilityCheck(required: .rawHCI, effective: .rawHCI, fileCapabilities: .rawHCI, executable: "/x")
        XCTAssertTrue(BluetoothDoctor.capabilityFinding(held).detail.contains("scan, advertise and adapter up work"))
        let noKernel = BluetoothDoctor.capabilityFinding(held, kernelHasBluetooth: false).detail
        XCTAssertFalse(noKernel.contains("adapter up work"), noKernel)
        XCTAssertTrue(noKernel.contains("this kernel has no Bluetooth"), noKernel)
        XCTAssertFalse(BluetoothDoctor.capabilityFinding(lacking, kernelHasBluetooth: false).detail.contains("ATT connections work"))

        XCTAssertEqual(BluetoothDoctor.rfkillFindings([.init(name: "hci0", soft: true, hard: false)]).first?.action, "`sudo rfkill unblock bluetooth`")
        XCTAssertEqual(BluetoothDoctor.rfkillFindings([.init(name: "hci0", soft: false, hard: true)]).first?.status, .problem)
        XCTAssertEqual(BluetoothDoctor.rfkillFindings([.init(name: "hci0", soft: false, hard: false)]), [])
    }

    /// The JSON of `mirror doctor --json` and `mirror adapters --json`, byte for byte: one line, keys in byte
    /// order, an absent action or error left out.
    func testReportJSONIsOneLineWithSortedKeys() throws {
        let doctor = DoctorReport(findings: [
            DoctorFinding(check: "kernel", status: .ok, detail: "AF_BLUETOOTH \"works\" at /sys"),
            DoctorFinding(check: "adapter hci0", status: .problem, detail: "down", action: "sudo btmgmt -i hci0 power on"),
        ])
        XCTAssertEqual(doctor.json, #"{"findings":[{"check":"kernel","detail":"AF_BLUETOOTH \"works\" at /sys","status":"ok"},"#
                       + #"{"action":"sudo btmgmt -i hci0 power on","check":"adapter hci0","detail":"down","status":"problem"}],"healthy":false}"#)
        let adapter = HCIAdapter(index: 1, name: "hci1", address: try BluetoothAddress(parsing: "00:AA:01:01:00:01"), isUp: true,
                                 supportsLE: true, supportsBREDR: false, aclMTU: 251, aclPackets: 8, bus: "virtual", featuresKnown: false)
        XCTAssertEqual(AdaptersReport(adapters: [adapter], error: nil).json,
                       #"{"adapters":[{"aclMTU":251,"aclPackets":8,"address":"00:AA:01:01:00:01","bus":"virtual","featuresKnown":false,"#
                       + #""index":1,"isUp":true,"name":"hci1","supportsBREDR":false,"supportsLE":true}]}"#)
        XCTAssertEqual(AdaptersReport(adapters: [], error: "no Bluetooth").json, #"{"adapters":[],"error":"no Bluetooth"}"#)
    }

    func testReportOnThisMachineRendersAsTextAndJSON() throws {
        let report = BluetoothDoctor.run()
        XCTAssertEqual(report.findings.first?.check, "kernel")
        XCTAssertEqual(report.findings.first?.status, kernelHasBluetooth() ? .ok : .problem)
        XCTAssertTrue(report.findings.contains { $0.check == "capabilities" })
        XCTAssertTrue(report.findings.contains { $0.check == "bluetoothd" })
        // Issue 37: every report says unix: targets need no Bluetooth (before: nothing told a new user so).
        XCTAssertEqual(report.findings.last, BluetoothDoctor.unixTargetsFinding)
        XCTAssertTrue(report.text.contains("info     unix targets: unix:PATH targets (mirror-sim, hostile-peer) need no Bluetooth, adapter or capability"), report.text)
        let json = try parseJSON(report.json)
        XCTAssertEqual(json["healthy"], .bool(report.isHealthy))
        let findings = try XCTUnwrap(json["findings"]?.items)
        XCTAssertEqual(findings.count, report.findings.count)
        // Every finding says all of itself: the JSON gives back the report.
        XCTAssertEqual(findings.map { f in
            DoctorFinding(check: f["check"]?.string ?? "?", status: f["status"]?.string.flatMap(DoctorFinding.Status.init) ?? .info,
                          detail: f["detail"]?.string ?? "?", action: f["action"]?.string)
        }, report.findings)
        if !kernelHasBluetooth() {
            XCTAssertFalse(report.isHealthy)
            XCTAssertTrue(report.text.hasPrefix("PROBLEM  kernel: this kernel has no Bluetooth support"), report.text)
            XCTAssertTrue(report.text.hasSuffix("doctor: not ready for raw ATT (see PROBLEM lines)\n"))
        }
    }
}
