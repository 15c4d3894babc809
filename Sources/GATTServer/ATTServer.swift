// The one ATT server: the answer to every request of Core Spec 5.4 Vol 3 Part F §3.4 from an attribute database,
// with the error codes §3.4.1.1 and each request's section name. No I/O: a caller hands it decoded PDUs, and the
// link's security when an attribute asks for it.
import ATTStack
import LinkCore
import GATTVocabulary

/// What one connection's server remembers (Vol 3 Part F §3.2.8 the ATT_MTU, §3.4.6 the prepare queue;
/// Part G §3.3.3.3 the CCCD values, one set per client).
public struct ATTSession: Sendable {
    /// The ATT_MTU agreed by Exchange MTU (23 until then).
    public var mtu = ATTMTU.minimumLE
    /// CCCD values by characteristic value handle.
    public var cccd: [UInt16: UInt16] = [:]
    /// Prepare Write parts waiting for an Execute Write.
    public var prepared: [(handle: UInt16, offset: Int, value: [UInt8])] = []
    /// An Enhanced ATT bearer's session (§3.2.11): its MTU is its channel's, and Exchange MTU is not used on it (§3.4.2.1).
    public var enhanced = false
    public init() {}

    /// The session of an Enhanced ATT bearer whose channel agreed on `mtu`.
    public init(enhancedMTU mtu: Int) {
        self.mtu = mtu
        enhanced = true
    }

    /// Whether the client enabled notifications (bit 0) or indications (bit 1) of the value at `valueHandle`.
    public func subscribed(_ valueHandle: UInt16, indications: Bool = false) -> Bool {
        (cccd[valueHandle] ?? 0) & (indications ? 0x0002 : 0x0001) != 0
    }
}

/// A read the server is about to answer: which attribute, for which request.
public struct AttributeRead {
    public let attribute: Attribute
    public let opcode: ATTOpcode
}

/// What a read handler answers: the stored value, another value, or an ATT error.
public enum ReadOutcome: Sendable, Equatable {
    case stored
    case value([UInt8])
    case error(ATTErrorCode)
}

/// A write the server is about to apply: the attribute, the whole value, and the request that carries it
/// (Prepare Write Request: one part, checked before it is queued; Execute Write Request: the assembled value).
public struct AttributeWrite {
    public let attribute: Attribute
    public let value: [UInt8]
    public let opcode: ATTOpcode
}

/// What a write handler decides: store the value (the default), accept it (answering now or after a delay), or refuse.
public enum WriteOutcome: Sendable, Equatable {
    case store
    case accepted(responseAfterMilliseconds: Int?)
    case rejected(ATTErrorCode)
}

/// The server's answer to one PDU.
public enum ATTServerReply: Sendable, Equatable {
    /// Commands, confirmations and responses get none (Vol 3 Part F §3.3).
    case none
    case now(ATTPDU)
    case later(milliseconds: Int, ATTPDU)
}

/// The ATT server over one database. Handlers customise reads and writes per attribute (a state machine behind
/// the values); everything else (discovery, MTU, offsets, queues, CCCDs, error codes) is decided here.
public struct ATTServer: Sendable {
    public var database: AttributeDatabase
    /// The Server Rx MTU it offers in Exchange MTU (Vol 3 Part F §3.4.2.2).
    public var serverRxMTU: UInt16
    /// The most Prepare Write parts one connection may queue before Prepare Queue Full (§3.4.6.1).
    public var prepareQueueLimit = 64

    public init(database: AttributeDatabase, serverRxMTU: UInt16 = 517) {
        self.database = database
        self.serverRxMTU = serverRxMTU
    }

    public typealias ReadHandler = (AttributeRead) -> ReadOutcome
    public typealias WriteHandler = (AttributeWrite) -> WriteOutcome
    /// The link's security now (Vol 3 Part C §10.2), asked only for an attribute with a security requirement.
    public typealias LinkSecurityQuery = () -> BTSecurity

    /// The answer to raw bytes: a malformed request gets its Error Response, a malformed command nothing (§3.3.2).
    public mutating func answer(bytes: [UInt8], session: inout ATTSession,
                                read: ReadHandler = { _ in .stored }, write: WriteHandler = { _ in .store },
                                link: LinkSecurityQuery = { .unencrypted }) -> ATTServerReply {
        switch Self.decode(bytes) {
        case .pdu(let pdu): return answer(pdu, session: &session, read: read, write: write, link: link)
        case .malformed(_, let reply): return reply
        }
    }

    /// A client's bytes, decoded, or the answer a malformed PDU gets.
    public enum Input: Sendable {
        case pdu(ATTPDU)
        case malformed(ATTDecodeError, ATTServerReply)
    }

    /// Decodes a client's PDU, or gives the Error Response the codec says a malformed request gets (§3.4.1.1).
    public static func decode(_ bytes: [UInt8]) -> Input {
        do { return .pdu(try ATTPDU.decode(bytes)) } catch {
            return .malformed(error, error.serverErrorResponse.map { .now($0) } ?? .none)
        }
    }

    /// The answer to one decoded PDU; `link` gives the link's security, against which an attribute's read or write
    /// requirement is checked (unencrypted unless given).
    public mutating func answer(_ pdu: ATTPDU, session: inout ATTSession,
                                read: ReadHandler = { _ in .stored }, write: WriteHandler = { _ in .store },
                                link: LinkSecurityQuery = { .unencrypted }) -> ATTServerReply {
        let mtu = session.mtu
        func error(_ code: ATTErrorCode, _ handle: UInt16) -> ATTServerReply {
            .now(.errorResponse(requestOpcode: pdu.opcode, handle: handle, error: code))
        }
        switch pdu {
        case .exchangeMTURequest(let clientRx):
            // §3.4.2.1: not on an Enhanced ATT bearer, whose MTU its channel set.
            if session.enhanced { return error(.requestNotSupported, 0x0000) }
            // §3.4.2: the smaller Rx MTU, never below 23.
            session.mtu = ATTMTU.negotiated(clientRxMTU: Int(clientRx), serverRxMTU: Int(serverRxMTU))
            return .now(.exchangeMTUResponse(serverRxMTU: serverRxMTU))

        case .findInformationRequest(let range):
            // §3.4.3.1-2: handles and types in one format (16-bit or 128-bit), as many as fit.
            guard Self.valid(range) else { return error(.invalidHandle, range.start) }
            var found: [(handle: UInt16, type: BluetoothUUID)] = []
            var short: Bool?
            var used = 2
            for a in database.attributes where a.handle >= range.start && a.handle <= range.end {
                let isShort = a.type.uuid16 != nil
                if short == nil { short = isShort }
                if short != isShort { break }
                let size = isShort ? 4 : 18
                if used + size > mtu { break }
                used += size
                found.append((a.handle, a.type))
            }
            guard !found.isEmpty, let list = try? ATTFindInformationList(found) else { return error(.attributeNotFound, range.start) }
            return .now(.findInformationResponse(list))

        case .findByTypeValueRequest(let range, let type, let value):
            // §3.4.3.3-4: attributes of a 16-bit type whose value matches; a service's group end, else the handle.
            guard Self.valid(range) else { return error(.invalidHandle, range.start) }
            var found: [(found: UInt16, groupEnd: UInt16)] = []
            var used = 1
            for a in database.attributes where a.handle >= range.start && a.handle <= range.end && a.type == .bit16(type) {
                // A value this link may not read is not compared either (that would disclose it).
                guard Self.refusal(a.readSecurity, link) == nil,
                      case .value(let v) = readValue(a, .findByTypeValueRequest, session, read), v[...] == value else { continue }
                if used + 4 > mtu { break }
                used += 4
                if case .service(let end) = a.role { found.append((a.handle, end)) } else { found.append((a.handle, a.handle)) }
            }
            guard !found.isEmpty, let list = try? ATTHandlesInformationList(found) else { return error(.attributeNotFound, range.start) }
            return .now(.findByTypeValueResponse(list))

        case .readByTypeRequest(let range, let type):
            // §3.4.4.1-2: values of one length (at most MTU-4 and 253 bytes each); an unreadable first one is an error.
            guard Self.valid(range) else { return error(.invalidHandle, range.start) }
            var found: [(handle: UInt16, value: [UInt8])] = []
            var used = 2
            for a in database.attributes where a.handle >= range.start && a.handle <= range.end && a.type == type {
                let outcome = permittedRead(a, .readByTypeRequest, session, read, link)
                guard case .value(let full) = outcome else {
                    if found.isEmpty, case .error(let code) = outcome { return error(code, a.handle) }
                    break
                }
                let value = Array(full.prefix(ATTMTU.readByTypeValueBudget(mtu)))
                if let first = found.first, first.value.count != value.count { break }
                if used + 2 + value.count > mtu { break }
                used += 2 + value.count
                found.append((a.handle, value))
            }
            guard !found.isEmpty, let list = try? ATTAttributeDataList(found) else { return error(.attributeNotFound, range.start) }
            return .now(.readByTypeResponse(list))

        case .readByGroupTypeRequest(let range, let type):
            // §3.4.4.9-10: only the service types group (Part G §2.5.3); values of one length, as many as fit.
            guard Self.valid(range) else { return error(.invalidHandle, range.start) }
            guard type == .primaryService || type == .secondaryService else { return error(.unsupportedGroupType, range.start) }
            var found: [(handle: UInt16, endGroup: UInt16, value: [UInt8])] = []
            var used = 2
            for a in database.attributes where a.handle >= range.start && a.handle <= range.end && a.type == type {
                guard case .service(let end) = a.role else { continue }
                if let first = found.first, first.value.count != a.value.count { break }
                let value = Array(a.value.prefix(ATTMTU.readByGroupTypeValueBudget(mtu)))
                if used + 4 + value.count > mtu { break }
                used += 4 + value.count
                found.append((a.handle, end, value))
            }
            guard !found.isEmpty, let list = try? ATTGroupAttributeDataList(found) else { return error(.attributeNotFound, range.start) }
            return .now(.readByGroupTypeResponse(list))

        case .readRequest(let handle):
            // §3.4.4.3-4: the first MTU-1 bytes.
            switch checkedRead(handle, .readRequest, session, read, link) {
            case .error(let code): return error(code, handle)
            case .value(let value): return .now(.readResponse(value: value.prefix(ATTMTU.readBlobPartBudget(mtu))))
            }

        case .readBlobRequest(let handle, let offset):
            // §3.4.4.5-6: MTU-1 bytes from the offset; past the end is Invalid Offset.
            switch checkedRead(handle, .readBlobRequest, session, read, link) {
            case .error(let code): return error(code, handle)
            case .value(let value):
                guard Int(offset) <= value.count else { return error(.invalidOffset, handle) }
                return .now(.readBlobResponse(value: value[Int(offset)...].prefix(ATTMTU.readBlobPartBudget(mtu))))
            }

        case .readMultipleRequest(let handles):
            // §3.4.4.7-8: the values concatenated, cut at MTU-1; any unreadable handle fails the whole request.
            var out: [UInt8] = []
            for h in handles {
                switch checkedRead(h, .readMultipleRequest, session, read, link) {
                case .error(let code): return error(code, h)
                case .value(let value): out += value
                }
            }
            return .now(.readMultipleResponse(values: out.prefix(ATTMTU.readBlobPartBudget(mtu))))

        case .readMultipleVariableRequest(let handles):
            // §3.4.4.11-12: length-value tuples, cut at MTU-1.
            var values: [[UInt8]] = []
            for h in handles {
                switch checkedRead(h, .readMultipleVariableRequest, session, read, link) {
                case .error(let code): return error(code, h)
                case .value(let value): values.append(value)
                }
            }
            guard let list = try? ATTLengthValueList(values, limit: ATTMTU.readBlobPartBudget(mtu)) else {
                return error(.invalidPDU, 0)
            }
            return .now(.readMultipleVariableResponse(list))

        case .writeRequest(let handle, let value), .writeCommand(let handle, let value):
            // §3.4.5.1-3: a command is applied the same way and never answered, not even with an error (one the
            // link's security refuses is dropped).
            let isCommand = pdu.opcode == .writeCommand
            let outcome = checkedWrite(handle, Array(value), pdu.opcode, &session, write, link)
            if isCommand { return .none }
            switch outcome {
            case .rejected(let code): return error(code, handle)
            case .accepted(let delay?): return .later(milliseconds: delay, .writeResponse)
            case .accepted(nil), .store: return .now(.writeResponse)
            }

        case .prepareWriteRequest(let handle, let offset, let value):
            // §3.4.6.1-2: permissions (and the link's security) are checked now, the part is queued and echoed.
            guard let a = database.attribute(handle) else { return error(.invalidHandle, handle) }
            guard a.writable else { return error(.writeNotPermitted, handle) }
            if let code = Self.refusal(a.writeSecurity, link) { return error(code, handle) }
            guard session.prepared.count < prepareQueueLimit else { return error(.prepareQueueFull, handle) }
            if case .rejected(let code) = write(AttributeWrite(attribute: a, value: Array(value), opcode: .prepareWriteRequest)) {
                return error(code, handle)
            }
            session.prepared.append((handle, Int(offset), Array(value)))
            return .now(.prepareWriteResponse(handle: handle, offset: offset, value: value))

        case .executeWriteRequest(let flags):
            // §3.4.6.3-4: 0x00 cancels; 0x01 writes each handle's parts in order, each at its offset, which may not be
            // past the value's end (Invalid Offset): the first over the current value's octets before it, the next
            // over what the earlier parts made (a long write from 0 is just its parts; the value's tail is the write's).
            let queue = session.prepared
            session.prepared = []
            guard flags == .writeAll else { return .now(.executeWriteResponse) }
            var order: [UInt16] = []
            var values: [UInt16: [UInt8]] = [:]
            for part in queue {
                if values[part.handle] == nil {
                    order.append(part.handle)
                    values[part.handle] = []
                    if part.offset > 0 {
                        guard let a = database.attribute(part.handle) else { return error(.invalidHandle, part.handle) }
                        switch readValue(a, .executeWriteRequest, session, read) {
                        case .error(let code): return error(code, part.handle)
                        case .value(let current): values[part.handle] = Array(current.prefix(part.offset))
                        }
                    }
                }
                let before = values[part.handle]!
                guard part.offset <= before.count else { return error(.invalidOffset, part.handle) }
                values[part.handle] = Array(before.prefix(part.offset)) + part.value + before.dropFirst(part.offset + part.value.count)
                guard values[part.handle]!.count <= ATTMTU.maximumAttributeValue else {
                    return error(.invalidAttributeValueLength, part.handle)
                }
            }
            var delay: Int?
            for handle in order {
                switch checkedWrite(handle, values[handle]!, .executeWriteRequest, &session, write, link) {
                case .rejected(let code): return error(code, handle)
                case .accepted(let d?): delay = max(delay ?? 0, d)
                case .accepted(nil), .store: break
                }
            }
            return delay.map { .later(milliseconds: $0, .executeWriteResponse) } ?? .now(.executeWriteResponse)

        case .handleValueConfirmation, .signedWriteCommand:
            // A confirmation ends an indication (the connection's business); a signed write needs keys this server lacks.
            return .none

        default:
            // Responses and notifications from a client are not requests: nothing to answer (§3.3).
            if pdu.opcode.kind == .request { return error(.requestNotSupported, 0) }
            return .none
        }
    }

    static func valid(_ r: ATTHandleRange) -> Bool { r.start != 0 && r.start <= r.end }

    /// A read's result inside the server.
    enum Got {
        case value([UInt8])
        case error(ATTErrorCode)
    }

    /// The value a read sees: a CCCD's from the session, else the handler's or the stored one.
    func readValue(_ a: Attribute, _ opcode: ATTOpcode, _ session: ATTSession, _ read: ReadHandler) -> Got {
        if case .cccd(let valueHandle) = a.role { return .value(le16(session.cccd[valueHandle] ?? 0)) }
        switch read(AttributeRead(attribute: a, opcode: opcode)) {
        case .stored: return .value(a.value)
        case .value(let v): return .value(v)
        case .error(let code): return .error(code)
        }
    }

    /// Read with the handle and permission checks (§3.4.4.3: Invalid Handle, Read Not Permitted, the link's security).
    func checkedRead(_ handle: UInt16, _ opcode: ATTOpcode, _ session: ATTSession, _ read: ReadHandler,
                     _ link: LinkSecurityQuery) -> Got {
        guard let a = database.attribute(handle) else { return .error(.invalidHandle) }
        return permittedRead(a, opcode, session, read, link)
    }

    /// Read with the permission checks (§3.4.4.3): Read Not Permitted, then the link's security (§3.2.5).
    func permittedRead(_ a: Attribute, _ opcode: ATTOpcode, _ session: ATTSession, _ read: ReadHandler,
                       _ link: LinkSecurityQuery) -> Got {
        guard a.readable else { return .error(.readNotPermitted) }
        if let code = Self.refusal(a.readSecurity, link) { return .error(code) }
        return readValue(a, opcode, session, read)
    }

    /// The refusal of `requirement` on the link (§3.2.5), asking the link only when there is a requirement.
    static func refusal(_ requirement: GATTSecurityRequirement, _ link: LinkSecurityQuery) -> ATTErrorCode? {
        requirement.isNoSecurity ? nil : requirement.refusal(on: link())
    }

    /// Write with the checks of §3.4.5.1 (Invalid Handle, Write Not Permitted, the link's security, at most 512
    /// bytes); a CCCD takes 2 bytes and is kept in the session (Part G §3.3.3.3) before the handler sees it.
    mutating func checkedWrite(_ handle: UInt16, _ value: [UInt8], _ opcode: ATTOpcode, _ session: inout ATTSession,
                               _ write: WriteHandler, _ link: LinkSecurityQuery) -> WriteOutcome {
        guard let a = database.attribute(handle) else { return .rejected(.invalidHandle) }
        guard a.writable else { return .rejected(.writeNotPermitted) }
        if let code = Self.refusal(a.writeSecurity, link) { return .rejected(code) }
        guard value.count <= ATTMTU.maximumAttributeValue else { return .rejected(.invalidAttributeValueLength) }
        var isCCCD = false
        if case .cccd(let valueHandle) = a.role {
            guard value.count == 2 else { return .rejected(.invalidAttributeValueLength) }
            session.cccd[valueHandle] = value.littleEndianUInt16(at: 0)
            isCCCD = true
        }
        let outcome = write(AttributeWrite(attribute: a, value: value, opcode: opcode))
        guard outcome == .store, !isCCCD else { return outcome }
        // A write replaces the value; an executed long write puts its octets from offset 0 over it (§3.4.6.3).
        database.setValue(opcode == .executeWriteRequest ? value + a.value.dropFirst(value.count) : value, at: handle)
        return outcome
    }
}
