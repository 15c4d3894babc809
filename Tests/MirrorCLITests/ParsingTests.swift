// The command-line parsers and the argument parser, called directly.
import TestSupport
import XCTest
@testable import MirrorCommandLine
import ATTStack

final class ParsingTests: XCTestCase {
    func usage<T>(_ body: () throws -> T, file: StaticString = #filePath, line: UInt = #line) -> UsageError? {
        do {
            let value = try body()
            XCTFail("expected a usage error, got \(value)", file: file, line: line)
            return nil
        } catch let error as UsageError {
            return error
        } catch {
            XCTFail("expected a usage error, got \(error)", file: file, line: line)
            return nil
        }
    }

    func testHandles() throws {
        XCTAssertEqual(try parseHandle("18"), 18)
        XCTAssertEqual(try parseHandle("0x0012"), 0x12)
        XCTAssertEqual(try parseHandle("0XFFFF"), 0xFFFF)
        XCTAssertEqual(usage { try parseHandle("0x1_2") }?.token, "0x1_2")
        XCTAssertEqual(usage { try parseHandle("0") }?.message, "invalid handle \"0\": handle 0x0000 is reserved (handles are 0x0001-0xFFFF)")
        XCTAssertEqual(usage { try parseHandle("0x10000") }?.message, "invalid handle \"0x10000\": larger than 0xFFFF")
        XCTAssertEqual(usage { try parseHandle("-1") }?.token, "-1")
        XCTAssertEqual(usage { try parseHandle("") }?.token, "")
        XCTAssertEqual(usage { try parseHandle("12a") }?.token, "12a")
    }

    func testAddressesAndTargets() throws {
        XCTAssertEqual(try parseAddress("00:aa:01:01:00:01").description, "00:AA:01:01:00:01")
        let random = try parseTarget("c0:11:22:33:44:55", type: .random)
        XCTAssertEqual(random.description, "C0:11:22:33:44:55 (LE random)")
        XCTAssertEqual(random.addressType, .random)
        XCTAssertEqual(try parseTarget("00:AA:01:01:00:01", type: nil).addressType, .public)
        XCTAssertEqual(try parseTarget("unix:/tmp/sim.sock", type: nil).target, .unix(path: "/tmp/sim.sock"))
        XCTAssertTrue(try parseTarget("unix:/tmp/sim.sock", type: nil).isUnix)
        XCTAssertEqual(usage { try parseAddress("00:AA:01:01:00") }?.token, "00:AA:01:01:00")
        XCTAssertEqual(usage { try parseAddress("00:AA:01:01:0:01") }?.message.hasPrefix("invalid address \"00:AA:01:01:0:01\": character 14"), true)
        XCTAssertEqual(usage { try parseTarget("00:AA:01:01:00:0G", type: nil) }?.message,
                       "invalid target \"00:AA:01:01:00:0G\": character 17: 'G' is not a hexadecimal digit")
        XCTAssertEqual(usage { try parseTarget("unix:", type: nil) }?.token, "unix:")
        XCTAssertEqual(usage { try parseTarget("unix:/tmp/x", type: .random) }?.token, "unix:/tmp/x")
        let long = "unix:/" + String(repeating: "a", count: 120)
        XCTAssertEqual(usage { try parseTarget(long, type: nil) }?.token, long)
    }

    func testHexValues() throws {
        XCTAssertEqual(try parseHexValue("0102ff"), [1, 2, 0xFF])
        XCTAssertEqual(try parseHexValue("0x0102FF"), [1, 2, 0xFF])
        XCTAssertEqual(try parseHexValue("01:02:ff"), [1, 2, 0xFF])
        XCTAssertEqual(try parseHexValue("01 02 ff"), [1, 2, 0xFF])
        XCTAssertEqual(try parseHexValue(""), [])
        XCTAssertEqual(usage { try parseHexValue("01zz") }?.message, "invalid hex value \"01zz\": \"z\" at position 3 is not a hex digit")
        XCTAssertEqual(usage { try parseHexValue("010") }?.message, "invalid hex value \"010\": odd number of hex digits (each byte is two digits)")
        XCTAssertEqual(usage { try parseHexValue("01:2:03") }?.token, "01:2:03")
        XCTAssertEqual(try parseHexValue(String(repeating: "ab", count: 600)).count, 600)
        XCTAssertNotNil(usage { try parseHexValue(String(repeating: "ab", count: 65536)) })
    }

    func testUUIDsAndSelectors() throws {
        XCTAssertEqual(try parseUUID("2A00").description, "2a00")
        XCTAssertEqual(try parseUUID("0x2a00").description, "2a00")
        XCTAssertEqual(try parseUUID("0000180A-0000-1000-8000-00805F9B34FB").description, "180a")
        XCTAssertEqual(try parseUUID("6e400001-b5a3-f393-e0a9-e50e24dcca9e").description, "6e400001-b5a3-f393-e0a9-e50e24dcca9e")
        XCTAssertEqual(usage { try parseUUID("2a0") }?.token, "2a0")
        XCTAssertEqual(try parseHandleOrUUID("18"), .handle(18))
        XCTAssertEqual(try parseHandleOrUUID("0x0012"), .handle(0x12))
        XCTAssertEqual(try parseHandleOrUUID("2a00"), .uuid(.bit16(0x2A00)))
        XCTAssertEqual(try parseHandleOrUUID("uuid:1234"), .uuid(.bit16(0x1234)))
        XCTAssertEqual(usage { try parseHandleOrUUID("zz") }?.token, "zz")
    }

    func testNumbersAndDurations() throws {
        XCTAssertEqual(try parseSeconds("5"), 5)
        XCTAssertEqual(try parseSeconds("0.5"), 0.5)
        XCTAssertEqual(try parseSeconds("250ms"), 0.25, accuracy: 1e-9)
        XCTAssertEqual(try parseSeconds("2s"), 2)
        XCTAssertEqual(usage { try parseSeconds("0") }?.token, "0")
        XCTAssertEqual(usage { try parseSeconds("abc") }?.token, "abc")
        XCTAssertEqual(try parseMTU("247"), 247)
        XCTAssertEqual(usage { try parseMTU("22") }?.message, "invalid MTU \"22\": must be 23-517")
        XCTAssertEqual(try parseAdapter("hci1"), "hci1")
        XCTAssertEqual(try parseAdapter("0"), "hci0")
        XCTAssertEqual(usage { try parseAdapter("hcix") }?.token, "hcix")
    }

    // MARK: the argument parser

    let specs = [
        CommandSpec(name: "write", summary: "w",
                    positionals: [PositionalSpec("TARGET", help: "t"), PositionalSpec("HANDLE", help: "h"), PositionalSpec("HEX", help: "x")],
                    options: [.flag("--long", help: "l"), .value("--count", "N", help: "c")],
                    globals: GlobalOptionName.connection, examples: []),
        CommandSpec(name: "listen", summary: "l",
                    positionals: [PositionalSpec("TARGET", help: "t"), PositionalSpec("HANDLE", optional: true, variadic: true, help: "h")],
                    globals: [.json], examples: []),
        CommandSpec(name: "link", summary: "k", positionals: [PositionalSpec("TARGET", help: "t")],
                    globals: GlobalOptionName.connection, examples: []),
    ]

    func run(_ args: [String]) throws(UsageError) -> (CommandSpec, ParsedArguments, GlobalOptions) {
        guard case .run(let spec, let parsed, let global) = try parseCommandLine(args, commands: specs) else {
            throw UsageError("not a run")
        }
        return (spec, parsed, global)
    }

    func testParsesCommandsOptionsAndGlobalsAnywhere() throws {
        let (spec, parsed, global) = try run(["--json", "write", "unix:/x", "--mtu=100", "0x12", "--long", "01", "--count", "3", "--timeout", "2.5"])
        XCTAssertEqual(spec.name, "write")
        XCTAssertEqual(parsed.positionals, ["unix:/x", "0x12", "01"])
        XCTAssertTrue(parsed.has("--long"))
        XCTAssertEqual(parsed.string("--count"), "3")
        XCTAssertEqual(global, GlobalOptions(timeout: 2.5, mtu: 100, json: true))
        let (_, afterDash, _) = try run(["listen", "unix:/x", "--", "-5"])
        XCTAssertEqual(afterDash.positionals, ["unix:/x", "-5"])
    }

    /// The link options: ranges and steps from Core Spec Vol 4 Part E §7.8.18, §7.8.33, §7.8.49, each refusal naming
    /// the allowed range (exit 2 as bad usage).
    func testLinkOptions() throws {
        XCTAssertEqual(try parseConnectionInterval("7.5"), 7.5...7.5)
        XCTAssertEqual(try parseConnectionInterval("15-30"), 15...30)
        XCTAssertEqual(try parseConnectionInterval("4000"), 4000...4000)
        XCTAssertEqual(try parseConnectionInterval("8.75"), 8.75...8.75)
        XCTAssertEqual(usage { try parseConnectionInterval("7") }?.message,
                       "invalid connection interval \"7\": 7 ms is outside 7.5-4000 ms in steps of 1.25 ms")
        XCTAssertEqual(usage { try parseConnectionInterval("4001.25") }?.message,
                       "invalid connection interval \"4001.25\": 4001.25 ms is outside 7.5-4000 ms in steps of 1.25 ms")
        XCTAssertEqual(usage { try parseConnectionInterval("8") }?.message,
                       "invalid connection interval \"8\": 8 ms is not a multiple of 1.25 ms (7.5-4000 ms in steps of 1.25 ms)")
        XCTAssertEqual(usage { try parseConnectionInterval("30-15") }?.message,
                       "invalid connection interval \"30-15\": MIN 30 ms is larger than MAX 15 ms")
        XCTAssertEqual(usage { try parseConnectionInterval("fast") }?.token, "fast")
        XCTAssertEqual(usage { try parseConnectionInterval("15-") }?.token, "15-")
        XCTAssertEqual(try parseSupervisionTimeout("100"), 100)
        XCTAssertEqual(try parseSupervisionTimeout("32000"), 32000)
        XCTAssertEqual(usage { try parseSupervisionTimeout("90") }?.message, "invalid supervision timeout \"90\": must be 100-32000")
        XCTAssertEqual(usage { try parseSupervisionTimeout("105") }?.message,
                       "invalid supervision timeout \"105\": 105 ms is not a multiple of 10 ms (100-32000 ms in steps of 10 ms)")

        let (_, _, global) = try run(["link", "unix:/x", "--interval", "7.5-15", "--latency", "4", "--supervision-timeout", "2000",
                                      "--phy", "2m", "--data-length", "251"])
        XCTAssertEqual(global.link.interval, 7.5...15)
        XCTAssertEqual(global.link.latency, 4)
        XCTAssertEqual(global.link.supervisionTimeoutMilliseconds, 2000)
        XCTAssertEqual(global.link.phy, .le2M)
        XCTAssertEqual(global.link.dataLength, 251)
        XCTAssertTrue(global.link.asksForConnectionUpdate)
        XCTAssertTrue(try run(["link", "unix:/x"]).2.link.isEmpty)
        XCTAssertEqual(usage { try run(["listen", "unix:/x", "--phy", "2m"]) }?.message, "option --phy does not apply to mirror listen")
        for (args, message) in [
            (["--latency", "500"], "--latency: invalid peripheral latency \"500\": must be 0-499"),
            (["--data-length", "26"], "--data-length: invalid data length \"26\": must be 27-251"),
            (["--phy", "3m"], "--phy: invalid PHY \"3m\": expected one of 1m, 2m, coded"),
            (["--interval", "50", "--latency", "1", "--supervision-timeout", "200"],
             "--supervision-timeout: 200 ms must be larger than (1 + latency 1) x interval max 50 ms x 2 = 200 ms (Core Spec Vol 6 Part B §4.5.2)"),
        ] {
            XCTAssertEqual(usage { try run(["link", "unix:/x"] + args) }?.message, message)
        }
    }

    /// --bearers: CID 4 and up to four Enhanced ATT bearers; 1 when not given; a count outside 1-5 or not a
    /// number is refused naming the range (exit 2 as bad usage).
    func testBearersOption() throws {
        XCTAssertEqual(try run(["link", "unix:/x"]).2.bearers, 1)
        XCTAssertEqual(try run(["link", "unix:/x", "--bearers", "3"]).2.bearers, 3)
        XCTAssertEqual(try run(["--bearers=5", "link", "unix:/x"]).2.bearers, 5)
        XCTAssertEqual(try run(["link", "unix:/x", "--bearers", "1"]).2, try run(["link", "unix:/x"]).2)
        for (token, message) in [
            ("0", "--bearers: invalid bearer count \"0\": must be 1-5"),
            ("6", "--bearers: invalid bearer count \"6\": must be 1-5"),
            ("two", "--bearers: invalid bearer count \"two\": expected a whole number"),
            ("-1", "--bearers: invalid bearer count \"-1\": expected a whole number"),
        ] {
            let error = usage { try run(["link", "unix:/x", "--bearers", token]) }
            XCTAssertEqual(error?.message, message)
            XCTAssertEqual(error?.token, token)
        }
        XCTAssertEqual(usage { try run(["listen", "unix:/x", "--bearers", "2"]) }?.message, "option --bearers does not apply to mirror listen")
        let shell = try run(["link", "unix:/x", "--bearers", "2"])
        XCTAssertEqual(GlobalOptions().overlaid(by: shell.2, given: shell.1.givenGlobals).bearers, 2)
        XCTAssertEqual(GlobalOptions().overlaid(by: shell.2, given: []).bearers, 1)
    }

    func testHelpForms() throws {
        guard case .toolHelp = try parseCommandLine([], commands: specs) else { return XCTFail("no args is help") }
        guard case .toolHelp = try parseCommandLine(["--help"], commands: specs) else { return XCTFail("--help") }
        guard case .commandHelp(let s1) = try parseCommandLine(["write", "--help"], commands: specs), s1.name == "write"
        else { return XCTFail("write --help") }
        // `help COMMAND` is the command's whole page; `help options` and `help exit-codes` the shared pages (issue 37).
        guard case .commandManual(let s2) = try parseCommandLine(["help", "listen"], commands: specs), s2.name == "listen"
        else { return XCTFail("help listen") }
        guard case .helpTopic(.options) = try parseCommandLine(["help", "options"], commands: specs) else { return XCTFail("help options") }
        guard case .helpTopic(.exitCodes) = try parseCommandLine(["help", "exit-codes"], commands: specs) else { return XCTFail("help exit-codes") }
        guard case .version = try parseCommandLine(["--version"], commands: specs) else { return XCTFail("--version") }
    }

    func testRefusesWithTheWrongToken() {
        XCTAssertEqual(usage { try run(["wirte"]) }?.message, "unknown command \"wirte\" (did you mean write?)")
        XCTAssertEqual(usage { try run(["write", "unix:/x", "1", "01", "--lnog"]) }?.message,
                       "unknown option \"--lnog\" for mirror write (did you mean --long?)")
        XCTAssertEqual(usage { try run(["write", "unix:/x", "1", "01", "--lnog"]) }?.token, "--lnog")
        XCTAssertEqual(usage { try run(["write", "unix:/x", "1", "01", "--count"]) }?.message, "option --count needs a value (N)")
        XCTAssertEqual(usage { try run(["write", "unix:/x", "1", "01", "--long=yes"]) }?.message,
                       "option --long takes no value, but was given \"yes\"")
        XCTAssertEqual(usage { try run(["write", "unix:/x", "1", "01", "--count", "1", "--count", "2"]) }?.message,
                       "option --count was given more than once")
        XCTAssertEqual(usage { try run(["write", "unix:/x", "1"]) }?.message, "missing HEX (x)")
        XCTAssertEqual(usage { try run(["write", "unix:/x", "1", "01", "extra"]) }?.token, "extra")
        XCTAssertEqual(usage { try run(["listen", "unix:/x", "--mtu", "50"]) }?.message, "option --mtu does not apply to mirror listen")
        XCTAssertEqual(usage { try run(["--trace", "listen", "unix:/x"]) }?.message, "option --trace does not apply to mirror listen")
        XCTAssertEqual(usage { try run(["write", "unix:/x", "1", "01", "--mtu", "600"]) }?.message, "--mtu: invalid MTU \"600\": must be 23-517")
        XCTAssertEqual(usage { try run(["write", "unix:/x", "1", "01", "--mtu", "600"]) }?.token, "600")
        XCTAssertEqual(usage { try run(["write", "unix:/x", "1", "01", "--security", "max"]) }?.message,
                       "--security: invalid security level \"max\": expected one of low, medium, high")
    }

    func testExclusiveOptions() throws {
        let parsed = ParsedArguments(command: "write", flags: ["--long", "--reliable"])
        XCTAssertEqual(usage { try parsed.exclusive(["--no-response", "--long", "--reliable"]) }?.message,
                       "--long and --reliable cannot be used together")
        XCTAssertNoThrow(try ParsedArguments(command: "write", flags: ["--long"]).exclusive(["--long", "--reliable"]))
    }
}
