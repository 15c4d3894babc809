// A pairing failure's exit status and JSON fields: who refused (this host, the peer, the kernel) and what was awaited.
import XCTest
import GATTPeer
import JSON
import LinuxBluetooth
import MirrorCommandLine

final class PairingReportTests: XCTestCase {
    let address = try! BluetoothAddress(parsing: "00:AA:01:01:00:01")

    func failure(_ change: (inout PairingError) -> Void) -> ErrorReport {
        var e = PairingError(address: address, peer: "00:AA:01:01:00:01 (public)", adapter: "hci0")
        change(&e)
        return ErrorReport(e)
    }

    func testEachWayOfFailingHasItsExitStatusAndFields() {
        XCTAssertEqual(failure { $0.status = 0x05; $0.disconnectReason = 0x03 }.status, .failure)
        XCTAssertEqual(failure { $0.status = 0x05; $0.refusedHere = "no passkey" }.status, .localRefusal)
        XCTAssertEqual(failure { $0.status = 0x04 }.status, .connection)
        XCTAssertEqual(failure { $0.status = 0x14 }.status, .unsupported)
        let timeout = failure { $0.waitedFor = "the SMP pairing"; $0.seconds = 60; $0.method = .justWorks }
        XCTAssertEqual(timeout.status, .timeout)
        let json = timeout.json.compact
        for field in ["\"address\":\"00:AA:01:01:00:01\"", "\"adapter\":\"hci0\"", "\"method\":\"Just Works\"",
                      "\"waitingFor\":\"the SMP pairing\"", "\"seconds\":60", "\"managementStatus\":null"] {
            XCTAssertTrue(json.contains(field), "\(field) in \(json)")
        }
        let refused = failure { $0.status = 0x05; $0.authenticationStatus = 0x05 }
        XCTAssertTrue(refused.json.compact.contains("\"managementStatusName\":\"Authentication Failed\""), refused.json.compact)
        let smp = failure { $0.status = 0x05; $0.smpFailure = SMPPairingFailed(handle: 42, reason: 0x04, sentBy: .peer); $0.linkLossReason = 0x13 }
        for field in ["\"smpReason\":4", "\"smpReasonName\":\"Confirm Value Failed\"", "\"smpSentBy\":\"peer\"",
                      "\"linkLossReason\":19", "\"linkLossReasonName\":\"Remote User Terminated Connection\""] {
            XCTAssertTrue(smp.json.compact.contains(field), "\(field) in \(smp.json.compact)")
        }
        XCTAssertTrue(refused.json.compact.contains("\"smpReason\":null"), refused.json.compact)
    }

    func testAPeersInsufficientSecuritySaysHowToPairAndOtherErrorsDoNot() {
        for code: UInt8 in [0x05, 0x0C, 0x0F] {
            let facts = ATTErrorFacts(code: code, name: "x", requestOpcode: 0x0A, requestName: "Read Request", handle: 3, rejectedBy: .peer)
            XCTAssertEqual(ErrorReport(CLIError.att(facts)).hint,
                           "the peer wants an encrypted (0x0F, 0x0C) or authenticated (0x05) link: pair with it (mirror pair TARGET), or give --pair to pair on this connection"
                           + (code == 0x05 ? ErrorReport.authenticatedLinkHint : ""))
            XCTAssertEqual(ErrorReport(CLIError.att(facts)).status, .peerError)
        }
        let other = ATTErrorFacts(code: 0x0A, name: "Attribute Not Found", requestOpcode: 0x0A, requestName: "Read Request", handle: 3, rejectedBy: .peer)
        XCTAssertNil(ErrorReport(CLIError.att(other)).hint)
    }

    /// No CAP_NET_ADMIN for the agent (GATTPeer's PairingUnavailableError): the report CLIError.unsupported gave,
    /// word for word (exit 7, no fields).
    func testNoAgentHereIsUnsupportedWithItsSentence() {
        let sentence = "--pair: mirror needs CAP_NET_ADMIN"
        let report = ErrorReport(PairingUnavailableError(sentence))
        XCTAssertEqual(report.status, .unsupported)
        XCTAssertEqual(report.message, sentence)
        XCTAssertEqual(report.json.compact, ErrorReport(CLIError.unsupported(sentence)).json.compact)
    }
}
