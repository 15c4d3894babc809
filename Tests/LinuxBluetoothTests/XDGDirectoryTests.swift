// The XDG Base Directory rule (one place: the shell's history under state, the GATT cache under cache).
import LinuxBluetooth
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
