// The bench's bare loop placement and socket (BenchMeasurement's `BareLoopSetup`), in process: the target's default,
// the refusals as `mirror bench` words them, and a second connection that runs a bare turn against a plain peer.
import BareATT
import BenchMeasurement
import XCTest
@testable import MirrorCommandLine

final class BenchSetupTests: XCTestCase {
    func testTheDefaultPlacementFollowsTheTarget() {
        XCTAssertEqual(BareLoopSetup.placement(nil, isUnix: true), .secondConnection)
        XCTAssertEqual(BareLoopSetup.placement(nil, isUnix: false), .sameConnection, "an LE link takes one ATT socket")
        XCTAssertEqual(BareLoopSetup.placement(.sameConnection, isUnix: true), .sameConnection)
        XCTAssertNil(BareLoopSetup.placement(BareLoopOption.none, isUnix: true))
    }

    func testWhatCannotBePlacedIsRefusedAndWordedAsBefore() throws {
        XCTAssertNil(try BareLoopSetup.socket(BareLoopOption.none, unixPath: "/tmp/x", bearer: nil, timeout: 1, clientRxMTU: 23))
        XCTAssertThrowsError(try BareLoopSetup.socket(.secondConnection, unixPath: nil, bearer: nil, timeout: 1, clientRxMTU: 23)) { error in
            XCTAssertEqual(error as? BenchFailure, .secondConnectionNeedsUnixTarget)
            XCTAssertEqual(benchCLIError(error) as? UsageError, UsageError(secondConnectionOnLE, command: "bench"))
        }
        XCTAssertThrowsError(try BareLoopSetup.socket(nil, unixPath: nil, bearer: nil, timeout: 1, clientRxMTU: 23)) { error in
            XCTAssertEqual(error as? BenchFailure, .sameConnectionNeedsSocketBearer)
            XCTAssertEqual("\(benchCLIError(error))", "\(CLIError.unsupported("--bare-loop same-connection needs a socket bearer under the GATT client"))")
        }
    }

    func testASecondConnectionRunsABareTurnAgainstAPlainPeer() throws {
        let peer = try PlainPeer.loopback()
        defer { peer.close() }
        guard let (socket, placement) = try BareLoopSetup.socket(nil, unixPath: peer.path, bearer: nil, timeout: 5, clientRxMTU: 100) else {
            return XCTFail("no bare loop for a unix: target")
        }
        defer { socket.close() }
        XCTAssertEqual(placement, .secondConnection)
        guard case .own(let loop) = socket else { return XCTFail("a unix: target's bare loop has its own connection") }
        let round = try loop.requests(handle: PlainPeer.sinkHandle, value: Array(repeating: 7, count: 97), writes: 5)
        XCTAssertEqual(round.writes, 5)
        let (_, counted) = try loop.commands(handle: PlainPeer.sinkHandle, value: [1, 2, 3], writes: 4, counter: PlainPeer.counterHandle)
        XCTAssertEqual(counted, 4, "the plain peer counted every bare Write Command")
    }
}
