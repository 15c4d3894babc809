// The GATT procedures a program (and the CLI) runs on one connection, over the names of CharacteristicLookup:
// reads (Core Spec Vol 3 Part G §4.8), writes (§4.9), every value of a database, subscriptions (§4.10-4.11,
// CCCD §3.3.3.3) with the Database Out Of Sync (0x12, §2.5.2.1) resync and retry. Nothing here prints.
import ATTStack
import GATTClient
import GATTVocabulary

/// How a value is written (Vol 3 Part G §4.9).
public enum GATTWriteMode: String, Sendable, CaseIterable {
    /// Write Request, answered by Write Response (§4.9.3).
    case request = "request"
    /// Write Command, not answered (§4.9.1).
    case command = "command"
    /// Prepare Write Requests and Execute Write (§4.9.4).
    case long = "long"
    /// A long write whose every echoed part is checked (Reliable Writes, §4.9.5).
    case reliable = "reliable"
}

/// Read By Type over the whole database found no attribute of `uuid` (Attribute Not Found from the peer,
/// Vol 3 Part F §3.4.4.1): a read by UUID's empty answer, an error rather than no values.
public struct AttributeTypeNotFound: Error, Sendable, Equatable, CustomStringConvertible {
    /// The attribute type asked for.
    public var uuid: BluetoothUUID
    /// The error for `uuid`.
    public init(uuid: BluetoothUUID) { self.uuid = uuid }
    /// "no attribute of type 2a98": what names the handle in the error's words.
    public var description: String { "no attribute of type \(uuid)" }
}

/// A characteristic named to subscribe to that neither notifies nor indicates (its properties, Vol 3 Part G
/// §3.3.1.1): the reference as the caller gave it, and those of the peer that do, so the error can offer them.
public struct CharacteristicNotSubscribable: Error, Sendable, Equatable, CustomStringConvertible {
    /// The reference as given (a name, a UUID, a handle).
    public var reference: String
    public var valueHandle: UInt16
    public var properties: GATTCharacteristicProperties
    /// The characteristics that notify or indicate, each as "label (0x000C)".
    public var subscribable: [String]

    public init(reference: String, valueHandle: UInt16, properties: GATTCharacteristicProperties, subscribable: [String]) {
        self.reference = reference
        self.valueHandle = valueHandle
        self.properties = properties
        self.subscribable = subscribable
    }

    public var description: String {
        (reference == ATTHex.handle(valueHandle) ? reference : "\(reference) (\(ATTHex.handle(valueHandle)))")
            + " neither notifies nor indicates (properties: \(properties)); "
            + (subscribable.isEmpty ? "no characteristic of the peer does" : "those that do: " + subscribable.joined(separator: ", "))
    }
}

/// One characteristic's values as `CharacteristicLookup.readEveryValue(of:)` read them: its value (nil when it
/// is not readable) and each descriptor's, in order, each the bytes or the peer's ATT error.
public struct CharacteristicValues: Sendable {
    /// The characteristic, as discovered.
    public var characteristic: GATTCharacteristic
    /// Its value, read whole; nil when its properties do not allow a read.
    public var value: Result<[UInt8], GATTAttributeError>?
    /// One outcome per descriptor of `characteristic`, in its order.
    public var descriptors: [Result<[UInt8], GATTAttributeError>]

    /// The outcomes of `characteristic`'s reads.
    public init(characteristic: GATTCharacteristic, value: Result<[UInt8], GATTAttributeError>?,
                descriptors: [Result<[UInt8], GATTAttributeError>]) {
        self.characteristic = characteristic
        self.value = value
        self.descriptors = descriptors
    }

    /// The value of its Characteristic Presentation Format descriptor (0x2904, Part G §3.3.3.5), when read.
    public var presentationFormat: [UInt8]? {
        guard let i = characteristic.descriptors.firstIndex(where: { $0.uuid == .bit16(0x2904) }), i < descriptors.count,
              case .success(let bytes) = descriptors[i] else { return nil }
        return bytes
    }
}

/// An attribute of the database a connection knows: a characteristic's value, or one of its descriptors.
public enum KnownAttribute: Sendable {
    /// The value of a characteristic, with its names.
    case value(CharacteristicCatalog.Entry)
    /// A descriptor of `characteristic`.
    case descriptor(GATTDescriptor, of: GATTCharacteristic)
}

extension CharacteristicLookup {
    /// The GATT client of the connection.
    public var client: GATTClient { database.client }

    /// A handle as given; a UUID or name resolved (and named in the engine's later words, a timeout's above all:
    /// after an ATT timeout the bearer is closed, Part F §3.3.3, so no name can be looked up then).
    public func valueHandle(_ reference: CharacteristicReference) async throws -> UInt16 {
        if case .handle(let h) = reference { return h }
        let entry = try await characteristic(reference)
        if let label = entry.label, client.name(of: entry.characteristic.valueHandle) == nil {
            client.setName(label, for: entry.characteristic.valueHandle)
        }
        return entry.characteristic.valueHandle
    }

    /// `body` on the value handle `reference` names (`locate`, by default `valueHandle`), retried once after
    /// Database Out Of Sync (0x12) with a UUID or name resolved again; a raw handle is not remapped.
    public func retryingOutOfSync<T>(_ reference: CharacteristicReference,
                                     locate: ((CharacteristicReference) async throws -> UInt16)? = nil,
                                     _ body: (UInt16) async throws -> T) async throws -> T {
        let remapping: String? = if case .handle = reference { nil } else { reference.description }
        return try await database.retryingOutOfSync(remapping: remapping, locate: {
            if let locate { try await locate(reference) } else { try await valueHandle(reference) }
        }, body)
    }

    /// A peer's ATT error with its handle's name added when it has none (`label(ofValueHandle:)`, found after
    /// the fact so that a success costs nothing); any other error as it is.
    public func labelled(_ error: GATTError) async -> GATTError {
        guard case .attribute(var e) = error, e.handleName == nil, !client.isClosed else { return error }
        e.handleName = await label(ofValueHandle: e.handle)
        return .attribute(e)
    }

    /// `body`, its GATT error `labelled`.
    public func labelling<T>(_ body: () async throws -> T) async throws -> T {
        do {
            return try await body()
        } catch let error as GATTError {
            throw await labelled(error)
        }
    }

    /// The value at `handle`, whole: Read, then Read Blob while a part was full (Part G §4.8.1, §4.8.3).
    public func read(handle: UInt16) async throws -> [UInt8] {
        try await labelling { try await client.readLong(handle: handle) }
    }

    /// Every value of type `uuid` in the database: Read Using Characteristic UUID (Part G §4.8.2), each value
    /// that filled its pair read whole. Throws `AttributeTypeNotFound` when there is none.
    public func read(uuid: BluetoothUUID) async throws -> [(handle: UInt16, value: [UInt8])] {
        let found = try await client.readLong(uuid: uuid)
        guard !found.isEmpty else { throw AttributeTypeNotFound(uuid: uuid) }
        return found
    }

    /// Writes `value` at `handle` as `mode` says; `timeout` bounds a Write Command's wait for room to send.
    public func write(handle: UInt16, value: [UInt8], mode: GATTWriteMode, timeout: Duration? = nil) async throws {
        try await labelling {
            switch mode {
            case .request: try await client.write(handle: handle, value: value)
            case .command: try await client.writeWithoutResponse(handle: handle, value: value, timeout: timeout)
            case .long: try await client.writeLong(handle: handle, value: value)
            case .reliable: try await client.writeReliable([(handle: handle, value: value)])
            }
        }
    }

    /// Every readable value of `services` and every descriptor's, in database order, as many at once as bearers
    /// are open (`GATTClient.readLong(each:)`); one list per service, one entry per characteristic.
    public func readEveryValue(of services: [GATTService]) async throws(GATTError) -> [[CharacteristicValues]] {
        var handles: [UInt16] = []
        for c in services.flatMap(\.characteristics) {
            if c.properties.contains(.read) { handles.append(c.valueHandle) }
            handles += c.descriptors.map(\.handle)
        }
        var outcomes = try await client.readLong(each: handles)[...]
        return services.map { s in
            s.characteristics.map { c in
                let value = c.properties.contains(.read) ? outcomes.popFirst() : nil
                return CharacteristicValues(characteristic: c, value: value,
                                            descriptors: c.descriptors.compactMap { _ in outcomes.popFirst() })
            }
        }
    }

    /// `readEveryValue(of:)` by handle (each value's and each descriptor's outcome), and what each value read means
    /// as `decode` says: the bytes, the UUID, the characteristic's label (nil for a descriptor) and its Presentation
    /// Format (0x2904; nil for a descriptor).
    public func readEveryValueByHandle(of services: [GATTService],
                                       decode: ([UInt8], BluetoothUUID, String?, [UInt8]?) -> String?) async throws(GATTError)
        -> (outcomes: [UInt16: Result<[UInt8], GATTAttributeError>], decoded: [UInt16: String])
    {
        var outcomes: [UInt16: Result<[UInt8], GATTAttributeError>] = [:], decoded: [UInt16: String] = [:]
        for read in try await readEveryValue(of: services).joined() {
            let c = read.characteristic
            if let outcome = read.value {
                outcomes[c.valueHandle] = outcome
                if case .success(let v) = outcome {
                    decoded[c.valueHandle] = decode(v, c.uuid, names.label(c.uuid, userDescription: nil), read.presentationFormat)
                }
            }
            for (d, outcome) in zip(c.descriptors, read.descriptors) {
                outcomes[d.handle] = outcome
                if case .success(let v) = outcome { decoded[d.handle] = decode(v, d.uuid, nil, nil) }
            }
        }
        return (outcomes, decoded)
    }

    /// Names each characteristic's value handle of `services` in the GATT client's errors and trace by its label
    /// (the profile's name or the well-known one), where it has one.
    public func nameValueHandles(in services: [GATTService]) {
        for c in services.flatMap(\.characteristics) {
            if let name = names.label(c.uuid, userDescription: nil) { client.setName(name, for: c.valueHandle) }
        }
    }

    /// What is at `handle` in the database this connection knows (discovered or cached; nothing is sent): a
    /// characteristic's value with its names, or a descriptor; nil when unknown.
    public func knownAttribute(at handle: UInt16) -> KnownAttribute? {
        guard let known = database.known else { return nil }
        for c in known.services.flatMap(\.characteristics) {
            if c.valueHandle == handle {
                let description = known.descriptions[c.valueHandle]
                return .value(CharacteristicCatalog.Entry(characteristic: c, profileName: names.name(of: c.uuid), userDescription: description,
                                                          label: names.label(c.uuid, userDescription: description)))
            }
            if let d = c.descriptors.first(where: { $0.handle == handle }) { return .descriptor(d, of: c) }
        }
        return nil
    }

    /// What a subscription to `references` targets (every characteristic that notifies or indicates when empty),
    /// each with its names (its User Description read if not yet). `locate` resolves a UUID or name (by default
    /// `characteristic`); a handle is the characteristic whose value or declaration it is, else `GATTError.unsupported`.
    public func subscriptionTargets(_ references: [CharacteristicReference],
                                    locate: ((CharacteristicReference) async throws -> CharacteristicCatalog.Entry)? = nil)
        async throws -> [CharacteristicCatalog.Entry]
    {
        let characteristics = try await database.discovered().services.flatMap(\.characteristics)
        let notifying = characteristics.filter { $0.properties.contains(.notify) || $0.properties.contains(.indicate) }
        var targets: [GATTCharacteristic] = []
        if references.isEmpty {
            targets = notifying
            guard !targets.isEmpty else { throw GATTError.unsupported("no characteristic of \(client.label) notifies or indicates") }
        } else {
            for reference in references {
                if case .handle(let h) = reference {
                    guard let c = characteristics.first(where: { $0.valueHandle == h || $0.declarationHandle == h }) else {
                        let list = notifying.map { ATTHex.handle($0.valueHandle) }.joined(separator: ", ")
                        throw GATTError.unsupported("handle \(ATTHex.handle(h)) is not a characteristic of \(client.label); value handles that notify or indicate: \(list.isEmpty ? "none" : list)")
                    }
                    targets.append(c)
                } else if let locate {
                    targets.append(try await locate(reference).characteristic)
                } else {
                    targets.append(try await characteristic(reference).characteristic)
                }
            }
        }
        // A named characteristic that cannot notify is the caller's mistake: named as given, with those that can.
        for (reference, c) in zip(references, targets) where !c.properties.contains(.notify) && !c.properties.contains(.indicate) {
            let labels = try await catalog(describing: Set(notifying.map(\.valueHandle)))
            throw CharacteristicNotSubscribable(
                reference: reference.description, valueHandle: c.valueHandle, properties: c.properties,
                subscribable: notifying.map { n in "\(labels.entry(at: n.valueHandle)?.label ?? n.uuid.description) (\(ATTHex.handle(n.valueHandle)))" })
        }
        let catalog = try await catalog(describing: Set(targets.map(\.valueHandle)))
        return targets.map { c in
            let named = catalog.entry(at: c.valueHandle)
            return CharacteristicCatalog.Entry(characteristic: c, profileName: named?.profileName,
                                               userDescription: named?.userDescription, label: named?.label)
        }
    }

    /// Subscribes to each target in turn (the GATT client checks it, arms its stream and writes its CCCD) and
    /// tells `subscribed` the mode and the value read right after.
    public func subscribe(_ targets: [CharacteristicCatalog.Entry], preferIndications: Bool,
                          subscribed: (CharacteristicCatalog.Entry, GATTSubscriptionMode, [UInt8]?) -> Void) async throws(GATTError) {
        for entry in targets {
            let c = entry.characteristic
            let (value, _) = try await client.subscribe(to: c, preferIndications: preferIndications)
            // subscribe(to:) has checked that the characteristic notifies or indicates.
            subscribed(entry, GATTSubscriptionMode(for: c.properties, preferIndications: preferIndications)!, value)
        }
    }

    /// `subscriptionTargets` then `subscribe`; after Database Out Of Sync (0x12) the database is resynchronized
    /// (`resynchronizing` is told first), the references resolved again and subscribed again once (a raw handle is
    /// refused: it is not remapped). `targeted` is told each resolution's targets, just before they are subscribed.
    public func subscribingResynchronized(_ references: [CharacteristicReference], preferIndications: Bool,
                                          locate: ((CharacteristicReference) async throws -> CharacteristicCatalog.Entry)? = nil,
                                          targeted: ([CharacteristicCatalog.Entry]) -> Void = { _ in },
                                          resynchronizing: () -> Void = {},
                                          subscribed: (CharacteristicCatalog.Entry, GATTSubscriptionMode, [UInt8]?) -> Void) async throws
        -> [CharacteristicCatalog.Entry]
    {
        var targets = try await subscriptionTargets(references, locate: locate)
        targeted(targets)
        var retried = false
        while true {
            do {
                try await subscribe(targets, preferIndications: preferIndications, subscribed: subscribed)
                break
            } catch {
                guard GATTDatabaseCache.isOutOfSync(error), !retried else { throw error }
                retried = true
                resynchronizing()
                try await database.resynchronize()
                if let raw = references.first(where: { if case .handle = $0 { true } else { false } }) {
                    throw GATTDatabaseCache.outOfSync(error, "the database changed: its Database Hash was re-read and the database rediscovered; "
                                                      + "\(raw.description) was given as a raw handle and is not remapped")
                }
                targets = try await subscriptionTargets(references, locate: locate)
                targeted(targets)
            }
        }
        return targets
    }
}

extension GATTDatabaseCache {
    /// The database known on this connection or by the store, kept for the connection, with the characteristics
    /// of `uuids` in the primary service `service` checked against the peer's declarations first (`verify`, as a
    /// name is: a program writes to them). A mismatch rediscovered the database: that one is returned. Nil when
    /// neither knows it.
    public func knownOrStored(verifying uuids: Set<BluetoothUUID>, inService service: BluetoothUUID) async throws(GATTError) -> [GATTService]? {
        guard let known = try await knownOrStored() else { return nil }
        return try await verified(known.services, uuids: uuids, inService: service)
    }

    /// `services` after the characteristics of `uuids` in the primary service `service` are verified (`verify`:
    /// nothing is sent for a database discovered on this connection); after a mismatch, the database rediscovered.
    public func verified(_ services: [GATTService], uuids: Set<BluetoothUUID>, inService service: BluetoothUUID) async throws(GATTError) -> [GATTService] {
        let named = services.filter { $0.isPrimary && $0.uuid == service }.flatMap(\.characteristics).filter { uuids.contains($0.uuid) }
        for c in named where try await !verify(c) {
            return known?.services ?? []
        }
        return services
    }
}
