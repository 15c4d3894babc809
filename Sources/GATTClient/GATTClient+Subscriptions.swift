// Subscribing to a discovered characteristic (Core Spec 5.4 Vol 3 Part G §4.10, §4.11): the checks a CCCD
// write needs (the notify/indicate property, the CCCD itself) and the choice between the two, in one place.
import ATTStack
import GATTVocabulary

extension GATTClient {
    /// Subscribes to a characteristic's notifications, or its indications when `preferIndications` or when it
    /// only indicates: arms the stream first, then writes the CCCD (Part G §3.3.3.3), then reads the value (when
    /// readable) and returns it with the stream, so the caller knows the current state and misses no change
    /// that comes before the CCCD write's response. Descriptors are discovered when `characteristic.descriptors`
    /// is empty.
    public func subscribe(to characteristic: GATTCharacteristic, preferIndications: Bool = false) async throws(GATTError)
        -> (value: [UInt8]?, notifications: GATTNotificationStream)
    {
        try await onLinkLoop { () async throws(GATTError) -> (value: [UInt8]?, notifications: GATTNotificationStream) in
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

    /// `body` is told each notification and indication of every bearer, on the link's event loop in arrival order,
    /// before any stream (an indication is confirmed first, Part F §3.4.7.2). It must not block.
    public func onValue(_ body: @escaping @Sendable (GATTNotification) -> Void) { engine.addValueHandler(body) }

    // MARK: Subscribing by handles (Part G §4.10, §4.11)

    /// Subscribes by handles: arms the stream, writes `mode` to the CCCD at `cccdHandle`, then (when `readValue`)
    /// reads the value. On a failure the stream is finished and the error thrown.
    public func subscribe(valueHandle: UInt16, cccdHandle: UInt16, mode: GATTSubscriptionMode = .notify,
                          readValue: Bool = true) async throws(GATTError)
        -> (value: [UInt8]?, notifications: GATTNotificationStream)
    {
        try await onLinkLoop { () async throws(GATTError) -> (value: [UInt8]?, notifications: GATTNotificationStream) in
            let (stream, sink) = try engine.addSubscriber(handle: valueHandle)
            do throws(GATTError) {
                let bits = mode.rawValue
                try await write(handle: cccdHandle, value: [UInt8(bits & 0xFF), UInt8(bits >> 8)])
                let value: [UInt8]? = readValue ? try await readLong(handle: valueHandle) : nil
                return (value, stream)
            } catch {
                sink.continuation.finish(throwing: error)
                engine.removeSubscriber(sink)
                throw error
            }
        }
    }

    /// Writes 0x0000 to the CCCD (the server stops pushing) and ends the handle's streams.
    public func unsubscribe(valueHandle: UInt16, cccdHandle: UInt16) async throws(GATTError) {
        try await onLinkLoop { () async throws(GATTError) -> Void in
            try await write(handle: cccdHandle, value: [0, 0])
            engine.finishSubscribers(handle: valueHandle)
        }
    }

    /// Unsubscribes from a characteristic whose CCCD was discovered.
    public func unsubscribe(from characteristic: GATTCharacteristic) async throws(GATTError) {
        try await onLinkLoop { () async throws(GATTError) -> Void in
            var cccd = characteristic.cccd
            if cccd == nil { cccd = try await discoverDescriptors(of: characteristic).first { $0.isCCCD } }
            guard let cccd else {
                throw .unsupported("characteristic \(characteristic.uuid) has no Client Characteristic Configuration descriptor")
            }
            try await unsubscribe(valueHandle: characteristic.valueHandle, cccdHandle: cccd.handle)
        }
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
