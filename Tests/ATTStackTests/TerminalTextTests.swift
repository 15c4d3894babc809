// TerminalText: the one sanitizer for peer- and network-supplied text before a terminal.
import ATTStack
import XCTest

final class TerminalTextTests: XCTestCase {
    /// The probe: an OSC title, a clear screen, a carriage return, a C1 CSI.
    static let hostile = "\u{1B}]0;x\u{07}\u{1B}[2J\r\u{9B}31m"

    func testEveryControlIsEscapedVisibly() {
        XCTAssertEqual(TerminalText.escaped(Self.hostile), "\\x1b]0;x\\x07\\x1b[2J\\x0d\\x9b31m")
        XCTAssertEqual(TerminalText.escaped("a\u{7F}b\u{9D}c\u{202E}d\u{2028}e\u{2066}f\u{061C}"),
                       "a\\x7fb\\x9dc\\u202ed\\u2028e\\u2066f\\u061c")
        XCTAssertEqual(TerminalText.escaped("tab\there\nnewline"), "tab\\x09here\\x0anewline")
    }

    func testNoUnsafeScalarSurvives() {
        for v in UInt32(0)...0x3000 {
            guard let scalar = Unicode.Scalar(v) else { continue }
            let out = TerminalText.escaped("<" + String(Character(scalar)) + ">")
            XCTAssertFalse(out.unicodeScalars.contains(where: TerminalText.isUnsafe), "U+\(String(v, radix: 16)) got through")
            let masked = TerminalText.masked(String(Character(scalar)))
            XCTAssertFalse(masked.unicodeScalars.contains(where: TerminalText.isUnsafe))
        }
    }

    func testPlainTextIsUnchanged() {
        for s in ["mirror-sim", "HomeNet-5G", "Ünïcødé ✓ 日本", "back\\slash", ""] {
            XCTAssertEqual(TerminalText.escaped(s), s)
            XCTAssertEqual(TerminalText.masked(s), s)
        }
    }

    func testMaskedReplacesOneForOne() {
        XCTAssertEqual(TerminalText.masked("a\u{1B}b\u{9B}c"), "a.b.c")
    }
}
