// The GATT feature characteristics (Core Spec 5.4 Vol 3 Part G §7.2 Client Supported Features, §7.4 Server
// Supported Features): which bits this client sets, and whether the server offers Enhanced ATT bearers.
import ATTStack

/// Client Supported Features (0x2B29, Part G §7.2, Table 7.6): the bits a client writes to the server.
public struct GATTClientFeatures: OptionSet, Sendable, Equatable {
    public let rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }
    /// Bit 0: Robust Caching (§2.5.2.1).
    public static let robustCaching = GATTClientFeatures(rawValue: 0x01)
    /// Bit 1: Enhanced ATT bearer.
    public static let enhancedATTBearer = GATTClientFeatures(rawValue: 0x02)
    /// Bit 2: Multiple Handle Value Notifications (0x23, which this client decodes).
    public static let multipleHandleValueNotifications = GATTClientFeatures(rawValue: 0x04)
    /// The value written: one octet (the only one with defined bits).
    public var bytes: [UInt8] { [rawValue] }
}

extension GATTClient {
    /// Reads Server Supported Features (0x2B3A, Part G §7.4) by UUID and says whether its bit 0, EATT Supported,
    /// is set. Nil when the server has no such characteristic (Attribute Not Found): it offers no EATT.
    public func serverSupportsEnhancedATT() async throws(GATTError) -> Bool? {
        try await onLinkLoop { () async throws(GATTError) -> Bool? in
            let found: [(handle: UInt16, value: [UInt8])]
            do throws(GATTError) {
                found = try await read(uuid: .serverSupportedFeatures)
            } catch {
                if isAttributeNotFound(error) { return nil }
                throw error
            }
            guard let first = found.first else { return nil }
            return (first.value.first ?? 0) & 0x01 != 0
        }
    }
}

extension GATTClient {
    /// The Client Supported Features bits the server has taken from this client (`writeClientFeatures`).
    public var writtenClientFeatures: GATTClientFeatures { clientFeatures.withLock { $0.written } }

    /// Sets `features` in the server's Client Supported Features (0x2B29, Part G §7.2) with every bit asked for
    /// before: one Write Request of their union, since a client shall not clear a bit it set. The one place this
    /// client writes 0x2B29 (robust caching, the EATT bit). `handle`: its value handle when discovery knows it;
    /// nil finds it with one Read By Type. Returns the bits written; nil when the server has no 0x2B29.
    @discardableResult
    public func writeClientFeatures(_ features: GATTClientFeatures, handle: UInt16? = nil) async throws(GATTError) -> GATTClientFeatures? {
        try await onLinkLoop { () async throws(GATTError) -> GATTClientFeatures? in
            var valueHandle = handle
            if valueHandle == nil {
                do throws(GATTError) {
                    valueHandle = try await read(uuid: .clientSupportedFeatures).first?.handle
                } catch {
                    if isAttributeNotFound(error) { return nil }
                    throw error
                }
            }
            guard let valueHandle else { return nil }
            let union = clientFeatures.withLock { state in
                state.asked.formUnion(features)
                return state.asked
            }
            try await write(handle: valueHandle, value: union.bytes)
            clientFeatures.withLock { $0.written.formUnion(union) }
            return union
        }
    }
}
