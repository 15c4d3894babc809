// The JSON writer, the error table and the output formats, called directly.
import TestSupport
import ATTStack
import LinuxBluetooth
import LinkCore
import GATTClient
import GATTVocabulary
import JSON
import Mirror
@testable import MirrorCommandLine
import XCTest

final class OutputTests: XCTestCase {
    func testJSONKeepsKeyOrderAndEscapes() throws {
        let value: JSONValue = .object([("z", 1), ("a", [true, .null, 2.5]), ("s", "q\"\\\n\u{01}é")])
        XCTAssertEqual(value.compact, #"{"z":1,"a":[true,null,2.5],"s":"q\"\\\n\u0001é"}"#)
        XCTAssertEqual(try parseJSON(value.pretty), value)
        XCTAssertEqual(try parseJSON(value.compact), value)
        XCTAssertEqual(JSONValue.object([]).pretty, "{}")
        XCTAssertEqual(JSONValue.double(0.1 + 0.2).compact, "0.3")
        XCTAssertEqual(JSONValue.double(.nan).compact, "null")
        XCTAssertThrowsError(try parseJSON("{\"a\":1,}"))
    }

    /// What profile and scenario files read: fields (a repeated key keeps its last value at its first place),
    /// items, strings, numbers as integers, and editing in place.
    func testJSONReadingAndEditing() throws {
        var v = try parseJSON(bytes: Array(#"{"a":1,"b":{"c":"x"},"a":2.9,"l":[true,"s",-3.5]}"#.utf8))
        XCTAssertEqual(v.fields?.map(\.0), ["a", "b", "l"])
        XCTAssertEqual(v.fields?.first?.1, .double(2.9))
        XCTAssertEqual(v["a"], 1, "the subscript reads the first of a repeated key")
        XCTAssertEqual(v["l"]?.items?.map(\.text), ["true", "s", "-3.5"])
        XCTAssertEqual(v["l"]?[2]?.integer, -3)
        XCTAssertEqual(v["b"]?["c"]?.string, "x")
        XCTAssertNil(v["b"]?.string)
        XCTAssertNil(JSONValue.double(1e300).integer)
        v["b"]?["c"] = nil
        v["b"]?["d"] = [1]
        v["a"] = nil
        v["z"] = "new"
        XCTAssertEqual(v.compact, #"{"b":{"d":[1]},"l":[true,"s",-3.5],"z":"new"}"#)
        do { _ = try parseJSON("{"); XCTFail("parsed") } catch {
            XCTAssertEqual(error.description, "invalid JSON at byte 1: unexpected end")
        }
    }

    let peerError = ATTErrorFacts(code: .invalidAttributeValueLength, request: .writeRequest, handle: 0x12,
                                  handleLabel: "cloudToken", rejectedBy: .peer, valueLength: 41, budget: 244, mtu: 247)

    func testPeerATTErrorSentence() {
        XCTAssertEqual(peerError.message,
                       "ATT error 0x0D Invalid Attribute Value Length from the peer, on Write Request to handle 0x0012 (cloudToken): 41-byte value, within the 244-byte budget of MTU 247, so the peripheral rejected it at the application layer")
        let report = ErrorReport(CLIError.att(peerError))
        XCTAssertEqual(report.status, .peerError)
        XCTAssertEqual(report.status.rawValue, 3)
        let e = report.json["error"]
        XCTAssertEqual(e?["kind"], "att")
        XCTAssertEqual(e?["code"], 13)
        XCTAssertEqual(e?["name"], "Invalid Attribute Value Length")
        XCTAssertEqual(e?["requestOpcode"], 0x12)
        XCTAssertEqual(e?["handle"], 0x12)
        XCTAssertEqual(e?["rejectedBy"], "peer")
        XCTAssertEqual(e?["valueLength"], 41)
        XCTAssertEqual(e?["budget"], 244)
        XCTAssertEqual(e?["mtu"], 247)
        XCTAssertEqual(e?["exitStatus"], 3)
    }

    func testLocalRefusalSentence() {
        let local = ATTErrorFacts(code: nil, name: "value exceeds the budget", requestOpcode: 0x12, requestName: "Write Request",
                                  handle: 0x12, rejectedBy: .local, valueLength: 600, budget: 244, mtu: 247)
        XCTAssertEqual(local.message, "not sent: 600-byte value exceeds the 244-byte budget of MTU 247 (local limit)")
        let report = ErrorReport(CLIError.att(local))
        XCTAssertEqual(report.status, .localRefusal)
        XCTAssertEqual(report.json["error"]?["rejectedBy"], "local")
        XCTAssertEqual(report.json["error"]?["kind"], "local")
    }

    func testApplicationErrorShowsRawValue() {
        let app = ATTErrorFacts(code: ATTErrorCode(0x85), request: .readRequest, handle: 0x16, rejectedBy: .peer)
        XCTAssertEqual(app.message, "ATT error 0x85 application error (raw value 0x85, defined by the peripheral's application) from the peer, on Read Request to handle 0x0016")
        XCTAssertEqual(app.jsonFields.first { $0.0 == "code" }?.1, 0x85)
        XCTAssertEqual(app.jsonFields.first { $0.0 == "name" }?.1, "application error")
    }

    func testExitStatusesAreDistinct() {
        let statuses = [ErrorReport(UsageError("x")).status,
                        ErrorReport(CLIError.att(peerError)).status,
                        ErrorReport(CLIError.timeout(what: "a Read Response", seconds: 30)).status,
                        ErrorReport(CLIError.connection("gone")).status,
                        ErrorReport(CLIError.unsupported("no")).status]
        XCTAssertEqual(statuses.map(\.rawValue), [2, 3, 5, 6, 7])
        XCTAssertEqual(Set(ExitStatus.allCases.map(\.rawValue)).count, ExitStatus.allCases.count)
        XCTAssertEqual(ErrorReport(CLIError.timeout(what: "a Read Response", seconds: 30)).message,
                       "timed out after 30 s waiting for a Read Response")
    }

    func testDatabaseJSONShape() throws {
        let db = DatabaseListing(mtu: 247, services: [
            GATTService(uuid: .bit16(0x1800), startHandle: 1, endHandle: 5, characteristics: [
                GATTCharacteristic(uuid: .bit16(0x2A00), declarationHandle: 2, valueHandle: 3, properties: GATTCharacteristicProperties(rawValue: 0x0A),
                                   endHandle: 4, descriptors: [GATTDescriptor(handle: 4, uuid: .bit16(0x2901))]),
            ]),
        ])
        XCTAssertEqual(db.json.compact,
                       #"{"mtu":247,"services":[{"uuid":"1800","start":1,"end":5,"primary":true,"characteristics":[{"uuid":"2a00","handle":2,"valueHandle":3,"properties":["read","write"],"descriptors":[{"uuid":"2901","handle":4,"name":"Characteristic User Description"}],"name":"Device Name"}],"name":"Generic Access"}]}"#,
                       "issue 37: \"name\" last where the text names it")
        XCTAssertEqual(db.text, [
            "MTU 247",
            "Primary service 1800 Generic Access  handles 0x0001-0x0005",
            "  Characteristic 2a00 Device Name  handle 0x0002  value handle 0x0003  [read, write]",
            "    Descriptor 2901 Characteristic User Description  handle 0x0004",
        ])
    }

    func testValueText() {
        XCTAssertEqual(valueText(Array("Mirror".utf8)), "4d 69 72 72 6f 72  \"Mirror\"  (6 bytes)")
        XCTAssertEqual(printableText([0x41, 0x00, 0xFF]), "A..")
        XCTAssertEqual(valueText([]), "(empty)")
        XCTAssertEqual(propertyNames(0x3E), ["read", "write-without-response", "write", "notify", "indicate"])
    }

    func testLibraryErrorRows() {
        let timeout = ErrorReport(GATTError.timeout(GATTTimeoutError(waitingFor: "Write Response", handle: 0x12, handleName: "cloudToken", after: .seconds(30))))
        XCTAssertEqual(timeout.status, .timeout)
        XCTAssertEqual(timeout.message, "timed out after 30 s waiting for Write Response on handle 0x0012 (cloudToken)")
        XCTAssertEqual(timeout.json["error"]?["seconds"]?.compact, "30")
        let gone = ErrorReport(GATTError.disconnected(GATTDisconnectedError(reason: "the peer closed the connection", during: "Read Request to handle 0x0003")))
        XCTAssertEqual(gone.status, .connection)
        XCTAssertEqual(gone.json["error"]?["during"], "Read Request to handle 0x0003")
        let violation = ErrorReport(GATTError.protocolViolation(GATTProtocolViolation(received: [0x13, 0xFF], expected: "Write Response", problem: "wrong length")))
        XCTAssertEqual(violation.status, .protocolViolation)
        XCTAssertEqual(violation.json["error"]?["received"], "13ff")
        let local = ErrorReport(GATTError.attribute(GATTAttributeError(code: .invalidAttributeValueLength, requestOpcode: .writeRequest, handle: 0x12, rejectedBy: .local, valueLength: 600, budget: 244, mtu: 247)))
        XCTAssertEqual(local.status, .localRefusal)
        XCTAssertEqual(local.message, "not sent: 600-byte value exceeds the 244-byte budget of MTU 247 (local limit)")
        XCTAssertNil(local.hint, "a value over 512 bytes gets no --long hint")
        let socket = ErrorReport(TransportError.socket(SocketError(syscall: "socket", errno: .addressFamilyNotSupported, context: "opening")))
        XCTAssertEqual(socket.status, .unsupported)
        XCTAssertEqual(socket.json["error"]?["errnoName"], "EAFNOSUPPORT")
        XCTAssertEqual(ErrorReport(TransportError.connectTimedOut(peer: "00:AA:01:01:00:01", seconds: 10)).status, .timeout)
        // EACCES from a send on an established link is its authentication failure: the connection lost (6), as when
        // the same end reaches a waiting request; from socket() it is the missing capability (7).
        let ended = ErrorReport(TransportError.socket(LinuxBluetooth.socketError("send", EACCES, "sending a 3-byte PDU", .l2cap(peer: "00:AA:01:01:00:01"))))
        XCTAssertEqual(ended.status, .connection)
        XCTAssertNil(ended.json["error"]?["needs"])
        XCTAssertEqual(ErrorReport(TransportError.socket(LinuxBluetooth.socketError("socket", EACCES, "opening", .l2cap(peer: "00:AA:01:01:00:01")))).status, .unsupported)
        // A connect's SO_ERROR of EACCES is the link ended while it was made (pairing failed): lost (6), as from a send.
        let endedWhileMade = ErrorReport(TransportError.socket(LinuxBluetooth.socketError("SO_ERROR", EACCES, "connecting", .l2cap(peer: "00:AA:01:01:00:01"))))
        XCTAssertEqual(endedWhileMade.status, .connection)
        XCTAssertNil(endedWhileMade.json["error"]?["needs"])
        XCTAssertEqual(ErrorReport(MirrorProcedureError("no mirror service")).status, .failure)
        do {
            _ = try MirrorProfile.load(path: "/nonexistent/profile.json")
            XCTFail("a missing profile loads")
        } catch {
            XCTAssertEqual(ErrorReport(error).status, .usage)
            XCTAssertEqual(ErrorReport(error).message, "profile /nonexistent/profile.json: cannot read the file")
        }
    }
}
