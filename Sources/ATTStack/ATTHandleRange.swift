// The Starting Handle / Ending Handle pair of the find and read-by-type requests:
// Core Spec 5.4 Vol 3 Part F §3.4.3.1, §3.4.3.3, §3.4.4.1, §3.4.4.9.

/// An inclusive attribute handle range (Core Spec 5.4 Vol 3 Part F §3.4.3.1). The decoder rejects a
/// zero starting handle; `isValid` also checks start <= end, which a server answers with Invalid Handle.
public struct ATTHandleRange: Hashable, Sendable, CustomStringConvertible {
    public var start: UInt16
    public var end: UInt16

    @inlinable public init(start: UInt16, end: UInt16) {
        self.start = start
        self.end = end
    }

    /// The whole handle space, 0x0001-0xFFFF.
    public static let all = ATTHandleRange(start: 0x0001, end: 0xFFFF)

    /// A range a server may serve: a non-zero start no greater than the end (§3.4.3.1).
    @inlinable public var isValid: Bool { start != 0 && start <= end }

    /// Whether `handle` lies in the range (both ends included).
    @inlinable public func contains(_ handle: UInt16) -> Bool { handle >= start && handle <= end }

    /// `0x0001-0xFFFF`.
    public var description: String { "\(ATTHex.handle(start))-\(ATTHex.handle(end))" }
}
