// What the host offers a fault layer (the hostile peer): its accept loop, a database per client, a stream that
// holds one PDU at a time, and a lent socket that its close ends.
import ATTStack
import Dispatch
import LinkCore
import LinuxBluetooth
import GATTClient
import GATTServer
import TestSupport
import XCTest

#if canImport(Glibc)
import Glibc
#endif

final class HostCapabilityTests: XCTestCase {
    /// 0x0001 service 0xFFF0, 0x0002-0x0003 "a" (read, write, notify), its CCCD 0x0004.
    let database = AttributeDatabase { db in
        db.service(.bit16(0xFFF0))
        db.characteristic(.bit16(0xFFF1), [.read, .write, .notify], value: [1, 2, 3], name: "a")
    }

    /// A host accepting on a fresh unix: path; `attached` gets each server-side connection.
    func serve(_ host: GATTServerHost, tag: String, ended: @escaping @Sendable (TransportError) -> Void = { _ in }) throws -> (String, ATTBearerListener) {
        let path = temporarySocketPath(tag)
        let listener = try ATTBearerListener.unix(path: path)
        host.acceptConnections(on: listener, ended: ended)
        return (path, listener)
    }

    func client(_ path: String) async throws -> GATTClient {
        try await GATTClient.connect(transport: ATTBearer.connect(unixPath: path))
    }

    func testEachClientHasItsOwnDatabaseAndTheAcceptLoopEndsWithItsListener() async throws {
        let ended = Lock<TransportError?>(nil)
        let endedSignal = DispatchSemaphore(value: 0)
        let host = GATTServerHost(database: database, databasePerConnection: true)
        let (path, listener) = try serve(host, tag: "own-db") { e in
            ended.withLock { $0 = e }
            endedSignal.signal()
        }
        let a = try await client(path), b = try await client(path)
        defer { a.close(); b.close() }
        try await a.write(handle: 3, value: [9])
        let fromA = try await a.read(handle: 3), fromB = try await b.read(handle: 3)
        XCTAssertEqual(fromA, [9])
        XCTAssertEqual(fromB, [1, 2, 3], "b reads its own copy")
        XCTAssertEqual(host.database.attribute(3)?.value, [1, 2, 3], "the host's database is the one every copy starts from")
        listener.close()
        XCTAssertEqual(endedSignal.wait(timeout: .now() + 10), .success, "the accept loop ends when its listener closes")
        guard case .closedLocally? = ended.withLock({ $0 }) else { return XCTFail("\(String(describing: ended.withLock { $0 }))") }

        // One database for all (the default): b sees a's write.
        let shared = GATTServerHost(database: database)
        let (path2, listener2) = try serve(shared, tag: "shared-db")
        defer { listener2.close() }
        let c = try await client(path2), d = try await client(path2)
        defer { c.close(); d.close() }
        try await c.write(handle: 3, value: [7])
        let fromD = try await d.read(handle: 3)
        XCTAssertEqual(fromD, [7])
    }

    func testAStreamSendsEveryPDUAndLetsAnAnswerThrough() async throws {
        let count = 20_000
        let attached = Lock<ATTServerConnection?>(nil)
        let done = Lock<(Int, Bool)?>(nil)
        let doneSignal = DispatchSemaphore(value: 0)
        var hooks = GATTServerHost.Hooks()
        hooks.attached = { c, _ in attached.withLock { $0 = c } }
        let host = GATTServerHost(database: database, hooks: hooks)
        let (path, listener) = try serve(host, tag: "stream")
        defer { listener.close() }
        let c = try await client(path)
        defer { c.close() }
        _ = try await c.subscribe(valueHandle: 3, cccdHandle: 4, readValue: false)
        let server = try XCTUnwrap(attached.withLock { $0 })
        server.stream({ i, _ in i < count ? ATTPDU.handleValueNotification(handle: 3, value: [UInt8(i & 0xFF)][...]).bytes : nil }) { sent, finished in
            done.withLock { $0 = (sent, finished) }
            doneSignal.signal()
        }
        // A request during the stream is answered (its answer goes between the notifications).
        let during = try await c.read(handle: 3)
        XCTAssertEqual(during, [1, 2, 3])
        XCTAssertEqual(doneSignal.wait(timeout: .now() + 60), .success, "the stream did not end")
        XCTAssertEqual(done.withLock { $0?.0 }, count)
        XCTAssertEqual(done.withLock { $0?.1 }, true)
        // This answer follows every notification on the wire.
        _ = try await c.read(handle: 3)
        let stats0 = await c.statistics
        XCTAssertEqual(stats0.notificationsReceived, count)
    }

    func testAStreamWithoutEndStopsUnfinishedWhenItsClientGoes() async throws {
        let attached = Lock<ATTServerConnection?>(nil)
        let done = Lock<(Int, Bool)?>(nil)
        let doneSignal = DispatchSemaphore(value: 0)
        var hooks = GATTServerHost.Hooks()
        hooks.attached = { c, _ in attached.withLock { $0 = c } }
        let host = GATTServerHost(database: database, hooks: hooks)
        let (path, listener) = try serve(host, tag: "stream-gone")
        defer { listener.close() }
        let c = try await client(path)
        _ = try await c.read(handle: 3)
        let server = try XCTUnwrap(attached.withLock { $0 })
        server.stream({ _, _ in ATTPDU.handleValueNotification(handle: 3, value: [0][...]).bytes }) { sent, finished in
            done.withLock { $0 = (sent, finished) }
            doneSignal.signal()
        }
        c.close()
        XCTAssertEqual(doneSignal.wait(timeout: .now() + 10), .success, "the stream did not end with its connection")
        XCTAssertEqual(done.withLock { $0?.1 }, false)
        XCTAssertGreaterThan(done.withLock { $0?.0 } ?? 0, 0)
    }

    func testDisconnectAllEndsALoanBlockedOnItsClient() async throws {
        let attached = Lock<ATTServerConnection?>(nil)
        let closed = DispatchSemaphore(value: 0)
        let entered = DispatchSemaphore(value: 0)
        var hooks = GATTServerHost.Hooks()
        hooks.attached = { c, _ in attached.withLock { $0 = c } }
        hooks.closed = { _, _ in closed.signal() }
        let host = GATTServerHost(database: database, hooks: hooks)
        let (path, listener) = try serve(host, tag: "lend")
        defer { listener.close() }
        let c = try await client(path)
        defer { c.close() }
        _ = try await c.read(handle: 3)
        let server = try XCTUnwrap(attached.withLock { $0 })
        server.lend { fd in
            guard let fd else { return XCTFail("no socket lent") }
            entered.signal()
            // Blocked on the client's hang-up, which never comes: only the host's close wakes it.
            var p = pollfd(fd: fd, events: 0, revents: 0)
            _ = poll(&p, 1, 10_000)
        }
        XCTAssertEqual(entered.wait(timeout: .now() + 10), .success)
        let started = ContinuousClock.now
        host.disconnectAll(reason: "shutting down")
        XCTAssertEqual(closed.wait(timeout: .now() + 10), .success)
        XCTAssertLessThan(ContinuousClock.now - started, .seconds(5), "the loan ended at the close, not at its 10 s poll")
        XCTAssertEqual(host.clientCount, 0)
    }
}
