// HostEnvironment's ReservedFile (`mirror bench --plot FILE`): opened before the run, written whole after it; a file
// the run created is removed when there is nothing to write, a path that was there before never is.
import Foundation
import HostEnvironment
import LinkCore
import XCTest

final class ReservedFileTests: XCTestCase {
    func directory() throws -> String {
        let d = FileManager.default.temporaryDirectory.appendingPathComponent("reserved-\(getpid())-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: d, withIntermediateDirectories: true)
        addTeardownBlock { try? FileManager.default.removeItem(atPath: d) }
        return d
    }

    func testANewFileIsWrittenWholeOrRemovedWhenTheRunHasNothing() throws {
        let d = try directory()
        let written = try ReservedFile(path: d + "/a.svg", what: "the plot file")
        XCTAssertTrue(written.created)
        try written.write("<svg/>\n", what: "the plot")
        XCTAssertEqual(try String(contentsOfFile: d + "/a.svg", encoding: .utf8), "<svg/>\n")
        let discarded = try ReservedFile(path: d + "/b.svg", what: "the plot file")
        XCTAssertTrue(FileManager.default.fileExists(atPath: d + "/b.svg"), "claimed before the run")
        discarded.discard()
        XCTAssertFalse(FileManager.default.fileExists(atPath: d + "/b.svg"), "created by this run, nothing to put in it")
    }

    func testAPathThatWasThereIsTheUsersAndABadOneFailsAtOnce() throws {
        let d = try directory()
        try "older\n".write(toFile: d + "/old.svg", atomically: false, encoding: .utf8)
        let old = try ReservedFile(path: d + "/old.svg", what: "the plot file")
        XCTAssertFalse(old.created)
        old.discard()
        XCTAssertTrue(FileManager.default.fileExists(atPath: d + "/old.svg"), "never removed")
        XCTAssertThrowsError(try ReservedFile(path: d + "/no-such-dir/p.svg", what: "the plot file")) { error in
            XCTAssertEqual("\(error)", "creating the plot file \(d)/no-such-dir/p.svg: open failed with ENOENT (No such file or directory)")
        }
    }
}
