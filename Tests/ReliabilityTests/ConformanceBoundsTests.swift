// Issue 36: `mirror check` is bounded by construction, whatever the server it checks does. Each hostile server here
// is a scripted peer in-process (ScriptedPeer over the hostile peer's database, with one behaviour changed), and each
// test asserts the bound the check now keeps: PDUs stored, requests sent, time spent, and that a check that stopped
// early does not pass.
import ATTStack
@testable import Conformance
import GATTServer
import HostilePeer
import LinkCore
import TestSupport
import XCTest

final class ConformanceBoundsTests: XCTestCase {
    /// A server that answers as the hostile peer's well-behaved database, except where `override` returns steps.
    func server(_ override: @escaping @Sendable ([UInt8]) -> [Step]?) -> ScriptedPeer {
        let server = Lock((ATTServer(database: HostilePeer.database), ATTSession()))
        return ScriptedPeer(label: "bounds") { bytes in
            if let steps = override(bytes) { return steps }
            return server.withLock { s in
                guard case .now(let answer) = s.0.answer(bytes: bytes, session: &s.1) else { return [] }
                return [.server(answer.bytes)]
            }
        }
    }

    func check(_ peer: ScriptedPeer, limit: Duration = .seconds(2), configure: (inout ConformanceOptions) -> Void = { _ in })
        async -> (ATTProbe, ConformanceReport) {
        let probe = ATTProbe(transport: peer)
        peer.start(probe)
        var options = ConformanceOptions(target: "scripted", limit: limit)
        configure(&options)
        let report = await runConformanceCheck(probe, options)
        peer.close(reason: "test done")
        return (probe, report)
    }

    /// Notifications flooded inside one unanswered request (before: every one kept, 3.1 GB in 43.6 s): the probe keeps
    /// at most its stored limit and counts the rest; the check stops at the transaction timeout and does not pass.
    func testANotificationFloodInsideARequestIsCountedNotKept() async throws {
        let flood = 3 * ATTProbe.storedPDULimit
        let note = ATTPDU.handleValueNotification(handle: HostilePeer.deviceNameHandle, value: [0x41][...]).bytes
        let peer = server { bytes in
            guard bytes.first == ATTOpcode.readByGroupTypeRequest.rawValue else { return nil }
            return Array(repeating: Step.server(note), count: flood)
        }
        let (probe, report) = await check(peer, limit: .seconds(2))
        XCTAssertLessThanOrEqual(probe.storedCount, ATTProbe.storedPDULimit + 8, "the log holds the limit and the exchanges, not the flood")
        XCTAssertEqual(report.notStored, flood - ATTProbe.storedPDULimit)
        XCTAssertFalse(report.complete)
        XCTAssertFalse(report.passes)
        XCTAssertTrue(report.findings.contains { $0.rule == .responseWithinTimeout }, "\(report.findings.map(\.rule.id))")
        XCTAssertTrue(report.textLines.contains("\(report.notStored) PDUs from the server past the \(ATTProbe.storedPDULimit) kept were counted, not kept"))
        XCTAssertEqual(report.json["notStored"], .int(flood - ATTProbe.storedPDULimit))
    }

    /// A server whose Find By Type Value claims a service at every handle asked, one handle of progress per answer
    /// (before: 131,091 requests against two attributes): the walk ends at the first range Read By Group Type did
    /// not give, the disagreement is the finding, and the check stays within 4 requests per attribute plus 200.
    func testFindByTypeValueThatClaimsAServiceAtEveryHandleEndsTheWalk() async throws {
        let peer = server { bytes in
            guard bytes.first == ATTOpcode.findByTypeValueRequest.rawValue, bytes.count >= 3 else { return nil }
            return [.server([ATTOpcode.findByTypeValueResponse.rawValue, bytes[1], bytes[2], bytes[1], bytes[2]])]
        }
        let (_, report) = await check(peer)
        XCTAssertTrue(report.complete, report.stopped ?? "")
        XCTAssertTrue(report.findings.contains { $0.rule == .discoveryServicesAgree }, "\(report.findings.map(\.rule.id))")
        XCTAssertLessThanOrEqual(report.requests, 4 * report.attributes + 200, "\(report.requests) requests for \(report.attributes) attributes")
    }

    /// A server that answers Exchange MTU 1.5 s late (before: every quiet period 4x that round trip, a 47-request
    /// check stretched to 82 s): each quiet period is at most a second, so the check takes the late answer plus at
    /// most a second per request kind.
    func testALateExchangeMTUDoesNotStretchTheQuietPeriods() async throws {
        let peer = server { bytes in
            guard bytes.first == ATTOpcode.exchangeMTURequest.rawValue else { return nil }
            return [.delay(1_500_000), .server(ATTPDU.exchangeMTUResponse(serverRxMTU: 517).bytes)]
        }
        let (_, report) = await check(peer, limit: .seconds(5))
        XCTAssertTrue(report.complete, report.stopped ?? "")
        // About 14 request kinds get a quiet period; 4 x 1.5 s each would be over 80 s.
        XCTAssertLessThan(report.seconds, 1.5 + 16 * 1.0 + 5, "the check took \(report.seconds) s")
    }

    /// Issue 37: the summary counts rules, instances beside (before: "22 SHALL broken" for 2 rules broken).
    func testTheSummaryCountsRulesWithTheirInstancesBeside() {
        let f = { (rule: ConformanceRule) in ConformanceFinding(rule: rule, observed: "seen", evidence: []) }
        let report = ConformanceReport(target: "t", mtu: 23, checked: ConformanceRule.catalogue,
                                       findings: Array(repeating: f(.errorEcho), count: 20) + [f(.handlesAscending), f(.handlesAscending)] + [f(.serviceChanged)],
                                       notRun: [], requests: 1, attributes: 1, seconds: 0, stopped: nil)
        XCTAssertEqual(report.textLines.last, "2 SHALL rules broken (22 instances), 1 SHOULD rule not followed, 0 notes")
        XCTAssertEqual(report.json["ruleCounts"]?["SHALL"], .int(2))
        XCTAssertEqual(report.json["counts"]?["SHALL"], .int(22))
    }

    /// The request budget and the deadline stop a check that would go on, and such a check does not pass.
    func testTheRequestBudgetAndTheDeadlineStopTheCheckIncomplete() async throws {
        let (_, budgeted) = await check(server { _ in nil }) { $0.requestBudget = 10 }
        XCTAssertEqual(budgeted.requests, 10)
        XCTAssertEqual(budgeted.stopped, "the check sent its budget of 10 requests (--max-requests) before it ended")
        XCTAssertFalse(budgeted.passes)
        XCTAssertEqual(budgeted.json["complete"], .bool(false))
        XCTAssertEqual(budgeted.json["passes"], .bool(false))
        // Every read answered 300 ms late: a 1 s deadline ends the check after a few, within it and one answer.
        let slow = server { bytes in
            guard bytes.first == ATTOpcode.readRequest.rawValue else { return nil }
            return [.delay(300_000), .server(ATTPDU.errorResponse(requestOpcode: .readRequest, handle: UInt16(bytes[1]) | UInt16(bytes[2]) << 8, error: .readNotPermitted).bytes)]
        }
        let (_, late) = await check(slow) { $0.deadline = .seconds(1) }
        XCTAssertEqual(late.stopped, "the check reached its deadline of 1 s (--max-time) before it ended")
        XCTAssertLessThan(late.seconds, 1 + 2, "within the deadline and one transaction timeout")
        XCTAssertFalse(late.passes)
        // One reason, said once: the rules not reached are listed by id under it.
        let text = late.textLines
        XCTAssertEqual(text.filter { $0.contains("--max-time") }.count, 1, text.joined(separator: "\n"))
        XCTAssertTrue(text.contains { $0.hasPrefix("  stopped before: ") }, text.joined(separator: "\n"))
    }
}
