// mirror bench --bearers N against --loopback's plain peer serving Enhanced ATT bearers at PATH.eatt: Write Requests
// by N writers at once spread over the bearers, each bearer's count and the total (every write counted at the
// peer), a round of one writer in the same run; and --trace / --btsnoop naming each bearer's PDUs.
import ATTStack
import Foundation
import GATTServer
import JSON
import LinuxBluetooth
import LinkCore
import TestSupport
import XCTest

final class BenchBearersTests: XCTestCase {
    let common = ["bench", "--loopback", "--mode", "with-response", "--count", "300", "--rounds", "2", "--warmup", "5",
                  "--bare-loop", "none"]

    func testThreeBearersReportEachBearersCountTheTotalThePeersCountAndTheOneBearerRoundInJSON() throws {
        let run = try MirrorProcess.run(common + ["--bearers", "3", "--json"])
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertEqual(run.stderr, "")
        let mode = try XCTUnwrap(run.json()["modes"]?[0], run.stdout)
        XCTAssertEqual(mode["mode"]?.string, "with-response")
        XCTAssertEqual(mode["writes"], 600)
        XCTAssertEqual(mode["confirmed"], 600)
        let bearers = try XCTUnwrap(mode["bearers"], run.stdout)
        XCTAssertEqual(bearers.fields?.map(\.0), ["writers", "perBearer", "total", "peerCounted", "oneBearer", "ratioToOneBearer"])
        XCTAssertEqual(bearers["writers"], 3)
        let per = try XCTUnwrap(bearers["perBearer"]?.items)
        XCTAssertEqual(per.map { $0["index"]?.integer }, [0, 1, 2])
        let counts = per.compactMap { $0["writes"]?.integer }
        XCTAssertEqual(counts.reduce(0, +), 600, "each bearer's count must add up to the writes: \(counts)")
        XCTAssertTrue(counts.allSatisfy { $0 > 0 }, "the client did not spread the writers over every bearer: \(counts)")
        XCTAssertEqual(bearers["total"], 600)
        XCTAssertEqual(bearers["peerCounted"], 600, "every write counted at the peer")
        XCTAssertEqual(bearers["oneBearer"]?["writes"], 600)
        XCTAssertGreaterThan(bearers["oneBearer"]?["writesPerSecond"]?.number ?? 0, 0)
        XCTAssertGreaterThan(bearers["ratioToOneBearer"]?.number ?? 0, 0)
        // The series counts every write of the parallel rounds.
        XCTAssertEqual(mode["series"]?["writes"]?.items?.compactMap(\.integer).reduce(0, +), 600)
    }

    func testTheTextSaysEachBearersCountAndTheRatioAndOneBearerAddsNothing() throws {
        let run = try MirrorProcess.run(common + ["--bearers", "2"])
        XCTAssertEqual(run.status, 0, run.stderr)
        let lines = run.stdout.split(separator: "\n").map(String.init)
        let writers = try XCTUnwrap(lines.first { $0.hasPrefix("  2 writers at once") }, run.stdout)
        let m = try XCTUnwrap(writers.wholeMatch(of: /\ \ 2 writers at once on 2 bearers: bearer 0 (\d+), bearer 1 (\d+); total 600, peer counted 600/),
                              writers)
        XCTAssertEqual(Int(m.1)! + Int(m.2)!, 600)
        let one = try XCTUnwrap(lines.first { $0.hasPrefix("  one writer") }, run.stdout)
        XCTAssertNotNil(one.wholeMatch(of: /\ \ one writer, one bearer \(same run\): \d+ writes\/s; 2 bearers \/ one = \d+\.\d\d/), one)

        for args in [[], ["--bearers", "1"]] {
            let plain = try MirrorProcess.run(common + args + ["--json"])
            XCTAssertEqual(plain.status, 0, plain.stderr)
            let mode = try XCTUnwrap(plain.json()["modes"]?[0])
            XCTAssertNil(mode["bearers"], "one bearer: no bearers key")
            let text = try MirrorProcess.run(common + args)
            XCTAssertFalse(text.stdout.contains("writers at once"), text.stdout)
        }
    }

    func testTraceAndBTSnoopNameEachBearersPDUs() throws {
        let path = FileManager.default.temporaryDirectory.path + "/bench-bearers-\(getpid()).btsnoop"
        defer { try? FileManager.default.removeItem(atPath: path) }
        let run = try MirrorProcess.run(["bench", "--loopback", "--mode", "with-response", "--count", "40", "--rounds", "1",
                                         "--warmup", "0", "--bare-loop", "none", "--bearers", "2", "--trace", "--btsnoop", path])
        XCTAssertEqual(run.status, 0, run.stderr)
        // Time, direction, then the bearer's name on the enhanced bearer's lines only.
        let traced = run.stderr.split(separator: "\n").map { String($0.dropFirst(16)) }
        let onB1 = traced.filter { $0.hasPrefix("> [b1 cid 0x0041] Write Request handle 0x0012") }
        let onB1Answers = traced.filter { $0 == "< [b1 cid 0x0041] Write Response" }
        let onCID4 = traced.filter { $0.hasPrefix("> Write Request handle") }   // the bench's and the EATT bit's
        XCTAssertFalse(onB1.isEmpty, run.stderr)
        XCTAssertEqual(onB1.count, onB1Answers.count, run.stderr)
        XCTAssertFalse(onCID4.isEmpty, run.stderr)
        XCTAssertFalse(traced.contains { $0.contains("[b0") }, "the unenhanced bearer's lines are as they were")

        // tshark: the synthesized opening on CID 5 names SPSM 0x0027; the bearer's PDUs are on CID 0x0041 as ATT.
        let r = try ToolProcess.run(executable: URL(fileURLWithPath: "/usr/bin/tshark"),
                                    ["-r", path, "-d", "btl2cap.psm==0x0027,btatt", "-Y", "btl2cap", "-T", "fields",
                                     "-E", "separator=;", "-e", "btl2cap.cid", "-e", "btl2cap.cmd_code", "-e", "btl2cap.le_psm",
                                     "-e", "btatt.opcode"])
        XCTAssertEqual(r.status, 0, r.stderr)
        let rows = r.stdout.split(separator: "\n").map(String.init)
        XCTAssertEqual(rows.filter { $0.hasPrefix("0x0005;") }, ["0x0005;0x14;0x0027;", "0x0005;0x15;;"])
        let writesOnB1 = rows.filter { $0 == "0x0041;;;0x12" }.count
        let answersOnB1 = rows.filter { $0 == "0x0041;;;0x13" }.count
        XCTAssertEqual(writesOnB1, onB1.count, r.stdout)
        XCTAssertEqual(answersOnB1, onB1.count, r.stdout)
        XCTAssertEqual(rows.filter { $0 == "0x0004;;;0x12" }.count, onCID4.count, r.stdout)
        XCTAssertEqual(rows.filter { !$0.hasPrefix("0x0005;") && !$0.hasPrefix("0x0004;") && !$0.hasPrefix("0x0041;") }, [],
                       "PDUs on a CID that is neither CID 4 nor the bearer's")
        try assertReadersOpen(path)
    }

    /// The writers' wait is bounded by each write's transaction timeout: a peer that never answers Write Requests on
    /// its Enhanced ATT bearers fails the run naming what the writer waited for (the bearer closes, §3.3.3).
    func testAWriterWhoseBearerNeverAnswersTimesOutNamingIt() throws {
        let path = temporarySocketPath("mirror-bench-silent-eatt")
        let database = AttributeDatabase { db in
            db.service(.genericAttribute)
            db.characteristic(.clientSupportedFeatures, [.read, .write], value: [0], name: "clientFeatures")
            db.characteristic(.serverSupportedFeatures, [.read], value: [0x01], name: "serverFeatures")
            db.service(.batteryService)
            db.characteristic(.bit16(0x2A1A), [.read, .write], value: [1], name: "sink")
        }
        let sink = database.handles["sink"]!
        var hooks = GATTServerHost.Hooks()
        hooks.inbound = { bytes, connection in
            let enhanced = (connection.transport as? ATTBearer)?.channelIDs != nil
            return enhanced && bytes.first == ATTOpcode.writeRequest.rawValue ? .drop : .serve
        }
        let host = GATTServerHost(database: database, serverRxMTU: 247, hooks: hooks, enhancedBearerLimit: 4)
        let listener = try ATTBearerListener.unix(path: path)
        let enhanced = try ATTBearerListener.unixEnhanced(forUnixPath: path)
        defer {
            listener.close()
            enhanced.close()
        }
        host.acceptConnections(on: listener)
        Thread {
            while true {
                do throws(TransportError) { _ = try host.acceptEnhancedBearer(on: enhanced) } catch {
                    if case .closedLocally = error { return }
                }
            }
        }.start()
        let run = try MirrorProcess.run(["bench", "unix:\(path)", "--handle", String(format: "0x%04X", sink), "--count", "50",
                                         "--warmup", "0", "--rounds", "1", "--mode", "with-response", "--bare-loop", "none",
                                         "--bearers", "2", "--timeout", "1"])
        XCTAssertEqual(run.status, 5, run.stderr)
        let first = run.stderr.split(separator: "\n").first.map(String.init) ?? ""
        XCTAssertTrue(first.hasPrefix("mirror: timed out after 1 s waiting for Write Response"), run.stderr)
        XCTAssertTrue(first.contains(String(format: "handle 0x%04X", sink)), run.stderr)
    }
}
