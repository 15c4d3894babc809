// Pairing through the kernel's management interface (BlueZ doc/mgmt-protocol.rst; the kernel side is
// net/bluetooth/mgmt.c and smp.c): the commands that start and answer a pairing, and the events that ask for answers.
// The kernel runs SMP (Core Spec 5.4 Vol 3 Part H) itself; user space only chooses the IO capability and answers.

import ATTStack
import LinkCore

/// An SMP IO capability (Vol 3 Part H §2.3.2, Table 2.5); the values are the management interface's.
public enum IOCapability: UInt8, Sendable, CaseIterable, CustomStringConvertible {
    case displayOnly = 0x00
    case displayYesNo = 0x01
    case keyboardOnly = 0x02
    case noInputNoOutput = 0x03
    case keyboardDisplay = 0x04

    /// The capability `--io` names, as bluetoothctl's agent capabilities read (display, yesno, keyboard, none,
    /// keyboard-display), or by the spec's name in any case (DisplayOnly, ...).
    public init?(name: String) {
        let name = name.lowercased()
        guard let io = Self.allCases.first(where: { $0.name == name || $0.description.lowercased() == name }) else { return nil }
        self = io
    }

    /// The `--io` name.
    public var name: String {
        switch self {
        case .displayOnly: "display"
        case .displayYesNo: "yesno"
        case .keyboardOnly: "keyboard"
        case .noInputNoOutput: "none"
        case .keyboardDisplay: "keyboard-display"
        }
    }

    /// The spec's name (Table 2.5).
    public var description: String {
        switch self {
        case .displayOnly: "DisplayOnly"
        case .displayYesNo: "DisplayYesNo"
        case .keyboardOnly: "KeyboardOnly"
        case .noInputNoOutput: "NoInputNoOutput"
        case .keyboardDisplay: "KeyboardDisplay"
        }
    }
}

/// The Address and Address_Type fields most pairing commands and events carry: six octets least significant first,
/// then 0x01 LE Public or 0x02 LE Random (0x00 BR/EDR is not this tool's).
func managementAddress(_ address: BluetoothAddress, _ type: LEAddressType) -> [UInt8] {
    address.bytes.reversed() + [type.rawValue]
}

/// Reads the Address and Address_Type at `offset`; nil for BR/EDR or an unknown type.
func managementAddress(in d: [UInt8], at offset: Int = 0) -> (BluetoothAddress, LEAddressType)? {
    guard d.count >= offset + 7, let type = LEAddressType(rawValue: d[offset + 6]) else { return nil }
    return (BluetoothAddress(uncheckedBytes: d[offset..<(offset + 6)].reversed()), type)
}

extension ManagementCommand {
    /// Set Bondable (0x0009): the kernel clears HCI_BONDABLE at the first management command (mgmt.c), and without
    /// it SMP asks for no bonding, so no key is kept for a next connection.
    public static func setBondable(index: Int, _ on: Bool) -> ManagementCommand {
        ManagementCommand(opcode: 0x0009, index: UInt16(index), name: "Set Bondable", parameters: [on ? 1 : 0])
    }

    /// Set IO Capability (0x0018): what this host says it can show and enter when the peer starts the pairing.
    public static func setIOCapability(index: Int, _ io: IOCapability) -> ManagementCommand {
        ManagementCommand(opcode: 0x0018, index: UInt16(index), name: "Set IO Capability", parameters: [io.rawValue])
    }

    /// Set Secure Connections (0x002D): 0x01 lets SMP use LE Secure Connections (Vol 3 Part H §2.3.5.6).
    public static func setSecureConnections(index: Int, _ on: Bool) -> ManagementCommand {
        ManagementCommand(opcode: 0x002D, index: UInt16(index), name: "Set Secure Connections", parameters: [on ? 1 : 0])
    }

    /// Set Powered (0x0005).
    public static func setPowered(index: Int, _ on: Bool) -> ManagementCommand {
        ManagementCommand(opcode: 0x0005, index: UInt16(index), name: "Set Powered", parameters: [on ? 1 : 0])
    }

    /// Read Local Out Of Band Extended Data (0x003B) for LE (Address_Type bits 1 and 2): with Secure Connections on,
    /// the kernel makes the LE values with SMP (smp.c smp_generate_oob), so it fails when the adapter has no SMP.
    public static func readLocalOutOfBandExtendedData(index: Int) -> ManagementCommand {
        ManagementCommand(opcode: 0x003B, index: UInt16(index), name: "Read Local Out Of Band Extended Data",
                          parameters: [leDiscoveryTypes])
    }

    /// Read Controller Information (0x0004): address, version, manufacturer, supported and current settings.
    public static func readControllerInformation(index: Int) -> ManagementCommand {
        ManagementCommand(opcode: 0x0004, index: UInt16(index), name: "Read Controller Information", parameters: [])
    }

    /// Pair Device (0x0019): connects if needed and pairs with `io` for this pairing only. Its Command Complete
    /// comes when pairing ends, with the status of the whole.
    public static func pairDevice(index: Int, address: BluetoothAddress, type: LEAddressType,
                                  io: IOCapability) -> ManagementCommand {
        ManagementCommand(opcode: 0x0019, index: UInt16(index), name: "Pair Device",
                          parameters: managementAddress(address, type) + [io.rawValue])
    }

    /// Cancel Pair Device (0x001A).
    public static func cancelPairDevice(index: Int, address: BluetoothAddress, type: LEAddressType) -> ManagementCommand {
        ManagementCommand(opcode: 0x001A, index: UInt16(index), name: "Cancel Pair Device",
                          parameters: managementAddress(address, type))
    }

    /// User Confirmation Reply (0x001C) or Negative Reply (0x001D): the answer to a User Confirmation Request.
    public static func userConfirmationReply(index: Int, address: BluetoothAddress, type: LEAddressType,
                                             accept: Bool) -> ManagementCommand {
        ManagementCommand(opcode: accept ? 0x001C : 0x001D, index: UInt16(index),
                          name: accept ? "User Confirmation Reply" : "User Confirmation Negative Reply",
                          parameters: managementAddress(address, type))
    }

    /// User Passkey Reply (0x001E, the passkey as 4 octets) or, for nil, User Passkey Negative Reply (0x001F).
    public static func userPasskeyReply(index: Int, address: BluetoothAddress, type: LEAddressType,
                                        passkey: UInt32?) -> ManagementCommand {
        guard let passkey else {
            return ManagementCommand(opcode: 0x001F, index: UInt16(index), name: "User Passkey Negative Reply",
                                     parameters: managementAddress(address, type))
        }
        return ManagementCommand(opcode: 0x001E, index: UInt16(index), name: "User Passkey Reply",
                                 parameters: managementAddress(address, type) + le32(passkey))
    }
}

/// A management event of pairing (mgmt-protocol.rst "Events"): the peer is the Address and Address_Type it carries.
public enum PairingEvent: Sendable, Equatable {
    /// Device Connected (0x000B).
    case deviceConnected(BluetoothAddress, LEAddressType)
    /// Device Disconnected (0x000C) with the management reason (0x00 unspecified, 0x01 timeout, 0x02 this host,
    /// 0x03 the peer, 0x04 authentication failure).
    case deviceDisconnected(BluetoothAddress, LEAddressType, reason: UInt8)
    /// Connect Failed (0x000D) with a management status.
    case connectFailed(BluetoothAddress, LEAddressType, status: UInt8)
    /// User Confirmation Request (0x000F): `confirmHint` true asks only yes or no (Just Works); false shows
    /// `value` for Numeric Comparison (Vol 3 Part H §2.3.5.6.2).
    case userConfirmationRequest(BluetoothAddress, LEAddressType, confirmHint: Bool, value: UInt32)
    /// User Passkey Request (0x0010): enter the passkey the peer shows (Passkey Entry, §2.3.5.3).
    case userPasskeyRequest(BluetoothAddress, LEAddressType)
    /// Passkey Notify (0x0017): show `passkey` for the peer's user to enter; `entered` counts keypresses.
    case passkeyNotify(BluetoothAddress, LEAddressType, passkey: UInt32, entered: UInt8)
    /// Authentication Failed (0x0011) with an HCI status (smp.c reports every SMP failure as 0x05).
    case authenticationFailed(BluetoothAddress, LEAddressType, status: UInt8)

    /// The peer the event is about.
    public var peer: (address: BluetoothAddress, type: LEAddressType) {
        switch self {
        case .deviceConnected(let a, let t), .deviceDisconnected(let a, let t, _), .connectFailed(let a, let t, _),
             .userConfirmationRequest(let a, let t, _, _), .userPasskeyRequest(let a, let t),
             .passkeyNotify(let a, let t, _, _), .authenticationFailed(let a, let t, _):
            return (a, t)
        }
    }

    /// Whether the kernel's SMP asks this agent to answer (a pairing has begun): a confirmation or a passkey, or a
    /// passkey to show (Vol 3 Part H §2.3.5).
    public var asksForAnAnswer: Bool {
        switch self {
        case .userConfirmationRequest, .userPasskeyRequest, .passkeyNotify: return true
        default: return false
        }
    }

    /// Decodes a pairing event's parameters; nil for other codes, a BR/EDR address or a short event.
    static func parse(code: UInt16, _ d: [UInt8]) -> PairingEvent? {
        guard let (a, t) = managementAddress(in: d) else { return nil }
        switch code {
        case 0x000B where d.count >= 13: return .deviceConnected(a, t)
        case 0x000C where d.count >= 8: return .deviceDisconnected(a, t, reason: d[7])
        case 0x000D where d.count >= 8: return .connectFailed(a, t, status: d[7])
        case 0x000F where d.count >= 12:
            return .userConfirmationRequest(a, t, confirmHint: d[7] == 1, value: d.littleEndianUInt32(at: 8))
        case 0x0010: return .userPasskeyRequest(a, t)
        case 0x0011 where d.count >= 8: return .authenticationFailed(a, t, status: d[7])
        case 0x0017 where d.count >= 12:
            return .passkeyNotify(a, t, passkey: d.littleEndianUInt32(at: 7), entered: d[11])
        default: return nil
        }
    }
}

/// The management Device Disconnected reason's name (mgmt-protocol.rst).
public func managementDisconnectReasonName(_ reason: UInt8) -> String {
    switch reason {
    case 0x00: "unspecified"
    case 0x01: "connection timeout"
    case 0x02: "terminated by this host"
    case 0x03: "terminated by the peer"
    case 0x04: "terminated after an authentication failure"
    case 0x05: "terminated by this host for suspend"
    default: "reason \(ATTHex.byte(reason))"
    }
}
