// Reads (Core Spec 5.4 Vol 3 Part G §4.8): by handle (long values read whole), by UUID, multiple.
import ATTStack
import LinkCore

extension GATTClient {
    // MARK: - Reads (Part G §4.8)

    /// Read Characteristic Value (Part G §4.8.1): one Read Request (at most MTU-1 bytes).
    public func read(handle: UInt16) async throws(GATTError) -> [UInt8] {
        try await onLinkLoop { () async throws(GATTError) -> [UInt8] in
            try await read(handle: handle, on: nil)
        }
    }

    func read(handle: UInt16, on bearer: ATTEngine?) async throws(GATTError) -> [UInt8] {
        let pdu = try await transact(.readRequest(handle: handle), handle: handle, on: bearer)
        guard case .readResponse(let value) = pdu else { throw unexpected(pdu, "Read Response") }
        return Array(value)
    }

    /// Long reads of `handles` (`readLong(handle:)`), one after another on one bearer; with Enhanced ATT bearers open,
    /// as many at once as bearers are open (each bearer has its own request slot, Vol 3 Part F §3.2.11). Each
    /// handle's value or the ATT error the peer answered, in the order of `handles`; any other failure ends them all.
    public func readLong(each handles: [UInt16]) async throws(GATTError) -> [Result<[UInt8], GATTAttributeError>] {
        try await onLinkLoop { () async throws(GATTError) -> [Result<[UInt8], GATTAttributeError>] in
            @Sendable func one(_ h: UInt16) async throws(GATTError) -> Result<[UInt8], GATTAttributeError> {
                do { return .success(try await readLong(handle: h)) } catch {
                    if case .attribute(let e) = error { return .failure(e) }
                    throw error
                }
            }
            let width = openBearerCount
            guard width > 1 else {
                var outcomes: [Result<[UInt8], GATTAttributeError>] = []
                for h in handles { outcomes.append(try await one(h)) }
                return outcomes
            }
            do {
                return try await withThrowingTaskGroup(of: (Int, Result<[UInt8], GATTAttributeError>).self) { group in
                    var outcomes = [Result<[UInt8], GATTAttributeError>?](repeating: nil, count: handles.count)
                    var next = 0
                    func startNext() {
                        let i = next, h = handles[i]
                        next += 1
                        group.addTask { (i, try await one(h)) }
                    }
                    while next < min(width, handles.count) { startNext() }
                    while let (i, outcome) = try await group.next() {
                        outcomes[i] = outcome
                        if next < handles.count { startNext() }
                    }
                    return outcomes.map { $0! }
                }
            } catch let error as GATTError {
                throw error
            } catch {
                throw .cancelled(operation: "reading \(handles.count) values")
            }
        }
    }

    /// Read Long Characteristic Value (Part G §4.8.3): a Read Request, then Read Blob while the part filled MTU-1
    /// bytes; stops at 512 bytes, or on Attribute Not Long / Invalid Offset at an exact part boundary.
    public func readLong(handle: UInt16) async throws(GATTError) -> [UInt8] {
        try await onLinkLoop { () async throws(GATTError) -> [UInt8] in
            // One bearer for the whole value: the parts are cut at its MTU-1 (Part G §4.8.3).
            try await withPinnedBearer { engine async throws(GATTError) in try await readLong(handle: handle, on: engine) }
        }
    }

    private func readLong(handle: UInt16, on engine: ATTEngine) async throws(GATTError) -> [UInt8] {
        var value = try await read(handle: handle, on: engine)
        if value.count > ATTMTU.maximumAttributeValue {
            // Core Spec 5.4 Vol 3 Part F §3.2.9: no attribute value is longer than 512 bytes.
            throw violation([ATTOpcode.readResponse.rawValue] + value, "a Read Response of at most 512 value bytes",
                            "a Read Response of \(value.count) value bytes, past the 512-byte maximum of an attribute value")
        }
        while value.count < ATTMTU.maximumAttributeValue {
            let part = ATTMTU.readBlobPartBudget(engine.mtu)
            guard value.count % part == 0, !value.isEmpty else { break }
            let pdu: ATTPDU
            do {
                pdu = try await transact(.readBlobRequest(handle: handle, offset: UInt16(value.count)), handle: handle,
                                         on: engine)
            } catch {
                if let a = error.attributeError, a.rejectedBy == .peer,
                   a.code == .attributeNotLong || a.code == .invalidOffset { break }
                throw error
            }
            guard case .readBlobResponse(let blob) = pdu else { throw unexpected(pdu, "Read Blob Response") }
            value += blob
            if value.count > ATTMTU.maximumAttributeValue {
                // Core Spec 5.4 Vol 3 Part F §3.2.9: no attribute value is longer than 512 bytes.
                throw violation(pdu.bytes, "at most \(ATTMTU.maximumAttributeValue - value.count + blob.count) more bytes of handle \(ATTHex.handle(handle))",
                                "a Read Blob Response at offset \(value.count - blob.count) that takes the value to \(value.count) bytes, past the 512-byte maximum of an attribute value")
            }
            if blob.count < part { break }
        }
        return value
    }

    /// Read Using Characteristic UUID (Part G §4.8.2): Read By Type over `range`, repeated past the last handle
    /// returned until Attribute Not Found or the range's end. Each value is at most MTU-4 bytes.
    public func read(uuid: BluetoothUUID, in range: ATTHandleRange = .all) async throws(GATTError) -> [(handle: UInt16, value: [UInt8])] {
        try await onLinkLoop { () async throws(GATTError) -> [(handle: UInt16, value: [UInt8])] in
            var out: [(handle: UInt16, value: [UInt8])] = []
            try await readByTypeLoop(range: range, type: uuid) { (_, handle, value) throws(GATTError) in
                out.append((handle, Array(value)))
            }
            return out
        }
    }

    /// Read Multiple Characteristic Values (Part G §4.8.4): the values concatenated, as the server sends them.
    public func readMultiple(handles: [UInt16]) async throws(GATTError) -> [UInt8] {
        try await onLinkLoop { () async throws(GATTError) -> [UInt8] in
            let list: ATTHandleList
            do { list = try ATTHandleList(handles) } catch {
                throw .unsupported("Read Multiple needs at least 2 non-zero handles: \(error)")
            }
            let pdu = try await transact(.readMultipleRequest(list), handle: handles.first)
            guard case .readMultipleResponse(let values) = pdu else { throw unexpected(pdu, "Read Multiple Response") }
            return Array(values)
        }
    }

    /// Read Multiple Variable Length Characteristic Values (Part G §4.8.5): one value per handle.
    public func readMultipleVariable(handles: [UInt16]) async throws(GATTError) -> [[UInt8]] {
        try await onLinkLoop { () async throws(GATTError) -> [[UInt8]] in
            let list: ATTHandleList
            do { list = try ATTHandleList(handles) } catch {
                throw .unsupported("Read Multiple Variable needs at least 2 non-zero handles: \(error)")
            }
            let pdu = try await transact(.readMultipleVariableRequest(list), handle: handles.first)
            guard case .readMultipleVariableResponse(let values) = pdu else {
                throw unexpected(pdu, "Read Multiple Variable Response")
            }
            return values.map { Array($0) }
        }
    }


    /// Read By Type over `range`, continuing after the last handle, until Attribute Not Found or the range's end.
    func readByTypeLoop(range: ATTHandleRange, type: BluetoothUUID,
                                _ each: (ATTPDU, UInt16, ArraySlice<UInt8>) throws(GATTError) -> Void) async throws(GATTError) {
        var start = range.start
        while start <= range.end {
            let pdu: ATTPDU
            do {
                pdu = try await transact(.readByTypeRequest(range: ATTHandleRange(start: start, end: range.end), type: type),
                                         handle: start)
            } catch {
                if isAttributeNotFound(error) { return }
                throw error
            }
            guard case .readByTypeResponse(let list) = pdu, !list.isEmpty else {
                throw unexpected(pdu, "a non-empty Read By Type Response")
            }
            var last: UInt16 = 0
            for e in list {
                guard e.handle >= start, e.handle <= range.end, e.handle > last else {
                    throw backwards(pdu, "attribute at \(ATTHex.handle(e.handle)) while reading \(ATTHex.handle(start))-\(ATTHex.handle(range.end))")
                }
                try each(pdu, e.handle, e.value)
                last = e.handle
            }
            if last >= range.end || last == 0xFFFF { return }
            start = last + 1
        }
    }
}
