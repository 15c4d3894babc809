// The JSON parser's nesting limit: 100,000 `[` used to overflow the stack (SIGSEGV); now a parse error.
import JSON
import XCTest

final class JSONNestingTests: XCTestCase {
    func testNestingPastTheLimitIsAnErrorNamingTheLimitAndTheOffset() {
        let deep = String(repeating: "[", count: 100_000)
        XCTAssertThrowsError(try parseJSON(deep)) { error in
            let e = error as? JSONParseError
            XCTAssertEqual(e?.offset, jsonMaximumNestingDepth, "the byte of the first level past the limit")
            XCTAssertEqual(e?.description, "invalid JSON at byte 512: arrays and objects nested deeper than the limit of 512 levels")
        }
        let objects = String(repeating: "{\"a\":", count: 100_000)
        XCTAssertThrowsError(try parseJSON(objects)) { error in
            XCTAssertTrue("\(error)".contains("limit of 512 levels"), "\(error)")
        }
    }

    func testNestingUpToTheLimitParses() throws {
        let n = jsonMaximumNestingDepth
        var value = try parseJSON(String(repeating: "[", count: n) + String(repeating: "]", count: n))
        var depth = 1
        while case .array(let items) = value, let first = items.first { value = first; depth += 1 }
        XCTAssertEqual(depth, n)
        XCTAssertThrowsError(try parseJSON(String(repeating: "[", count: n + 1) + String(repeating: "]", count: n + 1)))
        // Siblings do not add up: depth is how deep, not how many.
        XCTAssertNoThrow(try parseJSON("[" + Array(repeating: "[[]]", count: 2000).joined(separator: ",") + "]"))
    }
}
