// What Tab offers: the completer's candidates for the word, once each, none holding a terminal control.
import LineEditor
import XCTest

final class CompletionOfferTests: XCTestCase {
    /// A peer's User Description with ESC ] 0;x BEL ESC [2J CR CSI 31m is never offered: libedit would print it
    /// raw in its list of candidates and insert it raw in the line (issue 23).
    func testTabOffersNoCandidateWithATerminalControl() {
        let hostile = "\u{1B}]0;x\u{07}\u{1B}[2J\r\u{9B}31m"
        XCTAssertEqual(Completion.offered(["0x0003", hostile, "scanState", "0x0003", "s" + hostile, "s\u{202E}x"], for: ""),
                       ["0x0003", "scanState"])
        XCTAssertEqual(Completion.offered(["scanState", "scanError", "secret"], for: "scan"), ["scanState", "scanError"])
    }
}
