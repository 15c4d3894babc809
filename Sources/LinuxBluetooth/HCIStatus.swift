// The one table of HCI status and error codes (Core Spec 5.4 Vol 1 Part F §1.3): command refusals and
// disconnect reasons share it. LE names are used where the spec gives an LMP and an LL name (0x1E, 0x20, 0x22, 0x23).

import ATTStack
import LinkCore

/// HCI status codes by their spec names.
public enum HCIStatus {
    /// Every code Vol 1 Part F §1.3 names; nil for a reserved or unknown code.
    public static func name(_ status: UInt8) -> String? { names[status] }

    /// "0x3B Unacceptable Connection Parameters", or "0x7F (not named by the Core Spec)".
    public static func describe(_ status: UInt8) -> String {
        "\(ATTHex.byte(status)) \(name(status) ?? "(not named by the Core Spec)")"
    }

    static let names: [UInt8: String] = [
        0x00: "Success", 0x01: "Unknown HCI Command", 0x02: "Unknown Connection Identifier", 0x03: "Hardware Failure",
        0x04: "Page Timeout", 0x05: "Authentication Failure", 0x06: "PIN or Key Missing", 0x07: "Memory Capacity Exceeded",
        0x08: "Connection Timeout", 0x09: "Connection Limit Exceeded",
        0x0A: "Synchronous Connection Limit To A Device Exceeded", 0x0B: "Connection Already Exists",
        0x0C: "Command Disallowed", 0x0D: "Connection Rejected due to Limited Resources",
        0x0E: "Connection Rejected Due To Security Reasons", 0x0F: "Connection Rejected due to Unacceptable BD_ADDR",
        0x10: "Connection Accept Timeout Exceeded", 0x11: "Unsupported Feature or Parameter Value",
        0x12: "Invalid HCI Command Parameters", 0x13: "Remote User Terminated Connection",
        0x14: "Remote Device Terminated Connection due to Low Resources",
        0x15: "Remote Device Terminated Connection due to Power Off", 0x16: "Connection Terminated By Local Host",
        0x17: "Repeated Attempts", 0x18: "Pairing Not Allowed", 0x19: "Unknown LMP PDU", 0x1A: "Unsupported Remote Feature",
        0x1B: "SCO Offset Rejected", 0x1C: "SCO Interval Rejected", 0x1D: "SCO Air Mode Rejected",
        0x1E: "Invalid LL Parameters", 0x1F: "Unspecified Error", 0x20: "Unsupported LL Parameter Value",
        0x21: "Role Change Not Allowed", 0x22: "LL Response Timeout", 0x23: "LL Procedure Collision",
        0x24: "LMP PDU Not Allowed", 0x25: "Encryption Mode Not Acceptable", 0x26: "Link Key cannot be Changed",
        0x27: "Requested QoS Not Supported", 0x28: "Instant Passed", 0x29: "Pairing With Unit Key Not Supported",
        0x2A: "Different Transaction Collision", 0x2C: "QoS Unacceptable Parameter", 0x2D: "QoS Rejected",
        0x2E: "Channel Classification Not Supported", 0x2F: "Insufficient Security",
        0x30: "Parameter Out Of Mandatory Range", 0x32: "Role Switch Pending", 0x34: "Reserved Slot Violation",
        0x35: "Role Switch Failed", 0x36: "Extended Inquiry Response Too Large",
        0x37: "Secure Simple Pairing Not Supported By Host", 0x38: "Host Busy - Pairing",
        0x39: "Connection Rejected due to No Suitable Channel Found", 0x3A: "Controller Busy",
        0x3B: "Unacceptable Connection Parameters", 0x3C: "Advertising Timeout",
        0x3D: "Connection Terminated due to MIC Failure", 0x3E: "Connection Failed to be Established",
        0x40: "Coarse Clock Adjustment Rejected but Will Try to Adjust Using Clock Dragging",
        0x41: "Type0 Submap Not Defined", 0x42: "Unknown Advertising Identifier", 0x43: "Limit Reached",
        0x44: "Operation Cancelled by Host", 0x45: "Packet Too Long",
    ]

    /// What a status means for this tool, beyond its name (kept for the advertising and scanning errors).
    static let hints: [UInt8: String] = [
        0x01: "the controller does not support it",
        0x0C: "advertising or scanning is already running, or another host owns the state: is bluetoothd using this adapter?",
    ]
}

/// A status's name with this tool's hint, for error details: "Unknown HCI Command (the controller does not support it)".
func hciStatusMeaning(_ status: UInt8) -> String {
    guard let name = HCIStatus.name(status) else { return "see Core Spec Vol 1 Part F for status \(ATTHex.byte(status))" }
    return HCIStatus.hints[status].map { "\(name) (\($0))" } ?? name
}
