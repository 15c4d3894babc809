// fixedPoint prints what String(format:) printed for the CLI's "%.Nf" and "%7.3f" figures.
import Foundation
import LinkCore
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
}
