// fixedPoint prints what String(format:) printed for the CLI's "%.Nf" and "%7.3f" figures.
import Foundation
@testable import MirrorCommandLine
import XCTest

final class FixedPointTests: XCTestCase {
    func testFixedPointIsStringFormatsFixedNotation() {
        for v in [0, 0.093, 0.0005, 1.5, 2.5, 12.345, 99.9999, -3.25, 123456.789, 1e-9, 1e22] {
            XCTAssertEqual(fixedPoint(v, decimals: 3, width: 7), String(format: "%7.3f", v), "\(v)")
            for decimals in 0...3 {
                XCTAssertEqual(fixedPoint(v, decimals: decimals), String(format: "%.\(decimals)f", v), "\(v) with \(decimals)")
            }
        }
    }

    func testFixedPointKeepsThePointWhateverTheLocale() throws {
        let previous = String(cString: setlocale(LC_NUMERIC, nil))
        defer { setlocale(LC_NUMERIC, previous) }
        // A locale that writes "2,50"; skipped where none is installed (Debian's locales package adds them).
        let commaLocales: [String] = ["de_DE.UTF-8", "fr_FR.UTF-8", "de_DE.utf8"]
        guard commaLocales.contains(where: { name in setlocale(LC_NUMERIC, name) != nil }) else {
            throw XCTSkip("no locale with a decimal comma is installed")
        }
        XCTAssertEqual(fixedPoint(2.5, decimals: 2), "2.50")
    }
}
