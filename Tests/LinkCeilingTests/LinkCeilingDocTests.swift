// docs/LINK-CEILING.md's table, row by row, against LinkCeiling(_:): the doc cannot drift from the code.
import LinkCeiling
import XCTest

final class LinkCeilingDocTests: XCTestCase {
    func testTheDocumentedTableMatchesTheFunction() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let doc = try String(contentsOf: root.appendingPathComponent("docs/LINK-CEILING.md"), encoding: .utf8)
        let rows = doc.split(separator: "\n").map { $0.split(separator: "|").map { $0.trimmingCharacters(in: .whitespaces) } }
            .filter { $0.count == 9 && RadioPHY(rawValue: $0[0]) != nil }
        XCTAssertEqual(rows.count, 12, "3 links × 4 intervals")
        var seen: Set<String> = []
        for row in rows {
            let phy = try XCTUnwrap(RadioPHY(rawValue: row[0]))
            let dataLength = try XCTUnwrap(Int(row[1])), mtu = try XCTUnwrap(Int(row[2])), interval = try XCTUnwrap(Double(row[3]))
            let c = LinkCeiling(try XCTUnwrap(LinkParameters(phy: phy, dataLength: dataLength, intervalMilliseconds: interval, mtu: mtu)))
            let name = row[0...3].joined(separator: "/")
            seen.insert(name)
            XCTAssertEqual(row[4], String(Int(c.packetsPerEvent)), name)
            XCTAssertEqual(row[5], String(Int(c.writeCommand.bytesPerSecond.rounded())), name)
            XCTAssertEqual(row[6], tenths(c.writeCommand.writesPerSecond), name)
            XCTAssertEqual(row[7], String(Int(c.writeRequest.bytesPerSecond.rounded())), name)
            XCTAssertEqual(row[8], tenths(c.writeRequest.writesPerSecond), name)
        }
        for link in ["1M/27/23", "1M/251/247", "2M/251/247"] {
            for interval in ["7.5", "15", "30", "50"] { XCTAssertTrue(seen.contains("\(link)/\(interval)"), "\(link) at \(interval) ms") }
        }
    }

    private func tenths(_ v: Double) -> String {
        let t = Int((v * 10).rounded())
        return "\(t / 10).\(t % 10)"
    }
}
