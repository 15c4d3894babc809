// The GATT client tests' helpers around TestSupport's ScriptedPeer: the script check as an XCTest assertion, an
// event log, a client over a scripted peer, a real-time limit, a shared counter.
import ATTStack
import LinuxBluetooth
import LinkCore
import Synchronization
import TestSupport
import XCTest
@testable import GATTClient

extension ScriptedPeer {
    /// Fails the test when the client sent anything unexpected or left script steps unused.
    func assertScriptDone(file: StaticString = #filePath, line: UInt = #line) {
        for p in scriptProblems { XCTFail(p, file: file, line: line) }
    }
}

/// Events collected from a client.
final class EventLog: Sendable {
    let events = Lock<[GATTClientEvent]>([])
    var all: [GATTClientEvent] { events.withLock { $0 } }
    var handler: @Sendable (GATTClientEvent) -> Void { { [self] e in events.withLock { $0.append(e) } } }
}

/// Starts a client over a scripted peer with a manual clock.
func makeClient(_ peer: ScriptedPeer, clock: ManualClock = ManualClock(), log: EventLog? = nil,
                configure: (inout GATTClient.Configuration) -> Void = { _ in }) async throws -> GATTClient {
    var config = GATTClient.Configuration()
    config.clock = clock
    config.events = log?.handler
    configure(&config)
    return try await GATTClient.connect(transport: peer, configuration: config)
}

/// Runs `body` with a real-time limit so that a hang fails the test instead of the whole run.
func within<T: Sendable>(_ seconds: Double = 10, _ what: String = "the test",
                         _ body: @escaping @Sendable () async throws -> T) async throws -> T {
    try await withDeadline(.milliseconds(Int64(seconds * 1000)), waitingFor: what, body)
}

/// Waits, yielding, until `condition` holds: the test fails with "timed out after N s waiting for WHAT" once
/// `seconds` (real time) pass, so that no wait of a test is unbounded.
func waitUntil(_ what: String, within seconds: Double = 10, _ condition: @escaping @Sendable () -> Bool) async throws {
    try await within(seconds, what) {
        while !condition() { try Task.checkCancellation(); await Task.yield() }
    }
}

/// A shareable atomic integer for test closures.
final class Counter: Sendable {
    let value = Atomic<Int>(0)
    /// Adds one and returns the new value.
    func increment() -> Int { value.wrappingAdd(1, ordering: .relaxed).newValue }
    var current: Int { value.load(ordering: .relaxed) }
}

/// Cancels `task`, whose back-to-back write to handle 0x0012 waits for a response that has not come, and checks that
/// the write is released at once (within 5 s), failing as cancelled and naming the Write Request.
func assertCancellingReleasesTheWriteInFlight(_ task: Task<Void, any Error>,
                                              file: StaticString = #filePath, line: UInt = #line) async throws {
    task.cancel()
    do {
        try await within(5, "the cancelled write's release") { try await task.value }
        XCTFail("expected the cancelled write to throw", file: file, line: line)
    } catch let e as GATTError {
        guard case .cancelled(let operation) = e else { return XCTFail("\(e)", file: file, line: line) }
        XCTAssertTrue(operation.contains("Write Request to handle 0x0012"), operation, file: file, line: line)
    }
}
