// Peer- and network-supplied text never reaches a terminal raw (issue 23, point 3): a User Description used as a
// label, a characteristic's value, an SSID, an advertised name, each fed `ESC ] 0;x BEL ESC [2J CR CSI 31m`; the
// text output escapes it (TerminalText), the JSON keeps it exact.
import ATTStack
import Foundation
import GATTServer
import JSON
@testable import LinuxBluetooth
import LinkCore
@testable import MirrorCommandLine
import TestSupport
import XCTest

/// ESC ] 0;x BEL (set the title), ESC [2J (clear the screen), CR, CSI 31m (U+009B: red, on 8-bit terminals).
let hostileText = "\u{1B}]0;x\u{07}\u{1B}[2J\r\u{9B}31m"

/// The same text as `TerminalText.escaped` prints it.
let hostileEscaped = #"\x1b]0;x\x07\x1b[2J\x0d\x9b31m"#

/// Fails for every scalar of stdout or stderr that must not reach a terminal raw (TerminalText.isUnsafe; the line
/// feed between lines excepted), naming the stream and the line.
func assertNoRawControl(_ run: ToolRun, _ what: String, file: StaticString = #filePath, line: UInt = #line) {
    for (stream, text) in [("stdout", run.stdout), ("stderr", run.stderr)] {
        for l in text.split(separator: "\n", omittingEmptySubsequences: false)
        where l.unicodeScalars.contains(where: TerminalText.isUnsafe) {
            XCTFail("\(what): a raw control reached \(stream): \(String(reflecting: String(l)))", file: file, line: line)
        }
    }
}

extension AttributeDatabase {
    /// A peer whose Device Name, two User Descriptions and values are the hostile text: "hostile" notifies and
    /// reads it, "secret" (its read refused by GATTPeer's hooks) and "twin" share its User Description.
    static func hostile() -> AttributeDatabase {
        let text = Array(hostileText.utf8)
        return AttributeDatabase { db in
            db.service(.genericAccess)
            db.characteristic(.deviceName, [.read], value: text, name: "deviceName")
            db.service(BluetoothUUID(string: "6e400101-b5a3-f393-e0a9-e50e24dcca9e")!)
            db.characteristic(BluetoothUUID(string: "6e400102-b5a3-f393-e0a9-e50e24dcca9e")!, [.read, .notify], value: text, name: "hostile")
            db.descriptor(.characteristicUserDescription, value: text, name: "hostileName")
            db.characteristic(BluetoothUUID(string: "6e400103-b5a3-f393-e0a9-e50e24dcca9e")!, [.read], value: [1], name: "secret")
            db.descriptor(.characteristicUserDescription, value: text, name: "secretName")
        }
    }
}

final class HostileTextTests: XCTestCase {
    var peer: GATTPeer!

    override func setUpWithError() throws {
        var behaviour = GATTPeer.Behaviour()
        behaviour.notificationsPerSubscription = 1
        behaviour.notificationValue = Array(hostileText.utf8)
        peer = try GATTPeer(database: .hostile(), behaviour: behaviour)
    }

    override func tearDown() { peer.close() }

    /// A value holding C0 and C1 controls: masked in `read`'s and `gatt --read`'s text, exact in their JSON.
    func testValuesInReadAndGATTReadAreMaskedInTextAndExactInJSON() throws {
        let handle = peer.hexHandle("hostile")
        let read = try MirrorProcess.run(["read", peer.target, handle])
        XCTAssertEqual(read.status, 0, read.stderr)
        assertNoRawControl(read, "read")
        XCTAssertTrue(read.stdout.contains(#"  ".]0;x..[2J..31m"  "#), read.stdout)
        // --trace shows a PDU's value as hex only.
        let traced = try MirrorProcess.run(["read", peer.target, handle, "--trace"])
        assertNoRawControl(traced, "read --trace")
        XCTAssertTrue(traced.stderr.contains(ATTHex.bytes(Array(hostileText.utf8))), traced.stderr)
        let readJSON = try MirrorProcess.run(["read", peer.target, handle, "--json"])
        assertNoRawControl(readJSON, "read --json")
        XCTAssertEqual(try readJSON.json()["value"], .string(ATTHex.string(Array(hostileText.utf8))))
        let gatt = try MirrorProcess.run(["gatt", peer.target, "--read"])
        XCTAssertEqual(gatt.status, 0, gatt.stderr)
        assertNoRawControl(gatt, "gatt --read")
        let gattJSON = try MirrorProcess.run(["gatt", peer.target, "--read", "--json"])
        assertNoRawControl(gattJSON, "gatt --read --json")
        XCTAssertTrue(gattJSON.stdout.contains(ATTHex.string(Array(hostileText.utf8))), "the value's exact hex: \(gattJSON.stdout)")
    }

    /// `listen`: the User Description as the label of the subscribed line and of each notification, escaped;
    /// exact in the JSON's "name".
    func testListenEscapesTheUserDescriptionLabel() throws {
        let handle = peer.hexHandle("hostile")
        let run = try MirrorProcess.run(["listen", peer.target, handle, "--count", "1"])
        XCTAssertEqual(run.status, 0, run.stderr)
        assertNoRawControl(run, "listen")
        XCTAssertTrue(run.stdout.contains(" " + hostileEscaped + ": "), run.stdout)
        XCTAssertTrue(run.stderr.contains(hostileEscaped + " (notifications)"), run.stderr)
        let json = try MirrorProcess.run(["listen", peer.target, handle, "--count", "1", "--json"])
        assertNoRawControl(json, "listen --json")
        let objects = try json.jsonLines()
        XCTAssertEqual(objects.dropLast().last?["name"], .string(hostileText), "exact in the JSON (before the last line, the counts)")
        XCTAssertEqual(objects.first?["subscriptions"]?.items?.first?["name"], .string(hostileText), "and in the subscribed event")
    }

    /// The errors that carry a peer's names: "names known", the candidates of an ambiguous name, an ATT error
    /// labelled with the characteristic's User Description.
    func testErrorsEscapeThePeersNames() throws {
        let unknown = try MirrorProcess.run(["read", peer.target, "nosuchname"])
        XCTAssertEqual(unknown.status, 2, unknown.stderr)
        assertNoRawControl(unknown, "names known")
        XCTAssertTrue(unknown.stderr.contains("names known: " + hostileEscaped), unknown.stderr)
        let twins = try MirrorProcess.run(["read", peer.target, "name:" + hostileText])
        XCTAssertEqual(twins.status, 2, twins.stderr)
        assertNoRawControl(twins, "the candidates")
        XCTAssertTrue(twins.stderr.contains("names 2 characteristics"), twins.stderr)
        let refused = try MirrorProcess.run(["read", peer.target, peer.hexHandle("secret")])
        XCTAssertEqual(refused.status, 3, refused.stderr)
        assertNoRawControl(refused, "an ATT error")
        XCTAssertTrue(refused.stderr.contains("(\(hostileEscaped))"), refused.stderr)
        let refusedJSON = try MirrorProcess.run(["read", peer.target, peer.hexHandle("secret"), "--json"])
        assertNoRawControl(refusedJSON, "an ATT error, --json")
        XCTAssertEqual(try refusedJSON.json()["error"]?["handleName"], .string(hostileText), "exact in the JSON")
    }

    /// `mirror shell`: the subscribed line, the notification line, unsubscribe and a failed line's names.
    func testShellLinesEscapeThePeersNames() throws {
        let handle = peer.hexHandle("hostile")
        let script = "subscribe \(handle)\nread \(handle)\nunsubscribe \(handle)\nread nosuchname\n"
        let run = try MirrorProcess.run(["shell", peer.target, "--keep-going"], input: script)
        assertNoRawControl(run, "shell")
        XCTAssertTrue(run.stdout.contains("subscribed to \(handle) 6e400102-b5a3-f393-e0a9-e50e24dcca9e \(hostileEscaped) ("), run.stdout)
        XCTAssertTrue(run.stdout.contains("unsubscribed from \(handle) \(hostileEscaped)"), run.stdout)
        XCTAssertTrue(run.stderr.contains("names known: " + hostileEscaped), run.stderr)
    }

    /// `discover`'s line for an advertiser whose Complete Local Name (AD type 0x09) is the hostile text.
    func testDiscoverEscapesTheAdvertisedName() throws {
        let name = Array(hostileText.utf8)
        let report = LEAdvertisingReport(eventType: 0, addressType: .random, address: try BluetoothAddress(parsing: "C0:11:22:33:44:55"),
                                         data: [UInt8(name.count + 1), 0x09] + name, rssi: -40)
        let device = report
        XCTAssertFalse(device.text.unicodeScalars.contains(where: TerminalText.isUnsafe), String(reflecting: device.text))
        XCTAssertTrue(device.text.contains("\"\(hostileEscaped)\""), device.text)
        XCTAssertEqual(device.json["name"], JSONValue.string(hostileText), "exact in the JSON")
    }
}

/// The mirror's Wi-Fi: SSIDs from wifiNetworkSSIDEnum and wifiSetSSID (the air's text, through the mirror).
final class HostileSSIDTests: XCTestCase {
    var sim: SimulatorProcess!

    override func setUpWithError() throws { sim = try SimulatorProcess(["--networks", "lab," + hostileText, "--ssid", hostileText]) }
    override func tearDown() { sim.stop() }

    func testWiFiListStatusAndEventsEscapeSSIDs() throws {
        let list = try MirrorProcess.run(["wifi", "list", sim.target])
        XCTAssertEqual(list.status, 0, list.stderr)
        assertNoRawControl(list, "wifi list")
        XCTAssertTrue(list.stdout.contains("  " + hostileEscaped), list.stdout)
        XCTAssertTrue(list.stderr.contains(hostileEscaped), "the read event's decoded SSID: \(list.stderr)")
        let status = try MirrorProcess.run(["wifi", "status", sim.target])
        XCTAssertEqual(status.status, 0, status.stderr)
        assertNoRawControl(status, "wifi status")
        XCTAssertTrue(status.stdout.contains("SSID " + hostileEscaped), status.stdout)
        let json = try MirrorProcess.run(["wifi", "list", sim.target, "--json"])
        assertNoRawControl(json, "wifi list --json")
        XCTAssertEqual(try json.jsonLines().last?["networks"], .array([.string("lab"), .string(hostileText)]), "exact in the JSON")
    }
}
