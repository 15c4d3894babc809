// The inbound router: every PDU the transport delivers is decoded once, by the codec (ATTPDU.decode), and routed
// on the decoded value (Core Spec 5.4 Vol 3 Part F §3.3, §3.4): a response to the request slot, a notification
// or indication to the fan-out, a request of the peer to an answer in the outbox. A PDU the codec rejects is
// routed on its opcode byte (§3.4.1.1), so that an indication is still confirmed and a request still answered.
import ATTStack

extension ATTEngine {
    /// A PDU from the peer as the codec read it: decoded, or why it is malformed.
    enum Received {
        case pdu(ATTPDU)
        case malformed(ATTDecodeError)
    }

    /// A Write Response is its opcode alone: every one is decoded from this shared array, not a fresh copy.
    static let writeResponsePDU: [UInt8] = [ATTOpcode.writeResponse.rawValue]

    func transport(didReceiveBytes pdu: UnsafeRawBufferPointer) {
        if pdu.count == 1 && pdu[0] == ATTOpcode.writeResponse.rawValue {
            transport(didReceive: Self.writeResponsePDU)
        } else {
            transport(didReceive: Array(pdu))
        }
    }

    /// A PDU from the transport: routed at once on the loop's thread (the socket bearer delivers there); a
    /// transport without a loop (a test double) delivers on its own thread, which waits while the loop routes it.
    func transport(didReceive bytes: [UInt8]) {
        onLoopAndWait { self.route(bytes) }
    }

    /// Decodes one PDU with the codec and routes it, on the loop.
    func route(_ bytes: [UInt8]) {
        let decoded: ATTPDU
        do {
            decoded = try ATTPDU.decode(bytes)
        } catch {
            routeMalformed(error, bytes)
            return
        }
        switch decoded {
        case .handleValueNotification(let handle, let value):
            deliver(handle: handle, value: Array(value), kind: .notification)
        case .multipleHandleValueNotification(let list):
            for (handle, value) in list { deliver(handle: handle, value: Array(value), kind: .notification) }
        case .handleValueIndication(let handle, let value):
            // §3.4.7.2: every indication is confirmed, also one for a handle nobody subscribed to. The confirmation
            // is queued before the value is handed on, so that a request its consumer sends in answer goes out
            // after it (a Service Changed confirmation makes a robust-caching client change-aware, Part G §2.5.2.1).
            queueAnswer(.handleValueConfirmation, counting: .confirmation)
            deliver(handle: handle, value: Array(value), kind: .indication)
        case .exchangeMTURequest where isEnhanced:
            // Vol 3 Part F §3.4.2: Exchange MTU is not used on an Enhanced ATT bearer.
            refuse(.exchangeMTURequest, bytes)
        case .exchangeMTURequest(let peerRxMTU):
            answerExchangeMTU(peerRxMTU: peerRxMTU, request: bytes)
        case .handleValueConfirmation:
            report(GATTProtocolViolation(received: bytes, expected: "no Handle Value Confirmation (this client sends no indications)",
                                         problem: "an unsolicited Handle Value Confirmation"), failed: nil)
        default:
            let op = decoded.opcode
            if Self.isResponse(op) { answer(.pdu(decoded), opcode: op, raw: bytes) } else { refuse(op, bytes) }
        }
    }

    /// A PDU the codec rejected, routed on its opcode byte.
    private func routeMalformed(_ error: ATTDecodeError, _ bytes: [UInt8]) {
        guard let op = error.opcode else {
            report(GATTProtocolViolation(received: bytes, expected: "an ATT PDU", problem: "an empty PDU"), failed: nil)
            return
        }
        switch op {
        case .handleValueIndication:
            report(GATTProtocolViolation(received: bytes, expected: "a well-formed Handle Value Indication",
                                         problem: "\(error) (confirmed anyway)"), failed: nil)
            queueAnswer(.handleValueConfirmation, counting: .confirmation)
        case .handleValueNotification, .multipleHandleValueNotification, .handleValueConfirmation:
            report(GATTProtocolViolation(received: bytes, expected: "a well-formed \(op.name)", problem: error.description),
                   failed: nil)
        case .exchangeMTURequest:
            // The one request this client serves, malformed: Invalid PDU (§3.4.1.1).
            let answer = ATTPDU.errorResponse(requestOpcode: op, handle: 0, error: .invalidPDU)
            let sent = queueAnswer(answer, counting: nil)
            events?(.answeredPeerRequest(request: bytes, answer: sent))
        default:
            if Self.isResponse(op) { answer(.malformed(error), opcode: op, raw: bytes) } else { refuse(op, bytes) }
        }
    }

    /// A response: an Error Response or an opcode that answers a request (confirmations are routed before this).
    static func isResponse(_ op: ATTOpcode) -> Bool { op == .errorResponse || op.requestOpcode != nil }

    /// What is not a response: a command is dropped; any other request is answered Request Not Supported.
    private func refuse(_ op: ATTOpcode, _ bytes: [UInt8]) {
        if op.isCommand {
            // Commands are never answered (§3.3); this client has no attribute server to apply them to.
            dropped("a \(op.description) from the peer (this client has no attribute server)")
        } else {
            // A request (or an unknown opcode without the command bit): Request Not Supported (§3.4.1.1).
            let answer = ATTPDU.errorResponse(requestOpcode: op, handle: 0, error: .requestNotSupported)
            let sent = queueAnswer(answer, counting: .peerRequest)
            events?(.answeredPeerRequest(request: bytes, answer: sent))
        }
    }

    /// The peer's Exchange MTU Request (§3.4.2.1): the smaller Rx MTU holds from now on, answered with ours.
    private func answerExchangeMTU(peerRxMTU: UInt16, request: [UInt8]) {
        let newMTU = ATTMTU.negotiated(clientRxMTU: peerRxMTU, serverRxMTU: clientRxMTU)
        state.access { s in
            s.mtu = newMTU
            s.mtuExchanged = true
        }
        publishedMTU.store(newMTU, ordering: .releasing)
        let answer = ATTPDU.exchangeMTUResponse(serverRxMTU: UInt16(clientRxMTU))
        let sent = queueAnswer(answer, counting: .peerRequest)
        events?(.answeredPeerRequest(request: request, answer: sent))
        events?(.mtuChanged(newMTU))
    }
}
