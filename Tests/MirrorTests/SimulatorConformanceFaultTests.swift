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
        let lines = logLines
        let sim = SimulatedMirror(options: options, log: { lines.append($0) })
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
    /// Every simulator's log lines in this test.
    let logLines = LineLog()

    /// The log lines naming a fault.
    var faultLines: [String] { logLines.all.compactMap { line in line.range(of: "conn ").map { String(line[$0.lowerBound...]) } }.filter { $0.contains(": fault ") } }

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
        // A scenario file takes them as --fault does, beside the per-characteristic forms.
        var scenario = SimOptions()
        try scenario.apply(scenario: Data(#"{"faults": ["cccd-present", "drop:cloudToken", "execute-write"]}"#.utf8), source: "test")
        XCTAssertEqual(scenario.conformanceFaults, [.cccdPresent, .executeWrite])
        XCTAssertEqual(scenario.faults, [SimFault(.drop, "cloudToken")])
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
        XCTAssertEqual(faultLines, ["conn 1: fault invalid-handle-zero on Read Request"])
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
        XCTAssertEqual(faultLines, ["conn 1: fault request-not-supported on opcode 0x3F"])
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
        XCTAssertEqual(faultLines, ["conn 1: fault no-unsolicited-response on Read Request"])
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

    // MARK: - P2

    func testReadBlobAtEnd() throws {
        let ((a, plain), (b, faulty)) = try pair(.readBlobAtEnd)
        defer { withExtendedLifetime((a, b)) {} }
        XCTAssertEqual(show(plain.request([0x0C] + le16(deviceNameValue) + le16(10))), show([0x0D]))
        XCTAssertEqual(show(faulty.request([0x0C] + le16(deviceNameValue) + le16(10))), show([0x01, 0x0C] + le16(deviceNameValue) + [0x07]))
        XCTAssertEqual(faulty.request([0x0C] + le16(deviceNameValue) + le16(3)), [0x0D] + Array("mirror-sim".utf8).dropFirst(3))
    }

    func testResponseWellFormed() throws {
        let ((a, plain), (b, faulty)) = try pair(.responseWellFormed)
        defer { withExtendedLifetime((a, b)) {} }
        // Find Information past the last handle: Attribute Not Found, five octets (§3.4.1.1); the fault adds a sixth.
        let request: [UInt8] = [0x04] + le16(0xFF00) + le16(0xFFFF)
        XCTAssertEqual(show(plain.request(request)), show([0x01, 0x04] + le16(0xFF00) + [0x0A]))
        XCTAssertEqual(show(faulty.request(request)), show([0x01, 0x04] + le16(0xFF00) + [0x0A, 0x00]))
        // Other Error Responses keep their five octets.
        XCTAssertEqual(show(faulty.request([0x0A] + le16(0xFF00))), show([0x01, 0x0A] + le16(0xFF00) + [0x01]))
    }

    func testReadMultiple() throws {
        let ((a, plain), (b, faulty)) = try pair(.readMultiple)
        defer { withExtendedLifetime((a, b)) {} }
        let name = Array("mirror-sim".utf8)
        let gap: [UInt8] = [0x00, 0x18]   // handle 0x0001: the GAP service declaration's value, 0x1800
        // Asked 0x0003 then 0x0001: the values in that order (§3.4.4.8); the fault sorts the handles.
        XCTAssertEqual(plain.request([0x0E] + le16(deviceNameValue) + le16(0x0001)), [0x0F] + name + gap)
        XCTAssertEqual(faulty.request([0x0E] + le16(deviceNameValue) + le16(0x0001)), [0x0F] + gap + name)
        // Asked in ascending order the fault changes nothing.
        XCTAssertEqual(faulty.request([0x0E] + le16(0x0001) + le16(deviceNameValue)), [0x0F] + gap + name)
    }

    func testDiscoveryServicesAgree() throws {
        let ((a, plain), (b, faulty)) = try pair(.discoveryServicesAgree)
        defer { withExtendedLifetime((a, b)) {} }
        let service = a.options.profile.service.attWireBytes
        let start = try XCTUnwrap(a.database.attributes.first { $0.type == .primaryService && $0.value == service }?.handle)
        let end = UInt16(a.database.attributes.count)
        let find: [UInt8] = [0x06, 0x01, 0x00, 0xFF, 0xFF, 0x00, 0x28] + service
        XCTAssertEqual(show(plain.request(find)), show([0x07] + le16(start) + le16(end)))
        XCTAssertEqual(show(faulty.request(find)), show([0x01, 0x06, 0x01, 0x00, 0x0A]))
        // Read By Group Type still lists it; GAP is still found by its UUID.
        XCTAssertEqual(faulty.request([0x10] + le16(start) + [0xFF, 0xFF, 0x00, 0x28]), [0x11, 20] + le16(start) + le16(end) + service)
        XCTAssertEqual(show(faulty.request([0x06, 0x01, 0x00, 0xFF, 0xFF, 0x00, 0x28, 0x00, 0x18])), show([0x07, 0x01, 0x00, 0x05, 0x00]))
    }

    /// Find Information from `start` to the end, every handle and type, in the order given.
    func findInformation(_ t: ScriptedPeer, from start: UInt16 = 0x0001) -> [(UInt16, BluetoothUUID)] {
        var out: [(UInt16, BluetoothUUID)] = []
        var next = start
        while let pdu = t.request([0x04] + le16(next) + [0xFF, 0xFF]), case .findInformationResponse(let list)? = try? ATTPDU.decode(pdu) {
            out += list.map { ($0.handle, $0.type) }
            guard let last = list.map(\.handle).max(), last < 0xFFFF else { break }
            next = last + 1
        }
        return out
    }

    func testDiscoveryCharacteristicsAgree() throws {
        let ((a, plain), (b, faulty)) = try pair(.discoveryCharacteristicsAgree)
        defer { withExtendedLifetime((a, b)) {} }
        let declaration = try XCTUnwrap(a.valueHandle("cloudToken")) - 1
        let declarations = { (t: ScriptedPeer) in self.findInformation(t).filter { $0.1 == .characteristic }.map(\.0) }
        let all = a.database.attributes.filter { $0.type == .characteristic }.map(\.handle)
        XCTAssertEqual(declarations(plain), all)
        XCTAssertEqual(declarations(faulty), all.filter { $0 != declaration })
        // Read By Type 0x2803 still lists it.
        let byType = try XCTUnwrap(faulty.request([0x08] + le16(declaration) + le16(declaration) + [0x03, 0x28]))
        XCTAssertEqual(Array(byType.prefix(4)), [0x09, 21] + le16(declaration))
    }

    func testCharacteristicValueHandle() throws {
        let ((a, plain), (b, faulty)) = try pair(.characteristicValueHandle)
        defer { withExtendedLifetime((a, b)) {} }
        for (sim, t, shift) in [(a, plain, UInt16(0)), (b, faulty, 1)] {
            let value = try XCTUnwrap(sim.valueHandle("cloudToken"))
            let declaration = try XCTUnwrap(t.request([0x0A] + le16(value - 1)))
            XCTAssertEqual(Array(declaration[2...3]), le16(value + shift))
        }
        // The other declarations name their own value handle.
        let scanState = try XCTUnwrap(b.valueHandle("scanState"))
        XCTAssertEqual(Array(try XCTUnwrap(faulty.request([0x0A] + le16(scanState - 1)))[2...3]), le16(scanState))
    }

    func testHandlesAscending() throws {
        let ((a, plain), (b, faulty)) = try pair(.handlesAscending)
        defer { withExtendedLifetime((a, b)) {} }
        let request: [UInt8] = [0x04, 0x01, 0x00, 0xFF, 0xFF]
        guard case .findInformationResponse(let sorted)? = try? ATTPDU.decode(try XCTUnwrap(plain.request(request))),
              case .findInformationResponse(let reversed)? = try? ATTPDU.decode(try XCTUnwrap(faulty.request(request))) else {
            return XCTFail("no Find Information Response")
        }
        XCTAssertGreaterThan(sorted.count, 1)
        XCTAssertEqual(sorted.map(\.handle), sorted.map(\.handle).sorted())
        XCTAssertEqual(reversed.map(\.handle), sorted.map(\.handle).reversed())
    }

    func testReadByTypeConsistent() throws {
        let ((a, plain), (b, faulty)) = try pair(.readByTypeConsistent)
        defer { withExtendedLifetime((a, b)) {} }
        let readByType: [UInt8] = [0x08, 0x01, 0x00, 0xFF, 0xFF, 0x00, 0x2A]
        let name = Array("mirror-sim".utf8)
        XCTAssertEqual(show(plain.request(readByType)), show([0x09, 12, 0x03, 0x00] + name))
        XCTAssertEqual(show(faulty.request(readByType)), show([0x09, 13, 0x03, 0x00] + name))
        // Characteristic discovery (0x2803) is left alone.
        XCTAssertEqual(faulty.request([0x08, 0x01, 0x00, 0x05, 0x00, 0x03, 0x28]).map { Array($0.prefix(2)) }, [0x09, 0x07])
    }

    func testExtendedPropertiesPresent() throws {
        let ((a, plain), (b, faulty)) = try pair(.extendedPropertiesPresent)
        defer { withExtendedLifetime((a, b)) {} }
        for (sim, t, bit7) in [(a, plain, false), (b, faulty, true)] {
            let value = try XCTUnwrap(sim.valueHandle("cloudToken"))
            let properties = try XCTUnwrap(t.request([0x0A] + le16(value - 1))?[1])
            XCTAssertEqual(properties & 0x80 != 0, bit7)
            XCTAssertEqual(properties & 0x7F, 0x0A)
            XCTAssertFalse(descriptors(after: value, t, sim).contains(.bit16(0x2900)))
        }
    }

    func testServiceChanged() throws {
        let ((a, plain), (b, faulty)) = try pair(.serviceChanged)
        defer { withExtendedLifetime((a, b)) {} }
        for (sim, t, indicate) in [(a, plain, true), (b, faulty, false)] {
            let value = try XCTUnwrap(sim.database.attributes.first { $0.type == .serviceChanged }?.handle)
            XCTAssertEqual(t.request([0x0A] + le16(value - 1))?[1], indicate ? 0x20 : 0x00)
            XCTAssertEqual(descriptors(after: value, t, sim).contains(.clientCharacteristicConfiguration), indicate)
        }
    }

    func testSupportedFeatures() throws {
        let ((a, plain), (b, faulty)) = try pair(.supportedFeatures) { $0.caching = true }
        defer { withExtendedLifetime((a, b)) {} }
        let readByType: [UInt8] = [0x08, 0x01, 0x00, 0xFF, 0xFF, 0x29, 0x2B]
        let csf = try XCTUnwrap(a.valueHandle(AttributeDatabase.clientSupportedFeaturesName))
        XCTAssertEqual(show(plain.request(readByType)), show([0x09, 3] + le16(csf) + [0x00]))
        XCTAssertEqual(show(faulty.request(readByType)), show([0x01, 0x08, 0x01, 0x00, 0x0A]))
        // The Database Hash is there, and right (PTS's order) for the database without it; without --caching too.
        for sim in [b, try makeSim([SimConformanceFault.supportedFeatures.rawValue]).0] {
            XCTAssertNil(sim.valueHandle(AttributeDatabase.clientSupportedFeaturesName))
            let hash = try XCTUnwrap(sim.valueHandle(AttributeDatabase.databaseHashName))
            XCTAssertEqual(sim.database.attribute(hash)?.value, GATTHashOrder.pts.served(try sim.database.databaseHash()))
        }
    }

    // MARK: - P3 (writes)

    /// A long write of `value` to `handle` in parts of `size` octets from `offset`; returns the Execute Write's answer.
    func longWrite(_ t: ScriptedPeer, _ handle: UInt16, _ value: [UInt8], offset: Int = 0, size: Int = 18) -> [UInt8]? {
        var at = 0
        while at < value.count {
            let part = Array(value[at..<min(at + size, value.count)])
            guard t.request([0x16] + le16(handle) + le16(UInt16(offset + at)) + part)?.first == 0x17 else { return nil }
            at += part.count
        }
        return t.request([0x18, 0x01])
    }

    func testWriteNotPermitted() throws {
        let ((a, plain), (b, faulty)) = try pair(.writeNotPermitted)
        defer { withExtendedLifetime((a, b)) {} }
        let h = try XCTUnwrap(a.valueHandle("wifiNumNetworks"))
        XCTAssertEqual(show(plain.request([0x12] + le16(h) + [0x07])), show([0x01, 0x12] + le16(h) + [0x03]))
        XCTAssertEqual(show(faulty.request([0x12] + le16(h) + [0x07])), show([0x13]))
        XCTAssertEqual(faulty.request([0x0A] + le16(h)), [0x0B, 0x00], "nothing written")
        // A write the attribute takes is written.
        let token = try XCTUnwrap(b.valueHandle("cloudToken"))
        XCTAssertEqual(faulty.request([0x12] + le16(token) + Array("abc".utf8)), [0x13])
        XCTAssertEqual(faulty.request([0x0A] + le16(token)), [0x0B] + Array("abc".utf8))
    }

    func testWriteTooLong() throws {
        let ((a, plain), (b, faulty)) = try pair(.writeTooLong)
        defer { withExtendedLifetime((a, b)) {} }
        let token = try XCTUnwrap(a.valueHandle("cloudToken"))
        let limit = a.options.effectiveTokenLimit
        let long = Array(repeating: UInt8(ascii: "x"), count: limit + 1)
        // One Write Request (MTU 517), then a long write at MTU 23.
        for t in [plain, faulty] { XCTAssertEqual(t.request([0x02, 0x05, 0x02]), [0x03, 0x05, 0x02]) }
        XCTAssertEqual(show(plain.request([0x12] + le16(token) + long)), show([0x01, 0x12] + le16(token) + [0x0D]))
        XCTAssertEqual(show(faulty.request([0x12] + le16(token) + long)), show([0x13]))
        XCTAssertEqual(faulty.request([0x0A] + le16(token)), [0x0B] + long.prefix(limit))
        let (c, short) = try makeSim([SimConformanceFault.writeTooLong.rawValue])
        let (d, plainShort) = try makeSim()
        defer { withExtendedLifetime((c, d)) {} }
        let longer = Array(repeating: UInt8(ascii: "y"), count: limit + 6)
        XCTAssertEqual(show(longWrite(plainShort, token, longer)), show([0x01, 0x18] + le16(token) + [0x0D]))
        XCTAssertEqual(show(longWrite(short, token, longer)), show([0x19]))
        XCTAssertEqual(c.snapshot.cloudToken, String(decoding: longer.prefix(limit), as: UTF8.self))
        XCTAssertEqual(d.snapshot.cloudToken, "")
    }

    func testPrepareWriteEcho() throws {
        let ((a, plain), (b, faulty)) = try pair(.prepareWriteEcho)
        defer { withExtendedLifetime((a, b)) {} }
        let token = try XCTUnwrap(a.valueHandle("cloudToken"))
        let prepare: [UInt8] = [0x16] + le16(token) + [0x00, 0x00] + Array("abc".utf8)
        XCTAssertEqual(show(plain.request(prepare)), show([0x17] + le16(token) + [0x00, 0x00] + Array("abc".utf8)))
        XCTAssertEqual(show(faulty.request(prepare)), show([0x17] + le16(token) + [0x00, 0x00] + Array("ab".utf8) + [UInt8(ascii: "c") ^ 0xFF]))
        // The part queued is the one sent.
        for (sim, t) in [(a, plain), (b, faulty)] {
            XCTAssertEqual(t.request([0x18, 0x01]), [0x19])
            XCTAssertEqual(sim.snapshot.cloudToken, "abc")
        }
    }

    func testExecuteWrite() throws {
        let ((a, plain), (b, faulty)) = try pair(.executeWrite)
        defer { withExtendedLifetime((a, b)) {} }
        let token = try XCTUnwrap(a.valueHandle("cloudToken"))
        let url = Array("http://192.168.1.23:8080/upload/abc".utf8)
        XCTAssertEqual(longWrite(plain, token, url), [0x19])
        XCTAssertEqual(longWrite(faulty, token, url), [0x19])
        XCTAssertEqual(plain.request([0x0A] + le16(token)), [0x0B] + url.prefix(22))
        XCTAssertEqual(a.snapshot.cloudToken, String(decoding: url, as: UTF8.self))
        XCTAssertEqual(faulty.request([0x0A] + le16(token)), [0x0B], "nothing written")
        // A queue the server refuses is still refused: too long, 0x0D.
        let long = Array(repeating: UInt8(ascii: "x"), count: b.options.effectiveTokenLimit + 1)
        XCTAssertEqual(show(longWrite(faulty, token, long)), show([0x01, 0x18] + le16(token) + [0x0D]))
        // Execute Write 0x00 cancels, fault or not.
        XCTAssertEqual(faulty.request([0x16] + le16(token) + [0x00, 0x00, 0x41]), [0x17] + le16(token) + [0x00, 0x00, 0x41])
        XCTAssertEqual(faulty.request([0x18, 0x00]), [0x19])
    }

    func testWriteInvalidOffset() throws {
        let ((a, plain), (b, faulty)) = try pair(.writeInvalidOffset)
        defer { withExtendedLifetime((a, b)) {} }
        let token = try XCTUnwrap(a.valueHandle("cloudToken"))
        // cloudToken is empty: offset 5 is past its end (§3.4.6.3).
        XCTAssertEqual(show(longWrite(plain, token, Array("ab".utf8), offset: 5)), show([0x01, 0x18] + le16(token) + [0x07]))
        XCTAssertEqual(show(longWrite(faulty, token, Array("ab".utf8), offset: 5)), show([0x19]))
        XCTAssertEqual(b.snapshot.cloudToken, "")
        // A long write from offset 0 is written.
        XCTAssertEqual(longWrite(faulty, token, Array("abc".utf8)), [0x19])
        XCTAssertEqual(b.snapshot.cloudToken, "abc")
    }
}
