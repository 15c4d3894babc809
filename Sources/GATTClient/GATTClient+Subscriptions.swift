// Subscribing to a discovered characteristic (Core Spec 5.4 Vol 3 Part G §4.10, §4.11): the checks a CCCD
// write needs (the notify/indicate property, the CCCD itself) and the choice between the two, in one place.
import ATTStack

extension GATTClient {
    /// Subscribes to a characteristic's notifications, or its indications when `preferIndications` or when it
    /// only indicates: arms the stream first, then writes the CCCD (Part G §3.3.3.3), then reads the value (when
    /// readable) and returns it with the stream, so the caller knows the current state and misses no change
    /// that comes before the CCCD write's response. Descriptors are discovered when `characteristic.descriptors`
    /// is empty.
    public func subscribe(to characteristic: GATTCharacteristic, preferIndications: Bool = false) async throws(GATTError)
        -> (value: [UInt8]?, notifications: GATTNotificationStream)
    {
        let c = characteristic
        guard let mode = GATTSubscriptionMode(for: c.properties, preferIndications: preferIndications) else {
            throw .unsupported("characteristic \(c.uuid) at \(ATTHex.handle(c.valueHandle)) neither notifies nor indicates (properties: \(c.properties))")
        }
        var cccd = c.cccd
        if cccd == nil && c.descriptors.isEmpty {
            cccd = try await discoverDescriptors(of: c).first { $0.isCCCD }
        }
        guard let cccd else {
            throw .unsupported("characteristic \(c.uuid) at \(ATTHex.handle(c.valueHandle)) has no Client Characteristic Configuration descriptor (0x2902)")
        }
        return try await subscribe(valueHandle: c.valueHandle, cccdHandle: cccd.handle, mode: mode,
                                   readValue: c.properties.contains(.read))
    }
}

extension GATTSubscriptionMode {
    /// The mode a subscription to a characteristic with `properties` uses: notifications, or indications when
    /// preferred or the only kind; nil when it does neither.
    public init?(for properties: GATTCharacteristicProperties, preferIndications: Bool = false) {
        let notifies = properties.contains(.notify), indicates = properties.contains(.indicate)
        guard notifies || indicates else { return nil }
        self = indicates && (preferIndications || !notifies) ? .indicate : .notify
    }
}
