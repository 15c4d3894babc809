// Shared helpers: a hostile peer on a fresh unix socket, a client connected to it, deadlines.
import ATTStack
import LinuxBluetooth
import LinkCore
import Foundation
import GATTClient
import HostilePeer
import TestSupport
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// A fresh socket path under /tmp (short enough for sun_path).
func freshSocketPath(_ tag: String) -> String { temporarySocketPath("hp-" + tag.prefix(12)) }

/// Starts a hostile peer with `options` on a fresh path.
func startPeer(_ options: HostileOptions, file: StaticString = #filePath, line: UInt = #line) throws -> HostilePeer {
    let peer = try HostilePeer(path: freshSocketPath(options.scenario.rawValue), options: options)
    peer.start()
    return peer
}

/// Test-scale knobs: the TSan stage runs the same tests with smaller floods (a sanitized build is ~10x slower).
enum Scale {
    static func int(_ name: String, _ fallback: Int) -> Int {
        ProcessInfo.processInfo.environment[name].flatMap(Int.init) ?? fallback
    }
    /// Notifications in the flood test (the million by default).
    static var flood: Int { int("RELIABILITY_FLOOD", 1_000_000) }
    /// Indications in the storm test.
    static var storm: Int { int("RELIABILITY_STORM", 100_000) }
    /// Connect/operate/close cycles of the leak test.
    static var cycles: Int { int("RELIABILITY_CYCLES", 2_000) }
}

/// A client on a new connection to `peer`, with a short transaction timeout so that timeouts take a fraction of a second.
func connect(_ peer: HostilePeer, timeout: Duration = .milliseconds(400), mtu: Int = 517,
             events: (@Sendable (GATTClientEvent) -> Void)? = nil) async throws -> GATTClient {
    let bearer = try ATTBearer.connect(unixPath: peer.path)
    var c = GATTClient.Configuration()
    c.transactionTimeout = timeout
    c.clientRxMTU = mtu
    c.events = events
    return try await GATTClient.connect(transport: bearer, configuration: c)
}

/// Runs `body`, requires it to throw a `GATTError` within `limit`, and returns the error.
func expectFailure<T>(within limit: Duration, _ what: String, file: StaticString = #filePath, line: UInt = #line,
                      _ body: () async throws(GATTError) -> T) async -> GATTError? {
    let start = ContinuousClock.now
    do {
        let v = try await body()
        XCTFail("\(what): succeeded with \(v), expected a named error", file: file, line: line)
        return nil
    } catch {
        let took = ContinuousClock.now - start
        XCTAssertLessThanOrEqual(took, limit, "\(what): took \(took), over its deadline \(limit)", file: file, line: line)
        XCTAssertFalse(error.description.isEmpty, file: file, line: line)
        return error
    }
}

extension GATTError {
    var isProtocolViolation: Bool { if case .protocolViolation = self { return true }; return false }
    var isDisconnected: Bool { if case .disconnected = self { return true }; return false }
    var isTimeout: Bool { if case .timeout = self { return true }; return false }
}
