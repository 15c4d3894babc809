import Foundation
import XCTest
@testable import LinuxBluetooth
import LinkCore
import ATTStack
import CBlueZSocket

/// The pairing commands and events against BlueZ's doc/mgmt-protocol.rst layouts, and the agent's answers over a
/// socketpair standing in for the kernel's HCI_CHANNEL_CONTROL socket.
final class PairingAgentTests: XCTestCase {
    let peer = try! BluetoothAddress(parsing: "00:AA:01:01:00:01")
    /// The peer's Address field (least significant octet first) and Address_Type 0x01 LE Public.
    let peerField: [UInt8] = [0x01, 0x00, 0x01, 0x01, 0xAA, 0x00, 0x01]

    func testCommandsAreTheDocumentedPackets() {
        // Header: Command Code, Controller Index, Parameter Length (2 octets each, little-endian), then parameters.
        // Set Bondable 0x0009: Bondable (1 octet).
        XCTAssertEqual(ManagementCommand.setBondable(index: 0, true).packet, [0x09, 0x00, 0x00, 0x00, 0x01, 0x00, 0x01])
        // Set IO Capability 0x0018: IO_Capability (0x03 NoInputNoOutput).
        XCTAssertEqual(ManagementCommand.setIOCapability(index: 1, .noInputNoOutput).packet, [0x18, 0x00, 0x01, 0x00, 0x01, 0x00, 0x03])
        // Set Secure Connections 0x002D: 0x01 enables.
        XCTAssertEqual(ManagementCommand.setSecureConnections(index: 0, true).packet, [0x2D, 0x00, 0x00, 0x00, 0x01, 0x00, 0x01])
        // Read Controller Information 0x0004: no parameters.
        XCTAssertEqual(ManagementCommand.readControllerInformation(index: 0).packet, [0x04, 0x00, 0x00, 0x00, 0x00, 0x00])
        // Pair Device 0x0019: Address (6), Address_Type (1), IO_Capability (1: 0x04 KeyboardDisplay).
        XCTAssertEqual(ManagementCommand.pairDevice(index: 0, address: peer, type: .public, io: .keyboardDisplay).packet,
                       [0x19, 0x00, 0x00, 0x00, 0x08, 0x00] + peerField + [0x04])
        // Cancel Pair Device 0x001A: Address, Address_Type (0x02 LE Random).
        XCTAssertEqual(ManagementCommand.cancelPairDevice(index: 0, address: peer, type: .random).packet,
                       [0x1A, 0x00, 0x00, 0x00, 0x07, 0x00, 0x01, 0x00, 0x01, 0x01, 0xAA, 0x00, 0x02])
        // User Confirmation Reply 0x001C and Negative Reply 0x001D: Address, Address_Type.
        XCTAssertEqual(ManagementCommand.userConfirmationReply(index: 0, address: peer, type: .public, accept: true).packet,
                       [0x1C, 0x00, 0x00, 0x00, 0x07, 0x00] + peerField)
        XCTAssertEqual(ManagementCommand.userConfirmationReply(index: 0, address: peer, type: .public, accept: false).packet,
                       [0x1D, 0x00, 0x00, 0x00, 0x07, 0x00] + peerField)
        // User Passkey Reply 0x001E: Address, Address_Type, Passkey (4 octets): 123456 = 0x0001E240.
        XCTAssertEqual(ManagementCommand.userPasskeyReply(index: 0, address: peer, type: .public, passkey: 123456).packet,
                       [0x1E, 0x00, 0x00, 0x00, 0x0B, 0x00] + peerField + [0x40, 0xE2, 0x01, 0x00])
        // User Passkey Negative Reply 0x001F: Address, Address_Type.
        XCTAssertEqual(ManagementCommand.userPasskeyReply(index: 0, address: peer, type: .public, passkey: nil).packet,
                       [0x1F, 0x00, 0x00, 0x00, 0x07, 0x00] + peerField)
    }

    func testEventsAreReadFromTheDocumentedLayouts() {
        func event(_ code: UInt8, _ params: [UInt8]) -> ManagementEvent? {
            ManagementEvent.parse([code, 0x00, 0x00, 0x00, UInt8(params.count), 0x00] + params)
        }
        // User Confirmation Request 0x000F: Address, Address_Type, Confirm_Hint, Value (4 octets).
        XCTAssertEqual(event(0x0F, peerField + [0x01, 0, 0, 0, 0]),
                       .pairing(index: 0, .userConfirmationRequest(peer, .public, confirmHint: true, value: 0)))
        XCTAssertEqual(event(0x0F, peerField + [0x00, 0x40, 0xE2, 0x01, 0x00]),
                       .pairing(index: 0, .userConfirmationRequest(peer, .public, confirmHint: false, value: 123456)))
        // User Passkey Request 0x0010: Address, Address_Type.
        XCTAssertEqual(event(0x10, peerField), .pairing(index: 0, .userPasskeyRequest(peer, .public)))
        // Passkey Notify 0x0017: Address, Address_Type, Passkey (4), Entered (1).
        XCTAssertEqual(event(0x17, peerField + [0x0F, 0x27, 0x00, 0x00, 0x02]),
                       .pairing(index: 0, .passkeyNotify(peer, .public, passkey: 9999, entered: 2)))
        // Authentication Failed 0x0011: Address, Address_Type, Status.
        XCTAssertEqual(event(0x11, peerField + [0x05]), .pairing(index: 0, .authenticationFailed(peer, .public, status: 0x05)))
        // Device Connected 0x000B: Address, Address_Type, Flags (4), EIR_Data_Length (2), EIR_Data.
        XCTAssertEqual(event(0x0B, peerField + [0x08, 0, 0, 0, 0x00, 0x00]), .pairing(index: 0, .deviceConnected(peer, .public)))
        // Device Disconnected 0x000C: Address, Address_Type, Reason.
        XCTAssertEqual(event(0x0C, peerField + [0x03]), .pairing(index: 0, .deviceDisconnected(peer, .public, reason: 0x03)))
        // Connect Failed 0x000D: Address, Address_Type, Status.
        XCTAssertEqual(event(0x0D, peerField + [0x04]), .pairing(index: 0, .connectFailed(peer, .public, status: 0x04)))
        // A BR/EDR peer (Address_Type 0x00) and a short event are not pairing events this tool reads; no crash.
        XCTAssertEqual(event(0x10, Array(peerField.prefix(6)) + [0x00]), .other(code: 0x10, index: 0))
        XCTAssertEqual(event(0x0F, Array(peerField.prefix(5))), .other(code: 0x0F, index: 0))
        XCTAssertEqual(event(0x0F, peerField + [0x01]), .other(code: 0x0F, index: 0))
        XCTAssertEqual(sixDigits(42), "000042")
    }

    /// A socketpair: the agent's end, and the kernel's end with `events` already queued on it.
    func kernel(_ events: [[UInt8]], prompts: PairingPrompts = .fixed(passkey: nil)) -> (PairingAgent, Int32) {
        var fds: [Int32] = [0, 0]
        XCTAssertEqual(socketpair(AF_UNIX, Int32(SOCK_SEQPACKET.rawValue), 0, &fds), 0)
        for e in events { XCTAssertEqual(write(fds[1], e, e.count), e.count) }
        return (PairingAgent(socket: ManagementSocket(adopting: fds[0], adapter: "hci0"), index: 0, prompts: prompts), fds[1])
    }

    /// What the agent sent, packet by packet.
    func sent(_ fd: Int32) -> [[UInt8]] {
        var packets: [[UInt8]] = []
        var buffer = [UInt8](repeating: 0, count: 64)
        while true {
            let n = recv(fd, &buffer, buffer.count, Int32(MSG_DONTWAIT))
            if n <= 0 { return packets }
            packets.append(Array(buffer.prefix(n)))
        }
    }

    func event(_ code: UInt8, _ params: [UInt8]) -> [UInt8] {
        [code, 0x00, 0x00, 0x00, UInt8(params.count & 0xFF), UInt8(params.count >> 8)] + params
    }
    func pairComplete(_ status: UInt8) -> [UInt8] { event(0x01, [0x19, 0x00, status] + peerField) }

    func testJustWorksIsConfirmedAndReported() throws {
        let (agent, k) = kernel([event(0x0B, peerField + [0, 0, 0, 0, 0, 0]), event(0x0F, peerField + [0x01, 0, 0, 0, 0]),
                                 event(0x01, [0x1C, 0x00, 0x00] + peerField), pairComplete(0x00)])
        defer { close(k) }
        let outcome = try agent.pair(address: peer, type: .public, io: .noInputNoOutput)
        XCTAssertEqual(outcome, PairingOutcome(address: peer, type: .public, method: .justWorks, alreadyPaired: false))
        XCTAssertEqual(sent(k), [ManagementCommand.pairDevice(index: 0, address: peer, type: .public, io: .noInputNoOutput).packet,
                                 ManagementCommand.userConfirmationReply(index: 0, address: peer, type: .public, accept: true).packet])
    }

    func testPasskeyEntryRepliesWithTheGivenPasskeyAndARefusalSaysWhoRefused() throws {
        let (agent, k) = kernel([event(0x10, peerField), pairComplete(0x00)], prompts: .fixed(passkey: 123456))
        defer { close(k) }
        XCTAssertEqual(try agent.pair(address: peer, type: .public, io: .keyboardOnly).method, .passkeyEntry)
        XCTAssertEqual(sent(k).last, ManagementCommand.userPasskeyReply(index: 0, address: peer, type: .public, passkey: 123456).packet)

        // No passkey: the negative reply, and the kernel's 0x05 is this host's refusal, not the peer's.
        let (agent2, k2) = kernel([event(0x10, peerField), event(0x11, peerField + [0x05]), pairComplete(0x05)])
        defer { close(k2) }
        XCTAssertThrowsError(try agent2.pair(address: peer, type: .public, io: .keyboardOnly)) { error in
            XCTAssertEqual("\(error)", "pairing with 00:AA:01:01:00:01 (public) on hci0 failed: Pair Device answered 0x05 Authentication Failed (method Passkey Entry; this host refused: no passkey to enter (give --passkey N, or run on a terminal to type it); the kernel reported Authentication Failed, HCI status 0x05)")
        }
        XCTAssertEqual(sent(k2).last, ManagementCommand.userPasskeyReply(index: 0, address: peer, type: .public, passkey: nil).packet)
    }

    func testNumericComparisonAsksThePromptAndPassesTheDisplayedPasskeyOn() throws {
        let asked = Lock<[String]>([])
        let prompts = PairingPrompts(confirm: { v, _ in asked.withLock { $0.append("confirm \(sixDigits(v))") }; return false },
                                     passkey: { _ in nil },
                                     display: { p, _ in asked.withLock { $0.append("display \(sixDigits(p))") } })
        let (agent, k) = kernel([event(0x0F, peerField + [0x00, 0x40, 0xE2, 0x01, 0x00]), pairComplete(0x05)], prompts: prompts)
        defer { close(k) }
        XCTAssertThrowsError(try agent.pair(address: peer, type: .public, io: .displayYesNo)) { error in
            XCTAssertTrue("\(error)".contains("method Numeric Comparison; this host refused: the six digits 123456 were not confirmed"), "\(error)")
        }
        XCTAssertEqual(sent(k).last, ManagementCommand.userConfirmationReply(index: 0, address: peer, type: .public, accept: false).packet)
        // Passkey Notify shows the passkey once (Entered 0), not at every keypress the peer reports.
        let (agent2, k2) = kernel([event(0x17, peerField + [0x07, 0, 0, 0, 0]), event(0x17, peerField + [0x07, 0, 0, 0, 1]), pairComplete(0x00)], prompts: prompts)
        defer { close(k2) }
        XCTAssertEqual(try agent2.pair(address: peer, type: .public, io: .displayOnly).method, .passkeyEntry)
        XCTAssertEqual(asked.withLock { $0 }, ["confirm 123456", "display 000007"])
    }

    func testAlreadyPairedAndAPeerThatDroppedTheLinkAreNamed() throws {
        let (agent, k) = kernel([pairComplete(0x13)])
        defer { close(k) }
        XCTAssertTrue(try agent.pair(address: peer, type: .public, io: .noInputNoOutput).alreadyPaired)
        let (agent2, k2) = kernel([event(0x0C, peerField + [0x03]), pairComplete(0x05)])
        defer { close(k2) }
        XCTAssertThrowsError(try agent2.pair(address: peer, type: .public, io: .noInputNoOutput)) { error in
            XCTAssertEqual("\(error)", "pairing with 00:AA:01:01:00:01 (public) on hci0 failed: Pair Device answered 0x05 Authentication Failed (the link dropped: terminated by the peer); the peer refused the pairing or the values did not match; if it was bonded before it may have forgotten the bond: `mirror bonds remove 00:AA:01:01:00:01` then pair again")
        }
    }

    func testASilentKernelTimesOutNamingTheStepAndCancels() {
        let (agent, k) = kernel([event(0x0B, peerField + [0, 0, 0, 0, 0, 0])])
        defer { close(k) }
        XCTAssertThrowsError(try agent.pair(address: peer, type: .public, io: .noInputNoOutput, limit: 0.3)) { error in
            XCTAssertEqual("\(error)", "pairing with 00:AA:01:01:00:01 (public) on hci0 failed: timed out after 0.3 s waiting for the SMP pairing with 00:AA:01:01:00:01 (public) to end (Pair Device's Command Complete); the peer or the kernel stopped answering; btmon shows the SMP exchange")
        }
        XCTAssertEqual(sent(k).last, ManagementCommand.cancelPairDevice(index: 0, address: peer, type: .public).packet)
    }

    /// Command Complete for `opcode` with `status` and return parameters.
    func complete(_ opcode: UInt16, status: UInt8 = 0, _ ret: [UInt8] = []) -> [UInt8] {
        event(0x01, [UInt8(opcode & 0xFF), UInt8(opcode >> 8), status] + ret)
    }

    /// Read Controller Information's return: Address, Version, Manufacturer, Supported and Current Settings, then the
    /// rest (Class of Device, Name, Short Name) zero.
    func controllerInformation(supported: UInt32, current: UInt32) -> [UInt8] {
        [0x00, 0x00, 0x00, 0x01, 0xAA, 0x00, 0x0B, 0x02, 0x00] + le32(supported) + le32(current)
            + [UInt8](repeating: 0, count: 3 + 249 + 11)
    }

    func testAnAdapterWithoutSMPIsPoweredOffAndOnAgainThroughTheManagementInterface() throws {
        // Powered (bit 0), SSP (bit 6), LE (bit 9), Secure Connections (bit 11) on; Read Local OOB Extended Data
        // fails (0x03): smp_generate_oob found no SMP, so the adapter is power-cycled through the management socket.
        let settings: UInt32 = 1 | 1 << 6 | 1 << 9 | 1 << 11
        let (agent, k) = kernel([complete(0x0009, [0, 0, 0, 0]), complete(0x0018),
                                 complete(0x0004, controllerInformation(supported: settings, current: settings)),
                                 event(0x02, [0x3B, 0x00, 0x03]), complete(0x0005, [0, 2, 0, 0]), complete(0x0005, [1, 2, 0, 0]),
                                 complete(0x003B, [0x06, 0x00, 0x00])])
        defer { close(k) }
        let note = try agent.prepare(io: .noInputNoOutput)
        XCTAssertEqual(note, "hci0 had been powered on outside the Bluetooth management interface, so the kernel had no SMP on it (no pairing possible): powered it off and on again through that interface, which registers SMP")
        XCTAssertEqual(sent(k), [ManagementCommand.setBondable(index: 0, true).packet,
                                 ManagementCommand.setIOCapability(index: 0, .noInputNoOutput).packet,
                                 ManagementCommand.readControllerInformation(index: 0).packet,
                                 // Read Local OOB Extended Data 0x003B: Address_Type 0x06 (LE public and random).
                                 [0x3B, 0x00, 0x00, 0x00, 0x01, 0x00, 0x06],
                                 // Set Powered 0x0005: Powered 0x00, then 0x01.
                                 [0x05, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00], [0x05, 0x00, 0x00, 0x00, 0x01, 0x00, 0x01],
                                 // Asked again after the power cycle: SMP is there now.
                                 [0x3B, 0x00, 0x00, 0x00, 0x01, 0x00, 0x06]])

        // SMP there (the OOB data comes): nothing else is sent. Secure Connections supported but off: turned on first.
        let (agent2, k2) = kernel([complete(0x0009, [0, 0, 0, 0]), complete(0x0018),
                                   complete(0x0004, controllerInformation(supported: settings, current: 1 | 1 << 6 | 1 << 9)),
                                   complete(0x002D, [0, 0, 0, 0]), complete(0x003B, [0x06, 0x00, 0x00])])
        defer { close(k2) }
        XCTAssertNil(try agent2.prepare(io: .keyboardOnly))
        XCTAssertEqual(sent(k2).map { $0[0] }, [0x09, 0x18, 0x04, 0x2D, 0x3B])

        // Still no SMP after the power cycle: the kernel cannot pair (its SMP crypto is missing); said.
        let (agent3, k3) = kernel([complete(0x0009, [0, 0, 0, 0]), complete(0x0018),
                                   complete(0x0004, controllerInformation(supported: settings, current: settings)),
                                   complete(0x003B, status: 0x03, [0x06]), complete(0x0005, [0, 2, 0, 0]),
                                   complete(0x0005, [1, 2, 0, 0]), complete(0x003B, status: 0x03, [0x06])])
        defer { close(k3) }
        XCTAssertThrowsError(try agent3.prepare(io: .noInputNoOutput)) { error in
            XCTAssertTrue("\(error)".hasPrefix("Read Local Out Of Band Extended Data (Bluetooth management) on hci0 failed with status 0x03 Failed: the kernel has no SMP on hci0 even after powering it on"), "\(error)")
        }
    }

    func testAnLEOnlyAdapterCannotBeAskedSoOnlyTheCallersLeavePowerCyclesIt() throws {
        // No SSP (bit 6): mgmt.c refuses the OOB read on such a controller before asking SMP, so it is not sent.
        let leOnly: UInt32 = 1 | 1 << 9 | 1 << 11
        let answers = [complete(0x0009, [0, 0, 0, 0]), complete(0x0018),
                       complete(0x0004, controllerInformation(supported: leOnly, current: leOnly))]
        let (agent, k) = kernel(answers)
        defer { close(k) }
        XCTAssertNil(try agent.prepare(io: .noInputNoOutput, mayPowerCycle: false))
        XCTAssertEqual(sent(k).map { $0[0] }, [0x09, 0x18, 0x04])
        let (agent2, k2) = kernel(answers + [complete(0x0005, [0, 2, 0, 0]), complete(0x0005, [1, 2, 0, 0])])
        defer { close(k2) }
        XCTAssertEqual(try agent2.prepare(io: .noInputNoOutput, mayPowerCycle: true),
                       "powered hci0 off and on again through the Bluetooth management interface (it had no connection, and no bluetoothd runs): an adapter first powered on outside that interface has no SMP in the kernel, and an LE-only one cannot be asked")
        XCTAssertEqual(sent(k2).map { $0[0] }, [0x09, 0x18, 0x04, 0x05, 0x05])

        // The power-on answered Success with Powered clear (the kernel still closing the device after its power-off
        // answer): asked again until the answer says Powered; three such answers are an error naming the command.
        let (agent3, k3) = kernel(answers + [complete(0x0005, [0, 2, 0, 0]), complete(0x0005, [0, 2, 0, 0]), complete(0x0005, [1, 2, 0, 0])])
        defer { close(k3) }
        XCTAssertNotNil(try agent3.prepare(io: .noInputNoOutput, mayPowerCycle: true))
        XCTAssertEqual(sent(k3).map { $0[0] }, [0x09, 0x18, 0x04, 0x05, 0x05, 0x05])
        let off = complete(0x0005, [0, 2, 0, 0])
        let (agent4, k4) = kernel(answers + [off, off, off, off])
        defer { close(k4) }
        XCTAssertThrowsError(try agent4.prepare(io: .noInputNoOutput, mayPowerCycle: true)) { error in
            XCTAssertTrue("\(error)".contains("3 Set Powered on answered Success with the adapter still off"), "\(error)")
        }
        XCTAssertEqual(sent(k4).map { $0[0] }, [0x09, 0x18, 0x04, 0x05, 0x05, 0x05, 0x05])
    }

    func testTheServingAgentAnswersUntilStoppedAndAStopWaitsForAnAnswerOnlyToItsLimit() throws {
        let reports = Lock<[String]>([])
        let (agent, k) = kernel([], prompts: .fixed(passkey: 123456))
        defer { close(k) }
        let service = try agent.startServing { line in reports.withLockBroadcasting { $0.append(line) } }
        // A User Passkey Request on this adapter: answered with the passkey, and reported.
        let request = event(0x10, peerField)
        XCTAssertEqual(write(k, request, request.count), request.count)
        XCTAssertNotNil(reports.wait(until: { $0.isEmpty ? nil : $0 }, timeoutNanoseconds: 5_000_000_000))
        XCTAssertEqual(reports.withLock { $0 }, ["pairing with 00:AA:01:01:00:01 (public): Passkey Entry, answered"])
        XCTAssertEqual(sent(k), [ManagementCommand.userPasskeyReply(index: 0, address: peer, type: .public, passkey: 123456).packet])
        let started = ContinuousClock.now
        service.stop()
        XCTAssertLessThan(ContinuousClock.now - started, .seconds(1), "the eventfd ends the thread's poll at once")
        // After stop, a request goes unanswered.
        XCTAssertEqual(write(k, request, request.count), request.count)
        var revents: Int16 = 0
        XCTAssertEqual(cbz_poll_one(k, Int16(CBZ_POLLIN), 200, &revents), 0, "nothing sent after stop")

        // An agent whose prompt has not returned: stop waits for it only to its limit, then says so (pairing.stop).
        // (entered, released): the prompt says it was entered, then waits for the test to release it.
        let prompt = Lock((false, false))
        let slow = PairingPrompts(confirm: { _, _ in true },
                                  passkey: { _ in
                                      prompt.withLockBroadcasting { $0.0 = true }
                                      _ = prompt.wait(until: { $0.1 ? () : nil }, timeoutNanoseconds: 5_000_000_000)
                                      return nil
                                  },
                                  display: { _, _ in })
        let (agent2, k2) = kernel([request], prompts: slow)
        defer { close(k2) }
        let service2 = try agent2.startServing { _ in }
        XCTAssertNotNil(prompt.wait(until: { $0.0 ? () : nil }, timeoutNanoseconds: 5_000_000_000), "the agent asked its prompt")
        // The prompt holds the agent's thread for 5 s: stop returns at its own limit, well before.
        let stopping = ContinuousClock.now
        service2.stop(limit: .milliseconds(200))
        let took = ContinuousClock.now - stopping
        XCTAssertGreaterThanOrEqual(took, .milliseconds(190), "stop returned before its limit, though the agent was held")
        XCTAssertLessThan(took, .seconds(4), "stop waited past its limit for the held agent")
        prompt.withLockBroadcasting { $0.1 = true }
    }

    /// A peer with a bond here that asks to pair again (the kernel's Just Works confirmation for it) is said so
    /// before the answer; a peer without one is answered with no such line (Vol 3 Part H §2.4.6).
    func testAPeerWithABondThatAsksToPairAgainIsSaidSo() throws {
        let reports = Lock<[String]>([])
        let (agent, k) = kernel([], prompts: .fixed(passkey: nil))
        defer { close(k) }
        let service = try agent.startServing(report: { line in reports.withLockBroadcasting { $0.append(line) } },
                                             bonded: { $0.description == "00:AA:01:01:00:01" ? "Just Works, kept in /tmp/bond.json" : nil })
        defer { service.stop() }
        let justWorks = event(0x0F, peerField + [0x01, 0, 0, 0, 0])
        XCTAssertEqual(write(k, justWorks, justWorks.count), justWorks.count)
        XCTAssertNotNil(reports.wait(until: { $0.count >= 2 ? $0 : nil }, timeoutNanoseconds: 5_000_000_000))
        XCTAssertEqual(reports.withLock { $0 }, [
            "00:AA:01:01:00:01 asks to pair again though this host holds a bond with it (Just Works, kept in /tmp/bond.json): the peer lost its keys or asks for a stronger key; the new pairing's keys replace the bond (if the peer did not lose them, something else may be using its address)",
            "pairing with 00:AA:01:01:00:01 (public): Just Works, answered",
        ])
        // Another peer, no bond: only the answer.
        let otherField: [UInt8] = [0x02, 0x00, 0x01, 0x01, 0xAA, 0x00, 0x01]   // 00:AA:01:01:00:02, LE public
        let request = event(0x0F, otherField + [0x01, 0, 0, 0, 0])
        XCTAssertEqual(write(k, request, request.count), request.count)
        XCTAssertNotNil(reports.wait(until: { $0.count >= 3 ? $0 : nil }, timeoutNanoseconds: 5_000_000_000))
        XCTAssertEqual(reports.withLock { $0 }.last, "pairing with 00:AA:01:01:00:02 (public): Just Works, answered")
        XCTAssertEqual(reports.withLock { $0 }.count, 3)
    }

    func testTheServingAgentReportsAFailuresSMPReasonAndSenderAndWhatItServed() throws {
        try servingAgentReportsAFailure(loop: nil)
    }

    /// As above with the agent's management socket and the SMP watch sources of one loop (a --pair link's): each
    /// report is made on the loop's thread, and the failure's wait for its PDU reads the watch's socket there.
    func testTheServingAgentOnALoopReportsAFailuresSMPReasonAndSenderAndWhatItServed() throws {
        let before = EventLoop.liveLoops
        try servingAgentReportsAFailure(loop: try EventLoop())
        XCTAssertTrue(EventLoop.waitForLiveLoops(atMost: before, seconds: 5), "the stopped agent and the closed watch left the loop")
    }

    func servingAgentReportsAFailure(loop: EventLoop?) throws {
        let reports = Lock<[String]>([])
        let loopThread = loop?.sync { pthread_self() }
        let readers = (threadCount("pair-agent"), threadCount("smp-watch"))
        let (agent, k) = kernel([], prompts: .fixed(passkey: 123456))
        defer { close(k) }
        // The watch over a socketpair: what the test writes there is ACL data the watch reads as incoming (the peer's).
        let acl = try SocketPair()
        acl.handOverA()
        let watch = try XCTUnwrap(SMPFailureWatch(adopting: acl.a, adapter: "hci0", seesACL: true, loop: loop))
        let service = try agent.startServing(report: { line in
            if let loopThread { XCTAssertTrue(pthread_equal(pthread_self(), loopThread) != 0, "reported off the loop: \(line)") }
            reports.withLockBroadcasting { $0.append(line) }
        }, watch: watch, on: loop)
        defer { service.stop() }
        if loop != nil {
            // No reader thread of their own (another test's may still be ending: the counts do not grow).
            XCTAssertLessThanOrEqual(threadCount("pair-agent"), readers.0, "\(threadNames())")
            XCTAssertLessThanOrEqual(threadCount("smp-watch"), readers.1, "\(threadNames())")
        }
        func awaitReports(_ count: Int) -> [String] {
            reports.wait(until: { $0.count >= count ? $0 : nil }, timeoutNanoseconds: 5_000_000_000) ?? reports.withLock { $0 }
        }
        // A User Passkey Request, answered: the method is served.
        let request = event(0x10, peerField)
        XCTAssertEqual(write(k, request, request.count), request.count)
        _ = awaitReports(1)
        // The peer's Pairing Failed (handle 0x2A, 0x04 Confirm Value Failed), then the kernel's Authentication Failed
        // 0x0011 (Address, Address_Type, Status 0x05): reported with the PDU's reason and its sender.
        acl.sendB([0x02, 0x2A, 0x20, 0x06, 0x00, 0x02, 0x00, 0x06, 0x00, 0x05, 0x04])
        let failed = event(0x11, peerField + [0x05])
        XCTAssertEqual(write(k, failed, failed.count), failed.count)
        XCTAssertEqual(awaitReports(3), [
            "pairing with 00:AA:01:01:00:01 (public): Passkey Entry, answered",
            "pairing with 00:AA:01:01:00:01 failed: Authentication Failed, HCI status 0x05",
            "pairing with 00:AA:01:01:00:01 failed: SMP Pairing Failed reason 0x04 Confirm Value Failed, sent by the peer",
        ])
        var expected = ServedPairing()
        // The failed attempt's method is not kept: a later pairing's would be confused with it.
        expected.authenticationFailed = 0x05
        expected.smpFailure = SMPPairingFailed(handle: 0x2A, reason: 0x04, sentBy: .peer)
        XCTAssertEqual(service.takeServed(), expected)
        XCTAssertNil(expected.pairedMethod, "no keys: no pairing ended in them")
        XCTAssertEqual(service.takeServed(), ServedPairing(), "taken: nothing served since")

        // A second failure with no PDU of its own is not reported with the first one's reason (taken).
        XCTAssertEqual(write(k, failed, failed.count), failed.count)
        XCTAssertEqual(awaitReports(4).count, 4)
        Thread.sleep(forTimeInterval: 0.5)
        XCTAssertEqual(reports.withLock { $0.count }, 4, "\(reports.withLock { $0 })")
        XCTAssertNil(service.takeServed().smpFailure)

        // New Long Term Key 0x000A with no request answered: a Just Works pairing that ended in keys.
        let ltk = event(0x0A, [0x01] + peerField + [0x02, 0x01, 0x10, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0] + [UInt8](repeating: 0x11, count: 16))
        XCTAssertEqual(write(k, ltk, ltk.count), ltk.count)
        let served = service.takeServed(awaitingKeysFor: .seconds(5))
        XCTAssertEqual(served.longTermKeys, 1)
        XCTAssertEqual(served.pairedMethod, .justWorks)
    }

    func testAFailureQueuedWhenTheAgentStopsIsStillReportedAndNothingAnswered() throws {
        try failureQueuedAtTheStop(loop: nil)
    }

    /// As above with the agent a source of a loop: the prompt holds the loop's thread, the stop is posted, and
    /// what was queued meanwhile is drained, not answered.
    func testAFailureQueuedWhenTheAgentOnALoopStopsIsStillReportedAndNothingAnswered() throws {
        try failureQueuedAtTheStop(loop: try EventLoop())
    }

    func failureQueuedAtTheStop(loop: EventLoop?) throws {
        // The agent is held in a prompt; meanwhile the kernel queues Authentication Failed and a request, and the
        // agent is stopped (a connect that failed to encrypt stops it as the failure comes). Released, it leaves at
        // the stop, reports the queued failure with its SMP reason, and answers nothing more.
        let reports = Lock<[String]>([])
        let prompt = Lock((false, false))
        let slow = PairingPrompts(confirm: { _, _ in true },
                                  passkey: { _ in
                                      prompt.withLockBroadcasting { $0.0 = true }
                                      _ = prompt.wait(until: { $0.1 ? () : nil }, timeoutNanoseconds: 5_000_000_000)
                                      return 123456
                                  },
                                  display: { _, _ in })
        let (agent, k) = kernel([event(0x10, peerField)], prompts: slow)
        defer { close(k) }
        let acl = try SocketPair()
        acl.handOverA()
        let watch = try XCTUnwrap(SMPFailureWatch(adopting: acl.a, adapter: "hci0", seesACL: true, loop: loop))
        let service = try agent.startServing(report: { line in reports.withLockBroadcasting { $0.append(line) } }, watch: watch, on: loop)
        XCTAssertNotNil(prompt.wait(until: { $0.0 ? () : nil }, timeoutNanoseconds: 5_000_000_000), "the agent asked its prompt")
        // Pairing Failed 0x01 Passkey Entry Failed on the link (a socketpair has no direction: read as the peer's).
        acl.sendB([0x02, 0x2A, 0x20, 0x06, 0x00, 0x02, 0x00, 0x06, 0x00, 0x05, 0x01])
        let failed = event(0x11, peerField + [0x05])
        XCTAssertEqual(write(k, failed, failed.count), failed.count)
        let confirm = event(0x0F, peerField + [0x00, 0x40, 0xE2, 0x01, 0x00])
        XCTAssertEqual(write(k, confirm, confirm.count), confirm.count)
        // The prompt is released only once the stop was asked (waited for up to 5 s), never before it however slow
        // this thread.
        DispatchQueue.global().async {
            _ = service.stopAsked.wait(until: { $0 ? () : nil }, timeoutNanoseconds: 5_000_000_000)
            prompt.withLockBroadcasting { $0.1 = true }
        }
        service.stop(limit: .seconds(5))
        XCTAssertEqual(reports.withLock { $0 }, [
            "pairing with 00:AA:01:01:00:01 (public): Passkey Entry, answered",
            "pairing with 00:AA:01:01:00:01 failed: Authentication Failed, HCI status 0x05",
            "pairing with 00:AA:01:01:00:01 failed: SMP Pairing Failed reason 0x01 Passkey Entry Failed, sent by the peer",
        ])
        XCTAssertEqual(sent(k), [ManagementCommand.userPasskeyReply(index: 0, address: peer, type: .public, passkey: 123456).packet],
                       "the queued confirmation was not answered")
    }

    /// The agent's own thread between stop() being asked and its wake-up being seen: a request it reads then is not
    /// answered, and a failure read then is still reported (stopAsked is set here without the wake-up, so the order
    /// is certain rather than a race the poll usually wins).
    func testARequestReadAfterTheStopWasAskedIsNotAnsweredAndAFailureStillReported() throws {
        let reports = Lock<[String]>([])
        let (agent, k) = kernel([])
        defer { close(k) }
        let service = try agent.startServing { line in reports.withLockBroadcasting { $0.append(line) } }
        service.stopAsked.withLock { $0 = true }
        let confirm = event(0x0F, peerField + [0x00, 0x40, 0xE2, 0x01, 0x00])
        XCTAssertEqual(write(k, confirm, confirm.count), confirm.count)
        let failed = event(0x11, peerField + [0x05])
        XCTAssertEqual(write(k, failed, failed.count), failed.count)
        // The failure comes after the request on the socket: once it is reported, the request was read.
        XCTAssertNotNil(reports.wait(until: { $0.isEmpty ? nil : () }, timeoutNanoseconds: 5_000_000_000), "the failure was reported")
        service.stop(limit: .seconds(5))
        XCTAssertEqual(reports.withLock { $0 }, ["pairing with 00:AA:01:01:00:01 failed: Authentication Failed, HCI status 0x05"])
        XCTAssertEqual(sent(k), [], "the request read after the stop was asked was not answered")
    }

    func testTheWaitForKeysAfterARaiseEndsAtItsLimit() throws {
        // A link encrypted with a key the kernel holds: no New Long Term Key comes, and the wait gives up (pairing.keys).
        let (agent, k) = kernel([])
        defer { close(k) }
        let service = try agent.startServing { _ in }
        defer { service.stop() }
        let started = ContinuousClock.now
        XCTAssertEqual(service.takeServed(awaitingKeysFor: .milliseconds(100)), ServedPairing())
        XCTAssertGreaterThanOrEqual(ContinuousClock.now - started, .milliseconds(100))
        XCTAssertNil(ServedPairing().pairedMethod)
    }

    /// Issue 36: Just Works the kernel leaves to user space (User Confirmation Request, Confirm_Hint 1) is this
    /// process's intent only for the peer it asked Pair Device for and holds no bond with (bluetoothd's Pair() rule);
    /// a bonded peer's, or another peer's, goes to the prompt, which refuses here: the Negative Reply, and why.
    func testJustWorksLeftToUserSpaceIsAcceptedOnlyForThisProcesssOwnUnbondedPeer() throws {
        let asked = Lock<[String]>([])
        let refusing = PairingPrompts(confirm: { _, _ in true }, passkey: { _ in nil }, display: { _, _ in },
                                      justWorks: { a in asked.withLock { $0.append(a.description) }; return false })
        let justWorks = event(0x0F, peerField + [0x01, 0, 0, 0, 0])
        // The peer Pair Device named, no bond: accepted without asking.
        let (agent, k) = kernel([justWorks, pairComplete(0x00)], prompts: refusing)
        defer { close(k) }
        XCTAssertEqual(try agent.pair(address: peer, type: .public, io: .noInputNoOutput).method, .justWorks)
        XCTAssertEqual(sent(k).last, ManagementCommand.userConfirmationReply(index: 0, address: peer, type: .public, accept: true).packet)
        XCTAssertEqual(asked.withLock { $0 }, [])
        // A bond with it is held: asked, refused, and the error says this host refused and why.
        let (agent2, k2) = kernel([justWorks, event(0x11, peerField + [0x05]), pairComplete(0x05)], prompts: refusing)
        defer { close(k2) }
        XCTAssertThrowsError(try agent2.pair(address: peer, type: .public, io: .noInputNoOutput, peerBonded: true)) { error in
            XCTAssertTrue("\(error)".contains("method Just Works; this host refused: Just Works (no MITM protection) that this host did not ask for, or with a peer it holds a bond with, was not accepted (the kernel leaves it to user space: Confirm_Hint 1)"), "\(error)")
            XCTAssertTrue("\(error)".contains("mirror pair --accept-just-works"), "\(error)")
        }
        XCTAssertEqual(sent(k2).last, ManagementCommand.userConfirmationReply(index: 0, address: peer, type: .public, accept: false).packet)
        XCTAssertEqual(asked.withLock { $0 }, ["00:AA:01:01:00:01"])
        // Another peer's request during this pairing: asked too, and refused.
        let otherField: [UInt8] = [0x02, 0x00, 0x01, 0x01, 0xAA, 0x00, 0x01]
        let (agent3, k3) = kernel([event(0x0F, otherField + [0x01, 0, 0, 0, 0]), pairComplete(0x00)], prompts: refusing)
        defer { close(k3) }
        _ = try agent3.pair(address: peer, type: .public, io: .noInputNoOutput)
        XCTAssertEqual(sent(k3).last?.first, 0x1D, "User Confirmation Negative Reply for 00:AA:01:01:00:02")
        XCTAssertEqual(asked.withLock { $0.last }, "00:AA:01:01:00:02")
        // Hint 0 (Numeric Comparison) is as before: the confirm prompt, never the Just Works one.
        let (agent4, k4) = kernel([event(0x0F, peerField + [0x00, 0x40, 0xE2, 0x01, 0x00]), pairComplete(0x00)], prompts: refusing)
        defer { close(k4) }
        XCTAssertEqual(try agent4.pair(address: peer, type: .public, io: .displayYesNo, peerBonded: true).method, .numericComparison)
        XCTAssertEqual(sent(k4).last?.first, 0x1C)
        XCTAssertEqual(asked.withLock { $0.count }, 2)
    }

    /// Issue 36: the serving agent (a connection's --pair) accepts Just Works left to it only for the peers
    /// `intended` names; any other is asked, and refused here, before this change accepted for any peer.
    func testTheServingAgentRefusesJustWorksItDidNotAskFor() throws {
        let reports = Lock<[String]>([])
        let refusing = PairingPrompts(confirm: { _, _ in true }, passkey: { _ in nil }, display: { _, _ in }, justWorks: { _ in false })
        let (agent, k) = kernel([], prompts: refusing)
        defer { close(k) }
        let service = try agent.startServing(report: { line in reports.withLockBroadcasting { $0.append(line) } },
                                             intended: { $0.description == "00:AA:01:01:00:01" })
        defer { service.stop() }
        let otherField: [UInt8] = [0x02, 0x00, 0x01, 0x01, 0xAA, 0x00, 0x01]   // 00:AA:01:01:00:02, LE public
        for field in [peerField, otherField] {
            let request = event(0x0F, field + [0x01, 0, 0, 0, 0])
            XCTAssertEqual(write(k, request, request.count), request.count)
        }
        XCTAssertNotNil(reports.wait(until: { $0.count >= 2 ? $0 : nil }, timeoutNanoseconds: 5_000_000_000))
        let lines = reports.withLock { $0 }
        XCTAssertEqual(lines.first, "pairing with 00:AA:01:01:00:01 (public): Just Works, answered")
        XCTAssertTrue(lines.last?.hasPrefix("pairing with 00:AA:01:01:00:02 (public): Just Works, refused: Just Works (no MITM protection) that this host did not ask for") ?? false, "\(lines)")
        XCTAssertEqual(sent(k).map { $0[0] }, [0x1C, 0x1D])
    }

    /// Issue 36: --require-mitm declines Just Works even for the peer asked for; the outcome says whether the
    /// key is authenticated from New Long Term Key's Key_Type (Vol 3 Part H §2.3.1).
    func testRequireMITMDeclinesJustWorksAndTheOutcomeSaysWhetherTheKeyIsAuthenticated() throws {
        let (agent, k) = kernel([event(0x0F, peerField + [0x01, 0, 0, 0, 0]), pairComplete(0x05)])
        defer { close(k) }
        XCTAssertThrowsError(try agent.pair(address: peer, type: .public, io: .keyboardDisplay, requireMITM: true)) { error in
            XCTAssertTrue("\(error)".contains("this host refused: the pairing reached Just Works, which gives no MITM protection, and --require-mitm asks for it"), "\(error)")
            XCTAssertEqual((error as? PairingError)?.refusedHere, justWorksWithoutMITMRefusal)
        }
        XCTAssertEqual(sent(k).last?.first, 0x1D)
        func ltk(_ type: UInt8) -> [UInt8] {
            event(0x0A, [0x01] + peerField + [type, 0x01, 0x10, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0] + [UInt8](repeating: 0x11, count: 16))
        }
        let (agent2, k2) = kernel([ltk(0x02), pairComplete(0x00)])
        defer { close(k2) }
        XCTAssertEqual(try agent2.pair(address: peer, type: .public, io: .noInputNoOutput).authenticated, false, "unauthenticated P-256")
        let (agent3, k3) = kernel([ltk(0x03), pairComplete(0x00)])
        defer { close(k3) }
        XCTAssertEqual(try agent3.pair(address: peer, type: .public, io: .keyboardDisplay).authenticated, true, "authenticated P-256")
        XCTAssertNil(PairingOutcome(address: peer, type: .public, method: .justWorks, alreadyPaired: true).authenticated)
    }
}
