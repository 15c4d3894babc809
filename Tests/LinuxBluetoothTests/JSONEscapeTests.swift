// The JSON writer's escaping: exact per RFC 8259, and no raw terminal control (C0, DEL, C1, bidi) in its output.
import ATTStack
import JSON
import XCTest

final class JSONEscapeTests: XCTestCase {
    func testControlsAreEscapedAndTheValueRoundTrips() throws {
        let hostile = "\u{1B}]0;x\u{07}\u{1B}[2J\r\u{9B}31m\u{7F}\u{9D}\u{202E}\u{2028}"
        let text = JSONValue.object([("name", .string(hostile))]).compact
        XCTAssertFalse(text.unicodeScalars.contains(where: TerminalText.isUnsafe), text)
        XCTAssertTrue(text.contains("\\u001b]0;x\\u0007\\u001b[2J\\r\\u009b31m\\u007f\\u009d\\u202e\\u2028"), text)
        XCTAssertEqual(try parseJSON(text), .object([("name", .string(hostile))]))
    }
}
