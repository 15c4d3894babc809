// Encoding ATT PDUs into a caller's buffer or into bytes: Core Spec 5.4 Vol 3 Part F §3.4 (PDU formats).

extension ATTPDU {
    /// The number of bytes `encode` writes.
    @inlinable public var encodedLength: Int {
        switch self {
        case .errorResponse: return 5
        case .exchangeMTURequest, .exchangeMTUResponse: return 3
        case .findInformationRequest: return 5
        case .findInformationResponse(let list): return 2 + list.bytes.count
        case .findByTypeValueRequest(_, _, let value): return 7 + value.count
        case .findByTypeValueResponse(let list): return 1 + list.bytes.count
        case .readByTypeRequest(_, let type), .readByGroupTypeRequest(_, let type):
            return 5 + ATTPDU.wireLength(of: type)
        case .readByTypeResponse(let list): return 2 + list.bytes.count
        case .readRequest: return 3
        case .readResponse(let value), .readBlobResponse(let value), .readMultipleResponse(let value):
            return 1 + value.count
        case .readBlobRequest: return 5
        case .readMultipleRequest(let list), .readMultipleVariableRequest(let list): return 1 + list.bytes.count
        case .readByGroupTypeResponse(let list): return 2 + list.bytes.count
        case .writeRequest(_, let value), .writeCommand(_, let value),
             .handleValueNotification(_, let value), .handleValueIndication(_, let value):
            return 3 + value.count
        case .signedWriteCommand(_, let value, let signature): return 3 + value.count + signature.count
        case .prepareWriteRequest(_, _, let value), .prepareWriteResponse(_, _, let value): return 5 + value.count
        case .executeWriteRequest: return 2
        case .writeResponse, .executeWriteResponse, .handleValueConfirmation: return 1
        case .readMultipleVariableResponse(let list): return 1 + list.bytes.count
        case .multipleHandleValueNotification(let list): return 1 + list.bytes.count
        }
    }

    /// A UUID's width in a Read By Type / Read By Group Type Request: 2 bytes for `.bit16`, 16 otherwise
    /// (ATT has no 32-bit form). Keeping the case's width makes decode and encode byte-exact inverses.
    @inlinable static func wireLength(of type: BluetoothUUID) -> Int {
        if case .bit16 = type { return 2 }
        return 16
    }

    /// Checks the fields a PDU built by hand could get wrong, so that what `encode(into:)` writes decodes
    /// back to this PDU: the 12-byte signature, non-zero handles where the spec forbids 0x0000, defined
    /// Execute Write flags. (Lists are checked when they are built.)
    public func validate() throws(ATTEncodeError) {
        let op = opcode
        func zero(_ field: ATTPDUField) -> ATTEncodeError { .invalidField(opcode: op, field: field, problem: .zeroHandle) }
        switch self {
        case .findInformationRequest(let range), .findByTypeValueRequest(let range, _, _),
             .readByTypeRequest(let range, _), .readByGroupTypeRequest(let range, _):
            guard range.start != 0 else { throw zero(.startingHandle) }
        case .readRequest(let handle), .readBlobRequest(let handle, _), .writeRequest(let handle, _),
             .writeCommand(let handle, _), .prepareWriteRequest(let handle, _, _),
             .prepareWriteResponse(let handle, _, _), .handleValueNotification(let handle, _),
             .handleValueIndication(let handle, _):
            try ATTPDU.validateAttributeHandle(handle, of: op)
        case .signedWriteCommand(let handle, _, let signature):
            try ATTPDU.validateAttributeHandle(handle, of: op)
            guard signature.count == ATTPDU.signatureLength else {
                throw .invalidField(opcode: op, field: .authenticationSignature,
                                    problem: .wrongLength(expected: ATTPDU.signatureLength, actual: signature.count))
            }
        case .executeWriteRequest(let flags):
            guard flags.isDefined else { throw .invalidField(opcode: op, field: .flags, problem: .invalidFlags(flags.rawValue)) }
        default:
            break
        }
    }

    /// Validates the PDU (`validate()`), then writes it at the start of `buffer`; returns the byte count.
    /// Throws `.bufferTooSmall` when `buffer` is shorter than `encodedLength`.
    @inlinable
    public func encode(into buffer: UnsafeMutableRawBufferPointer) throws(ATTEncodeError) -> Int {
        try validate()
        let n = encodedLength
        guard buffer.count >= n else { throw .bufferTooSmall(opcode: opcode, needed: n, available: buffer.count) }
        return encodeUnchecked(into: buffer)
    }

    /// Writes a PDU that `validate()` already accepted at the start of `buffer` (at least `encodedLength` bytes);
    /// returns the byte count. For a sender that validates once, when the PDU is handed over, and encodes per send.
    @inlinable
    public func encode(validatedInto buffer: UnsafeMutableRawBufferPointer) -> Int {
        precondition(buffer.count >= encodedLength, "the buffer is shorter than the PDU")
        return encodeUnchecked(into: buffer)
    }

    /// Appends the PDU's bytes to `out`, as its fields say (no validation: see `validate()`).
    @inlinable
    public func encode(appendingTo out: inout [UInt8]) {
        let n = encodedLength
        let old = out.count
        out.append(contentsOf: repeatElement(0, count: n))
        out.withUnsafeMutableBytes { p in
            _ = encodeUnchecked(into: UnsafeMutableRawBufferPointer(rebasing: p[old...]))
        }
    }

    /// The PDU's bytes, as its fields say (no validation: see `validate()`).
    @inlinable
    public var bytes: [UInt8] {
        let n = encodedLength
        return [UInt8](unsafeUninitializedCapacity: n) { buffer, count in
            count = encodeUnchecked(into: UnsafeMutableRawBufferPointer(buffer))
        }
    }

    /// Writes the PDU at the start of `p`, which holds at least `encodedLength` bytes.
    @inlinable
    func encodeUnchecked(into p: UnsafeMutableRawBufferPointer) -> Int {
        p[0] = opcode.rawValue
        switch self {
        case .errorResponse(let req, let handle, let error):
            p[1] = req.rawValue
            p.attStoreLE16(handle, at: 2)
            p[4] = error.rawValue
            return 5
        case .exchangeMTURequest(let mtu), .exchangeMTUResponse(let mtu):
            p.attStoreLE16(mtu, at: 1)
            return 3
        case .findInformationRequest(let range):
            p.attStoreLE16(range.start, at: 1)
            p.attStoreLE16(range.end, at: 3)
            return 5
        case .findInformationResponse(let list):
            p[1] = list.format
            return 2 + p.attCopy(list.bytes, at: 2)
        case .findByTypeValueRequest(let range, let type, let value):
            p.attStoreLE16(range.start, at: 1)
            p.attStoreLE16(range.end, at: 3)
            p.attStoreLE16(type, at: 5)
            return 7 + p.attCopy(value, at: 7)
        case .findByTypeValueResponse(let list):
            return 1 + p.attCopy(list.bytes, at: 1)
        case .readByTypeRequest(let range, let type), .readByGroupTypeRequest(let range, let type):
            p.attStoreLE16(range.start, at: 1)
            p.attStoreLE16(range.end, at: 3)
            if case .bit16(let v) = type {
                p.attStoreLE16(v, at: 5)
                return 7
            }
            let v = type.uuid128
            for i in 0..<16 { p[5 + i] = UInt8(truncatingIfNeeded: v >> (i * 8)) }
            return 21
        case .readByTypeResponse(let list):
            p[1] = UInt8(truncatingIfNeeded: list.elementLength)
            return 2 + p.attCopy(list.bytes, at: 2)
        case .readRequest(let handle):
            p.attStoreLE16(handle, at: 1)
            return 3
        case .readResponse(let value), .readBlobResponse(let value), .readMultipleResponse(let value):
            return 1 + p.attCopy(value, at: 1)
        case .readBlobRequest(let handle, let offset):
            p.attStoreLE16(handle, at: 1)
            p.attStoreLE16(offset, at: 3)
            return 5
        case .readMultipleRequest(let list), .readMultipleVariableRequest(let list):
            return 1 + p.attCopy(list.bytes, at: 1)
        case .readByGroupTypeResponse(let list):
            p[1] = UInt8(truncatingIfNeeded: list.elementLength)
            return 2 + p.attCopy(list.bytes, at: 2)
        case .writeRequest(let handle, let value), .writeCommand(let handle, let value),
             .handleValueNotification(let handle, let value), .handleValueIndication(let handle, let value):
            return ATTPDU.encodeHandleValue(opcode, handle: handle, value: value, into: p)
        case .signedWriteCommand(let handle, let value, let signature):
            p.attStoreLE16(handle, at: 1)
            let n = 3 + p.attCopy(value, at: 3)
            return n + p.attCopy(signature, at: n)
        case .prepareWriteRequest(let handle, let offset, let value),
             .prepareWriteResponse(let handle, let offset, let value):
            p.attStoreLE16(handle, at: 1)
            p.attStoreLE16(offset, at: 3)
            return 5 + p.attCopy(value, at: 5)
        case .executeWriteRequest(let flags):
            p[1] = flags.rawValue
            return 2
        case .writeResponse, .executeWriteResponse, .handleValueConfirmation:
            return 1
        case .readMultipleVariableResponse(let list):
            return 1 + p.attCopy(list.bytes, at: 1)
        case .multipleHandleValueNotification(let list):
            return 1 + p.attCopy(list.bytes, at: 1)
        }
    }
}

/// A PDU's bytes in one heap object whose class is not generic: a request waits in the engine's queue as one of
/// these. An `[UInt8]` costs more than twice as much to make and free (Swift 6.3 on Linux looks up the generic
/// metadata of its storage class in a locked table on every allocation); this one's metadata is static.
/// Written once, by `ATTPDU.encoded`, before anything else holds it; read-only from then on (ManagedBuffer cannot be
/// Sendable, so the engine's request holds it as `nonisolated(unsafe)`).
public final class ATTEncodedPDU: ManagedBuffer<Int, UInt8> {
    /// The bytes' count (the header; ManagedBuffer's capacity would ask the allocator). Read through the header's
    /// pointer: `header` is a class property, and each access to it is a dynamic exclusivity check.
    @inlinable public var count: Int { withUnsafeMutablePointerToHeader { $0.pointee } }

    /// Calls `body` with the bytes.
    @inlinable
    public func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try withUnsafeMutablePointers { count, bytes in try body(UnsafeRawBufferPointer(start: bytes, count: count.pointee)) }
    }

    /// The bytes as an array, for the paths that keep or print them.
    public var bytes: [UInt8] { withUnsafeBytes { Array($0) } }
}

extension ATTPDU {
    /// The PDU's bytes, as its fields say (no validation: see `validate()`), in an `ATTEncodedPDU`.
    @inlinable
    public var encoded: ATTEncodedPDU {
        let n = encodedLength
        let storage = unsafeDowncast(ATTEncodedPDU.create(minimumCapacity: n) { _ in n }, to: ATTEncodedPDU.self)
        storage.withUnsafeMutablePointerToElements { p in
            _ = encodeUnchecked(into: UnsafeMutableRawBufferPointer(start: p, count: n))
        }
        return storage
    }
}

extension ATTPDU {
    /// The Attribute Handle rule `validate()` applies: 0x0000 is reserved and never names an attribute (Core Spec 5.4
    /// Vol 3 Part F §3.2.2). For a sender that checks one field without building the PDU (the Write Command fast path).
    @inlinable @inline(__always)
    public static func validateAttributeHandle(_ handle: UInt16, of opcode: ATTOpcode) throws(ATTEncodeError) {
        guard handle != 0 else { throw .invalidField(opcode: opcode, field: .attributeHandle, problem: .zeroHandle) }
    }

    /// The layout the handle-and-value PDUs share (Write Request and Command, Notification, Indication: Part F
    /// §3.4.5.1, §3.4.5.3, §3.4.7.1, §3.4.7.2): opcode, handle little-endian, value. `p` holds at least
    /// 3 + value.count bytes; returns the byte count. `encodeUnchecked` writes these PDUs with it, and a sender of
    /// back-to-back Write Commands calls it with no ATTPDU built.
    @inlinable @inline(__always)
    public static func encodeHandleValue(_ opcode: ATTOpcode, handle: UInt16, value: ArraySlice<UInt8>,
                                         into p: UnsafeMutableRawBufferPointer) -> Int {
        p[0] = opcode.rawValue
        p.attStoreLE16(handle, at: 1)
        return 3 + p.attCopy(value, at: 3)
    }
}
