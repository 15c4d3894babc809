import TestSupport
import CBlueZSocket
import Foundation
import XCTest
@testable import ATTStack
@testable import LinuxBluetooth
import LinkCore

/// A scripted controller on the far end of a socketpair: each command packet it reads goes to `answer`, whose
/// event packets it sends back, in order. Test code: its waits are the test's own.
final class ScriptedController: @unchecked Sendable {
    // @unchecked: `commands` is guarded by `lock`; `fd` is only read.
    /// Its own descriptor of the test's socket (closed in deinit, once its reader has ended too): a reader still
    /// running after its test must not receive from a later test's socket that reused the number.
    let fd: Int32
    private let lock = Lock<[[UInt8]]>([])
    private let answer: @Sendable ([UInt8]) -> [[UInt8]]
    private let done = DispatchSemaphore(value: 0)

    init(fd socket: Int32, answer: @escaping @Sendable (_ command: [UInt8]) -> [[UInt8]]) {
        let fd = cbz_dup(socket)
        precondition(fd >= 0, "dup of the controller's socket failed: errno \(cbz_errno())")
        self.fd = fd
        self.answer = answer
        Thread { [self] in
            while let packet = receiveDatagram(fd, seconds: 10) {
                lock.withLock { $0.append(packet) }
                for e in answer(packet) { sendDatagram(fd, e) }
            }
            done.signal()
        }.start()
    }

    deinit { _ = cbz_close(fd) }

    /// The command packets read so far.
    var commands: [[UInt8]] { lock.withLock { $0 } }
    func send(_ packet: [UInt8]) { sendDatagram(fd, packet) }
}

/// Opcode of a command packet (0x01, opcode little-endian, length, parameters).
func opcode(_ command: [UInt8]) -> UInt16 { UInt16(command[1]) | UInt16(command[2]) << 8 }
func commandStatus(_ status: UInt8, _ op: UInt16) -> [UInt8] { hciEvent(0x0F, [status, 0x01, UInt8(op & 0xFF), UInt8(op >> 8)]) }
func commandComplete(_ op: UInt16, _ ret: [UInt8]) -> [UInt8] { hciEvent(0x0E, [0x01, UInt8(op & 0xFF), UInt8(op >> 8)] + ret) }
func updateComplete(_ status: UInt8, handle: UInt8, interval: UInt16, latency: UInt16, timeout: UInt16) -> [UInt8] {
    hciEvent(0x3E, [0x03, status, handle, 0x00, UInt8(interval & 0xFF), UInt8(interval >> 8), UInt8(latency & 0xFF), UInt8(latency >> 8),
                    UInt8(timeout & 0xFF), UInt8(timeout >> 8)])
}
/// LE Connection Complete for `handle` as central, 30 ms, latency 0, 720 ms timeout.
func connectionComplete(handle: UInt8) -> [UInt8] {
    hciEvent(0x3E, [0x01, 0x00, handle, 0x00, 0x00, 0x00, 6, 5, 4, 3, 2, 1, 0x18, 0x00, 0x00, 0x00, 0x48, 0x00, 0x00])
}

final class HCILinkMonitorTests: XCTestCase {
    let adapter = HCIAdapter(index: 0, name: "hci0", address: BluetoothAddress(uncheckedBytes: [0, 0xAA, 1, 1, 0, 1]), isUp: true,
                             supportsLE: true, supportsBREDR: false, aclMTU: 27, aclPackets: 8, bus: "virtual")
    let quick = LinkRequestLimits(commandAnswer: .milliseconds(300), completion: .milliseconds(300), dataLengthChange: .milliseconds(200))

    /// A monitor on `pair.a` and a controller on `pair.b` that answers with `answer`.
    func rig(_ pair: SocketPair, privileged: Bool = true, sink: (@Sendable (HCILinkRecord) -> Void)? = nil,
             answer: @escaping @Sendable ([UInt8]) -> [[UInt8]]) throws -> (HCILinkMonitor, ScriptedController) {
        pair.handOverA()
        let monitor = try HCILinkMonitor(adopting: pair.a, adapter: adapter, receivesLEEvents: privileged, sink: sink)
        return (monitor, ScriptedController(fd: pair.b, answer: answer))
    }

    func testAnUpdateGrantedGivesTheCompletionEventsValuesAndTheLinkStateFollows() throws {
        let pair = try SocketPair()
        let records = Lock<[HCILinkRecord]>([])
        let (monitor, controller) = try rig(pair, sink: { r in records.withLock { $0.append(r) } }) { cmd in
            guard opcode(cmd) == 0x2013 else { return [] }
            // The controller settles on the maximum asked for: 0x000C (15 ms), latency 2, 5 s.
            return [commandStatus(0, 0x2013), hciEvent(0x13, [0x01, 0x41, 0x00, 0x01, 0x00]), updateComplete(0, handle: 0x40, interval: 0x0C, latency: 2, timeout: 500)]
        }
        defer { monitor.close() }
        // The link's LE Connection Complete comes before the handle is known: it reaches the sink at bind.
        controller.send(connectionComplete(handle: 0x40))
        controller.send(connectionComplete(handle: 0x41))
        XCTAssertTrue(waitFor { monitor.eventStateOf(0x41) != nil })
        XCTAssertEqual(records.withLock { $0.count }, 0)
        monitor.bind(handle: 0x40)
        XCTAssertEqual(records.withLock { $0.map(\.packet) }, [connectionComplete(handle: 0x40)])
        let before = try XCTUnwrap(monitor.eventState())
        XCTAssertEqual(before.intervalMilliseconds, .known(30, source: .hciEvent("LE Connection Complete")))
        XCTAssertEqual(before.role, .known(.central, source: .hciEvent("LE Connection Complete")))
        XCTAssertEqual(before.supervisionTimeoutMilliseconds.value, 720)

        let outcome = try monitor.requestConnectionUpdate(intervalMinUnits: 6, intervalMaxUnits: 0x0C, latency: 2, supervisionTimeoutUnits: 500, limits: quick)
        XCTAssertEqual(outcome, .granted(LEConnectionUpdateComplete(status: 0, handle: 0x40, intervalUnits: 0x0C, peripheralLatency: 2, supervisionTimeoutUnits: 500)))
        XCTAssertEqual(controller.commands.first, [0x01, 0x13, 0x20, 14, 0x40, 0x00, 0x06, 0x00, 0x0C, 0x00, 0x02, 0x00, 0xF4, 0x01, 0, 0, 0, 0])
        let after = try XCTUnwrap(monitor.eventState())
        XCTAssertEqual(after.intervalMilliseconds, .known(15, source: .hciEvent("LE Connection Update Complete")))
        XCTAssertEqual(after.peripheralLatency.value, 2)
        XCTAssertEqual(after.supervisionTimeoutMilliseconds.value, 5000)
        XCTAssertEqual(after.role, before.role)
        // The sink saw, in order: the connection, our command, its Command Status, the completion; not the other handle's packets.
        let kinds = records.withLock { $0.map { r -> String in
            switch r.kind {
            case .command(let c): return c.name
            case .event(let e): return String(describing: e).prefix(while: { $0 != "(" }).description
            }
        } }
        XCTAssertEqual(kinds, ["leConnectionComplete", "LE Connection Update", "commandStatus", "leConnectionUpdateComplete"])
    }

    func testRefusalsNameTheStatusAndLeaveTheLinkAsItWas() throws {
        let pair = try SocketPair()
        let (monitor, _) = try rig(pair) { cmd in
            switch opcode(cmd) {
            case 0x2013: return [commandStatus(0, 0x2013), updateComplete(0x3B, handle: 0x40, interval: 0, latency: 0, timeout: 0)]
            case 0x2032: return [commandStatus(0x11, 0x2032)]
            case 0x2022: return [commandStatus(0x01, 0x2022)] // btvirt: LE Set Data Length is an unknown command
            default: return []
            }
        }
        defer { monitor.close() }
        monitor.receive(connectionComplete(handle: 0x40))
        monitor.bind(handle: 0x40)
        let update = try monitor.requestConnectionUpdate(intervalMinUnits: 6, intervalMaxUnits: 6, latency: 0, supervisionTimeoutUnits: 100, limits: quick)
        XCTAssertEqual(update, .refused(HCIRefusal(command: "LE Connection Update", status: 0x3B, answer: "LE Connection Update Complete")))
        if case .refused(let r) = update {
            XCTAssertEqual(r.description, "LE Connection Update refused with HCI status 0x3B Unacceptable Connection Parameters (in its LE Connection Update Complete)")
        }
        XCTAssertEqual(monitor.eventState()?.intervalMilliseconds, .known(30, source: .hciEvent("LE Connection Complete")))
        let phy = try monitor.requestPHY(tx: .le2M, rx: .le2M, limits: quick)
        XCTAssertEqual(phy, .refused(HCIRefusal(command: "LE Set PHY", status: 0x11, answer: "Command Status")))
        if case .refused(let r) = phy { XCTAssertEqual(r.statusName, "0x11 Unsupported Feature or Parameter Value") }
        let dl = try monitor.requestDataLength(octets: 251, phy: .le1M, limits: quick)
        XCTAssertEqual(dl, .refused(HCIRefusal(command: "LE Set Data Length", status: 0x01, answer: "Command Status")))
        if case .refused(let r) = dl { XCTAssertEqual(r.statusName, "0x01 Unknown HCI Command") }
        XCTAssertEqual(monitor.eventState()?.dataLength.unknownReason, .notSeen("no LE Data Length Change seen on this link"))
    }

    func testAnUpdateWithNoCompletionTimesOutNamingTheEventTheHandleAndTheLimit() throws {
        let pair = try SocketPair()
        let (monitor, _) = try rig(pair) { cmd in opcode(cmd) == 0x2013 ? [commandStatus(0, 0x2013)] : [] }
        defer { monitor.close() }
        monitor.bind(handle: 0x40)
        let start = ContinuousClock.now
        let outcome = try monitor.requestConnectionUpdate(intervalMinUnits: 6, intervalMaxUnits: 6, latency: 0, supervisionTimeoutUnits: 100, limits: quick)
        XCTAssertEqual(outcome, .timedOut(LinkWaitTimeout(waitedFor: "LE Connection Update Complete", handle: 0x40, limit: .milliseconds(300))))
        if case .timedOut(let t) = outcome { XCTAssertEqual(t.description, "no LE Connection Update Complete for handle 0x0040 within 0.3 s") }
        XCTAssertGreaterThanOrEqual(ContinuousClock.now - start, .milliseconds(300))
        XCTAssertEqual(LinkWaitTimeout(waitedFor: "LE Connection Update Complete", handle: 0x40, limit: .seconds(10)).description,
                       "no LE Connection Update Complete for handle 0x0040 within 10 s")
        // A controller that does not answer at all: the command's own wait, named.
        let silent = try monitor.requestPHY(tx: .le2M, rx: .le2M, limits: quick)
        XCTAssertEqual(silent, .timedOut(LinkWaitTimeout(waitedFor: "Command Status or Command Complete for LE Set PHY", handle: nil, limit: .milliseconds(300))))
    }

    func testThePHYAndDataLengthGrantedAndADataLengthThatChangesNothing() throws {
        let pair = try SocketPair()
        let changes = Lock(true)
        let (monitor, _) = try rig(pair) { cmd in
            switch opcode(cmd) {
            case 0x2032: return [commandStatus(0, 0x2032), hciEvent(0x3E, [0x0C, 0x00, 0x40, 0x00, 0x02, 0x02])]
            case 0x2022:
                let ok = commandComplete(0x2022, [0x00, 0x40, 0x00])
                return changes.withLock { $0 } ? [ok, hciEvent(0x3E, [0x07, 0x40, 0x00, 0xFB, 0x00, 0x48, 0x08, 0xFB, 0x00, 0x48, 0x08])] : [ok]
            case 0x2030: return [commandComplete(0x2030, [0x00, 0x40, 0x00, 0x02, 0x02])]
            default: return []
            }
        }
        defer { monitor.close() }
        monitor.bind(handle: 0x40)
        XCTAssertEqual(try monitor.requestPHY(tx: .le2M, rx: .le2M, limits: quick), .granted(LinkPHYs(tx: 2, rx: 2)))
        XCTAssertEqual(monitor.eventState()?.txPHY, .known(.le2M, source: .hciEvent("LE PHY Update Complete")))
        let change = LEDataLengthChange(handle: 0x40, maxTxOctets: 251, maxTxTime: 2120, maxRxOctets: 251, maxRxTime: 2120)
        XCTAssertEqual(try monitor.requestDataLength(octets: 251, phy: .le1M, limits: quick), .granted(change))
        XCTAssertEqual(monitor.eventState()?.dataLength.value, LinkDataLength(maxTxOctets: 251, maxTxTime: 2120, maxRxOctets: 251, maxRxTime: 2120))
        changes.withLock { $0 = false }
        XCTAssertEqual(try monitor.requestDataLength(octets: 251, phy: .le1M, limits: quick), .granted(nil))
        XCTAssertEqual(try monitor.readPHY(limits: quick), .granted(LinkPHYs(tx: 2, rx: 2)))
    }

    func testTheDisconnectionReasonIsRememberedAndEndsAWaitingRequest() throws {
        let pair = try SocketPair()
        let (monitor, controller) = try rig(pair) { cmd in
            opcode(cmd) == 0x2013 ? [commandStatus(0, 0x2013), hciEvent(0x05, [0x00, 0x40, 0x00, 0x08])] : []
        }
        defer { monitor.close() }
        monitor.bind(handle: 0x40)
        XCTAssertNil(monitor.disconnectReason())
        XCTAssertThrowsError(try monitor.requestConnectionUpdate(intervalMinUnits: 6, intervalMaxUnits: 6, latency: 0, supervisionTimeoutUnits: 100,
                                                                 limits: LinkRequestLimits(completion: .seconds(5)))) { e in
            XCTAssertEqual(e as? LinkError, .disconnected(handle: 0x40, reason: 0x08))
            XCTAssertEqual((e as? LinkError)?.description, "the link (handle 0x0040) disconnected: 0x08 Connection Timeout")
        }
        XCTAssertEqual(monitor.disconnectReason(), 0x08)
        XCTAssertEqual(HCIStatus.describe(monitor.disconnectReason()!), "0x08 Connection Timeout")
        // Another link's disconnection is its own.
        controller.send(hciEvent(0x05, [0x00, 0x41, 0x00, 0x13]))
        XCTAssertTrue(waitFor { monitor.disconnectReason(handle: 0x41) == 0x13 })
        XCTAssertEqual(monitor.disconnectReason(), 0x08)
        // A request on a link already gone fails at once.
        XCTAssertThrowsError(try monitor.requestPHY(tx: .le1M, rx: .le1M, limits: quick)) { e in
            XCTAssertEqual(e as? LinkError, .disconnected(handle: 0x40, reason: 0x08))
        }
    }

    /// An error for a lost link waits a bounded time for the Disconnection Complete that names the reason.
    func testAwaitingTheDisconnectReasonIsBounded() throws {
        let pair = try SocketPair()
        let (monitor, controller) = try rig(pair) { _ in [] }
        defer { monitor.close() }
        monitor.bind(handle: 0x40)
        let started = ContinuousClock.now
        XCTAssertNil(monitor.awaitDisconnectReason(limit: .milliseconds(150)), "no event: nil at the limit")
        XCTAssertGreaterThanOrEqual(ContinuousClock.now - started, .milliseconds(140))
        DispatchQueue.global().asyncAfter(deadline: .now() + 0.05) { controller.send(hciEvent(0x05, [0x00, 0x40, 0x00, 0x13])) }
        XCTAssertEqual(monitor.awaitDisconnectReason(limit: .seconds(5)), 0x13, "the event that came while waiting")
        XCTAssertEqual(monitor.awaitDisconnectReason(limit: .zero), 0x13, "and at once once known")
    }

    func testAFailedEncryptionChangeIsFoundWithinItsLimit() throws {
        let pair = try SocketPair()
        let (monitor, controller) = try rig(pair) { _ in [] }
        defer { monitor.close() }
        XCTAssertNil(monitor.awaitEncryptionFailure(limit: .milliseconds(100)), "none yet: nil at the limit")
        // A successful Encryption Change (event 0x08: status, handle, enabled) is not a failure.
        controller.send(hciEvent(0x08, [0x00, 0x40, 0x00, 0x01]))
        XCTAssertNil(monitor.awaitEncryptionFailure(limit: .milliseconds(100)))
        // No handle is bound (the connect failed): any link's failed Encryption Change counts; 0x06 PIN or Key Missing.
        DispatchQueue.global().asyncAfter(deadline: .now() + 0.05) { controller.send(hciEvent(0x08, [0x06, 0x41, 0x00, 0x00])) }
        XCTAssertEqual(monitor.awaitEncryptionFailure(limit: .seconds(5)), 0x06)
        XCTAssertEqual("\(EncryptionFailedError(peer: "00:AA:01:01:00:01", adapter: "hci0", status: 0x06))",
                       "encrypting the link to 00:AA:01:01:00:01 on hci0 failed: the peer has no key for this bond (Encryption Change status 0x06 PIN or Key Missing): it has forgotten the bond (a reset, or a pairing with another central); pair again: `mirror bonds remove 00:AA:01:01:00:01`, then `mirror pair 00:AA:01:01:00:01` (or --pair), or run the command again with --repair, which does both")
    }

    func testWithoutTheCapabilityRequestsFailNamingItAndTheSetcapLine() throws {
        let pair = try SocketPair()
        let (monitor, controller) = try rig(pair, privileged: false) { _ in [] }
        defer { monitor.close() }
        monitor.bind(handle: 0x40)
        XCTAssertThrowsError(try monitor.requestConnectionUpdate(intervalMinUnits: 6, intervalMaxUnits: 6, latency: 0, supervisionTimeoutUnits: 100)) { e in
            guard case .needsCapability(let what, let cap, let setcap)? = e as? LinkError else { return XCTFail("\(e)") }
            XCTAssertEqual(what, "asking for connection parameters (LE Connection Update)")
            XCTAssertEqual(cap, "CAP_NET_RAW")
            XCTAssertTrue(setcap.hasPrefix("sudo setcap cap_net_raw,cap_net_admin+ep "), setcap)
        }
        XCTAssertThrowsError(try monitor.readLEBufferSize()) { e in
            guard case .needsCapability? = e as? LinkError else { return XCTFail("\(e)") }
        }
        XCTAssertEqual(controller.commands, [])
        // The reasons still come: the kernel's security filter passes Disconnection Complete.
        controller.send(hciEvent(0x05, [0x00, 0x40, 0x00, 0x13]))
        XCTAssertTrue(waitFor { monitor.disconnectReason() == 0x13 })
    }

    func testAnUnboundMonitorRefusesRequestsAndCloseEndsTheReaderAtOnce() throws {
        let pair = try SocketPair()
        let (monitor, _) = try rig(pair) { _ in [] }
        XCTAssertThrowsError(try monitor.requestPHY(tx: .le2M, rx: .le2M)) { e in XCTAssertEqual(e as? LinkError, .notBound) }
        let start = ContinuousClock.now
        monitor.close()
        XCTAssertLessThan(ContinuousClock.now - start, .seconds(1))
        monitor.bind(handle: 0x40)
        XCTAssertThrowsError(try monitor.readPHY()) { e in XCTAssertEqual(e as? LinkError, .closed) }
    }

    func testACloseWhoseReaderIsBusyReturnsAtItsLimit() throws {
        let pair = try SocketPair()
        // The sink holds the reader (it runs on the reader's thread) until the gate opens.
        let gate = Lock(false), inSink = Lock(false)
        let (monitor, controller) = try rig(pair, sink: { _ in
            inSink.withLockBroadcasting { $0 = true }
            gate.wait(until: { $0 ? () : nil })
        }) { _ in [] }
        monitor.bind(handle: 0x40)
        controller.send(hciEvent(0x05, [0x00, 0x40, 0x00, 0x13]))
        XCTAssertNotNil(inSink.wait(until: { $0 ? () : nil }, timeoutNanoseconds: 5_000_000_000), "the event reached the sink")
        let started = ContinuousClock.now
        monitor.close(limit: .milliseconds(100))
        let took = ContinuousClock.now - started
        XCTAssertGreaterThanOrEqual(took, .milliseconds(90), "close returned before its limit, though the reader was held")
        XCTAssertLessThan(took, .seconds(2), "close waited past its limit")
        gate.withLockBroadcasting { $0 = true }
        monitor.close()
    }

    func testLEBufferSizeReadAndSharedBuffers() throws {
        let pair = try SocketPair()
        let shared = Lock(false)
        let (monitor, _) = try rig(pair) { cmd in
            opcode(cmd) == 0x2002 ? [commandComplete(0x2002, shared.withLock { $0 } ? [0, 0, 0, 0] : [0, 0xFB, 0x00, 0x0A])] : []
        }
        defer { monitor.close() }
        XCTAssertEqual(try monitor.readLEBufferSize(limits: quick), .granted(LinkBuffers(size: 251, count: 10)))
        shared.withLock { $0 = true }
        XCTAssertEqual(try monitor.readLEBufferSize(limits: quick), .granted(nil))
    }

    func testTheLinkStateJoinsTheKernelsValuesTheEventsAndTheCommandsAnswers() throws {
        let pair = try SocketPair()
        let readPHYStatus = Lock<UInt8>(0x01)
        let (monitor, _) = try rig(pair) { cmd in
            switch opcode(cmd) {
            case 0x2030: return [commandStatus(readPHYStatus.withLock { $0 }, 0x2030)] // btvirt -L: LE Read PHY is unknown
            case 0x2002: return [commandComplete(0x2002, [0, 0xC0, 0x00, 0x01])]
            default: return []
            }
        }
        defer { monitor.close() }
        let (bearer, other) = try ATTBearer.pair(labels: ("client", "server"))
        defer { bearer.close(reason: "done"); other.close(reason: "done") }
        monitor.receive(connectionComplete(handle: 0x40))
        monitor.bind(handle: 0x40)
        let s = monitor.linkState(bearer: bearer, limits: quick)
        XCTAssertEqual(s.intervalMilliseconds, .known(30, source: .hciEvent("LE Connection Complete")))
        XCTAssertEqual(s.handle, .known(0x40, source: .hciEvent("LE Connection Complete")))
        // A controller that does not know LE Read PHY (before Core 5.0) has LE 1M only.
        let pre50 = LinkSource.hciCommand("LE Read PHY refused with 0x01 Unknown HCI Command: a controller without it has only LE 1M")
        XCTAssertEqual(s.txPHY, .known(.le1M, source: pre50))
        XCTAssertEqual(s.rxPHY, .known(.le1M, source: pre50))
        XCTAssertEqual(s.adapterLEBuffers, .known(LinkBuffers(size: 192, count: 1), source: .hciCommand("LE Read Buffer Size")))
        XCTAssertEqual(s.dataLength.unknownReason, .notSeen("no LE Data Length Change seen on this link"))
        // What the kernel would tell: nothing on a socketpair.
        XCTAssertEqual(s.securityLevel.unknownReason, .unavailable("not an LE link (client has no radio)"))
        // Any other refusal leaves the PHY unknown, with the status named.
        readPHYStatus.withLock { $0 = 0x0C }
        let t = monitor.linkState(bearer: bearer, limits: quick)
        XCTAssertEqual(t.txPHY.unknownReason, .unavailable("no LE PHY Update Complete seen on this link, and LE Read PHY was refused with 0x0C Command Disallowed"))
    }

    /// The advertising seen before a connect (the kernel's scan, Vol 4 Part E §7.7.65.2) is kept per advertiser and
    /// PDU type, the last of each (`mirror clone` records the target's); another advertiser's stays apart.
    func testTheAdvertisingReportsSeenAreKeptPerAdvertiserAndPDUType() throws {
        let pair = try SocketPair()
        let (monitor, controller) = try rig(pair) { _ in [] }
        defer { monitor.close() }
        let target = BluetoothAddress(uncheckedBytes: [0x00, 0xAA, 0x01, 0x01, 0x00, 0x01])
        func report(_ type: UInt8, _ address: [UInt8], _ data: [UInt8]) -> [UInt8] {
            hciEvent(0x3E, [0x02, 1, type, 0x00] + address.reversed() + [UInt8(data.count)] + data + [0xC4])
        }
        controller.send(report(0, target.bytes, [0x02, 0x01, 0x06, 0x03, 0x09, 0x41, 0x42]))
        controller.send(report(0, target.bytes, [0x02, 0x01, 0x06, 0x03, 0x09, 0x43, 0x44]))
        controller.send(report(4, target.bytes, [0x03, 0x19, 0x40, 0x03]))
        controller.send(report(0, [1, 2, 3, 4, 5, 6], [0x02, 0x01, 0x04]))
        XCTAssertTrue(waitFor { monitor.advertising(of: BluetoothAddress(uncheckedBytes: [1, 2, 3, 4, 5, 6])).count == 1 })
        let seen = monitor.advertising(of: target)
        XCTAssertEqual(seen.map(\.eventType), [0, 4])
        XCTAssertEqual(seen.first?.data, [0x02, 0x01, 0x06, 0x03, 0x09, 0x43, 0x44], "the last ADV_IND's data")
        XCTAssertEqual(seen.last?.data, [0x03, 0x19, 0x40, 0x03])
        XCTAssertEqual(seen.first?.rssi, -60)
        // A controller with extended scanning reports the same legacy PDU as LE Extended Advertising Report (0x0D):
        // Event_Type 0x0013 (legacy ADV_IND); an extended PDU's (0x0001) data is left out.
        let other = BluetoothAddress(uncheckedBytes: [0xC0, 1, 2, 3, 4, 5])
        func extended(_ type: UInt16, _ data: [UInt8]) -> [UInt8] {
            [UInt8(type & 0xFF), UInt8(type >> 8), 0x01] + other.bytes.reversed() + [1, 0, 0xFF, 0x7F, 0xB0, 0, 0, 0] + [UInt8](repeating: 0, count: 6)
                + [UInt8(data.count)] + data
        }
        controller.send(hciEvent(0x3E, [0x0D, 2] + extended(0x0001, [0x02, 0x01, 0x05]) + extended(0x0013, [0x02, 0x01, 0x06])))
        XCTAssertTrue(waitFor { !monitor.advertising(of: other).isEmpty })
        XCTAssertEqual(monitor.advertising(of: other), [LEAdvertisingReport(eventType: 0, addressType: .random, address: other, data: [0x02, 0x01, 0x06], rssi: -80)])
    }

    /// Polls `condition` for up to 5 s.
    func waitFor(_ condition: () -> Bool) -> Bool {
        let end = ContinuousClock.now + .seconds(5)
        while ContinuousClock.now < end {
            if condition() { return true }
            usleep(2000)
        }
        return condition()
    }
}

extension HCILinkMonitor {
    /// The event state of any handle (tests).
    func eventStateOf(_ handle: UInt16) -> LinkState? { stateForTests { $0.links[handle] } }
}
