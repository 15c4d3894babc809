import TestSupport
import CBlueZSocket
import Foundation
import JSON
import XCTest
@testable import ATTStack
@testable import LinuxBluetooth
import LinkCore

/// An HCI event packet (Core Spec 5.4 Vol 4 Part E §5.4.4).
func hciEvent(_ code: UInt8, _ parameters: [UInt8]) -> [UInt8] { [0x04, code, UInt8(parameters.count)] + parameters }

/// The link's HCI events and commands, byte by byte against the Core Spec's field order (Vol 4 Part E §7.7, §7.8).
final class LinkEventParsingTests: XCTestCase {
    let peer: [UInt8] = [0x06, 0x05, 0x04, 0x03, 0x02, 0x01] // 01:02:03:04:05:06 little-endian

    func testDisconnectionEncryptionAndCompletedPackets() {
        XCTAssertEqual(HCIEvent.parse(hciEvent(0x05, [0x00, 0x40, 0x00, 0x13])), .disconnectionComplete(status: 0, handle: 0x0040, reason: 0x13))
        // The handle's top 4 bits (flags) are not part of it.
        XCTAssertEqual(HCIEvent.parse(hciEvent(0x05, [0x00, 0x41, 0x30, 0x08]))?.connectionHandle, 0x0041)
        XCTAssertNil(HCIEvent.parse(hciEvent(0x05, [0x00, 0x40, 0x00])))
        XCTAssertNil(HCIEvent.parse(hciEvent(0x05, [0x00, 0x40, 0x00, 0x13, 0x00])))
        XCTAssertEqual(HCIEvent.parse(hciEvent(0x08, [0x00, 0x40, 0x00, 0x01])), .encryptionChange(status: 0, handle: 0x0040, enabled: 1))
        XCTAssertNil(HCIEvent.parse(hciEvent(0x08, [0x00, 0x40])))
        XCTAssertEqual(HCIEvent.parse(hciEvent(0x13, [0x02, 0x40, 0x00, 0x03, 0x00, 0x41, 0x00, 0x01, 0x01])),
                       .numberOfCompletedPackets([HCICompletedPackets(handle: 0x40, count: 3), HCICompletedPackets(handle: 0x41, count: 0x101)]))
        XCTAssertNil(HCIEvent.parse(hciEvent(0x13, [0x02, 0x40, 0x00, 0x03, 0x00])))
        XCTAssertNil(HCIEvent.parse(hciEvent(0x13, [])))
        // A declared length beyond the packet is malformed.
        XCTAssertNil(HCIEvent.parse([0x04, 0x05, 0x04, 0x00, 0x40]))
    }

    func testLEConnectionCompleteLegacyEnhancedAndV2() {
        // status, handle 0x0040, role peripheral, random, address, interval 0x0018 (30 ms), latency 4, timeout 0x01F4 (5 s), CCA.
        let tail: [UInt8] = [0x18, 0x00, 0x04, 0x00, 0xF4, 0x01, 0x05]
        let legacy: [UInt8] = [0x01, 0x00, 0x40, 0x00, 0x01, 0x01] + peer + tail
        let expected = LEConnectionComplete(subevent: 0x01, status: 0, handle: 0x0040, role: 1, peerAddressType: 1,
                                            peerAddress: BluetoothAddress(uncheckedBytes: [1, 2, 3, 4, 5, 6]),
                                            intervalUnits: 0x18, peripheralLatency: 4, supervisionTimeoutUnits: 0x1F4)
        XCTAssertEqual(HCIEvent.parse(hciEvent(0x3E, legacy)), .leConnectionComplete(expected))
        XCTAssertNil(HCIEvent.parse(hciEvent(0x3E, Array(legacy.dropLast()))))
        let rpas = [UInt8](repeating: 0xEE, count: 12)
        let v1: [UInt8] = [0x0A, 0x00, 0x40, 0x00, 0x01, 0x01] + peer + rpas + tail
        var e1 = expected
        e1.subevent = 0x0A
        XCTAssertEqual(HCIEvent.parse(hciEvent(0x3E, v1)), .leConnectionComplete(e1))
        XCTAssertEqual(e1.eventName, "LE Enhanced Connection Complete")
        XCTAssertNil(HCIEvent.parse(hciEvent(0x3E, Array(v1.dropLast()))))
        let v2: [UInt8] = [0x29, 0x00, 0x40, 0x00, 0x01, 0x01] + peer + rpas + tail + [0x00, 0xFF, 0xFF]
        var e2 = expected
        e2.subevent = 0x29
        XCTAssertEqual(HCIEvent.parse(hciEvent(0x3E, v2)), .leConnectionComplete(e2))
        XCTAssertEqual(e2.eventName, "LE Enhanced Connection Complete v2")
        XCTAssertNil(HCIEvent.parse(hciEvent(0x3E, Array(v2.dropLast()))))
        // A failed connection still parses, with its status.
        let failed: [UInt8] = [0x01, 0x3E, 0x00, 0x00, 0x00, 0x00] + peer + [0, 0, 0, 0, 0, 0, 0]
        guard case .leConnectionComplete(let f)? = HCIEvent.parse(hciEvent(0x3E, failed)) else { return XCTFail() }
        XCTAssertEqual(f.status, 0x3E)
    }

    func testLEUpdateDataLengthAndPHYEvents() {
        XCTAssertEqual(HCIEvent.parse(hciEvent(0x3E, [0x03, 0x00, 0x40, 0x00, 0x06, 0x00, 0x00, 0x00, 0x64, 0x00])),
                       .leConnectionUpdateComplete(LEConnectionUpdateComplete(status: 0, handle: 0x40, intervalUnits: 6, peripheralLatency: 0, supervisionTimeoutUnits: 100)))
        guard case .leConnectionUpdateComplete(let refused)? = HCIEvent.parse(hciEvent(0x3E, [0x03, 0x3B, 0x40, 0x00, 0, 0, 0, 0, 0, 0])) else { return XCTFail() }
        XCTAssertEqual(refused.status, 0x3B)
        XCTAssertNil(HCIEvent.parse(hciEvent(0x3E, [0x03, 0x00, 0x40, 0x00, 0x06, 0x00, 0x00, 0x00, 0x64])))
        XCTAssertEqual(HCIEvent.parse(hciEvent(0x3E, [0x07, 0x40, 0x00, 0xFB, 0x00, 0x48, 0x08, 0x1B, 0x00, 0x48, 0x01])),
                       .leDataLengthChange(LEDataLengthChange(handle: 0x40, maxTxOctets: 251, maxTxTime: 2120, maxRxOctets: 27, maxRxTime: 328)))
        XCTAssertNil(HCIEvent.parse(hciEvent(0x3E, [0x07, 0x40, 0x00, 0xFB, 0x00, 0x48, 0x08, 0x1B, 0x00, 0x48])))
        XCTAssertEqual(HCIEvent.parse(hciEvent(0x3E, [0x0C, 0x00, 0x40, 0x00, 0x02, 0x02])), .lePHYUpdateComplete(status: 0, handle: 0x40, txPHY: 2, rxPHY: 2))
        XCTAssertNil(HCIEvent.parse(hciEvent(0x3E, [0x0C, 0x00, 0x40, 0x00, 0x02])))
        // Other LE subevents stay .other; an empty LE Meta is .other too.
        XCTAssertEqual(HCIEvent.parse(hciEvent(0x3E, [0x04, 0x00, 0x40, 0x00])), .other(code: 0x3E, parameters: [0x04, 0x00, 0x40, 0x00]))
        XCTAssertEqual(HCIEvent.parse(hciEvent(0x3E, [])), .other(code: 0x3E, parameters: []))
    }

    func testCommandCompleteAndStatusCarryEveryNamedStatus() {
        for status: UInt8 in [0x01, 0x0C, 0x11, 0x12, 0x1A, 0x1E, 0x20, 0x23, 0x2A, 0x3B] {
            XCTAssertEqual(HCIEvent.parse(hciEvent(0x0F, [status, 0x01, 0x13, 0x20])), .commandStatus(opcode: 0x2013, status: status))
            XCTAssertEqual(HCIEvent.parse(hciEvent(0x0E, [0x01, 0x22, 0x20, status, 0x40, 0x00])),
                           .commandComplete(opcode: 0x2022, returnParameters: [status, 0x40, 0x00]))
            XCTAssertNotNil(HCIStatus.name(status))
        }
    }

    func testTheStatusNameTable() {
        XCTAssertEqual(HCIStatus.describe(0x01), "0x01 Unknown HCI Command")
        XCTAssertEqual(HCIStatus.describe(0x08), "0x08 Connection Timeout")
        XCTAssertEqual(HCIStatus.describe(0x0C), "0x0C Command Disallowed")
        XCTAssertEqual(HCIStatus.describe(0x11), "0x11 Unsupported Feature or Parameter Value")
        XCTAssertEqual(HCIStatus.describe(0x12), "0x12 Invalid HCI Command Parameters")
        XCTAssertEqual(HCIStatus.describe(0x13), "0x13 Remote User Terminated Connection")
        XCTAssertEqual(HCIStatus.describe(0x16), "0x16 Connection Terminated By Local Host")
        XCTAssertEqual(HCIStatus.describe(0x1A), "0x1A Unsupported Remote Feature")
        XCTAssertEqual(HCIStatus.describe(0x1E), "0x1E Invalid LL Parameters")
        XCTAssertEqual(HCIStatus.describe(0x20), "0x20 Unsupported LL Parameter Value")
        XCTAssertEqual(HCIStatus.describe(0x22), "0x22 LL Response Timeout")
        XCTAssertEqual(HCIStatus.describe(0x23), "0x23 LL Procedure Collision")
        XCTAssertEqual(HCIStatus.describe(0x2A), "0x2A Different Transaction Collision")
        XCTAssertEqual(HCIStatus.describe(0x3B), "0x3B Unacceptable Connection Parameters")
        XCTAssertEqual(HCIStatus.describe(0x3E), "0x3E Connection Failed to be Established")
        XCTAssertEqual(HCIStatus.describe(0x7F), "0x7F (not named by the Core Spec)")
        XCTAssertNil(HCIStatus.name(0x2B)) // reserved
        // The advertising and scanning errors keep their words.
        XCTAssertEqual(hciStatusMeaning(0x01), "Unknown HCI Command (the controller does not support it)")
        XCTAssertEqual(hciStatusMeaning(0x0C), "Command Disallowed (advertising or scanning is already running, or another host owns the state: is bluetoothd using this adapter?)")
        XCTAssertEqual(hciStatusMeaning(0x12), "Invalid HCI Command Parameters")
        XCTAssertEqual(hciStatusMeaning(0x7F), "see Core Spec Vol 1 Part F for status 0x7F")
    }

    func testCommandEncodingsInTheSpecsFieldOrder() throws {
        let update = try HCICommand.leConnectionUpdate(handle: 0x0040, intervalMinUnits: 6, intervalMaxUnits: 0x0C,
                                                       latency: 2, supervisionTimeoutUnits: 0x01F4)
        XCTAssertEqual(update.opcode, 0x2013)
        XCTAssertEqual(update.parameters, [0x40, 0x00, 0x06, 0x00, 0x0C, 0x00, 0x02, 0x00, 0xF4, 0x01, 0, 0, 0, 0])
        let phy = try HCICommand.leSetPHY(handle: 0x0041, txPHYs: LinkPHY.le2M.setPHYBit, rxPHYs: LinkPHY.le2M.setPHYBit)
        XCTAssertEqual(phy.opcode, 0x2032)
        XCTAssertEqual(phy.parameters, [0x41, 0x00, 0x00, 0x02, 0x02, 0x00, 0x00])
        let dl = try HCICommand.leSetDataLength(handle: 0x0040, txOctets: 251, txTime: 2120)
        XCTAssertEqual(dl.opcode, 0x2022)
        XCTAssertEqual(dl.parameters, [0x40, 0x00, 0xFB, 0x00, 0x48, 0x08])
        XCTAssertEqual(try HCICommand.leReadPHY(handle: 0x0040).opcode, 0x2030)
        XCTAssertEqual(try HCICommand.leReadPHY(handle: 0x0040).parameters, [0x40, 0x00])
        XCTAssertEqual(HCICommand.leReadBufferSize.opcode, 0x2002)
        XCTAssertEqual(HCICommand.leReadBufferSize.parameters, [])
    }

    func testEncodersRejectImpossibleValuesWithTheAllowedRange() {
        func error(_ body: () throws(HCIParameterError) -> HCICommand) -> HCIParameterError? {
            do { _ = try body(); return nil } catch { return error }
        }
        XCTAssertEqual(error { () throws(HCIParameterError) in try .leConnectionUpdate(handle: 0x40, intervalMinUnits: 5, intervalMaxUnits: 6, latency: 0, supervisionTimeoutUnits: 100) },
                       HCIParameterError(command: "LE Connection Update", parameter: "Connection_Interval_Min", value: "0x0005", allowed: "0x0006-0x0C80 (7.5 ms to 4 s in 1.25 ms units)"))
        XCTAssertEqual(error { () throws(HCIParameterError) in try .leConnectionUpdate(handle: 0x40, intervalMinUnits: 6, intervalMaxUnits: 0x0C81, latency: 0, supervisionTimeoutUnits: 100) }?.parameter, "Connection_Interval_Max")
        XCTAssertEqual(error { () throws(HCIParameterError) in try .leConnectionUpdate(handle: 0x40, intervalMinUnits: 12, intervalMaxUnits: 6, latency: 0, supervisionTimeoutUnits: 100) }?.allowed, "0x0006-0x0006 (at most Connection_Interval_Max)")
        XCTAssertEqual(error { () throws(HCIParameterError) in try .leConnectionUpdate(handle: 0x40, intervalMinUnits: 6, intervalMaxUnits: 6, latency: 500, supervisionTimeoutUnits: 100) }?.parameter, "Max_Latency")
        XCTAssertEqual(error { () throws(HCIParameterError) in try .leConnectionUpdate(handle: 0x40, intervalMinUnits: 6, intervalMaxUnits: 6, latency: 0, supervisionTimeoutUnits: 9) }?.parameter, "Supervision_Timeout")
        // 4 s interval, latency 0: the timeout must exceed 8 s; 8 s exactly is refused, 8.01 s is taken.
        let tight = error { () throws(HCIParameterError) in try .leConnectionUpdate(handle: 0x40, intervalMinUnits: 0x0C80, intervalMaxUnits: 0x0C80, latency: 0, supervisionTimeoutUnits: 800) }
        XCTAssertEqual(tight?.description, "LE Connection Update: Supervision_Timeout 0x0320 is outside more than (1 + Max_Latency) x Connection_Interval_Max x 2 = 8000 ms")
        XCTAssertNil(error { () throws(HCIParameterError) in try .leConnectionUpdate(handle: 0x40, intervalMinUnits: 0x0C80, intervalMaxUnits: 0x0C80, latency: 0, supervisionTimeoutUnits: 801) })
        XCTAssertEqual(error { () throws(HCIParameterError) in try .leConnectionUpdate(handle: 0x0F00, intervalMinUnits: 6, intervalMaxUnits: 6, latency: 0, supervisionTimeoutUnits: 100) }?.parameter, "Connection_Handle")
        XCTAssertEqual(error { () throws(HCIParameterError) in try .leSetPHY(handle: 0x40, txPHYs: 0, rxPHYs: 1) }?.parameter, "TX_PHYs")
        XCTAssertEqual(error { () throws(HCIParameterError) in try .leSetPHY(handle: 0x40, txPHYs: 1, rxPHYs: 8) }?.parameter, "RX_PHYs")
        XCTAssertEqual(error { () throws(HCIParameterError) in try .leSetDataLength(handle: 0x40, txOctets: 26, txTime: 328) }?.allowed, "0x001B-0x00FB (27 to 251 octets)")
        XCTAssertEqual(error { () throws(HCIParameterError) in try .leSetDataLength(handle: 0x40, txOctets: 252, txTime: 328) }?.parameter, "TX_Octets")
        XCTAssertEqual(error { () throws(HCIParameterError) in try .leSetDataLength(handle: 0x40, txOctets: 27, txTime: 0x4291) }?.parameter, "TX_Time")
    }

    func testTxTimeForEachPHY() {
        // Vol 6 Part B §4.5.10's figures: 1M 328 / 2120 µs, Coded (S=8) 2704 / 17040 µs; 2M is under 1M's floor for 27.
        XCTAssertEqual(HCICommand.dataLengthTxTime(octets: 27, phy: .le1M), 328)
        XCTAssertEqual(HCICommand.dataLengthTxTime(octets: 251, phy: .le1M), 2120)
        XCTAssertEqual(HCICommand.dataLengthTxTime(octets: 251, phy: .le2M), 1064)
        XCTAssertEqual(HCICommand.dataLengthTxTime(octets: 27, phy: .le2M), 328)
        XCTAssertEqual(HCICommand.dataLengthTxTime(octets: 27, phy: .leCoded), 2704)
        XCTAssertEqual(HCICommand.dataLengthTxTime(octets: 251, phy: .leCoded), 17040)
    }

    func testBTPHYBitsAsTheKernelFillsThem() {
        let src = LinkValue<UInt32>.known(0, source: .socketOption("BT_PHY"))
        func phy(_ bits: UInt32, tx: Bool) -> LinkValue<LinkPHY> {
            LinkState.decodePHYBits(.known(bits, source: .socketOption("BT_PHY")), tx: tx, .notSeen("x"))
        }
        XCTAssertEqual(phy(UInt32(CBZ_BT_PHY_LE_1M_TX | CBZ_BT_PHY_LE_2M_RX), tx: true), .known(.le1M, source: .socketOption("BT_PHY")))
        XCTAssertEqual(phy(UInt32(CBZ_BT_PHY_LE_1M_TX | CBZ_BT_PHY_LE_2M_RX), tx: false), .known(.le2M, source: .socketOption("BT_PHY")))
        // The kernel stores the PHY value 3 (Coded) and tests it as LE Set PHY's bits: 1M and 2M together.
        XCTAssertEqual(phy(UInt32(CBZ_BT_PHY_LE_1M_TX | CBZ_BT_PHY_LE_2M_TX), tx: true), .known(.leCoded, source: .socketOption("BT_PHY")))
        // Nothing until an LE PHY Update Complete.
        XCTAssertEqual(LinkState.decodePHYBits(src, tx: true, .notSeen("x")).unknownReason,
                       .notSeen("BT_PHY is empty until the kernel sees an LE PHY Update Complete"))
        XCTAssertEqual(LinkState.decodePHYBits(.unknown(.unavailable("ENOTCONN")), tx: true, .notSeen("x")), .unknown(.unavailable("ENOTCONN")))
    }

    func testABearerWithoutARadioHasEveryValueUnknownSayingWhy() throws {
        let (a, b) = try ATTBearer.pair(labels: ("client", "server"))
        defer { a.close(reason: "done"); b.close(reason: "done") }
        let s = LinkState.read(bearer: a)
        XCTAssertEqual(s, LinkState(allUnknown: .unavailable("not an LE link (client has no radio)")))
        XCTAssertEqual(s.jsonValue.compact.contains(#""intervalMs":{"unknown":"not an LE link (client has no radio)"}"#), true, s.jsonValue.compact)
        let known = LinkValue<Double>.known(7.5, source: .hciEvent("LE Connection Update Complete"))
        XCTAssertEqual(known.jsonValue { .double($0) }.compact, #"{"source":"HCI event LE Connection Update Complete","value":7.5}"#)
    }

    /// Issue 37: one reason shared by every value is said once (the scan's JSON result), every key kept (null); a link
    /// with one value known, or two reasons, is written as always.
    func testAReasonEveryValueSharesIsSaidOnceWithEveryKeyKept() throws {
        let reason = "not an LE link (client has no radio)"
        let s = LinkState(allUnknown: .unavailable(reason))
        XCTAssertEqual(s.sharedUnknown, .unavailable(reason))
        guard case .object(let once) = s.jsonValueSayingOnce, case .object(let full) = s.jsonValue else { return XCTFail() }
        XCTAssertEqual(once.first?.0, "unknown")
        XCTAssertEqual(once.first?.1, .string(reason))
        XCTAssertEqual(once.dropFirst().map(\.0), full.map(\.0), "every key of the link object is kept")
        XCTAssertTrue(once.dropFirst().allSatisfy { $0.1 == .null })
        XCTAssertEqual(s.jsonValueSayingOnce.compact.components(separatedBy: reason).count, 2, "the reason once")
        var known = s
        known.handle = .known(0x2A, source: .ioctl("HCIGETCONNINFO"))
        XCTAssertNil(known.sharedUnknown)
        XCTAssertEqual(known.jsonValueSayingOnce, known.jsonValue)
        var two = s
        two.role = .unknown(.notSeen("other"))
        XCTAssertEqual(two.jsonValueSayingOnce, two.jsonValue)
    }
}
