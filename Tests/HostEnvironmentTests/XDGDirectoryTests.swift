// The XDG Base Directory rule (one place: the shell's history under state, the GATT cache under cache).
import Foundation
import Glibc
import HostEnvironment
import LinuxBluetooth
import LinkCore
import XCTest

final class XDGDirectoryTests: XCTestCase {
    func testAnAbsoluteVariableWinsElseHomeElseNothing() {
        func env(_ values: [String: String]) -> (String) -> String? { { values[$0] } }
        XCTAssertEqual(XDGDirectory.cache.mirrorDirectory(environment: env(["XDG_CACHE_HOME": "/c", "HOME": "/h"])), "/c/mirror")
        XCTAssertEqual(XDGDirectory.cache.mirrorDirectory(environment: env(["XDG_CACHE_HOME": "rel", "HOME": "/h"])), "/h/.cache/mirror",
                       "a relative value is ignored, as the spec says")
        XCTAssertEqual(XDGDirectory.cache.mirrorDirectory(environment: env(["HOME": "/h"])), "/h/.cache/mirror")
        XCTAssertEqual(XDGDirectory.state.mirrorDirectory(environment: env(["XDG_STATE_HOME": "/s", "HOME": "/h"])), "/s/mirror")
        XCTAssertEqual(XDGDirectory.state.mirrorDirectory(environment: env(["HOME": "/h"])), "/h/.local/state/mirror")
        XCTAssertEqual(XDGDirectory.state.mirrorDirectory(environment: env(["XDG_CACHE_HOME": "/c"])), nil)
        XCTAssertNil(XDGDirectory.cache.mirrorDirectory(environment: env(["HOME": ""])))
    }
}

/// mirror's state and cache folders are private: created 0700, tightened when looser, refused when another user's.
final class PrivateDirectoryTests: XCTestCase {
    var base = ""
    override func setUpWithError() throws {
        base = NSTemporaryDirectory() + "mirror-private-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: base, withIntermediateDirectories: true)
    }
    override func tearDown() { try? FileManager.default.removeItem(atPath: base) }

    func mode(_ path: String) throws -> Int {
        try (FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? NSNumber)?.intValue ?? -1
    }

    func testALooserDirectoryIsTightenedAndAMissingOneCreatedPrivate() throws {
        let loose = base + "/state/mirror"
        try FileManager.default.createDirectory(atPath: loose, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o755])
        XCTAssertEqual(try mode(loose), 0o755)
        try XDGDirectory.preparePrivateDirectory(loose)
        XCTAssertEqual(try mode(loose), 0o700)
        let fresh = base + "/a/b/mirror"
        try XDGDirectory.preparePrivateDirectory(fresh)
        XCTAssertEqual(try mode(fresh), 0o700)
        XCTAssertEqual(try mode(base + "/a"), 0o700, "parents created as XDG asks")
    }

    func testAnotherUsersDirectoryOrAFileIsRefused() throws {
        let file = base + "/mirror"
        XCTAssertTrue(FileManager.default.createFile(atPath: file, contents: Data()))
        XCTAssertThrowsError(try XDGDirectory.preparePrivateDirectory(file)) { error in
            XCTAssertEqual(error as? PrivateDirectoryError, .notADirectory(path: file))
        }
        try FileManager.default.removeItem(atPath: file)
        try FileManager.default.createDirectory(atPath: file, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o777])
        let other: UInt32 = getuid() == 65534 ? 65533 : 65534
        guard chown(file, other, getgid()) == 0 else {
            // Only root may give a directory away; as anyone else, another user's directory cannot be made here.
            XCTAssertEqual(Errno.current, Errno(EPERM))
            return
        }
        XCTAssertThrowsError(try XDGDirectory.preparePrivateDirectory(file)) { error in
            XCTAssertEqual(error as? PrivateDirectoryError, .notOwned(path: file, owner: other, user: getuid()))
            XCTAssertTrue("\(error)".hasPrefix("refusing to use \(file): it is owned by uid \(other)"), "\(error)")
        }
        XCTAssertEqual(try mode(file), 0o777, "another user's directory is left as it is")
    }
}
