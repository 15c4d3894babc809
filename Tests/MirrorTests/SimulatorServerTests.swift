// The simulator's ATT server, byte for byte (Core Spec 5.4 Vol 3 Part F §3.4), and the mirror's
// behaviours of a real mirror, driven with raw PDUs through a test transport.
import TestSupport
import ATTStack
import LinuxBluetooth
import LinkCore
import Dispatch
import Foundation
import GATTClient
import Mirror
@testable import MirrorSimulator
import XCTest

final class SimulatorServerTests: XCTestCase {
    func makeSim(_ configure: (inout SimOptions) -> Void = { _ in }) -> (SimulatedMirror, ScriptedPeer) {
        var options = SimOptions()
        configure(&options)
        let sim = SimulatedMirror(options: options)
        let t = ScriptedPeer(unscripted: "test-double")
        sim.attach(t)
        return (sim, t)
    }

    let serviceLE: [UInt8] = [0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x6d, 0x69, 0x73, 0x72, 0x6f, 0x72, 0x72, 0x69, 0x6d]

    /// mirror-sim refuses a flag outside SimOptions.keys as unknown before it looks for a value: every key listed
    /// there is one `set` takes (a bad value is refused for its value, never as an unknown option), and others are not.
    func testEveryListedOptionKeyIsOneSetTakes() {
        for key in SimOptions.keys {
            var options = SimOptions()
            do { try options.set(key, "\u{1}not-a-value") } catch {
                XCTAssertFalse(error.problem.hasPrefix("unknown option"), "--\(key): \(error.problem)")
            }
        }
        var options = SimOptions()
        XCTAssertThrowsError(try options.set("bogus", "1")) { XCTAssertEqual(($0 as? SimOptionsError)?.problem, "unknown option --bogus") }
        XCTAssertFalse(SimOptions.keys.contains("bogus"))
    }

    func testExchangeMTUAndPrimaryServiceDiscoveryAreByteExact() {
        let (sim, t) = makeSim()
        defer { withExtendedLifetime(sim) {} }
        // At the default MTU 23: GAP and GATT (16-bit) fit one response; the 128-bit service needs its own.
        XCTAssertEqual(show(t.request([0x10, 0x01, 0x00, 0xFF, 0xFF, 0x00, 0x28])),
                       show([0x11, 0x06, 0x01, 0x00, 0x05, 0x00, 0x00, 0x18, 0x06, 0x00, 0x09, 0x00, 0x01, 0x18]))
        XCTAssertEqual(show(t.request([0x10, 0x0A, 0x00, 0xFF, 0xFF, 0x00, 0x28])),
                       show([0x11, 0x14, 0x0A, 0x00, 0x1D, 0x00] + serviceLE))
        XCTAssertEqual(show(t.request([0x10, 0x1E, 0x00, 0xFF, 0xFF, 0x00, 0x28])), show([0x01, 0x10, 0x1E, 0x00, 0x0A]))
        // Unsupported Group Type for a characteristic declaration; Invalid Handle for a reversed range.
        XCTAssertEqual(show(t.request([0x10, 0x01, 0x00, 0xFF, 0xFF, 0x03, 0x28])), show([0x01, 0x10, 0x01, 0x00, 0x10]))
        XCTAssertEqual(show(t.request([0x10, 0x05, 0x00, 0x01, 0x00, 0x00, 0x28])), show([0x01, 0x10, 0x05, 0x00, 0x01]))
        XCTAssertEqual(show(t.request([0x02, 0x05, 0x02])), show([0x03, 0x05, 0x02]))
        // Find By Type Value: the GAP service by its UUID, with its group end.
        XCTAssertEqual(show(t.request([0x06, 0x01, 0x00, 0xFF, 0xFF, 0x00, 0x28, 0x00, 0x18])), show([0x07, 0x01, 0x00, 0x05, 0x00]))
        XCTAssertEqual(show(t.request([0x06, 0x01, 0x00, 0xFF, 0xFF, 0x00, 0x28, 0x0F, 0x18])), show([0x01, 0x06, 0x01, 0x00, 0x0A]))
    }

    func testCharacteristicAndDescriptorDiscovery() {
        let (sim, t) = makeSim()
        XCTAssertEqual(show(t.request([0x02, 0x05, 0x02])), show([0x03, 0x05, 0x02]))
        // Read By Type 0x2803 in GAP: two declarations of 5 bytes.
        XCTAssertEqual(show(t.request([0x08, 0x01, 0x00, 0x05, 0x00, 0x03, 0x28])),
                       show([0x09, 0x07, 0x02, 0x00, 0x02, 0x03, 0x00, 0x00, 0x2A, 0x04, 0x00, 0x02, 0x05, 0x00, 0x01, 0x2A]))
        // In the mirror service every declaration has a 128-bit UUID (19 bytes): all eight fit at MTU 517.
        let answer = t.request([0x08, 0x0A, 0x00, 0x1D, 0x00, 0x03, 0x28])!
        XCTAssertEqual(Array(answer.prefix(2)), [0x09, 21])
        XCTAssertEqual((answer.count - 2) / 21, 8)
        let scanState = sim.valueHandle("scanState")!
        XCTAssertEqual(Array(answer[2..<7]), le16(scanState - 1) + [0x12] + le16(scanState))
        // Find Information: the CCCD after scanState's value, 16-bit format.
        XCTAssertEqual(show(t.request([0x04] + le16(scanState + 1) + le16(scanState + 1))), show([0x05, 0x01] + le16(scanState + 1) + [0x02, 0x29]))
        // The value itself has a 128-bit type: format 0x02.
        let info = t.request([0x04] + le16(scanState) + le16(scanState))!
        XCTAssertEqual(Array(info.prefix(4)), [0x05, 0x02] + le16(scanState))
        XCTAssertEqual(info.count, 2 + 18)
        XCTAssertEqual(show(t.request([0x04, 0x1E, 0x00, 0xFF, 0xFF])), show([0x01, 0x04, 0x1E, 0x00, 0x0A]))
        XCTAssertEqual(show(t.request([0x04, 0x00, 0x00, 0xFF, 0xFF])), show([0x01, 0x04, 0x00, 0x00, 0x01]))
    }

    func testReadsWritesAndErrorResponses() {
        let (sim, t) = makeSim()
        XCTAssertEqual(show(t.request([0x0A, 0x03, 0x00])), show([0x0B] + Array("mirror-sim".utf8)))
        XCTAssertEqual(show(t.request([0x0A, 0x40, 0x00])), show([0x01, 0x0A, 0x40, 0x00, 0x01]))   // Invalid Handle
        XCTAssertEqual(show(t.request([0x0A, 0x08, 0x00])), show([0x01, 0x0A, 0x08, 0x00, 0x02]))   // Service Changed: Read Not Permitted
        XCTAssertEqual(show(t.request([0x12, 0x03, 0x00, 0x41])), show([0x01, 0x12, 0x03, 0x00, 0x03])) // Write Not Permitted
        XCTAssertEqual(show(t.request([0x0C, 0x03, 0x00, 0x04, 0x00])), show([0x0D] + Array("or-sim".utf8)))
        XCTAssertEqual(show(t.request([0x0C, 0x03, 0x00, 0x0B, 0x00])), show([0x01, 0x0C, 0x03, 0x00, 0x07]))  // Invalid Offset
        XCTAssertEqual(show(t.request([0x0A, 0x03])), show([0x01, 0x0A, 0x00, 0x00, 0x04]))           // Invalid PDU
        XCTAssertEqual(show(t.request([0x0A, 0x00, 0x00])), show([0x01, 0x0A, 0x00, 0x00, 0x01]))     // handle 0: Invalid Handle
        XCTAssertEqual(show(t.request([0x3F, 0x01])), show([0x01, 0x3F, 0x00, 0x00, 0x06]))           // unknown request
        t.inject([0x7F, 0x01])                                                                        // unknown command: no answer
        t.inject([0x52, 0x08, 0x00, 0x01])                                                            // Write Command to a read-only one: no answer
        let scanState = sim.valueHandle("scanState")!
        XCTAssertEqual(show(t.request([0x12] + le16(scanState + 1) + [0x01])), show([0x01, 0x12] + le16(scanState + 1) + [0x0D]))
        XCTAssertEqual(show(t.request([0x12] + le16(scanState + 1) + [0x01, 0x00])), show([0x13]))
        XCTAssertEqual(show(t.request([0x0A] + le16(scanState + 1))), show([0x0B, 0x01, 0x00]))
        XCTAssertEqual(show(t.request([0x0A] + le16(scanState))), show([0x0B, 0x00]))
        // Read Multiple: Device Name and Appearance.
        XCTAssertEqual(show(t.request([0x0E, 0x05, 0x00, 0x03, 0x00])), show([0x0F, 0x00, 0x00] + Array("mirror-sim".utf8)))
    }

    /// The writes a connection brought are counted (any handle, accepted or refused) and logged when it closes:
    /// the VM's bench checks every tool's writes against this line.
    func testWritesReceivedAreCountedAndLoggedAtClose() {
        let lines = Lock<[String]>([])
        let closed = DispatchSemaphore(value: 0)
        let sim = SimulatedMirror(options: SimOptions(), log: { line in
            lines.withLock { $0.append(line) }
        }, connectionClosed: { _ in closed.signal() })
        let t = ScriptedPeer(unscripted: "test-double")
        sim.attach(t)
        let token = sim.valueHandle("cloudToken")!
        for _ in 0..<3 { XCTAssertEqual(t.request([0x12] + le16(token) + [0x41]), [0x13]) }
        XCTAssertEqual(t.request([0x12, 0x03, 0x00, 0x41]), [0x01, 0x12, 0x03, 0x00, 0x03])  // refused, still received
        for _ in 0..<5 { t.inject([0x52] + le16(token) + [0x42]) }
        XCTAssertEqual(t.request([0x0A] + le16(token)), [0x0B, 0x42], "the commands were handled before the read")
        XCTAssertEqual(sim.snapshot.writeRequests, 4)
        XCTAssertEqual(sim.snapshot.writeCommands, 5)
        t.close(reason: "bench done")
        XCTAssertEqual(closed.wait(timeout: .now() + 5), .success)
        let last = lines.withLock { $0.last ?? "" }
        XCTAssertTrue(last.hasSuffix("connection 1 closed: closed by this host: bench done; received 4 Write Requests, 5 Write Commands"), last)
    }

    func testCloudTokenLongerThanItsLimitIsRejectedWhileTheMTUAllowsIt() {
        let (sim, t) = makeSim()
        XCTAssertEqual(show(t.request([0x02, 0x05, 0x02])), show([0x03, 0x05, 0x02]))
        let token = sim.valueHandle("cloudToken")!
        // The bundled profile's limit is 40 (seed 000's working upload URL): a long LAN prefix with a 13-character secret is 41.
        let url41 = Array(("http://192.168.100.100:7777/" + String(repeating: "A", count: 13)).utf8)
        XCTAssertEqual(url41.count, 41)
        XCTAssertEqual(show(t.request([0x12] + le16(token) + url41)), show([0x01, 0x12] + le16(token) + [0x0D]))
        XCTAssertEqual(sim.snapshot.cloudToken, "")
        let url40 = Array(url41.dropLast())
        XCTAssertEqual(url40.count, 40)
        XCTAssertEqual(show(t.request([0x12] + le16(token) + url40)), show([0x13]))
        XCTAssertEqual(show(t.request([0x0A] + le16(token))), show([0x0B] + url40))
        // The same limit holds for a long write (Prepare Write + Execute Write) at MTU 23.
        let (sim2, t2) = makeSim()
        let h = sim2.valueHandle("cloudToken")!
        for offset in stride(from: 0, to: url41.count, by: 18) {
            let piece = Array(url41[offset..<min(offset + 18, url41.count)])
            XCTAssertEqual(show(t2.request([0x16] + le16(h) + [UInt8(offset), 0] + piece)), show([0x17] + le16(h) + [UInt8(offset), 0] + piece))
        }
        XCTAssertEqual(show(t2.request([0x18, 0x01])), show([0x01, 0x18] + le16(h) + [0x0D]))
    }

    func subscribe(_ sim: SimulatedMirror, _ t: ScriptedPeer, _ names: [String]) {
        for name in names {
            let h = sim.valueHandle(name)!
            XCTAssertEqual(show(t.request([0x12] + le16(h + 1) + [0x01, 0x00])), show([0x13]), name)
        }
    }

    func testCloudTokenWhileOfflineLatchesErrorAndALatchedErrorNotifiesNothingNew() {
        let (sim, t) = makeSim { $0.wifiConnected = false }
        subscribe(sim, t, ["scanState", "scanError"])
        let token = sim.valueHandle("cloudToken")!
        let stateH = sim.valueHandle("scanState")!, errorH = sim.valueHandle("scanError")!
        var notes: [[UInt8]] = []
        // The notifications come before the Write Response.
        XCTAssertEqual(show(t.request([0x12] + le16(token) + Array("http://debug.local:7777/upload/test".utf8), notes: &notes)), show([0x13]))
        XCTAssertEqual(notes.map { show($0) }, [show([0x1B] + le16(stateH) + [9]), show([0x1B] + le16(errorH) + [5])])
        XCTAssertEqual(sim.snapshot.scanState, 9)
        // The same write again: the values do not change, so nothing is notified.
        notes = []
        XCTAssertEqual(show(t.request([0x12] + le16(token) + Array("http://debug.local:7777/upload/test".utf8), notes: &notes)), show([0x13]))
        XCTAssertEqual(notes.count, 0)
        XCTAssertNil(t.next(timeout: 0.1))
        // cancelScan resets both to INVALID (notified, since they change).
        let action = sim.valueHandle("scannerAction")!
        XCTAssertEqual(show(t.request([0x12] + le16(action) + [0x36], notes: &notes)), show([0x13]))
        XCTAssertEqual(notes.map { show($0) }, [show([0x1B] + le16(stateH) + [0]), show([0x1B] + le16(errorH) + [0])])
    }

    /// The latched ERROR's notifications are due 5 ms after the write, its Write Response 10 ms after: with the timer
    /// queue stalled past both (a loaded machine), they still go out in that order, as they share the host's one queue.
    func testNotificationsDueBeforeADelayedWriteResponseGoFirstWhenBothFireLate() {
        for round in 0..<8 {
            let (sim, t) = makeSim { $0.wifiConnected = false }
            subscribe(sim, t, ["scanState", "scanError"])
            let token = sim.valueHandle("cloudToken")!
            let stateH = sim.valueHandle("scanState")!, errorH = sim.valueHandle("scanError")!
            let stalled = DispatchSemaphore(value: 0)
            sim.timers.async { stalled.signal(); usleep(60_000) }
            stalled.wait()
            var notes: [[UInt8]] = []
            XCTAssertEqual(show(t.request([0x12] + le16(token) + Array("http://debug.local:7777/upload/t".utf8), notes: &notes)), show([0x13]))
            XCTAssertEqual(notes.map { show($0) }, [show([0x1B] + le16(stateH) + [9]), show([0x1B] + le16(errorH) + [5])], "round \(round)")
        }
    }

    func testMisalignedScaleNotifiesScaleAlignmentWithin60To90MillisecondsBeforeTheWriteResponse() {
        let (sim, t) = makeSim { $0.scaleAligned = false }
        subscribe(sim, t, ["scanState", "scanError"])
        let action = sim.valueHandle("scannerAction")!, errorH = sim.valueHandle("scanError")!, stateH = sim.valueHandle("scanState")!
        let start = DispatchTime.now()
        t.inject([0x12] + le16(action) + [0x32])
        let first = t.next()
        let elapsed = Double(DispatchTime.now().uptimeNanoseconds - start.uptimeNanoseconds) / 1e6
        XCTAssertEqual(show(first), show([0x1B] + le16(errorH) + [11]))
        XCTAssertGreaterThanOrEqual(elapsed, 59)
        XCTAssertLessThan(elapsed, 250)
        XCTAssertEqual(show(t.next()), show([0x1B] + le16(stateH) + [9]))
        XCTAssertEqual(show(t.next()), show([0x13]))
    }

    func testCancelIgnoredByAWedgedMirror() {
        let (sim, t) = makeSim { $0.cancelResets = false; $0.initialScanState = 9; $0.initialScanError = 5 }
        let action = sim.valueHandle("scannerAction")!
        XCTAssertEqual(show(t.request([0x12] + le16(action) + [0x36])), show([0x13]))
        XCTAssertEqual(sim.snapshot.scanState, 9)
        XCTAssertEqual(show(t.request([0x12] + le16(action) + [0x99])), show([0x01, 0x12] + le16(action) + [0x13]))
        XCTAssertEqual(show(t.request([0x12] + le16(action) + [0x32, 0x00])), show([0x01, 0x12] + le16(action) + [0x0D]))
    }

    func testRebootDropsTheConnectionAndComesBackClean() {
        let (sim, t) = makeSim { $0.initialScanState = 9; $0.initialScanError = 5 }
        let action = sim.valueHandle("scannerAction")!
        XCTAssertEqual(show(t.request([0x12] + le16(action) + [0x33])), show([0x13]))
        XCTAssertNil(t.next(timeout: 2))
        XCTAssertEqual(t.closeReason, "mirror rebooting")
        let snap = sim.snapshot
        XCTAssertEqual([snap.scanState, snap.scanError], [0, 0])
        XCTAssertEqual(snap.reboots, 1)
        // A new connection finds it clean.
        let t2 = ScriptedPeer(unscripted: "test-double")
        sim.attach(t2)
        XCTAssertEqual(show(t2.request([0x0A] + le16(sim.valueHandle("scanState")!))), show([0x0B, 0x00]))
    }

    func testWiFiListSetSSIDAndStatus() {
        let (sim, t) = makeSim { $0.wifiConnected = false; $0.networks = ["alpha", "beta-5G"] }
        let action = sim.valueHandle("scannerAction")!, count = sim.valueHandle("wifiNumNetworks")!
        let ssidEnum = sim.valueHandle("wifiNetworkSSIDEnum")!, set = sim.valueHandle("wifiSetSSID")!
        let status = sim.valueHandle("wifiConnectionStatus")!
        XCTAssertEqual(show(t.request([0x0A] + le16(count))), show([0x0B, 0x00]))
        XCTAssertEqual(show(t.request([0x12] + le16(action) + [0x31])), show([0x13]))
        XCTAssertEqual(show(t.request([0x0A] + le16(count))), show([0x0B, 0x02]))
        XCTAssertEqual(show(t.request([0x0A] + le16(ssidEnum))), show([0x0B] + Array("alpha".utf8)))
        XCTAssertEqual(show(t.request([0x0A] + le16(ssidEnum))), show([0x0B] + Array("beta-5G".utf8)))
        XCTAssertEqual(show(t.request([0x0A] + le16(ssidEnum))), show([0x0B]))
        XCTAssertEqual(show(t.request([0x0A] + le16(status))), show([0x0B, 0x00]))
        XCTAssertEqual(show(t.request([0x12] + le16(status + 1) + [0x01, 0x00])), show([0x13]))
        func join(_ ssid: String) -> [String] {
            var notes: [[UInt8]] = []
            XCTAssertEqual(show(t.request([0x12] + le16(set) + Array(ssid.utf8), notes: &notes)), show([0x13]))
            while notes.count < 2, let n = t.next() { notes.append(n) }
            return notes.map { show($0) }
        }
        XCTAssertEqual(join("beta-5G"), [show([0x1B] + le16(status) + [1]), show([0x1B] + le16(status) + [2])])
        // An SSID it cannot see fails.
        XCTAssertEqual(join("nowhere"), [show([0x1B] + le16(status) + [1]), show([0x1B] + le16(status) + [3])])
    }

    func testFaultsDropDelayDisconnectAndNotifyFirst() throws {
        let faults = [try SimFault(parsing: "drop:cloudToken"), try SimFault(parsing: "delay:wifiNumNetworks:300"),
                      try SimFault(parsing: "notify-first:wifiSetSSID")]
        let (sim, t) = makeSim { o in o.faults = faults }
        subscribe(sim, t, ["scanState"])
        let token = sim.valueHandle("cloudToken")!
        t.inject([0x12] + le16(token) + Array("http://h/upload/x".utf8))
        XCTAssertNil(t.next(timeout: 0.3), "the dropped response must never come")
        XCTAssertEqual(sim.snapshot.cloudToken, "http://h/upload/x", "a dropped answer still acts")
        // Delay: the answer comes after 300 ms.
        let start = DispatchTime.now()
        XCTAssertEqual(show(t.request([0x0A] + le16(sim.valueHandle("wifiNumNetworks")!))), show([0x0B, 0x00]))
        XCTAssertGreaterThanOrEqual(Double(DispatchTime.now().uptimeNanoseconds - start.uptimeNanoseconds) / 1e6, 290)
        // Notify-first: the (unchanged) scanState goes out before the Write Response.
        var notes: [[UInt8]] = []
        XCTAssertEqual(show(t.request([0x12] + le16(sim.valueHandle("wifiSetSSID")!) + Array("mirror-lab".utf8), notes: &notes)), show([0x13]))
        XCTAssertEqual(notes.first.map { show($0) }, show([0x1B] + le16(sim.valueHandle("scanState")!) + [0]))
        // Disconnect: the connection closes without an answer.
        let disconnect = try SimFault(parsing: "disconnect:scannerAction")
        let (sim2, t2) = makeSim { o in o.faults = [disconnect] }
        t2.inject([0x12] + le16(sim2.valueHandle("scannerAction")!) + [0x32])
        XCTAssertNil(t2.next(timeout: 2))
        XCTAssertEqual(t2.closeReason, "fault: disconnect during Write Request")
        XCTAssertEqual(sim2.snapshot.scanState, 0)
    }

    func testScenarioFileAndFlags() throws {
        var o = SimOptions()
        try o.apply(scenario: Data(#"{"scale":"misaligned","wifi":"offline","faults":["drop:cloudToken","delay:scannerAction:50"],"token-limit":30,"latched-error":true}"#.utf8), source: "test")
        XCTAssertFalse(o.scaleAligned)
        XCTAssertFalse(o.wifiConnected)
        XCTAssertEqual(o.faults.map(\.description), ["drop:cloudToken", "delay:scannerAction:50"])
        XCTAssertEqual(o.effectiveTokenLimit, 30)
        XCTAssertEqual([o.initialScanState, o.initialScanError], [9, 5])
        try o.set("pace", "realistic")
        XCTAssertEqual(o.timings, .realistic)
        XCTAssertEqual(o.timings.scanStepMilliseconds * 8, 24_000)
        try o.set("fault", "delay:scannerAction:900@2")
        XCTAssertEqual(o.faults.last?.occurrence, 2)
        XCTAssertEqual(o.faults.last?.description, "delay:scannerAction:900@2")
        XCTAssertThrowsError(try o.set("scale", "sideways"))
        XCTAssertThrowsError(try o.set("fault", "explode:cloudToken"))
        XCTAssertThrowsError(try o.set("frobnicate", "1"))
    }
}
