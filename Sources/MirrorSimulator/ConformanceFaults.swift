// The conformance faults: each breaks exactly one rule of `mirror check`'s catalogue (Core Spec 5.4 Vol 3 Part F
// ATT, Part G GATT, Part C §12.1), named by the rule's id, so that every rule has a failing server in the tests.
import ATTStack
import GATTServer
import GATTVocabulary

/// A fault that breaks one conformance rule (`mirror-sim --fault RULE-ID`); its raw value is the rule's id.
public enum SimConformanceFault: String, Sendable, Hashable, CaseIterable {
    // P1
    case invalidHandleZero = "invalid-handle-zero"
    case invalidHandlePastEnd = "invalid-handle-past-end"
    case errorEcho = "error-echo"
    case requestNotSupported = "request-not-supported"
    case commandIgnored = "command-ignored"
    case mtuExchange = "mtu-exchange"
    case mtuAnsweredOnce = "mtu-answered-once"
    case noUnsolicitedResponse = "no-unsolicited-response"
    case responseWithinTimeout = "response-within-timeout"
    case responseWellFormed = "response-well-formed"
    case cccdPresent = "cccd-present"
    case gapDeviceName = "gap-device-name"
    case databaseHash = "database-hash"
    case readBlobOffset = "read-blob-offset"
    case readBlobPastEnd = "read-blob-past-end"
    // P2
    case readBlobAtEnd = "read-blob-at-end"
    case readMultiple = "read-multiple"
    case discoveryServicesAgree = "discovery-services-agree"
    case discoveryCharacteristicsAgree = "discovery-characteristics-agree"
    case characteristicValueHandle = "characteristic-value-handle"
    case handlesAscending = "handles-ascending"
    case readByTypeConsistent = "read-by-type-consistent"
    case extendedPropertiesPresent = "extended-properties-present"
    case serviceChanged = "service-changed"
    case supportedFeatures = "supported-features"
    // P3 (writes)
    case writeNotPermitted = "write-not-permitted"
    case writeTooLong = "write-too-long"
    case prepareWriteEcho = "prepare-write-echo"
    case executeWrite = "execute-write"
    case writeInvalidOffset = "write-invalid-offset"

    /// One line: what the simulator does wrong with this fault (`mirror-sim --list-faults`).
    public var summary: String {
        switch self {
        case .invalidHandleZero:
            return "a Read Request to handle 0x0000 gets an Error Response with error code 0x00 (not 0x01 Invalid Handle)"
        case .invalidHandlePastEnd:
            return "a Read or Read Blob Request past the last handle gets 0x0A Attribute Not Found (not 0x01 Invalid Handle)"
        case .errorEcho:
            return "Error Responses with code 0x0A Attribute Not Found (the end of each discovery) name request opcode 0x00"
        case .requestNotSupported:
            return "a request with an unassigned opcode (e.g. 0x3F) gets no answer (not 0x06 Request Not Supported)"
        case .commandIgnored:
            return "a command with an unassigned opcode (bit 6 set, e.g. 0x7E) gets an Error Response 0x06"
        case .mtuExchange:
            return "the Exchange MTU Response says Server Rx MTU 10 (below the minimum 23; the MTU stays 23)"
        case .mtuAnsweredOnce:
            return "the Exchange MTU Response is sent twice"
        case .noUnsolicitedResponse:
            return "the first Read Response of each connection is followed by a second copy nobody asked for"
        case .responseWellFormed:
            return "the Error Response that ends Find Information (0x0A Attribute Not Found) has a sixth octet (an Error Response has five)"
        case .responseWithinTimeout:
            return "the first Read Response of each connection goes out 2 s late (a checker's --timeout 1 catches it)"
        case .cccdPresent:
            return "scanState declares Notify but has no Client Characteristic Configuration descriptor (0x2902)"
        case .gapDeviceName:
            return "the GAP service (0x1800) has no Device Name characteristic (0x2A00)"
        case .databaseHash:
            return "implies --caching yes; the Database Hash is served in bluetoothd's octet order (as --hash-order bluez)"
        case .readBlobOffset:
            return "a Read Blob Request at an offset inside the value is answered from offset 0"
        case .readBlobPastEnd:
            return "a Read Blob Request at an offset past the value's end gets an empty part (not 0x07 Invalid Offset)"
        case .readMultiple:
            return "a Read Multiple Response gives the values in ascending handle order, whatever order the request asked"
        case .readBlobAtEnd:
            return "a Read Blob Request at an offset equal to the value's length gets 0x07 Invalid Offset (not an empty part)"
        case .discoveryServicesAgree:
            return "Find By Type Value leaves the mirror service out (0x0A when it was the only one); Read By Group Type lists it"
        case .discoveryCharacteristicsAgree:
            return "Find Information leaves cloudToken's characteristic declaration out; Read By Type 0x2803 lists it"
        case .characteristicValueHandle:
            return "cloudToken's declaration names the handle after its value (declaration + 2) as its value handle"
        case .handlesAscending:
            return "Find Information lists its handles in descending order"
        case .readByTypeConsistent:
            return "a Read By Type Response of values (any type but 0x2802 and 0x2803) has a Length field one too large"
        case .extendedPropertiesPresent:
            return "cloudToken's declaration sets Extended Properties (bit 7) without a descriptor 0x2900"
        case .serviceChanged:
            return "Service Changed (0x2A05) declares no Indicate (and has no CCCD)"
        case .supportedFeatures:
            return "implies --caching yes; the GATT service has the Database Hash but no Client Supported Features (0x2B29)"
        case .writeNotPermitted:
            return "a Write Request to a read-only attribute (e.g. wifiNumNetworks, Device Name) gets a Write Response (nothing written)"
        case .writeTooLong:
            return "a value too long for its attribute (cloudToken past its limit, any past 512) is cut to fit and accepted"
        case .prepareWriteEcho:
            return "each Prepare Write Response echoes the value with its last octet inverted (the queued part is right)"
        case .executeWrite:
            return "Execute Write (0x01) answers as usual but writes nothing (e.g. a long write of cloudToken)"
        case .writeInvalidOffset:
            return "a prepared write at an offset past the value's end is accepted (Execute Write Response, nothing written)"
        }
    }

    /// The faults that need the GATT service's caching characteristics (Vol 3 Part G §7.2-§7.3).
    var impliesCaching: Bool { self == .databaseHash || self == .supportedFeatures }

    /// `mirror-sim --list-faults`: each conformance fault with its line, then the per-characteristic fault forms.
    public static var listing: String {
        let width = allCases.map(\.rawValue.count).max() ?? 0
        var lines = allCases.map { $0.rawValue.padding(toLength: width, withPad: " ", startingAt: 0) + "  " + $0.summary }
        lines.append("")
        lines.append("once, on the Nth (default first) request to a characteristic CHAR (a profile name, e.g. cloudToken):")
        lines += SimFault.forms.map { "  " + $0 }
        return lines.joined(separator: "\n")
    }
}

extension SimFault {
    /// The per-characteristic fault forms with one line each (`mirror-sim --list-faults`).
    static let forms = [
        "drop:CHAR[@N]                  the request is acted on but never answered",
        "delay:CHAR:MS[@N]              the answer goes out MS milliseconds late",
        "disconnect:CHAR[@N]            the connection closes when the request arrives",
        "notify-first:CHAR[@N]          scanState and scanError are notified (unchanged too) before the answer",
        "change-database:CHAR[@N]       the database changes first (handles move, Service Changed, 0x12)",
    ]
}

// MARK: - the PDU faults

/// The longest value the simulator's attribute at `handle` takes (the fault write-too-long cuts to it): cloudToken's
/// own limit, wifiSetSSID's 32 octets, else the 512 of Vol 3 Part F §3.2.9.
extension SimulatedMirror {
    func valueLimit(of handle: UInt16, _ database: AttributeDatabase) -> Int {
        switch database.name(of: handle) {
        case "cloudToken": return options.effectiveTokenLimit
        case "wifiSetSSID": return 32
        default: return ATTMTU.maximumAttributeValue
        }
    }
}

/// An unassigned request opcode and an unassigned command opcode (Vol 3 Part F §3.3.1: bit 6 is the Command Flag).
extension SimConformanceFault {
    /// Whether `bytes` is a PDU with an opcode the Core Spec does not assign, and a request (no Command Flag).
    static func isUnassignedRequest(_ bytes: [UInt8]) -> Bool {
        guard let first = bytes.first else { return false }
        let op = ATTOpcode(rawValue: first)
        return !op.isDefined && !op.isCommand
    }

    /// Whether `bytes` is a PDU with an unassigned opcode and the Command Flag set.
    static func isUnassignedCommand(_ bytes: [UInt8]) -> Bool {
        guard let first = bytes.first else { return false }
        let op = ATTOpcode(rawValue: first)
        return !op.isDefined && op.isCommand
    }
}

// MARK: - the faults around the server's answer

extension SimulatedMirror {
    /// The conformance faults on a client's raw PDU, before the codec decodes it (the host's `inbound` hook): the
    /// PDUs the server answers from the decode error alone (a zero handle, an unassigned opcode; Vol 3 Part F §3.3,
    /// §3.4.1.1).
    func conformanceInterception(_ bytes: [UInt8], _ c: ATTServerConnection) -> ATTInterception {
        let faults = options.conformanceFaults
        guard !faults.isEmpty, let first = bytes.first else { return .serve }
        let op = ATTOpcode(rawValue: first)
        if faults.contains(.invalidHandleZero), bytes == [ATTOpcode.readRequest.rawValue, 0x00, 0x00] {
            logFault(.invalidHandleZero, c, op)
            return .reply(ATTPDU.errorResponse(requestOpcode: .readRequest, handle: 0x0000, error: ATTErrorCode(0x00)).bytes)
        }
        if faults.contains(.requestNotSupported), SimConformanceFault.isUnassignedRequest(bytes) {
            logFault(.requestNotSupported, c, op)
            return .drop
        }
        if faults.contains(.commandIgnored), SimConformanceFault.isUnassignedCommand(bytes) {
            logFault(.commandIgnored, c, op)
            return .reply(ATTPDU.errorResponse(requestOpcode: op, handle: 0x0000, error: .requestNotSupported).bytes)
        }
        return .serve
    }

    /// The server's answer to `pdu` from `c` (`GATTServerHost.Context.answer`), as the conformance faults change it.
    /// Runs in the host's context, outside the mirror's lock (the answer's read and write hooks take it).
    func conformanceAnswer(_ pdu: ATTPDU, _ c: ATTServerConnection, _ ctx: inout GATTServerHost.Context) -> ATTServerReply {
        let faults = options.conformanceFaults
        // The prepare queue before an Execute Write empties it (write-too-long answers it again, cut).
        let prepared = faults.contains(.writeTooLong) && pdu.opcode == .executeWriteRequest ? ctx.session(of: c).prepared : []
        let reply = ctx.answer(pdu, from: c)
        guard !faults.isEmpty, case .now(let answer) = reply else { return reply }
        let key = ObjectIdentifier(c)
        /// Whether fault `f` is on and has not acted on this connection yet (it has now).
        func once(_ f: SimConformanceFault) -> Bool {
            faults.contains(f) && state.withLock { $0.connections[key]?.faultsFired.insert(f).inserted ?? false }
        }
        var fired: SimConformanceFault?
        defer { if let fired { logFault(fired, c, pdu.opcode) } }
        switch (pdu, answer) {
        case (.exchangeMTURequest, .exchangeMTUResponse) where faults.contains(.mtuExchange):
            fired = .mtuExchange
            // Server Rx MTU 10, below the minimum (§3.4.2.2, §3.2.8): both sides stay at 23.
            ctx.updateSession(of: c) { $0.mtu = ATTMTU.minimumLE }
            return .now(.exchangeMTUResponse(serverRxMTU: 10))
        case (.exchangeMTURequest, .exchangeMTUResponse) where faults.contains(.mtuAnsweredOnce):
            fired = .mtuAnsweredOnce
            // One response per request (§3.3.2): this one goes twice.
            ctx.send(answer, to: c)
            return reply
        case (.readRequest, .readResponse) where once(.noUnsolicitedResponse):
            fired = .noUnsolicitedResponse
            // A second Read Response with no request outstanding (§3.3.2).
            ctx.send(answer, to: c)
            return reply
        case (.readRequest, .readResponse) where once(.responseWithinTimeout):
            fired = .responseWithinTimeout
            return .later(milliseconds: 2000, answer)
        case (.readRequest(let h), .errorResponse(_, _, .invalidHandle)) where faults.contains(.invalidHandlePastEnd) && ctx.database.attribute(h) == nil,
             (.readBlobRequest(let h, _), .errorResponse(_, _, .invalidHandle)) where faults.contains(.invalidHandlePastEnd) && ctx.database.attribute(h) == nil:
            fired = .invalidHandlePastEnd
            return .now(.errorResponse(requestOpcode: pdu.opcode, handle: h, error: .attributeNotFound))
        case (.readBlobRequest(let h, let offset), .readBlobResponse(let part)) where faults.contains(.readBlobOffset) && offset > 0 && !part.isEmpty:
            fired = .readBlobOffset
            // An offset inside the value, ignored (§3.4.4.5): the part from offset 0.
            return ctx.answer(.readBlobRequest(handle: h, offset: 0), from: c)
        case (.readBlobRequest, .errorResponse(_, _, .invalidOffset)) where faults.contains(.readBlobPastEnd):
            fired = .readBlobPastEnd
            return .now(.readBlobResponse(value: []))
        case (.readBlobRequest(let h, let offset), .readBlobResponse(let part)) where faults.contains(.readBlobAtEnd) && offset > 0 && part.isEmpty:
            fired = .readBlobAtEnd
            // At the end of the value an empty part is the answer (§3.4.4.5), not Invalid Offset.
            return .now(.errorResponse(requestOpcode: .readBlobRequest, handle: h, error: .invalidOffset))
        case (.findInformationRequest, .errorResponse(_, _, .attributeNotFound)) where faults.contains(.responseWellFormed):
            fired = .responseWellFormed
            // An Error Response is five octets (§3.4.1.1): this one has one more.
            ctx.sendRaw(answer.bytes + [0x00], to: c)
            return .none
        case (.readMultipleRequest(let handles), .readMultipleResponse) where faults.contains(.readMultiple) && handles.sorted() != Array(handles):
            fired = .readMultiple
            // The handles read in ascending order, not the order asked (§3.4.4.7-8).
            guard let sorted = try? ATTHandleList(handles.sorted()) else { return reply }
            return ctx.answer(.readMultipleRequest(sorted), from: c)
        case (.findByTypeValueRequest(let range, 0x2800, let value), .findByTypeValueResponse(let list))
            where faults.contains(.discoveryServicesAgree) && Array(value) == options.profile.service.attWireBytes:
            fired = .discoveryServicesAgree
            // The mirror service, found by Read By Group Type, is not found by its UUID (Part G §4.4.2).
            let kept = list.filter { ctx.database.attribute($0.found)?.value != Array(value) }
            guard !kept.isEmpty, let shorter = try? ATTHandlesInformationList(Array(kept)) else {
                return .now(.errorResponse(requestOpcode: .findByTypeValueRequest, handle: range.start, error: .attributeNotFound))
            }
            return .now(.findByTypeValueResponse(shorter))
        case (.findInformationRequest(let range), .findInformationResponse(let list)) where faults.contains(.discoveryCharacteristicsAgree):
            // cloudToken's declaration (Read By Type 0x2803 lists it) is missing from Find Information (Part G §4.7.1).
            let declaration = ctx.database.handle("cloudToken").map { $0 - 1 }
            guard list.contains(where: { $0.handle == declaration }) else { return reply }
            fired = .discoveryCharacteristicsAgree
            let kept = list.filter { $0.handle != declaration }
            guard !kept.isEmpty, let shorter = try? ATTFindInformationList(Array(kept)) else {
                // It was the only one: the answer from the handle after it, so the discovery goes on past it.
                guard let after = declaration.map({ $0 + 1 }), after <= range.end else {
                    return .now(.errorResponse(requestOpcode: .findInformationRequest, handle: range.start, error: .attributeNotFound))
                }
                return ctx.answer(.findInformationRequest(ATTHandleRange(start: after, end: range.end)), from: c)
            }
            return .now(.findInformationResponse(shorter))
        case (.findInformationRequest, .findInformationResponse(let list)) where faults.contains(.handlesAscending) && list.count > 1:
            fired = .handlesAscending
            // Descending handles (§3.4.3.2 lists them in ascending order).
            guard let reversed = try? ATTFindInformationList(list.reversed()) else { return reply }
            return .now(.findInformationResponse(reversed))
        case (.readByTypeRequest(_, let type), .readByTypeResponse(let list))
            where faults.contains(.readByTypeConsistent) && type != .characteristic && type != .include:
            fired = .readByTypeConsistent
            ctx.sendRaw(readByTypeResponseWithLengthTooLarge(list), to: c)
            return .none
        case (.writeRequest, .errorResponse(_, _, .writeNotPermitted)) where faults.contains(.writeNotPermitted):
            fired = .writeNotPermitted
            // A read-only attribute (§3.4.5.1: Write Not Permitted) acknowledged; nothing is written.
            return .now(.writeResponse)
        case (.writeRequest(let h, let value), .errorResponse(_, _, .invalidAttributeValueLength)) where faults.contains(.writeTooLong):
            fired = .writeTooLong
            // Too long (§3.2.9, §3.4.5.1: Invalid Attribute Value Length): cut to what the attribute takes, written.
            return ctx.answer(.writeRequest(handle: h, value: value.prefix(valueLimit(of: h, ctx.database))), from: c)
        case (.executeWriteRequest(.writeAll), .errorResponse(_, let h, .invalidAttributeValueLength)) where faults.contains(.writeTooLong):
            fired = .writeTooLong
            // A long write too long: its parts for that handle cut at the attribute's limit, and executed.
            let limit = valueLimit(of: h, ctx.database)
            let cut = prepared.compactMap { part -> (handle: UInt16, offset: Int, value: [UInt8])? in
                guard part.handle == h else { return part }
                return part.offset < limit ? (part.handle, part.offset, Array(part.value.prefix(limit - part.offset))) : nil
            }
            ctx.updateSession(of: c) { $0.prepared = cut }
            return ctx.answer(pdu, from: c)
        case (.prepareWriteRequest, .prepareWriteResponse(let h, let offset, let value)) where faults.contains(.prepareWriteEcho) && !value.isEmpty:
            fired = .prepareWriteEcho
            // The echo differs from the request (§3.4.6.2): its last octet inverted.
            return .now(.prepareWriteResponse(handle: h, offset: offset, value: value.dropLast() + [value.last! ^ 0xFF]))
        case (.executeWriteRequest(.writeAll), .errorResponse(_, _, .invalidOffset)) where faults.contains(.writeInvalidOffset):
            fired = .writeInvalidOffset
            // A prepared part past the value's end (§3.4.6.3: Invalid Offset) acknowledged; the queue is gone, unwritten.
            return .now(.executeWriteResponse)
        case (_, .errorResponse(_, let h, .attributeNotFound)) where faults.contains(.errorEcho):
            fired = .errorEcho
            // The request opcode in error is not the request's (§3.4.1.1).
            return .now(.errorResponse(requestOpcode: ATTOpcode(0x00), handle: h, error: .attributeNotFound))
        default:
            return reply
        }
    }
}

/// The fault read-by-type-consistent's answer: a Read By Type Response whose Length field (Vol 3 Part F §3.4.4.2)
/// is one more than each handle-value pair's length. The codec cannot encode a wrong Length, so the codec's bytes
/// are patched here, at that one field (octet 1).
func readByTypeResponseWithLengthTooLarge(_ list: ATTAttributeDataList) -> [UInt8] {
    var bytes = ATTPDU.readByTypeResponse(list).bytes
    bytes[1] &+= 1
    return bytes
}
