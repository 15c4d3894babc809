// mirror-sim's conformance faults (`--fault RULE-ID`), byte for byte through a test transport: each breaks its rule
// of `mirror check`'s catalogue (Core Spec 5.4 Vol 3 Part F, Part G), and the same request to the simulator without
// the fault gets the answer the rule expects.
import TestSupport
import ATTStack
import LinkCore
import Foundation
import GATTServer
import GATTVocabulary
@testable import MirrorSimulator
import XCTest

final class SimulatorConformanceFaultTests: XCTestCase {
    /// A simulator with `faults` (by rule id, as `--fault` takes them) and a raw peer attached to it.
    func makeSim(_ faults: [String] = [], _ configure: (inout SimOptions) throws -> Void = { _ in }) throws -> (SimulatedMirror, ScriptedPeer) {
        var options = SimOptions()
        for f in faults { try options.set("fault", f) }
        try configure(&options)
        let sim = SimulatedMirror(options: options)
        let t = ScriptedPeer(unscripted: "test-double")
        sim.attach(t)
        return (sim, t)
    }

    /// Both simulators, without and with the fault, each with its peer.
    func pair(_ fault: SimConformanceFault, _ configure: (inout SimOptions) throws -> Void = { _ in })
        throws -> (plain: (SimulatedMirror, ScriptedPeer), faulty: (SimulatedMirror, ScriptedPeer)) {
        (try makeSim([], configure), try makeSim([fault.rawValue], configure))
    }

    let deviceNameValue: UInt16 = 0x0003

    func testEveryRuleIdParsesAsAFaultAndIsListed() throws {
        for fault in SimConformanceFault.allCases {
            var options = SimOptions()
            try options.set("fault", fault.rawValue)
            XCTAssertEqual(options.conformanceFaults, [fault])
            XCTAssertEqual(options.faults, [])
            XCTAssertTrue(SimConformanceFault.listing.contains("\n" + fault.rawValue + " ") || SimConformanceFault.listing.hasPrefix(fault.rawValue + " "),
                          "\(fault.rawValue) in --list-faults")
            XCTAssertTrue(SimConformanceFault.listing.contains(fault.summary))
        }
        // The per-characteristic forms still parse as before; a wrong id names both forms.
        var options = SimOptions()
        try options.set("fault", "delay:scannerAction:900@2")
        XCTAssertEqual(options.faults, [try SimFault(parsing: "delay:scannerAction:900@2")])
        XCTAssertEqual(options.conformanceFaults, [])
        XCTAssertThrowsError(try options.set("fault", "cccd-presnt")) {
            XCTAssertTrue(($0 as? SimOptionsError)?.problem.contains("or a rule id (mirror-sim --list-faults)") == true, "\($0)")
        }
    }

    // MARK: - P1

    func testInvalidHandleZero() throws {
        let ((a, plain), (b, faulty)) = try pair(.invalidHandleZero)
        defer { withExtendedLifetime((a, b)) {} }
        // §3.4.4.3: Invalid Handle, the request's opcode and handle 0x0000 echoed.
        XCTAssertEqual(show(plain.request([0x0A, 0x00, 0x00])), show([0x01, 0x0A, 0x00, 0x00, 0x01]))
        XCTAssertEqual(show(faulty.request([0x0A, 0x00, 0x00])), show([0x01, 0x0A, 0x00, 0x00, 0x00]))
        // Only that read: a Read past the end is still Invalid Handle.
        let past = le16(UInt16(b.database.attributes.count + 1))
        XCTAssertEqual(show(faulty.request([0x0A] + past)), show([0x01, 0x0A] + past + [0x01]))
    }

    func testInvalidHandlePastEnd() throws {
        let ((a, plain), (b, faulty)) = try pair(.invalidHandlePastEnd)
        defer { withExtendedLifetime((a, b)) {} }
        let past = le16(UInt16(a.database.attributes.count + 1))
        XCTAssertEqual(show(plain.request([0x0A] + past)), show([0x01, 0x0A] + past + [0x01]))
        XCTAssertEqual(show(plain.request([0x0C] + past + [0x00, 0x00])), show([0x01, 0x0C] + past + [0x01]))
        XCTAssertEqual(show(faulty.request([0x0A] + past)), show([0x01, 0x0A] + past + [0x0A]))
        XCTAssertEqual(show(faulty.request([0x0C] + past + [0x00, 0x00])), show([0x01, 0x0C] + past + [0x0A]))
        XCTAssertEqual(show(faulty.request([0x0A, 0x00, 0x00])), show([0x01, 0x0A, 0x00, 0x00, 0x01]))
    }

    func testErrorEcho() throws {
        let ((a, plain), (b, faulty)) = try pair(.errorEcho)
        defer { withExtendedLifetime((a, b)) {} }
        let past = le16(UInt16(a.database.attributes.count + 1))
        // The end of a discovery: Attribute Not Found for the Starting Handle, naming Find Information (0x04).
        XCTAssertEqual(show(plain.request([0x04] + past + [0xFF, 0xFF])), show([0x01, 0x04] + past + [0x0A]))
        XCTAssertEqual(show(faulty.request([0x04] + past + [0xFF, 0xFF])), show([0x01, 0x00] + past + [0x0A]))
        // The other rules' Error Responses keep their opcode.
        XCTAssertEqual(show(faulty.request([0x0A] + past)), show([0x01, 0x0A] + past + [0x01]))
    }

    func testRequestNotSupported() throws {
        let ((a, plain), (b, faulty)) = try pair(.requestNotSupported)
        defer { withExtendedLifetime((a, b)) {} }
        // 0x3F: no opcode of Core 5.4, no Command Flag (§3.3.1).
        XCTAssertEqual(show(plain.request([0x3F, 0x01, 0x02])), show([0x01, 0x3F, 0x00, 0x00, 0x06]))
        XCTAssertNil(faulty.request([0x3F, 0x01, 0x02], timeout: 0.3))
        // The next request is answered as usual.
        XCTAssertEqual(show(faulty.request([0x02, 0x05, 0x02])), show([0x03, 0x05, 0x02]))
    }

    func testCommandIgnored() throws {
        let ((a, plain), (b, faulty)) = try pair(.commandIgnored)
        defer { withExtendedLifetime((a, b)) {} }
        // 0x7E: unassigned, Command Flag set: no answer (§3.3); the next answer is the Exchange MTU's.
        plain.inject([0x7E, 0x01, 0x02])
        XCTAssertEqual(show(plain.request([0x02, 0x05, 0x02])), show([0x03, 0x05, 0x02]))
        XCTAssertEqual(show(faulty.request([0x7E, 0x01, 0x02])), show([0x01, 0x7E, 0x00, 0x00, 0x06]))
        XCTAssertEqual(show(faulty.request([0x3F])), show([0x01, 0x3F, 0x00, 0x00, 0x06]))
    }

    func testMTUExchange() throws {
        let name = String(repeating: "n", count: 40)
        let ((a, plain), (b, faulty)) = try pair(.mtuExchange) { $0.deviceName = name }
        defer { withExtendedLifetime((a, b)) {} }
        XCTAssertEqual(show(plain.request([0x02, 0x05, 0x02])), show([0x03, 0x05, 0x02]))
        XCTAssertEqual(show(faulty.request([0x02, 0x05, 0x02])), show([0x03, 0x0A, 0x00]))
        // The server agreed on 23 (the minimum), not 517: a Read gives MTU-1 = 22 octets.
        XCTAssertEqual(plain.request([0x0A] + le16(deviceNameValue)), [0x0B] + Array(name.utf8))
        XCTAssertEqual(faulty.request([0x0A] + le16(deviceNameValue)), [0x0B] + Array(name.utf8.prefix(22)))
    }

    func testMTUAnsweredOnce() throws {
        let ((a, plain), (b, faulty)) = try pair(.mtuAnsweredOnce)
        defer { withExtendedLifetime((a, b)) {} }
        XCTAssertEqual(show(plain.request([0x02, 0x05, 0x02])), show([0x03, 0x05, 0x02]))
        XCTAssertNil(plain.next(timeout: 0.3))
        XCTAssertEqual(show(faulty.request([0x02, 0x05, 0x02])), show([0x03, 0x05, 0x02]))
        XCTAssertEqual(show(faulty.next(timeout: 1)), show([0x03, 0x05, 0x02]))
    }

    func testNoUnsolicitedResponse() throws {
        let ((a, plain), (b, faulty)) = try pair(.noUnsolicitedResponse)
        defer { withExtendedLifetime((a, b)) {} }
        let read = [0x0A] + le16(deviceNameValue), answer = [0x0B] + Array("mirror-sim".utf8)
        XCTAssertEqual(plain.request(read), answer)
        XCTAssertNil(plain.next(timeout: 0.3))
        XCTAssertEqual(faulty.request(read), answer)
        XCTAssertEqual(faulty.next(timeout: 1), answer)
        // Once per connection: the second Read gets one answer.
        XCTAssertEqual(faulty.request(read), answer)
        XCTAssertNil(faulty.next(timeout: 0.3))
    }

    func testResponseWithinTimeout() throws {
        let ((a, plain), (b, faulty)) = try pair(.responseWithinTimeout)
        defer { withExtendedLifetime((a, b)) {} }
        let read = [0x0A] + le16(deviceNameValue), answer = [0x0B] + Array("mirror-sim".utf8)
        XCTAssertEqual(plain.request(read, timeout: 1), answer)
        let sent = ContinuousClock.now
        XCTAssertNil(faulty.request(read, timeout: 1))
        XCTAssertEqual(faulty.next(timeout: 3), answer)
        XCTAssertGreaterThanOrEqual(ContinuousClock.now - sent, .milliseconds(1900))
        // The next Read is answered at once.
        XCTAssertEqual(faulty.request(read, timeout: 1), answer)
    }

    /// The descriptors' types between a value handle and the next declaration (Find Information, §3.4.3.1).
    func descriptors(after valueHandle: UInt16, _ t: ScriptedPeer, _ sim: SimulatedMirror) -> [BluetoothUUID] {
        let next = sim.database.attributes.first { $0.handle > valueHandle && ($0.type == .characteristic || $0.type == .primaryService) }?.handle
        let end = next.map { $0 - 1 } ?? 0xFFFF
        guard end > valueHandle, let pdu = t.request([0x04] + le16(valueHandle + 1) + le16(UInt16(end))),
              case .findInformationResponse(let list)? = try? ATTPDU.decode(pdu) else { return [] }
        return list.map(\.type)
    }

    func testCCCDPresent() throws {
        let ((a, plain), (b, faulty)) = try pair(.cccdPresent)
        defer { withExtendedLifetime((a, b)) {} }
        for (sim, t, cccd) in [(a, plain, true), (b, faulty, false)] {
            let value = try XCTUnwrap(sim.valueHandle("scanState"))
            // The declaration says Read and Notify either way (Part G §3.3.1.1).
            XCTAssertEqual(t.request([0x0A] + le16(value - 1))?.dropFirst().first, 0x12)
            XCTAssertEqual(descriptors(after: value, t, sim).contains(.clientCharacteristicConfiguration), cccd)
        }
        // The other notifying characteristics keep theirs.
        XCTAssertTrue(descriptors(after: try XCTUnwrap(b.valueHandle("scanError")), faulty, b).contains(.clientCharacteristicConfiguration))
    }

    func testGAPDeviceName() throws {
        let ((a, plain), (b, faulty)) = try pair(.gapDeviceName)
        defer { withExtendedLifetime((a, b)) {} }
        let readByType: [UInt8] = [0x08, 0x01, 0x00, 0xFF, 0xFF, 0x00, 0x2A]
        XCTAssertEqual(show(plain.request(readByType)), show([0x09, 12, 0x03, 0x00] + Array("mirror-sim".utf8)))
        XCTAssertEqual(show(faulty.request(readByType)), show([0x01, 0x08, 0x01, 0x00, 0x0A]))
        // GAP is still there, with Appearance.
        XCTAssertEqual(show(faulty.request([0x06, 0x01, 0x00, 0xFF, 0xFF, 0x00, 0x28, 0x00, 0x18])), show([0x07, 0x01, 0x00, 0x03, 0x00]))
    }

    func testDatabaseHash() throws {
        let ((a, plain), (b, faulty)) = try pair(.databaseHash) { $0.caching = true }
        defer { withExtendedLifetime((a, b)) {} }
        XCTAssertTrue(b.options.effectiveCaching)
        for (sim, t, order) in [(a, plain, GATTHashOrder.pts), (b, faulty, .bluez)] {
            let handle = try XCTUnwrap(sim.valueHandle(AttributeDatabase.databaseHashName))
            let mac = try sim.database.databaseHash()
            XCTAssertEqual(t.request([0x0A] + le16(handle)), [0x0B] + order.served(mac))
        }
        // The fault needs no --caching: it serves the hash itself.
        let (c, alone) = try makeSim([SimConformanceFault.databaseHash.rawValue])
        let handle = try XCTUnwrap(c.valueHandle(AttributeDatabase.databaseHashName))
        XCTAssertEqual(alone.request([0x0A] + le16(handle)), [0x0B] + GATTHashOrder.bluez.served(try c.database.databaseHash()))
    }

    func testReadBlobOffset() throws {
        let ((a, plain), (b, faulty)) = try pair(.readBlobOffset)
        defer { withExtendedLifetime((a, b)) {} }
        let name = Array("mirror-sim".utf8)
        XCTAssertEqual(plain.request([0x0C] + le16(deviceNameValue) + le16(3)), [0x0D] + name.dropFirst(3))
        XCTAssertEqual(faulty.request([0x0C] + le16(deviceNameValue) + le16(3)), [0x0D] + name)
        // At the end and past it, as the other rules want.
        XCTAssertEqual(faulty.request([0x0C] + le16(deviceNameValue) + le16(10)), [0x0D])
        XCTAssertEqual(show(faulty.request([0x0C] + le16(deviceNameValue) + le16(11))), show([0x01, 0x0C] + le16(deviceNameValue) + [0x07]))
    }

    func testReadBlobPastEnd() throws {
        let ((a, plain), (b, faulty)) = try pair(.readBlobPastEnd)
        defer { withExtendedLifetime((a, b)) {} }
        XCTAssertEqual(show(plain.request([0x0C] + le16(deviceNameValue) + le16(11))), show([0x01, 0x0C] + le16(deviceNameValue) + [0x07]))
        XCTAssertEqual(show(faulty.request([0x0C] + le16(deviceNameValue) + le16(11))), show([0x0D]))
        XCTAssertEqual(faulty.request([0x0C] + le16(deviceNameValue) + le16(3)), [0x0D] + Array("mirror-sim".utf8).dropFirst(3))
        XCTAssertEqual(faulty.request([0x0C] + le16(deviceNameValue) + le16(10)), [0x0D])
    }
}
