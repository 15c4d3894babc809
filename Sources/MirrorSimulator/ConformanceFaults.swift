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
    case cccdPresent = "cccd-present"
    case gapDeviceName = "gap-device-name"
    case databaseHash = "database-hash"
    case readBlobOffset = "read-blob-offset"
    case readBlobPastEnd = "read-blob-past-end"

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
        }
    }

    /// The faults that change the database's structure (the rest act on PDUs around the server's answer).
    var isStructural: Bool {
        switch self {
        case .cccdPresent, .gapDeviceName, .databaseHash: return true
        default: return false
        }
    }

    /// The faults that need the GATT service's caching characteristics (Vol 3 Part G §7.2-§7.3).
    var impliesCaching: Bool { self == .databaseHash }

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
    func conformanceInterception(_ bytes: [UInt8]) -> ATTInterception {
        let faults = options.conformanceFaults
        guard !faults.isEmpty, let first = bytes.first else { return .serve }
        let op = ATTOpcode(rawValue: first)
        if faults.contains(.invalidHandleZero), bytes == [ATTOpcode.readRequest.rawValue, 0x00, 0x00] {
            return .reply(ATTPDU.errorResponse(requestOpcode: .readRequest, handle: 0x0000, error: ATTErrorCode(0x00)).bytes)
        }
        if faults.contains(.requestNotSupported), SimConformanceFault.isUnassignedRequest(bytes) { return .drop }
        if faults.contains(.commandIgnored), SimConformanceFault.isUnassignedCommand(bytes) {
            return .reply(ATTPDU.errorResponse(requestOpcode: op, handle: 0x0000, error: .requestNotSupported).bytes)
        }
        return .serve
    }

    /// The server's answer to `pdu` from `c` (`GATTServerHost.Context.answer`), as the conformance faults change it.
    /// Runs in the host's context, outside the mirror's lock (the answer's read and write hooks take it).
    func conformanceAnswer(_ pdu: ATTPDU, _ c: ATTServerConnection, _ ctx: inout GATTServerHost.Context) -> ATTServerReply {
        let faults = options.conformanceFaults
        let reply = ctx.answer(pdu, from: c)
        guard !faults.isEmpty, case .now(let answer) = reply else { return reply }
        let key = ObjectIdentifier(c)
        /// Whether fault `f` is on and has not acted on this connection yet (it has now).
        func once(_ f: SimConformanceFault) -> Bool {
            faults.contains(f) && state.withLock { $0.connections[key]?.faultsFired.insert(f).inserted ?? false }
        }
        switch (pdu, answer) {
        case (.exchangeMTURequest, .exchangeMTUResponse) where faults.contains(.mtuExchange):
            // Server Rx MTU 10, below the minimum (§3.4.2.2, §3.2.8): both sides stay at 23.
            ctx.updateSession(of: c) { $0.mtu = ATTMTU.minimumLE }
            return .now(.exchangeMTUResponse(serverRxMTU: 10))
        case (.exchangeMTURequest, .exchangeMTUResponse) where faults.contains(.mtuAnsweredOnce):
            // One response per request (§3.3.2): this one goes twice.
            ctx.send(answer, to: c)
            return reply
        case (.readRequest, .readResponse) where once(.noUnsolicitedResponse):
            // A second Read Response with no request outstanding (§3.3.2).
            ctx.send(answer, to: c)
            return reply
        case (.readRequest, .readResponse) where once(.responseWithinTimeout):
            return .later(milliseconds: 2000, answer)
        case (.readRequest(let h), .errorResponse(_, _, .invalidHandle)) where faults.contains(.invalidHandlePastEnd) && ctx.database.attribute(h) == nil,
             (.readBlobRequest(let h, _), .errorResponse(_, _, .invalidHandle)) where faults.contains(.invalidHandlePastEnd) && ctx.database.attribute(h) == nil:
            return .now(.errorResponse(requestOpcode: pdu.opcode, handle: h, error: .attributeNotFound))
        case (.readBlobRequest(let h, let offset), .readBlobResponse(let part)) where faults.contains(.readBlobOffset) && offset > 0 && !part.isEmpty:
            // An offset inside the value, ignored (§3.4.4.5): the part from offset 0.
            return ctx.answer(.readBlobRequest(handle: h, offset: 0), from: c)
        case (.readBlobRequest, .errorResponse(_, _, .invalidOffset)) where faults.contains(.readBlobPastEnd):
            return .now(.readBlobResponse(value: []))
        case (_, .errorResponse(_, let h, .attributeNotFound)) where faults.contains(.errorEcho):
            // The request opcode in error is not the request's (§3.4.1.1).
            return .now(.errorResponse(requestOpcode: ATTOpcode(0x00), handle: h, error: .attributeNotFound))
        default:
            return reply
        }
    }
}
