// `mirror listen` says at its end how many notifications were dropped, and why: its stream's bound (1024 values,
// GATTClient.Configuration.notificationBufferLimit) overflowed before every subscription completed (the stream
// is read only from then on), or later, when the output fell behind the peer.
import Foundation
import JSON
import TestSupport
import XCTest

final class ListenDropTests: XCTestCase {
    /// 1100 notifications before the CCCD's Write Response: 1024 are buffered, 76 dropped before the subscription
    /// completed, every time.
    func testNotificationsBeforeTheSubscriptionCompletedAreCounted() throws {
        let peer = try GATTPeer(behaviour: .init(notificationsPerSubscription: 0, notificationsBeforeCCCDAnswer: 1100))
        defer { peer.close() }
        let counter = peer.hexHandle("counter")
        let text = try MirrorProcess.run(["listen", peer.target, counter, "--count", "1024"])
        XCTAssertEqual(text.status, 0, text.stderr)
        XCTAssertEqual(text.stdout.split(separator: "\n").count, 1024)
        XCTAssertTrue(text.stderr.hasSuffix("received 1024 notifications and indications\n"
                                            + "76 notifications dropped (output fell behind: 0; before the subscription completed: 76)\n"), text.stderr)
        let json = try MirrorProcess.run(["listen", peer.target, counter, "--count", "1024", "--json"])
        XCTAssertEqual(json.status, 0, json.stderr)
        let lines = try json.jsonLines()
        // The subscribed event, the 1024 values, the count line.
        XCTAssertEqual(lines.count, 1026)
        XCTAssertEqual(lines.first?["event"], "subscribed")
        XCTAssertEqual(lines.last, .object([("received", 1024), ("dropped", .object([
            ("total", 76), ("outputFellBehind", 0), ("beforeSubscribed", 76)]))]))
    }

    /// No drop: nothing more in text, and the JSON's last line still carries the zero counts.
    func testNoDropPrintsNothingInTextAndZeroInJSON() throws {
        let peer = try GATTPeer()
        defer { peer.close() }
        let text = try MirrorProcess.run(["listen", peer.target, peer.hexHandle("counter"), "--count", "3"])
        XCTAssertEqual(text.status, 0, text.stderr)
        XCTAssertFalse(text.stderr.contains("dropped"), text.stderr)
        let json = try MirrorProcess.run(["listen", peer.target, peer.hexHandle("counter"), "--count", "3", "--json"])
        XCTAssertEqual(try json.jsonLines().last, .object([("received", 3), ("dropped", .object([
            ("total", 0), ("outputFellBehind", 0), ("beforeSubscribed", 0)]))]))
    }

    /// 8000 notifications after the subscription completed while nobody reads mirror's stdout: the pipe (64 KiB)
    /// and the stream's 1024 fill, and the rest are dropped because the output fell behind.
    func testAStalledOutputsDropsAreCountedAsFallingBehind() throws {
        let peer = try GATTPeer(behaviour: .init(notificationsPerSubscription: 1))
        defer { peer.close() }
        let process = Process()
        process.executableURL = MirrorProcess.executable
        process.arguments = ["listen", peer.target, peer.hexHandle("counter"), "--count", "1500", "--json"]
        let out = Pipe(), err = Pipe()
        process.standardOutput = out
        process.standardError = err
        try process.run()
        // Bounded: a run that never ends is killed, and the test fails naming it.
        let watchdog = ProcessWatchdog(process, "mirror listen")
        // The first value's line (after the subscribed event): the listen is reading its stream, so every
        // subscription has completed.
        let first = readUntil(out.fileHandleForReading, contains: "tick 1")
        XCTAssertTrue(String(decoding: first, as: UTF8.self).contains("tick 1"), String(decoding: first, as: UTF8.self))
        // Then 8000 more while stdout is not read (each send waits while the peer's outbox is full).
        for i in 0..<8000 { peer.host.notifySubscribers(handle: peer.handle("counter"), value: [UInt8(truncatingIfNeeded: i)]) }
        let stdout = first + out.fileHandleForReading.readDataToEndOfFile()
        let stderr = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        XCTAssertNil(watchdog.end())
        XCTAssertEqual(process.terminationStatus, 0, stderr)
        let lines = try String(decoding: stdout, as: UTF8.self).split(separator: "\n").map { try parseJSON(String($0)) }
        XCTAssertEqual(lines.count, 1502, "the subscribed event, 1500 values, the count line")
        XCTAssertEqual(lines.first?["event"], "subscribed")
        let dropped = try XCTUnwrap(lines.last?["dropped"])
        XCTAssertEqual(dropped["beforeSubscribed"], 0)
        let behind = try XCTUnwrap(dropped["outputFellBehind"]?.integer)
        XCTAssertGreaterThan(behind, 0, "the output fell behind: \(dropped.compact)")
        XCTAssertEqual(dropped["total"]?.integer, behind)
    }
}
