// `--trace`: every ATT PDU, decoded, with its direction and a timestamp, on stderr.

import ATTStack

/// An `ATTTransport` that forwards everything to another one and prints each PDU sent and received
/// (Core Spec Vol 3 Part F §3.4, decoded by the codec) as one line on stderr:
/// `22:41:07.123456 > Write Request handle 0x0012 value [01 02]`.
public final class TracingTransport: ATTTransport {
    public let inner: any ATTTransport
    let console: Console

    public init(_ inner: any ATTTransport, console: Console) {
        self.inner = inner
        self.console = console
    }

    public var label: String { inner.label }

    public func start(_ sink: any ATTTransportSink) {
        inner.start(TracingSink(sink, console: console))
    }

    public func trySend(_ pdu: UnsafeRawBufferPointer) throws(TransportError) -> ATTSendResult {
        let result = try inner.trySend(pdu)
        if result == .sent {
            console.err(traceLine(direction: ">", bytes: Array(pdu.bindMemory(to: UInt8.self)), at: unixNow()))
        }
        return result
    }

    public func whenWritable(_ callback: @escaping @Sendable () -> Void) {
        inner.whenWritable(callback)
    }

    public func close(reason: String) {
        inner.close(reason: reason)
    }
}

/// Prints what arrives, then passes it on.
final class TracingSink: ATTTransportSink {
    let next: any ATTTransportSink
    let console: Console

    init(_ next: any ATTTransportSink, console: Console) {
        self.next = next
        self.console = console
    }

    func transport(didReceive pdu: [UInt8]) {
        console.err(traceLine(direction: "<", bytes: pdu, at: unixNow()))
        next.transport(didReceive: pdu)
    }

    func transport(didCloseWith reason: TransportError) {
        console.err("\(clockTime(unixSeconds: unixNow(), digits: 6)) - closed: \(reason)")
        next.transport(didCloseWith: reason)
    }
}

/// One trace line: time, ">" sent or "<" received, the decoded PDU (or why it does not decode, and its bytes).
public func traceLine(direction: String, bytes: [UInt8], at time: Double) -> String {
    let decoded: String
    do {
        decoded = try ATTPDU.decode(bytes).description
    } catch {
        decoded = "undecodable: \(error) [\(hexString(bytes, separator: " "))]"
    }
    return "\(clockTime(unixSeconds: time, digits: 6)) \(direction) \(decoded)"
}
