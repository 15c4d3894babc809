// hostile-peer SCENARIO unix:PATH: a hostile ATT server for reliability tests (here and in the VM).
import Foundation
import HostilePeer
import ATTStack
import LinuxBluetooth
import LinkCore

// SIGINT and SIGTERM stay pending from here on (before any thread exists) until the wait below takes one.
StopSignals.block()

let usage = """
    usage: hostile-peer SCENARIO unix:PATH [--on OPCODES] [--nth N] [--count N] [--delay-ms N]
           hostile-peer --fault RULE-ID unix:PATH [options]   (the scenario that breaks that `mirror check` rule)
           hostile-peer --list
      --on OPCODES   request opcodes to attack, comma-separated hex (e.g. 0x0a,0x0c); default: the scenario's
      --nth N        attack only the Nth attacked request (close defaults to the first)
      --count N      notifications of notification-flood (1000000), indications of indication-storm (100000)
      --delay-ms N   how late late-response answers (2000)
    Prints "hostile-peer: SCENARIO listening on unix:PATH" once it accepts; runs until SIGINT or SIGTERM.
    """

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data(("hostile-peer: " + message + "\n").utf8))
    exit(2)
}

var args = Array(CommandLine.arguments.dropFirst())
if args == ["--list"] {
    // Columns as wide as the longest name: padding(toLength:) cuts a longer one.
    let width = HostileScenario.allCases.map(\.rawValue.count).max()!, ruleWidth = HostileScenario.faults.map(\.rule.count).max()!
    func padded(_ s: String, _ w: Int) -> String { s + String(repeating: " ", count: max(0, w - s.count)) }
    for s in HostileScenario.allCases { say("\(padded(s.rawValue, width)) \(s.summary)") }
    say("")
    say("--fault RULE-ID: the scenario that breaks a rule of `mirror check` (mirror-sim --fault breaks every rule):")
    for f in HostileScenario.faults { say("  \(padded(f.rule, ruleWidth)) \(f.scenario.rawValue)") }
    exit(0)
}
// --fault RULE-ID: the scenario named by the rule it breaks.
if args.first == "--fault" {
    guard args.count >= 2 else { fail("--fault needs a rule id (hostile-peer --list)") }
    guard let fault = HostileScenario.faults.first(where: { $0.rule == args[1] }) else {
        fail("no scenario breaks the rule \(args[1]); these do: \(HostileScenario.faults.map(\.rule).joined(separator: ", ")) (mirror-sim --fault RULE-ID breaks every rule of mirror check)")
    }
    args = [fault.scenario.rawValue] + args.dropFirst(2)
}
if args.contains("--help") || args.contains("-h") { say(usage); exit(0) }
guard args.count >= 2 else { fail("expected SCENARIO and unix:PATH\n" + usage) }
guard let scenario = HostileScenario(rawValue: args[0]) else {
    fail("unknown scenario \(args[0]); one of: " + HostileScenario.allCases.map(\.rawValue).joined(separator: ", "))
}
guard args[1].hasPrefix("unix:"), args[1].count > 5 else { fail("expected unix:PATH, got \(args[1])") }
let path = String(args[1].dropFirst(5))
/// The options after SCENARIO and unix:PATH.
func parseOptions(_ args: ArraySlice<String>, _ scenario: HostileScenario) -> HostileOptions {
    var options = HostileOptions(scenario)
    var rest = args
    func value(_ name: String) -> String {
        guard let v = rest.popFirst() else { fail("\(name) needs a value") }
        return v
    }
    func number(_ name: String) -> Int {
        let v = value(name)
        guard let n = Int(v), n >= 0 else { fail("\(name): expected a whole number, got \(v)") }
        return n
    }
    while let arg = rest.popFirst() {
        switch arg {
        case "--on":
            var set: Set<UInt8> = []
            for part in value("--on").split(separator: ",") {
                let t = part.lowercased().hasPrefix("0x") ? String(part.dropFirst(2)) : String(part)
                guard let b = UInt8(t, radix: 16) else { fail("--on: not a hex opcode: \(part)") }
                set.insert(b)
            }
            options.victims = set
        case "--nth": options.nth = number("--nth")
        case "--count": options.count = number("--count")
        case "--delay-ms": options.delayMilliseconds = number("--delay-ms")
        default: fail("unknown option \(arg)\n" + usage)
        }
    }
    return options
}

func say(_ line: String) { FileHandle.standardOutput.write(Data((line + "\n").utf8)) }

let options = parseOptions(args[2...], scenario)
let peer: HostilePeer
do { peer = try HostilePeer(path: path, options: options) } catch { fail("\(error)") }
peer.start()
say("hostile-peer: \(scenario.rawValue) listening on \(peer.target)")
_ = StopSignals.wait()
peer.close()
let s = peer.stats
say("hostile-peer: \(s.connections) connections, \(s.requests) requests, \(s.notificationsSent) notifications, \(s.indicationsSent) indications sent")
