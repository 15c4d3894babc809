// ATT_MTU arithmetic in one place: Core Spec 5.4 Vol 3 Part F §3.2.8 (ATT_MTU), §3.2.9 (long attribute
// values, 512 bytes) and the PDU layouts of §3.4 that fix each payload budget.

/// The ATT_MTU limits and payload budgets (Core Spec 5.4 Vol 3 Part F §3.2.8, §3.2.9, §3.4).
/// Budgets are computed from `max(mtu, minimumLE)`: an LE ATT_MTU is never below 23.
public enum ATTMTU {
    /// The default and minimum ATT_MTU on an LE bearer (§3.2.8).
    public static let minimumLE = 23
    /// The largest useful ATT_MTU: a 512-byte value plus the 5-byte Prepare Write header.
    public static let maximum = 517
    /// The longest attribute value (§3.2.9).
    public static let maximumAttributeValue = 512

    /// Value bytes in one Write Request, Write Command, Handle Value Notification or Indication:
    /// ATT_MTU - 3 (opcode + handle).
    @inlinable public static func writeValueBudget<T: BinaryInteger>(_ mtu: T) -> Int {
        effective(mtu) - 3
    }

    /// The longest value one Write Request or Write Command carries: ATT_MTU - 3, and never more than an attribute
    /// holds (§3.2.9: 512), so at an ATT_MTU of 517 it is 512, not 514.
    @inlinable public static func writeValueLimit<T: BinaryInteger>(_ mtu: T) -> Int {
        min(writeValueBudget(mtu), maximumAttributeValue)
    }

    /// Value bytes in one Prepare Write Request part: ATT_MTU - 5 (opcode + handle + offset).
    @inlinable public static func prepareWritePartBudget<T: BinaryInteger>(_ mtu: T) -> Int {
        effective(mtu) - 5
    }

    /// Value bytes in one Read Response or Read Blob Response: ATT_MTU - 1 (opcode).
    @inlinable public static func readBlobPartBudget<T: BinaryInteger>(_ mtu: T) -> Int {
        effective(mtu) - 1
    }

    /// The most value bytes one Prepare Write part carries: ATT_MTU - 5, and never more than an attribute holds
    /// (§3.2.9: 512).
    @inlinable public static func prepareWritePartLimit<T: BinaryInteger>(_ mtu: T) -> Int {
        min(prepareWritePartBudget(mtu), maximumAttributeValue)
    }

    /// The most value bytes one Read Response or Read Blob Response carries: ATT_MTU - 1, and never more than an
    /// attribute holds (§3.2.9: 512), so at an ATT_MTU of 517 it is 512, not 516.
    @inlinable public static func readPartLimit<T: BinaryInteger>(_ mtu: T) -> Int {
        min(readBlobPartBudget(mtu), maximumAttributeValue)
    }

    /// Value bytes of one handle-value pair in a Read By Type Response: ATT_MTU - 4 (opcode, length, handle),
    /// and at most 253 because the pair's length is one octet (§3.4.4.2).
    @inlinable public static func readByTypeValueBudget<T: BinaryInteger>(_ mtu: T) -> Int {
        min(effective(mtu) - 4, 255 - 2)
    }

    /// Value bytes of one attribute data entry in a Read By Group Type Response: ATT_MTU - 6 (opcode, length, handle,
    /// end group handle), and at most 251 because the entry's length is one octet (§3.4.4.10).
    @inlinable public static func readByGroupTypeValueBudget<T: BinaryInteger>(_ mtu: T) -> Int {
        min(effective(mtu) - 6, 255 - 4)
    }

    /// The ATT_MTU both sides use after an Exchange MTU: the smaller Rx MTU, never below 23 (§3.4.2.2).
    @inlinable public static func negotiated<A: BinaryInteger, B: BinaryInteger>(clientRxMTU: A, serverRxMTU: B) -> Int {
        max(minimumLE, min(Int(clamping: clientRxMTU), Int(clamping: serverRxMTU)))
    }

    /// `mtu` raised to the LE minimum.
    @inlinable public static func effective<T: BinaryInteger>(_ mtu: T) -> Int {
        max(minimumLE, Int(clamping: mtu))
    }
}
