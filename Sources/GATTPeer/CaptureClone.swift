// A device rebuilt from a capture alone (`mirror clone --from CAPTURE`): the ATT exchange of one connection is
// replayed through ATTStack's codec, each request paired with its answer (one request at a time: Core Spec 5.4 Vol 3
// Part F §3.3.2), and what the discovery procedures (Part G §4.4-§4.7) and the reads (§4.8) revealed is put together,
// with what the capture never showed: handle ranges no discovery covered and values never read.
import ATTStack
import CaptureReader
import GATTVocabulary

/// What a capture did not show of the device.
public struct CaptureGaps: Sendable, Equatable {
    /// Handle ranges in which no primary service discovery (Read By Group Type of 0x2800) looked.
    public var servicesNotDiscovered: [ATTHandleRange]
    /// Ranges of discovered services in which no characteristic discovery (Read By Type of 0x2803) looked.
    public var characteristicsNotDiscovered: [ATTHandleRange]
    /// Ranges after a characteristic's value in which no descriptor discovery (Find Information) looked.
    public var descriptorsNotDiscovered: [ATTHandleRange]
    /// Readable values and descriptors never read.
    public var valuesNotRead: [UInt16]

    public var isEmpty: Bool {
        servicesNotDiscovered.isEmpty && characteristicsNotDiscovered.isEmpty && descriptorsNotDiscovered.isEmpty && valuesNotRead.isEmpty
    }
}

extension DeviceClone {
    /// Rebuilds the device this host talked to on `connection` (the peer as the ATT server). ATT PDUs that do not
    /// decode are counted in `undecodable`, never guessed at.
    public static func rebuilding(_ connection: CapturedConnection, source: String, names: CharacteristicNames = CharacteristicNames())
        -> (clone: DeviceClone, gaps: CaptureGaps, undecodable: Int) {
        var services: [UInt16: (end: UInt16, uuid: BluetoothUUID, primary: Bool)] = [:]
        var includes: [UInt16: GATTIncludedService] = [:]
        var declarations: [UInt16: (properties: UInt8, valueHandle: UInt16, uuid: BluetoothUUID)] = [:]
        var types: [UInt16: BluetoothUUID] = [:]
        var readings: [UInt16: Reading] = [:]
        var serviceCoverage: [ATTHandleRange] = [], characteristicCoverage: [ATTHandleRange] = [], descriptorCoverage: [ATTHandleRange] = []
        var clientMTU: UInt16?, serverMTU: UInt16?
        var servedHash: [UInt8]?
        var undecodable = 0
        var pending: ATTPDU?  // this host's request the peer has not answered yet
        var behaviours: [DeviceClone.WriteBehaviour] = []
        var writtenAt: Int64 = 0  // when the last write went out

        for pdu in connection.pdus {
            let decoded: ATTPDU
            do { decoded = try ATTPDU.decode(pdu.bytes) } catch { undecodable += 1; continue }
            if !pdu.fromPeer {
                switch decoded {
                case .writeRequest(let h, let v), .writeCommand(let h, let v):
                    behaviours.append(.init(handle: h, value: Array(v), withResponse: decoded.opcode == .writeRequest))
                    writtenAt = pdu.timestamp
                default: break
                }
                switch decoded {
                case .exchangeMTURequest(let rx): clientMTU = rx
                default: if decoded.opcode.kind == .request { pending = decoded }
                }
                continue
            }
            if case .exchangeMTUResponse(let rx) = decoded { serverMTU = rx }
            // What followed the last write, until the next one: the peer's doing in answer to it (Part F §3.4.7).
            switch decoded {
            case .handleValueNotification(let h, let v), .handleValueIndication(let h, let v):
                if !behaviours.isEmpty {
                    behaviours[behaviours.count - 1].then.append(.init(after: max(0, pdu.timestamp - writtenAt), handle: h, value: Array(v),
                                                                       indication: decoded.opcode == .handleValueIndication))
                }
            default: break
            }
            guard let request = pending, decoded.opcode.kind == .response else { continue }
            pending = nil
            switch (request, decoded) {
            case (.readByGroupTypeRequest(let range, let type), .readByGroupTypeResponse(let list)):
                var last = range.start
                for e in list {
                    if let uuid = BluetoothUUID(littleEndian: e.value) {
                        services[e.handle] = (e.endGroup, uuid, type == .primaryService)
                    }
                    last = max(last, e.endGroup)
                }
                if type == .primaryService { serviceCoverage.append(ATTHandleRange(start: range.start, end: last)) }
            case (.readByGroupTypeRequest(let range, let type), .errorResponse(_, _, let code)) where code == .attributeNotFound:
                if type == .primaryService { serviceCoverage.append(range) }
            case (.findByTypeValueRequest(_, let type, let value), .findByTypeValueResponse(let list)) where type == 0x2800:
                // Discover Primary Service by Service UUID (Part G §4.4.2): the services of that one UUID.
                if let uuid = BluetoothUUID(littleEndian: value) {
                    for e in list { services[e.found] = (e.groupEnd, uuid, true) }
                }
            case (.readByTypeRequest(let range, let type), .readByTypeResponse(let list)):
                var last = range.start
                for e in list {
                    last = max(last, e.handle)
                    let v = Array(e.value)
                    if type == .characteristic, v.count >= 5, let uuid = BluetoothUUID(littleEndian: v[3...]) {
                        declarations[e.handle] = (v[0], UInt16(v[1]) | UInt16(v[2]) << 8, uuid)
                    } else if type == .include, v.count >= 4 {
                        let start = UInt16(v[0]) | UInt16(v[1]) << 8, end = UInt16(v[2]) | UInt16(v[3]) << 8
                        let uuid = v.count >= 6 ? BluetoothUUID(littleEndian: v[4..<6]) : services[start]?.uuid
                        if let uuid { includes[e.handle] = GATTIncludedService(declarationHandle: e.handle, startHandle: start, endHandle: end, uuid: uuid) }
                    } else {
                        types[e.handle] = type
                        readings[e.handle] = .value(v)
                        if type == .databaseHash { servedHash = v }
                    }
                }
                if type == .characteristic { characteristicCoverage.append(ATTHandleRange(start: range.start, end: last)) }
            case (.readByTypeRequest(let range, let type), .errorResponse(_, _, let code)) where code == .attributeNotFound:
                if type == .characteristic { characteristicCoverage.append(range) }
            case (.findInformationRequest(let range), .findInformationResponse(let list)):
                var last = range.start
                for e in list { types[e.handle] = e.type; last = max(last, e.handle) }
                descriptorCoverage.append(ATTHandleRange(start: range.start, end: last))
            case (.findInformationRequest(let range), .errorResponse(_, _, let code)) where code == .attributeNotFound:
                descriptorCoverage.append(range)
            case (.readRequest(let handle), .readResponse(let value)):
                // The first read is the state the device started in; later ones show what writes made of it.
                if readings[handle] == nil { readings[handle] = .value(Array(value)) }
            case (.readBlobRequest(let handle, let offset), .readBlobResponse(let value)):
                // A part at the offset read so far continues the value (Part G §4.8.3); another offset is left alone.
                if case .value(let sofar)? = readings[handle], sofar.count == Int(offset) { readings[handle] = .value(sofar + value) }
            case (.readRequest(let handle), .errorResponse(_, _, let code)):
                readings[handle] = .refused(code)
            case (.writeRequest, .errorResponse(_, _, let code)):
                if !behaviours.isEmpty { behaviours[behaviours.count - 1].refusal = code }
            default:
                break
            }
        }

        // The database: services in handle order, each with its includes, characteristics and descriptors.
        var built: [GATTService] = []
        for start in services.keys.sorted() {
            let s = services[start]!
            var service = GATTService(uuid: s.uuid, startHandle: start, endHandle: s.end, isPrimary: s.primary)
            service.includedServices = includes.keys.sorted().filter { $0 > start && $0 <= s.end }.map { includes[$0]! }
            let decls = declarations.keys.sorted().filter { $0 > start && $0 <= s.end }
            service.characteristics = decls.enumerated().map { i, d in
                let c = declarations[d]!
                let end = i + 1 < decls.count ? decls[i + 1] - 1 : s.end
                let descriptors = types.keys.sorted().filter { $0 > c.valueHandle && $0 <= end && types[$0] != .characteristic }
                    .map { h -> GATTDescriptor in
                        let value: [UInt8]? = if case .value(let v)? = readings[h], types[h] == .characteristicExtendedProperties { v } else { nil }
                        return GATTDescriptor(handle: h, uuid: types[h]!, value: value)
                    }
                return GATTCharacteristic(uuid: c.uuid, declarationHandle: d, valueHandle: c.valueHandle,
                                          properties: GATTCharacteristicProperties(rawValue: c.properties), endHandle: end,
                                          descriptors: descriptors)
            }
            built.append(service)
        }
        // Readings of attributes the rebuilt database does not hold (a Read By Type of a type outside it) stay out.
        var held = Set<UInt16>()
        for c in built.flatMap(\.characteristics) { held.insert(c.valueHandle); for d in c.descriptors { held.insert(d.handle) } }
        readings = readings.filter { held.contains($0.key) }
        if servedHash == nil, let hash = built.flatMap(\.characteristics).first(where: { $0.uuid == .databaseHash }),
           case .value(let v)? = readings[hash.valueHandle] { servedHash = v }

        var labels: [UInt16: String] = [:]
        for c in built.flatMap(\.characteristics) {
            if let n = names.label(c.uuid, userDescription: nil) { labels[c.valueHandle] = n }
        }
        let deviceName: String? = built.flatMap(\.characteristics).first { $0.uuid == .bit16(0x2A00) }
            .flatMap { c in if case .value(let v)? = readings[c.valueHandle] { String(decoding: v, as: UTF8.self) } else { nil } }
        let mtu = Int(min(clientMTU ?? 23, serverMTU ?? 23))
        var clone = DeviceClone(name: deviceName ?? connection.peer, source: source, mtu: mtu, services: built,
                                readings: readings, names: labels, servedHash: servedHash)
        clone.behaviours = behaviours

        // What no procedure looked at: the complement of each coverage within where it should have looked.
        func uncovered(_ within: ATTHandleRange, by covered: [ATTHandleRange]) -> [ATTHandleRange] {
            var gaps: [ATTHandleRange] = []
            var next = UInt32(within.start)
            for c in covered.sorted(by: { $0.start < $1.start }) where UInt32(c.end) >= next && c.start <= within.end {
                if UInt32(c.start) > next { gaps.append(ATTHandleRange(start: UInt16(next), end: c.start - 1)) }
                next = max(next, UInt32(c.end) + 1)
            }
            if next <= UInt32(within.end) { gaps.append(ATTHandleRange(start: UInt16(next), end: within.end)) }
            return gaps
        }
        let gaps = CaptureGaps(
            servicesNotDiscovered: uncovered(.all, by: serviceCoverage),
            characteristicsNotDiscovered: built.filter(\.isPrimary).flatMap { s in
                s.endHandle > s.startHandle ? uncovered(ATTHandleRange(start: s.startHandle + 1, end: s.endHandle), by: characteristicCoverage) : []
            },
            descriptorsNotDiscovered: built.flatMap(\.characteristics).flatMap { c in
                c.endHandle > c.valueHandle ? uncovered(ATTHandleRange(start: c.valueHandle + 1, end: c.endHandle), by: descriptorCoverage) : []
            },
            valuesNotRead: clone.unread)
        return (clone, gaps, undecodable)
    }
}
