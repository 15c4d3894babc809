// The upload receiver joins its directory and a file name as NSString's appendingPathComponent did.
import Foundation
@testable import Mirror
import XCTest

final class UploadPathTests: XCTestCase {
    func testUploadPathJoinsAsAppendingPathComponentDid() {
        for directory in ["/tmp/uploads", "/tmp/uploads/", "/tmp/uploads//", "/", "uploads", "./d", ""] {
            let name = "scan-42.zip"
            XCTAssertEqual(uploadPath(directory, name), (directory as NSString).appendingPathComponent(name), "\"\(directory)\"")
        }
    }
}
