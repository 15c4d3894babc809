// Writes (Core Spec 5.4 Vol 3 Part G §4.9): Write Request, long and reliable writes, write without response.
import ATTStack
import LinkCore

extension GATTClient {
    // MARK: - Writes (Part G §4.9)

    /// The value budget of one Write Request or Write Command: MTU-3, and never more than 512.
    public var writeValueBudget: Int { ATTMTU.writeValueLimit(mtu) }

    /// Write Characteristic Value (Part G §4.9.3): one Write Request. A value over MTU-3 bytes is refused locally
    /// (nothing is sent): use `writeLong`. From a task that prefers `eventLoop`, the request is written on the loop's
    /// thread at once and the task continues there when the response has been read; from elsewhere the call moves
    /// to the loop first (`withLinkLoop`) and back after.
    nonisolated(nonsending) public func write(handle: UInt16, value: [UInt8]) async throws(GATTError) {
        guard eventLoop.inEventLoop else { return try await onLinkLoop { () async throws(GATTError) in try await write(handle: handle, value: value) } }
        let engine = self.engine, pick = picksBearer
        // The codec encodes the request; the engine checks it against the ATT_MTU on its loop and decodes the answer.
        let request = try engine.encode(request: .writeRequest(handle: handle, value: value[...]), handle: handle)
        if canRetryAfterRaisingSecurity {
            _ = try await withSecurityRetry { () async throws(GATTError) -> ATTPDU in
                try await engine.request(request, handle: handle, valueLength: value.count, writeValueLength: value.count, pick: pick)
            }
        } else {
            _ = try await engine.request(request, handle: handle, valueLength: value.count, writeValueLength: value.count, pick: pick)
        }
    }

    /// Write Long Characteristic Values (Part G §4.9.4): Prepare Write parts of MTU-5 bytes, then Execute Write.
    /// On an error the queue is cancelled (Execute Write 0x00) and the first error is reported.
    public func writeLong(handle: UInt16, value: [UInt8]) async throws(GATTError) {
        try await onLinkLoop { () async throws(GATTError) -> Void in
            try await writeQueued([(handle, value)], compareEchoes: false)
        }
    }

    /// Reliable Writes (Part G §4.9.5): every part's echo is compared with what was sent; on a mismatch or an error
    /// the queue is cancelled (Execute Write 0x00) and the first problem is reported; otherwise Execute Write 0x01.
    public func writeReliable(_ writes: [(handle: UInt16, value: [UInt8])]) async throws(GATTError) {
        try await onLinkLoop { () async throws(GATTError) -> Void in
            try await writeQueued(writes, compareEchoes: true)
        }
    }

    /// Write Without Response (Part G §4.9.1) with flow control: sends exactly one Write Command when the socket
    /// has room, otherwise waits in FIFO order for a permit, at most `timeout` (default: the configuration's
    /// `permitTimeout`). Never drops or cuts a value; a value over MTU-3 bytes is refused locally.
    /// Runs on the caller's executor: from a task that prefers `eventLoop`, the fast path sends on the loop's thread
    /// and takes no suspension; from elsewhere the call moves to the loop first (`withLinkLoop`) and back after.
    /// Inlined into the caller, so the fast path costs a synchronous call and no async frame of its own.
    @inlinable
    nonisolated(nonsending) public func writeWithoutResponse(handle: UInt16, value: [UInt8], timeout: Duration? = nil) async throws(GATTError) {
        if try sendCommandNow(handle: handle, value: value) { return }
        try await writeWithoutResponseWaiting(handle: handle, value: value, timeout: timeout)
    }

    /// The fast path: true when the Write Command went out now (on the link's loop, with nothing waiting before
    /// it); false when it must wait for a permit or move to the loop. A value over MTU-3 bytes is refused here.
    @usableFromInline
    func sendCommandNow(handle: UInt16, value: [UInt8]) throws(GATTError) -> Bool {
        try engine.trySendCommandFast(handle: handle, value: value)
    }

    /// The slow path: off the loop, the call moves there and tries the fast path again; on it, the command queues
    /// for a permit (the socket is full or others wait before it).
    @usableFromInline
    nonisolated(nonsending) func writeWithoutResponseWaiting(handle: UInt16, value: [UInt8], timeout: Duration?) async throws(GATTError) {
        guard eventLoop.inEventLoop else {
            return try await onLinkLoop { () async throws(GATTError) in try await writeWithoutResponse(handle: handle, value: value, timeout: timeout) }
        }
        // A view of the caller's value: the waiter keeps its encoded bytes (waitForPermit).
        let command = ATTPDU.writeCommand(handle: handle, value: value[...])
        try await engine.waitForPermit(command, handle: handle, valueLength: value.count, limit: timeout ?? configuration.permitTimeout)
    }

    /// Several Write Requests to one handle (Part G §4.9.3), in order, each one sent when the one before it was
    /// answered: one request at a time on the wire, as Part F §3.3.2 has it, so other callers' requests on the same
    /// bearer may go between two of them. The call moves to the link's loop once, not once per value. Stops at the
    /// first error: `GATTWritesError` says how many values were confirmed before it, and the rest are not sent.
    nonisolated(nonsending) public func write(handle: UInt16, contentsOf values: [[UInt8]]) async throws(GATTWritesError) {
        let (done, failure) = await runWrites(values) { (value) async throws(GATTError) in
            try await self.write(handle: handle, value: value)
        }
        if let failure { throw GATTWritesError(error: failure, completed: done, total: values.count, mode: .request) }
    }

    /// Several Write Commands to one handle (Part G §4.9.1), in order, with the flow control of
    /// `writeWithoutResponse(handle:value:timeout:)` for each (a full socket waits for room, at most `timeout` per
    /// value). The call moves to the link's loop once, not once per value. Stops at the first error:
    /// `GATTWritesError` says how many values were sent before it, and the rest are not sent.
    nonisolated(nonsending) public func writeWithoutResponse(handle: UInt16, contentsOf values: [[UInt8]],
                                                             timeout: Duration? = nil) async throws(GATTWritesError) {
        let (done, failure) = await runWrites(values) { (value) async throws(GATTError) in
            try await self.writeWithoutResponse(handle: handle, value: value, timeout: timeout)
        }
        if let failure { throw GATTWritesError(error: failure, completed: done, total: values.count, mode: .command) }
    }

    /// Runs `one` for each value in order on the link's loop until one fails: how many went through, and the error.
    private func runWrites(_ values: [[UInt8]], _ one: (_ value: [UInt8]) async throws(GATTError) -> Void) async
        -> (completed: Int, error: GATTError?) {
        var done = 0
        do throws(GATTError) {
            try await onLinkLoop { () async throws(GATTError) -> Void in
                for value in values {
                    try await one(value)
                    done += 1
                }
            }
        } catch {
            return (done, error)
        }
        return (done, nil)
    }


    /// Prepare Write every part of every value, then Execute Write; cancel the queue on any problem.
    func writeQueued(_ writes: [(handle: UInt16, value: [UInt8])], compareEchoes: Bool) async throws(GATTError) {
        // One bearer for the whole queue: the server keeps a prepare queue per bearer (Part F §3.4.6).
        try await withPinnedBearer { engine async throws(GATTError) in
            try await writeQueued(writes, compareEchoes: compareEchoes, on: engine)
        }
    }

    private func writeQueued(_ writes: [(handle: UInt16, value: [UInt8])], compareEchoes: Bool,
                             on engine: ATTEngine) async throws(GATTError) {
        let m = engine.mtu
        let part = ATTMTU.prepareWritePartBudget(m)
        for w in writes where w.value.count > ATTMTU.maximumAttributeValue {
            throw localLimit(.prepareWriteRequest, handle: w.handle, length: w.value.count,
                             budget: ATTMTU.maximumAttributeValue, mtu: m)
        }
        var prepared = false
        do throws(GATTError) {
            for w in writes {
                var offset = 0
                repeat {
                    let end = min(offset + part, w.value.count)
                    let chunk = w.value[offset..<end]
                    let request = ATTPDU.prepareWriteRequest(handle: w.handle, offset: UInt16(offset), value: chunk)
                    prepared = true
                    let pdu = try await transact(request, handle: w.handle, valueLength: w.value.count,
                                                 budget: ATTMTU.maximumAttributeValue, on: engine)
                    guard case .prepareWriteResponse(let h, let o, let echo) = pdu else {
                        throw unexpected(pdu, "Prepare Write Response")
                    }
                    if compareEchoes && (h != w.handle || Int(o) != offset || !echo.elementsEqual(chunk)) {
                        throw violation(pdu.bytes,
                                        "Prepare Write Response echoing handle \(ATTHex.handle(w.handle)) offset \(offset) [\(ATTHex.string(chunk, separator: " ", uppercase: true))]",
                                        "the echo of a reliable write differs from what was sent")
                    }
                    offset = end
                } while offset < w.value.count
            }
        } catch {
            if prepared && !engine.isClosed {
                _ = try? await transact(.executeWriteRequest(flags: .cancelAll), handle: writes.first?.handle,
                                        ignoresCancellation: true, on: engine)
            }
            throw error
        }
        let pdu = try await transact(.executeWriteRequest(flags: .writeAll), handle: writes.first?.handle, on: engine)
        guard case .executeWriteResponse = pdu else { throw unexpected(pdu, "Execute Write Response") }
    }
}
