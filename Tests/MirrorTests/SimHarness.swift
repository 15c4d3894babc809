// The simulator on a real unix: SEQPACKET socket in this process, and GATT clients connected to it over ATTBearer.
import TestSupport
import ATTStack
import LinuxBluetooth
import LinkCore
import Foundation
import GATTClient
import GATTPeer
import Mirror
import MirrorSimulator
import XCTest

final class SimHarness: Sendable {
    let sim: SimulatedMirror
    let listener: ATTBearerListener
    /// With `eatt`: the listener at PATH.eatt (Enhanced ATT bearers), each request answered by the simulator.
    let enhancedListener: ATTBearerListener?
    let path: String
    let directory: String
    let logLines = LineLog()

    init(_ configure: (inout SimOptions) -> Void = { _ in }) throws {
        var options = SimOptions()
        configure(&options)
        let lines = logLines
        sim = SimulatedMirror(options: options, log: { line in lines.append(line) })
        path = NSTemporaryDirectory() + "mirror-sim-\(UInt32.random(in: 0...UInt32.max)).sock"
        directory = NSTemporaryDirectory() + "mirror-uploads-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        listener = try ATTBearerListener.unix(path: path)
        enhancedListener = options.eatt ? try ATTBearerListener.unixEnhanced(forUnixPath: path) : nil
        let listener = self.listener, sim = self.sim
        Thread {
            while let bearer = try? listener.accept() { sim.attach(bearer) }
        }.start()
        if let enhanced = enhancedListener {
            Thread {
                while let request = try? enhanced.acceptEnhancedRequest() { sim.acceptEnhanced(request) }
            }.start()
        }
    }

    func stop() {
        listener.close()
        enhancedListener?.close()
        sim.disconnectAll(reason: "test over")
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// A GATT client over unix:PATH, with the MTU exchanged unless `exchangeMTU` is false.
    func connect(timeout: Duration = .seconds(5), exchangeMTU: Bool = true) async throws -> GATTClient {
        let bearer = try ATTBearer.connect(unixPath: path)
        var config = GATTClient.Configuration()
        config.transactionTimeout = timeout
        let client = try await GATTClient.connect(transport: bearer, configuration: config)
        if exchangeMTU { _ = try await client.exchangeMTU() }
        return client
    }

    /// A GATTPeer Peer over unix:PATH with the bundled profile's names and a 5 s transaction timeout.
    func peer() async throws -> Peer {
        var o = Peer.Options()
        o.names = CharacteristicNames(MirrorProfile.bundled.characteristics)
        o.transactionTimeout = .seconds(5)
        return try await Peer.connect(to: .unix(path: path), options: o)
    }

    func scanOptions(timeout: Duration = .seconds(10)) -> MirrorScanOptions {
        var o = MirrorScanOptions(profile: .bundled, uploadHost: "127.0.0.1", uploadDirectory: directory)
        o.uploadPort = 0
        o.timeout = timeout
        o.settle = .milliseconds(50)
        return o
    }
}

/// Collects a procedure's events.
final class EventLog: Sendable {
    let events = Lock<[MirrorEvent]>([])
    var emit: @Sendable (MirrorEvent) -> Void { { [self] e in self.events.withLock { $0.append(e) } } }
    var all: [MirrorEvent] { events.withLock { $0 } }

    /// Index of the first event matching.
    func index(_ match: (MirrorEvent) -> Bool) -> Int? { all.firstIndex(where: match) }
}

/// The simulator's log lines (printed when a test fails to help read what happened).
final class LineLog: Sendable {
    private let lines = Lock<[String]>([])
    func append(_ line: String) { lines.withLock { $0.append(line) } }
    var all: [String] { lines.withLock { $0 } }
}
