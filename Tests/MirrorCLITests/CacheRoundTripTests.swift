// The round trips the GATT cache saves, measured: `listen`, `scan` and a `read` by name against `mirror-sim
// --caching yes`, cold (nothing cached) then warm, at ATT_MTU 23 and 517, each request counted from --trace.
// Before its own work a warm command sends Exchange MTU and one Read By Type of the Database Hash, no more; its own
// work starts with one Read Request of the cached declaration of each characteristic it names (verify on use).
import Foundation
import TestSupport
import XCTest

final class CacheRoundTripTests: XCTestCase {
    /// What a command sends to learn the database (Core Spec Vol 3 Part F §3.4, Part G §4.3-4.7, §7.3): everything
    /// else is its own work.
    static let setup = ["Exchange MTU Request", "Read By Group Type Request", "Find Information Request",
                        "Find By Type Value Request", "type 2b2a", "type 2802", "type 2803"]

    struct Count: CustomStringConvertible {
        var total: Int
        var beforeOwnWork: Int
        var firstOwn: String
        var description: String { "\(total) requests, \(beforeOwnWork) before its own work" }
    }

    func count(_ run: ToolRun) -> Count {
        let sent = run.stderr.split(separator: "\n").filter { $0.contains(" > ") && !$0.contains("Handle Value Confirmation") }
        let before = sent.firstIndex { line in !Self.setup.contains { line.contains($0) } } ?? sent.count
        return Count(total: sent.count, beforeOwnWork: before, firstOwn: before < sent.count ? String(sent[before]) : "")
    }

    func testColdAndWarmRoundTripsOfListenScanAndReadByNameAtMTU23And517() throws {
        var table: [String] = ["| command | MTU | cold | warm | --no-cache |", "|---|---|---|---|---|"]
        let uploads = NSTemporaryDirectory() + "round-trips-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: uploads, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: uploads) }
        let commands: [(String, [String], (String) -> [String])] = [
            // One notification each: the simulator notifies scanState (unchanged) as it answers the CCCD write.
            ("listen scanState", ["--fault", "notify-first:scanStateCCCD", "--fault", "notify-first:scanStateCCCD",
                                  "--fault", "notify-first:scanStateCCCD"],
             { ["listen", $0, "scanState", "--count", "1"] }),
            ("scan", [], { ["scan", $0, "--json", "--upload-dir", uploads, "--upload-port", "0", "--settle", "0.05"] }),
            ("read cloudToken", [], { ["read", $0, "cloudToken"] }),
        ]
        for (name, simOptions, arguments) in commands {
            for mtu in ["23", "517"] {
                let home = NSTemporaryDirectory() + "round-trips-cache-\(UInt32.random(in: 0...UInt32.max))"
                defer { try? FileManager.default.removeItem(atPath: home) }
                let sim = try SimulatorProcess(["--caching", "yes"] + simOptions)
                defer { sim.stop() }
                var counts: [Count] = []
                // Cold, warm, and with --no-cache (discovery as before the cache: the scan's of the mirror service only).
                for extra in [[], [], ["--no-cache"]] {
                    let run = try ToolProcess.run("mirror", arguments(sim.target) + ["--trace", "--mtu", mtu] + extra,
                                                  environment: ["XDG_CACHE_HOME": home], timeout: 60)
                    // At MTU 23 the scan's upload URL does not fit a Write Request (20 bytes): it ends writeFailed
                    // (exit 4) after the same discovery, which is what is counted here.
                    XCTAssertEqual(run.status, name == "scan" && mtu == "23" ? 4 : 0, "\(name) at MTU \(mtu): \(run.stderr)")
                    counts.append(count(run))
                }
                let (cold, warm, uncached) = (counts[0], counts[1], counts[2])
                XCTAssertLessThan(warm.beforeOwnWork, uncached.beforeOwnWork, "\(name) at MTU \(mtu): warm beats no cache")
                XCTAssertLessThanOrEqual(warm.beforeOwnWork, 2, "\(name) at MTU \(mtu), warm")
                XCTAssertGreaterThan(cold.beforeOwnWork, warm.beforeOwnWork + 5, "\(name) at MTU \(mtu): the cache saves the discovery")
                // The same own work (not the scan's: the second finds the mirror COMPLETE and resets it first), and
                // warm one Read Request more: the cached declaration of the characteristic named, read back first.
                if name != "scan" {
                    XCTAssertEqual(cold.total - cold.beforeOwnWork + 1, warm.total - warm.beforeOwnWork, "\(name) at MTU \(mtu): the same own work")
                    XCTAssertTrue(warm.firstOwn.contains("> Read Request handle"), "\(name) at MTU \(mtu): \(warm.firstOwn)")
                }
                table.append("| \(name) | \(mtu) | \(cold) | \(warm) | \(uncached) |")
            }
        }
        print(table.joined(separator: "\n"))
    }
}
