// The built `mirror`: help, and bad usage refused with the exact token, exit status 2, text and JSON.
import TestSupport
import XCTest
import MirrorCommandLine

final class UsageTests: XCTestCase {
    let commands = ["discover", "gatt", "read", "write", "listen", "mtu", "bench", "pair"]

    func testToolHelpListsCommandsExitStatusAndExamples() throws {
        let run = try MirrorProcess.run(["--help"])
        XCTAssertEqual(run.status, 0)
        for name in commands { XCTAssertTrue(run.stdout.contains("\n  \(name) "), "help lists \(name)") }
        XCTAssertTrue(run.stdout.contains("Exit status:"))
        // The code in a 4-column field ("  3   ...", "  130 ..."), then its meaning.
        for status in ExitStatus.allCases {
            let code = String(status.rawValue)
            XCTAssertTrue(run.stdout.contains("  " + code + String(repeating: " ", count: max(1, 4 - code.count)) + status.meaning), "\(code)")
        }
        XCTAssertTrue(run.stdout.contains("Examples:"))
        XCTAssertEqual(try MirrorProcess.run([]).stdout, run.stdout)
    }

    func testEveryCommandHasHelpWithExamples() throws {
        for name in commands {
            let run = try MirrorProcess.run([name, "--help"])
            XCTAssertEqual(run.status, 0, name)
            XCTAssertTrue(run.stdout.hasPrefix("mirror \(name): "), name)
            XCTAssertTrue(run.stdout.contains("Usage: mirror \(name)"), name)
            XCTAssertTrue(run.stdout.contains("Examples:\n  # "), name)
            XCTAssertTrue(run.stdout.contains("Exit status:"), name)
            XCTAssertEqual(run.stderr, "", name)
        }
    }

    /// Issue 37: a command's --help is one page (at most 50 lines, before: 72 to 146), its own options before the
    /// global ones, which it names and `mirror help options` explains; the exit statuses have `mirror help
    /// exit-codes`; `mirror help COMMAND` has every detail.
    func testEveryCommandsHelpIsOnePageThatPointsToTheRest() throws {
        for spec in commandTable.map(\.spec) {
            let run = try MirrorProcess.run([spec.name, "--help"])
            XCTAssertEqual(run.status, 0, spec.name)
            let lines = run.stdout.components(separatedBy: "\n").dropLast()
            XCTAssertLessThanOrEqual(lines.count, helpPageLines, "\(spec.name): \(lines.count) lines")
            XCTAssertTrue(run.stdout.contains("\nEvery detail: mirror help \(spec.name)\n"), spec.name)
            XCTAssertTrue(run.stdout.contains("\nExit status: 0 on success; every status in mirror help exit-codes\n"), spec.name)
            if let own = run.stdout.range(of: "\nOptions:\n"), let global = run.stdout.range(of: "\nGlobal options it takes") {
                XCTAssertLessThan(own.lowerBound, global.lowerBound, "\(spec.name): its own options first")
            }
            let manual = try MirrorProcess.run(["help", spec.name])
            XCTAssertEqual(manual.stdout, commandManual(spec), spec.name)
            XCTAssertTrue(manual.stdout.contains(spec.discussion.components(separatedBy: "\n\n").last!.prefix(40)), spec.name)
        }
        let options = try MirrorProcess.run(["help", "options"])
        XCTAssertEqual(options.status, 0)
        for o in GlobalOptions.specs { XCTAssertTrue(options.stdout.contains("\n  \(o.name)"), o.name) }
        let codes = try MirrorProcess.run(["help", "exit-codes"])
        for status in ExitStatus.allCases { XCTAssertTrue(codes.stdout.contains(status.meaning), "\(status)") }
    }

    func testBadUsageNamesTheToken() throws {
        let cases: [([String], String)] = [
            (["gatt", "unix:/tmp/x", "--frobnicate"], "mirror: unknown option \"--frobnicate\" for mirror gatt\nsee: mirror gatt --help\n"),
            (["gat", "unix:/tmp/x"], "mirror: unknown command \"gat\" (did you mean gatt?)\nsee: mirror --help\n"),
            (["read", "00:11:22:33:44:5Z", "0x12"], "mirror: invalid target \"00:11:22:33:44:5Z\": character 17: 'Z' is not a hexadecimal digit\nsee: mirror read --help\n"),
            (["read", "unix:/tmp/x", "0x12g"], "mirror: invalid handle \"0x12g\": expected a decimal number or 0x hex, as in 18 or 0x0012\nsee: mirror read --help\n"),
            (["write", "unix:/tmp/x", "0x12", "0q"], "mirror: invalid hex value \"0q\": \"q\" at position 2 is not a hex digit; or give text:STRING, u8:N, u16:N, u32:N, i8:N, i16:N, i32:N, or a name the profile gives this characteristic's values\nsee: mirror write --help\n"),
            (["write", "unix:/tmp/x", "0x12", "01", "--long", "--no-response"], "mirror: --no-response and --long cannot be used together\nsee: mirror write --help\n"),
            (["mtu", "unix:/tmp/x", "--mtu", "1000"], "mirror: --mtu: invalid MTU \"1000\": must be 23-517\nsee: mirror mtu --help\n"),
            (["bench", "unix:/tmp/x"], "mirror: missing --handle H (the value handle to write to)\nsee: mirror bench --help\n"),
            (["bench", "--loopback", "--rounds", "0"], "mirror: --rounds: invalid rounds \"0\": must be 1-1000\nsee: mirror bench --help\n"),
            (["listen", "unix:/tmp/x", "0x0"], "mirror: invalid handle \"0x0\": handle 0x0000 is reserved (handles are 0x0001-0xFFFF)\nsee: mirror listen --help\n"),
            (["gatt", "unix:/tmp/x", "--type", "random"], "mirror: --type applies to a device address, not to the unix socket target \"unix:/tmp/x\"\nsee: mirror gatt --help\n"),
            (["mtu", "unix:/tmp/x", "--security", "high"], "mirror: --security applies to a Bluetooth link, not to the unix socket target \"unix:/tmp/x\"\nsee: mirror mtu --help\n"),
            (["discover", "--duration", "soon"], "mirror: --duration: invalid duration \"soon\": expected seconds greater than 0, as in 5, 0.5 or 250ms\nsee: mirror discover --help\n"),
            (["read", "unix:/tmp/x", "0x0003", "--pair"], "mirror: --pair applies to a Bluetooth link, not to the unix socket target \"unix:/tmp/x\"\nsee: mirror read --help\n"),
            (["read", "unix:/tmp/x", "0x0003", "--repair"], "mirror: --repair applies to a Bluetooth link, not to the unix socket target \"unix:/tmp/x\"\nsee: mirror read --help\n"),
            (["pair", "unix:/tmp/x"], "mirror: pairing needs an LE device address: unix:/tmp/x is a unix socket, with no link to pair\nsee: mirror pair --help\n"),
            (["pair", "00:AA:01:01:00:01", "--passkey", "1234567"], "mirror: --passkey: invalid passkey \"1234567\": expected up to six decimal digits, 000000-999999\nsee: mirror pair --help\n"),
            (["pair", "00:AA:01:01:00:01", "--io", "screen"], "mirror: --io: invalid IO capability \"screen\": expected one of display, yesno, keyboard, none, keyboard-display\nsee: mirror pair --help\n"),
            (["read", "unix:/tmp/x"], "mirror: missing NAME|HANDLE|UUID (a characteristic's name (scanState, \"Device Name\"), a handle (18, 0x0012) or a UUID (2a00, uuid:1234, 128-bit form))\nsee: mirror read --help\n"),
        ]
        for (arguments, expected) in cases {
            let run = try MirrorProcess.run(arguments)
            XCTAssertEqual(run.status, ExitStatus.usage.rawValue, arguments.joined(separator: " "))
            XCTAssertEqual(run.stderr, expected)
            XCTAssertEqual(run.stdout, "")
        }
    }

    func testBadUsageAsJSON() throws {
        let run = try MirrorProcess.run(["--json", "write", "unix:/tmp/x", "0x10000", "01"])
        XCTAssertEqual(run.status, 2)
        let error = try run.json()["error"]
        XCTAssertEqual(error?["kind"], "usage")
        XCTAssertEqual(error?["message"], "invalid handle \"0x10000\": larger than 0xFFFF")
        XCTAssertEqual(error?["token"], "0x10000")
        XCTAssertEqual(error?["exitStatus"], 2)
    }
}
