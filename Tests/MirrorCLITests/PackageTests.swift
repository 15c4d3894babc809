// tools/package-deb.sh: the Debian package built from the debug `mirror` into a temporary directory, read back with
// dpkg-deb: its files and modes, its control fields, its postinst, the man page through `man -l`, the binary's --help.
import Foundation
import MirrorCommandLine
import TestSupport
import XCTest

final class PackageTests: XCTestCase {
    func testDebianPackageHasTheBinaryManPageCompletionAndPostinst() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("mirror-deb-\(getpid())-\(UInt32.random(in: 0...UInt32.max))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }

        let build = try ToolProcess.run(executable: repositoryRoot.appendingPathComponent("tools/package-deb.sh"),
                                        [ToolProcess.url("mirror").path, dir.path], timeout: 300)
        guard build.status == 0 else { return XCTFail("tools/package-deb.sh exited \(build.status): \(build.stderr)") }
        let arch = try runProgram(["dpkg", "--print-architecture"]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let version = String(MirrorMain.version.dropFirst("mirror ".count))
        let deb = dir.appendingPathComponent("mirror_\(version)_\(arch).deb").path
        XCTAssertEqual(build.stdout, deb + "\n")
        // A debug build loads the toolchain's Swift runtime: the script names those libraries rather than depend on them.
        XCTAssertTrue(build.stderr.contains("libswiftCore.so"), build.stderr)

        // Control fields.
        func field(_ name: String) throws -> String {
            let run = try runProgram(["dpkg-deb", "--field", deb, name])
            XCTAssertEqual(run.status, 0, run.stderr)
            return run.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        }
        XCTAssertEqual(try field("Package"), "mirror")
        XCTAssertEqual(try field("Version"), version)
        XCTAssertEqual(try field("Architecture"), arch)
        XCTAssertFalse(try field("Maintainer").isEmpty)
        XCTAssertFalse(try field("Description").isEmpty)
        let depends = Set(try field("Depends").split(separator: ",").map { $0.split(separator: " ")[0].trimmingCharacters(in: .whitespaces) })
        XCTAssertTrue(depends.isSuperset(of: ["libcap2", "zlib1g", "libc6", "libcap2-bin"]), "\(depends)")
        // Nothing links libbluetooth (BlueZ's headers are all the shim uses), so nothing depends on it.
        XCTAssertFalse(depends.contains("libbluetooth3"), "\(depends)")
        XCTAssertFalse(depends.contains { $0.contains("swift") }, "\(depends)")
        let recommends = Set(try field("Recommends").split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) })
        XCTAssertEqual(recommends, ["libmicrohttpd12", "libssl3", "libedit2"])
        let info = try runProgram(["dpkg-deb", "--info", deb])
        XCTAssertEqual(info.status, 0, info.stderr)
        XCTAssertTrue(info.stdout.contains(" postinst "), info.stdout)

        // Files and modes, owned by root.
        let contents = try runProgram(["dpkg-deb", "--contents", deb])
        XCTAssertEqual(contents.status, 0, contents.stderr)
        var modes: [String: String] = [:]
        for line in contents.stdout.split(separator: "\n") {
            let columns = line.split(separator: " ", omittingEmptySubsequences: true)
            guard columns.count >= 6 else { continue }
            XCTAssertEqual(columns[1], "root/root", String(line))
            modes[String(columns[5])] = String(columns[0])
        }
        XCTAssertEqual(modes["./usr/bin/mirror"], "-rwxr-xr-x")
        XCTAssertEqual(modes["./usr/share/man/man1/mirror.1.gz"], "-rw-r--r--")
        XCTAssertEqual(modes["./usr/share/bash-completion/completions/mirror"], "-rw-r--r--")

        // The extracted files: the completion and the man page are the committed ones; man renders the page; the
        // binary runs.
        let root = dir.appendingPathComponent("root")
        let extract = try runProgram(["dpkg-deb", "-x", deb, root.path])
        XCTAssertEqual(extract.status, 0, extract.stderr)
        XCTAssertEqual(try String(contentsOf: root.appendingPathComponent("usr/share/bash-completion/completions/mirror"), encoding: .utf8),
                       try String(contentsOf: repositoryRoot.appendingPathComponent("tools/completion/mirror.bash"), encoding: .utf8))
        let page = root.appendingPathComponent("usr/share/man/man1/mirror.1.gz").path
        let unzipped = try runProgram(["gzip", "-dc", page])
        XCTAssertEqual(unzipped.stdout, try String(contentsOf: repositoryRoot.appendingPathComponent("docs/mirror.1"), encoding: .utf8))
        let man = try runProgram(["man", "-P", "cat", "--warnings", "-l", page])
        XCTAssertEqual(man.status, 0, man.stderr)
        XCTAssertEqual(man.stderr, "")
        XCTAssertTrue(man.stdout.contains("EXIT STATUS"), man.stdout)
        let help = try ToolProcess.run(executable: root.appendingPathComponent("usr/bin/mirror"), ["--help"])
        XCTAssertEqual(help.status, 0, help.stderr)
        XCTAssertEqual(help.stdout, toolHelp(commandTable.map(\.spec)))

        // The postinst runs setcap on the installed binary, and when setcap fails says so and lets the install go on.
        let control = dir.appendingPathComponent("control")
        let e = try runProgram(["dpkg-deb", "-e", deb, control.path])
        XCTAssertEqual(e.status, 0, e.stderr)
        let postinst = control.appendingPathComponent("postinst")
        XCTAssertTrue(FileManager.default.isExecutableFile(atPath: postinst.path))
        XCTAssertTrue(try String(contentsOf: postinst, encoding: .utf8).contains("setcap cap_net_raw,cap_net_admin+ep /usr/bin/mirror"))
        let fakes = dir.appendingPathComponent("bin")
        try FileManager.default.createDirectory(at: fakes, withIntermediateDirectories: true)
        let setcap = fakes.appendingPathComponent("setcap")
        let record = dir.appendingPathComponent("setcap-args")
        for (exitStatus, message) in [(0, false), (1, true)] {
            try "#!/bin/sh\necho \"$@\" >\(record.path)\nexit \(exitStatus)\n".write(to: setcap, atomically: true, encoding: .utf8)
            try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: setcap.path)
            let run = try runProgram(["PATH=\(fakes.path):/usr/bin:/bin", "sh", postinst.path, "configure"])
            XCTAssertEqual(run.status, 0, "setcap exiting \(exitStatus): the postinst must not fail the install")
            XCTAssertEqual(try String(contentsOf: record, encoding: .utf8), "cap_net_raw,cap_net_admin+ep /usr/bin/mirror\n")
            XCTAssertEqual(run.stderr.contains("setcap cap_net_raw,cap_net_admin+ep /usr/bin/mirror failed"), message, run.stderr)
        }
    }
}
