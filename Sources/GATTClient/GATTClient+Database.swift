// Procedures over the whole database that a GATT client user wants in one call: every service including the
// secondary ones, and Read Using Characteristic UUID with long values read whole (Core Spec 5.4 Vol 3 Part G §4).
import ATTStack
import GATTVocabulary

extension GATTClient {
    /// Every primary service with its includes, characteristics and descriptors, and the secondary services
    /// the includes reach (Part G §4.5.1: they are found only through include declarations), in handle order.
    public func discoverDatabase() async throws(GATTError) -> [GATTService] {
        try await onLinkLoop { () async throws(GATTError) -> [GATTService] in
            try await discoverDatabase(in: .all)
        }
    }

    /// `discoverDatabase` for the primary services declared in `range` (what a Service Changed indication names,
    /// Part G §7.1), with the secondary services their includes reach.
    public func discoverDatabase(in range: ATTHandleRange) async throws(GATTError) -> [GATTService] {
        try await onLinkLoop { () async throws(GATTError) -> [GATTService] in
            var services = try await discoverAll(in: range)
            var known = Set(services.map(\.startHandle))
            for inc in services.flatMap(\.includedServices) where !known.contains(inc.startHandle) {
                known.insert(inc.startHandle)
                services.append(try await withContents(GATTService(uuid: inc.uuid, startHandle: inc.startHandle,
                                                                    endHandle: inc.endHandle, isPrimary: false)))
            }
            services.sort { $0.startHandle < $1.startHandle }
            return services
        }
    }

    /// The peer's Database Hash (Part G §7.3) by one Read By Type of 0x2B2A over the whole range (Read Using
    /// Characteristic UUID, §4.8.2; a server has at most one): its handle and value, or nil when it has none
    /// (Attribute Not Found).
    public func readDatabaseHash() async throws(GATTError) -> (handle: UInt16, value: [UInt8])? {
        try await onLinkLoop { () async throws(GATTError) -> (handle: UInt16, value: [UInt8])? in
            let pdu: ATTPDU
            do throws(GATTError) {
                pdu = try await transact(.readByTypeRequest(range: .all, type: .databaseHash), handle: 0x0001)
            } catch {
                if isAttributeNotFound(error) { return nil }
                throw error
            }
            guard case .readByTypeResponse(let list) = pdu, let first = list.first(where: { _ in true }) else {
                throw unexpected(pdu, "a non-empty Read By Type Response")
            }
            return (first.handle, Array(first.value))
        }
    }

    /// What the Database Hash covers that `discoverDatabase` does not find (Part G §7.3.1): the secondary services
    /// no include reaches (Read By Group Type of 0x2801, as BlueZ's client finds them), with their characteristics
    /// and descriptors, and each Characteristic Extended Properties value (0x2900) by a Read Request.
    public func readHashedValues(_ services: inout [GATTService]) async throws(GATTError) {
        let known = Set(services.map(\.startHandle))
        let secondaries: [GATTService]
        do {
            secondaries = try await discoverServices(type: .secondaryService)
        } catch {
            // A peer that refuses the group type (an ATT error) has none to show: the hash then tells.
            guard case .attribute = error else { throw error }
            secondaries = []
        }
        for secondary in secondaries where !known.contains(secondary.startHandle) {
            services.append(try await withContents(secondary))
        }
        services.sort { $0.startHandle < $1.startHandle }
        for s in services.indices {
            for c in services[s].characteristics.indices {
                for d in services[s].characteristics[c].descriptors.indices
                where services[s].characteristics[c].descriptors[d].uuid == .characteristicExtendedProperties
                    && services[s].characteristics[c].descriptors[d].value == nil {
                    services[s].characteristics[c].descriptors[d].value =
                        try await read(handle: services[s].characteristics[c].descriptors[d].handle)
                }
            }
        }
    }

    /// `service` with its characteristics and their descriptors (Part G §4.6.1, §4.7.1).
    func withContents(_ service: GATTService) async throws(GATTError) -> GATTService {
        var service = service
        var chars = try await discoverCharacteristics(in: service.range)
        for j in chars.indices { chars[j].descriptors = try await discoverDescriptors(of: chars[j]) }
        service.characteristics = chars
        return service
    }

    /// Read Using Characteristic UUID (Part G §4.8.2) with each value that filled its Read By Type pair
    /// (ATT_MTU - 4 bytes, at most 253) read again whole by Read Long Characteristic Value (§4.8.3).
    public func readLong(uuid: BluetoothUUID, in range: ATTHandleRange = .all) async throws(GATTError)
        -> [(handle: UInt16, value: [UInt8])]
    {
        try await onLinkLoop { () async throws(GATTError) -> [(handle: UInt16, value: [UInt8])] in
            var out: [(handle: UInt16, value: [UInt8])] = []
            for (handle, value) in try await read(uuid: uuid, in: range) {
                if value.count >= ATTMTU.readByTypeValueBudget(mtu) {
                    out.append((handle, try await readLong(handle: handle)))
                } else {
                    out.append((handle, value))
                }
            }
            return out
        }
    }
}
