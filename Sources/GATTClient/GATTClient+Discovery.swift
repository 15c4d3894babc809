// Discovery (Core Spec 5.4 Vol 3 Part G §4.4-§4.7): primary services, includes, characteristics, descriptors.
import ATTStack
import LinkCore
import GATTVocabulary

extension GATTClient {
    // MARK: - Discovery (Part G §4.4-§4.7)

    /// Discover All Primary Services (Part G §4.4.1): Read By Group Type of 0x2800 over the whole handle range.
    public func discoverAllPrimaryServices() async throws(GATTError) -> [GATTService] {
        try await onLinkLoop { () async throws(GATTError) -> [GATTService] in
            try await discoverServices(type: .primaryService)
        }
    }

    /// Read By Group Type of `type` (0x2800 primary, 0x2801 secondary) over `range`, repeated past the last group
    /// until Attribute Not Found or the range's end (Part F §3.4.4.9; Part G §4.4.1).
    func discoverServices(type: BluetoothUUID, in range: ATTHandleRange = .all) async throws(GATTError) -> [GATTService] {
        var out: [GATTService] = []
        var start = range.start
        while true {
            let pdu: ATTPDU
            do {
                pdu = try await transact(.readByGroupTypeRequest(range: ATTHandleRange(start: start, end: range.end),
                                                                 type: type), handle: start)
            } catch {
                if isAttributeNotFound(error) { break }
                throw error
            }
            guard case .readByGroupTypeResponse(let list) = pdu, !list.isEmpty else {
                throw unexpected(pdu, "a non-empty Read By Group Type Response")
            }
            var last: UInt16 = 0
            for e in list {
                guard e.handle >= start, e.endGroup >= e.handle, e.handle > last else {
                    throw backwards(pdu, "service at \(ATTHex.handle(e.handle))-\(ATTHex.handle(e.endGroup)) while discovering from \(ATTHex.handle(start))")
                }
                guard let uuid = BluetoothUUID(littleEndian: e.value) else {
                    throw unexpected(pdu, "a 2- or 16-byte service UUID at \(ATTHex.handle(e.handle))")
                }
                out.append(GATTService(uuid: uuid, startHandle: e.handle, endHandle: e.endGroup, isPrimary: type == .primaryService))
                last = e.endGroup
            }
            if last >= range.end { break }
            start = last + 1
        }
        return out
    }

    /// Discover Primary Service by Service UUID (Part G §4.4.2): Find By Type Value of 0x2800 with the UUID.
    public func discoverPrimaryServices(uuid: BluetoothUUID) async throws(GATTError) -> [GATTService] {
        try await onLinkLoop { () async throws(GATTError) -> [GATTService] in
            var out: [GATTService] = []
            var start: UInt16 = 0x0001
            let value = uuid.littleEndianBytes
            while true {
                let pdu: ATTPDU
                do throws(GATTError) {
                    pdu = try await transact(.findByTypeValueRequest(range: ATTHandleRange(start: start, end: 0xFFFF),
                                                                     type: 0x2800, value: value[...]), handle: start)
                } catch {
                    if isAttributeNotFound(error) { break }
                    throw error
                }
                guard case .findByTypeValueResponse(let list) = pdu, !list.isEmpty else {
                    throw unexpected(pdu, "a non-empty Find By Type Value Response")
                }
                var last: UInt16 = 0
                for e in list {
                    guard e.found >= start, e.groupEnd >= e.found, e.found > last else {
                        throw backwards(pdu, "service at \(ATTHex.handle(e.found))-\(ATTHex.handle(e.groupEnd)) while discovering from \(ATTHex.handle(start))")
                    }
                    out.append(GATTService(uuid: uuid, startHandle: e.found, endHandle: e.groupEnd))
                    last = e.groupEnd
                }
                if last == 0xFFFF { break }
                start = last + 1
            }
            return out
        }
    }

    /// Find Included Services (Part G §4.5.1): Read By Type of 0x2802 within the service; a 128-bit included
    /// service's UUID is read from its declaration with a Read Request.
    public func discoverIncludedServices(of service: GATTService) async throws(GATTError) -> [GATTIncludedService] {
        try await onLinkLoop { () async throws(GATTError) -> [GATTIncludedService] in
            var out: [GATTIncludedService] = []
            try await readByTypeLoop(range: service.range, type: .include) { (pdu, handle, value) throws(GATTError) in
                guard value.count == 6 || value.count == 4 else {
                    throw unexpected(pdu, "a 4- or 6-byte include declaration value at \(ATTHex.handle(handle))")
                }
                let s = value.littleEndianUInt16(at: value.startIndex)
                let e = value.littleEndianUInt16(at: value.startIndex + 2)
                if value.count == 6 {
                    out.append(GATTIncludedService(declarationHandle: handle, startHandle: s, endHandle: e,
                                                   uuid: BluetoothUUID(littleEndian: value.suffix(2))!))
                } else {
                    out.append(GATTIncludedService(declarationHandle: handle, startHandle: s, endHandle: e,
                                                   uuid: .bit16(0)))
                }
            }
            for i in out.indices where out[i].uuid == .bit16(0) {
                let raw = try await read(handle: out[i].startHandle)
                guard raw.count == 16, let uuid = BluetoothUUID(littleEndian: raw) else {
                    throw .protocolViolation(GATTProtocolViolation(
                        received: raw, expected: "a 16-byte service UUID at \(ATTHex.handle(out[i].startHandle))",
                        problem: "an included service declaration of \(raw.count) bytes"))
                }
                out[i].uuid = uuid
            }
            return out
        }
    }

    /// Discover All Characteristics of a Service (Part G §4.6.1): Read By Type of 0x2803 within the service.
    public func discoverCharacteristics(of service: GATTService) async throws(GATTError) -> [GATTCharacteristic] {
        try await onLinkLoop { () async throws(GATTError) -> [GATTCharacteristic] in
            try await discoverCharacteristics(in: service.range)
        }
    }

    /// Discover Characteristics by UUID (Part G §4.6.2): the same requests, keeping the characteristics of `uuid`.
    public func discoverCharacteristics(of service: GATTService, uuid: BluetoothUUID) async throws(GATTError) -> [GATTCharacteristic] {
        try await onLinkLoop { () async throws(GATTError) -> [GATTCharacteristic] in
            try await discoverCharacteristics(in: service.range).filter { $0.uuid == uuid }
        }
    }

    /// Discover All Characteristics in a handle range (Part G §4.6.1).
    public func discoverCharacteristics(in range: ATTHandleRange) async throws(GATTError) -> [GATTCharacteristic] {
        try await onLinkLoop { () async throws(GATTError) -> [GATTCharacteristic] in
            var out: [GATTCharacteristic] = []
            try await readByTypeLoop(range: range, type: .characteristic) { (pdu, handle, value) throws(GATTError) in
                guard value.count == 5 || value.count == 19 else {
                    throw unexpected(pdu, "a 5- or 19-byte characteristic declaration value at \(ATTHex.handle(handle))")
                }
                let b = value.startIndex
                let props = GATTCharacteristicProperties(rawValue: value[b])
                let valueHandle = value.littleEndianUInt16(at: b + 1)
                guard valueHandle > handle else {
                    throw backwards(pdu, "characteristic declared at \(ATTHex.handle(handle)) with its value at \(ATTHex.handle(valueHandle))")
                }
                let uuid = BluetoothUUID(littleEndian: value[(b + 3)...])!
                out.append(GATTCharacteristic(uuid: uuid, declarationHandle: handle, valueHandle: valueHandle,
                                              properties: props, endHandle: range.end))
            }
            for i in out.indices.dropLast() { out[i].endHandle = out[i + 1].declarationHandle - 1 }
            return out
        }
    }

    /// Discover All Characteristic Descriptors (Part G §4.7.1): Find Information after the value handle, up to the
    /// characteristic's end.
    public func discoverDescriptors(of characteristic: GATTCharacteristic) async throws(GATTError) -> [GATTDescriptor] {
        try await onLinkLoop { () async throws(GATTError) -> [GATTDescriptor] in
            guard characteristic.valueHandle < characteristic.endHandle else { return [] }
            return try await discoverDescriptors(in: ATTHandleRange(start: characteristic.valueHandle + 1, end: characteristic.endHandle))
        }
    }

    /// Find Information over a handle range (Part G §4.7.1).
    public func discoverDescriptors(in range: ATTHandleRange) async throws(GATTError) -> [GATTDescriptor] {
        try await onLinkLoop { () async throws(GATTError) -> [GATTDescriptor] in
            var out: [GATTDescriptor] = []
            var start = range.start
            while start <= range.end {
                let pdu: ATTPDU
                do throws(GATTError) {
                    pdu = try await transact(.findInformationRequest(ATTHandleRange(start: start, end: range.end)), handle: start)
                } catch {
                    if isAttributeNotFound(error) { break }
                    throw error
                }
                guard case .findInformationResponse(let list) = pdu, !list.isEmpty else {
                    throw unexpected(pdu, "a non-empty Find Information Response")
                }
                var last: UInt16 = 0
                for e in list {
                    guard e.handle >= start, e.handle <= range.end, e.handle > last else {
                        throw backwards(pdu, "descriptor at \(ATTHex.handle(e.handle)) while discovering \(ATTHex.handle(start))-\(ATTHex.handle(range.end))")
                    }
                    out.append(GATTDescriptor(handle: e.handle, uuid: e.type))
                    last = e.handle
                }
                if last >= range.end || last == 0xFFFF { break }
                start = last + 1
            }
            return out
        }
    }

    /// The whole database: every primary service with its included services, characteristics and descriptors.
    public func discoverAll() async throws(GATTError) -> [GATTService] {
        try await onLinkLoop { () async throws(GATTError) -> [GATTService] in
            try await discoverAll(in: .all)
        }
    }

    /// The primary services declared in `range`, each with its included services, characteristics and descriptors.
    func discoverAll(in range: ATTHandleRange) async throws(GATTError) -> [GATTService] {
        var services = try await discoverServices(type: .primaryService, in: range)
        for i in services.indices {
            services[i].includedServices = try await discoverIncludedServices(of: services[i])
            services[i] = try await withContents(services[i])
        }
        return services
    }
}
