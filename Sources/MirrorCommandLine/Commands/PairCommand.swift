// mirror pair: pairing and bonding through the kernel's management interface, this process as the agent (no
// bluetoothd); the kernel runs SMP (Core Spec 5.4 Vol 3 Part H).
import ATTStack
import Bonding
import CBlueZSocket
import GATTPeer
import Glibc
import HostEnvironment
import JSON
import LineEditor
import LinuxBluetooth
import LinkCore

/// `--io`'s names (bluetoothctl's agent capabilities), one per SMP IO capability (Vol 3 Part H §2.3.2).
enum IOCapabilityName: String, CaseIterable {
    case display, yesno, keyboard, none
    case keyboardDisplay = "keyboard-display"

    var capability: IOCapability { IOCapability(name: rawValue)! }
}

/// Parses a passkey: six decimal digits at most, 0-999999 (Vol 3 Part H §2.3.5.3).
func parsePasskey(_ token: String) throws(UsageError) -> UInt32 {
    guard !token.isEmpty, token.count <= 6, token.allSatisfy({ $0.isASCII && $0.isNumber }), let v = UInt32(token) else {
        throw UsageError("invalid passkey \"\(token)\": expected up to six decimal digits, 000000-999999", token: token)
    }
    return v
}

/// `--io` and `--passkey`: `mirror pair`'s, and `mirror shell --pair`'s for its agent.
let pairingAnswerOptions: [OptionSpec] = [
    .choice("--io", "CAPABILITY", IOCapabilityName.self, help: "this side's IO capability: display, yesno, keyboard, none (default) or keyboard-display"),
    .value("--passkey", "N", help: "the passkey to enter when the peer shows one, or the Numeric Comparison value to accept (off a terminal); other local users see it in /proc/PID/cmdline while mirror runs: prefer --passkey-file"),
    .value("--passkey-file", "FILE", help: "--passkey read from FILE's first line (- for standard input, mirror pair only): not visible to other users"),
]

/// `mirror pair`'s own options beside `pairingAnswerOptions`: what Just Works may do (Vol 3 Part H §2.3.5.1).
let pairPolicyOptions: [OptionSpec] = [
    .flag("--accept-just-works", help: "accept Just Works that the kernel leaves to this host (a peer with a bond here pairing again, or another peer) without asking: off a terminal it is refused otherwise"),
    .flag("--require-mitm", help: "refuse a pairing without MITM protection (Just Works: an unauthenticated key); needs an --io that can show or enter a passkey"),
]

/// The passkey in `path`'s first line (`-`: standard input's): a regular file of at most 64 bytes, opened without
/// following a symlink and without blocking (a FIFO is refused), so the secret never sits on the command line.
public func readPasskeyFile(_ path: String, standardInputAllowed: Bool) throws(UsageError) -> UInt32 {
    let text: String
    if path == "-" {
        guard standardInputAllowed else {
            throw UsageError("- (standard input) is the shell's script or terminal here; give a file", token: path)
        }
        text = readLine() ?? ""
    } else {
        let fd = cbz_open_read_nofollow(path)
        guard fd >= 0 else {
            let e = Errno.current
            throw UsageError("cannot read \(path): \(e.name) (\(e.meaning))", token: path)
        }
        defer { _ = cbz_close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0, st.st_mode & S_IFMT == S_IFREG else {
            throw UsageError("\(path) is not a regular file", token: path)
        }
        var buffer = [UInt8](repeating: 0, count: 65)
        let n = buffer.withUnsafeMutableBytes { cbz_pread(fd, $0.baseAddress, $0.count, 0) }
        guard n >= 0, n <= 64 else { throw UsageError("\(path) holds no passkey (over 64 bytes, or unreadable)", token: path) }
        text = String(decoding: buffer[0..<n], as: UTF8.self)
    }
    let line = text.split(separator: "\n", omittingEmptySubsequences: false).first.map(String.init) ?? ""
    let digits = String(line.filter { $0 != " " && $0 != "\t" && $0 != "\r" })
    do { return try parsePasskey(digits) } catch {
        throw UsageError("the first line of \(path) is not a passkey: expected up to six decimal digits, 000000-999999", token: path)
    }
}

extension Invocation {
    /// `--io` (default NoInputNoOutput: Just Works) and `--passkey`, as `mirror pair` and `mirror shell` take them.
    func pairingAnswers() throws(UsageError) -> (io: IOCapability, passkey: UInt32?) {
        let io = try option("--io") { (s: String) throws(UsageError) in try parseChoice(s, IOCapabilityName.self, what: "IO capability") }?.capability
        try arguments.exclusive(["--passkey", "--passkey-file"])
        let fromFile = try option("--passkey-file") { (s: String) throws(UsageError) in
            try readPasskeyFile(s, standardInputAllowed: arguments.command == "pair")
        }
        if let fromFile { return (io ?? .noInputNoOutput, fromFile) }
        return (io ?? .noInputNoOutput, try option("--passkey") { (s: String) throws(UsageError) in try parsePasskey(s) })
    }
}

let pairCommand = Command(CommandSpec(
    name: "pair",
    summary: "pair and bond with an LE device through the kernel, this process as the agent (no bluetoothd)",
    discussion: """
        Asks the kernel to pair with TARGET (Bluetooth management Pair Device) and answers what the kernel's SMP asks \
        of user space: Just Works is confirmed; a passkey the peer shows is read from the terminal, or given with \
        --passkey; a passkey this side must show is printed; a Numeric Comparison value is asked on the terminal, or \
        accepted when it equals --passkey. --io says what this side can show and enter (default none: Just Works). \
        The adapter is made bondable first, so the kernel keeps the keys for later connections. Prints the method \
        used. Needs CAP_NET_ADMIN (setcap cap_net_raw,cap_net_admin+ep on the binary, or root); a failure names the \
        step, the kernel's status and the link's drop reason. \
        Just Works for TARGET when this host already holds a bond with it (or for any other peer) is asked on the \
        terminal, and refused off one unless --accept-just-works: a device using TARGET's address could take the \
        bond over. Each question waits 25 s at most. Says when the key has no MITM protection (Just Works); \
        --require-mitm refuses such a pairing (exit 4). A bond that names an identity address which already has a \
        bond here is refused unless the stored bond's IRK resolves the address paired with, or --repair replaces it.
        """,
    positionals: [PositionalSpec("TARGET", help: "the device's LE address (--type random for a random address)")],
    options: pairingAnswerOptions + pairPolicyOptions,
    globals: [.adapter, .type, .json, .repair],
    examples: [
        ("mirror pair 00:AA:01:01:00:01", "pair with Just Works on the default adapter"),
        ("mirror pair 00:AA:01:01:00:01 --io keyboard --passkey 123456", "enter the passkey the peer displays"),
    ]
)) { inv in
    let target = try inv.target()
    guard case .bluetooth(let address) = target.target else {
        throw UsageError("pairing needs an LE device address: \(target.target) is a unix socket, with no link to pair",
                         token: "\(target.target)", command: "pair")
    }
    let (io, passkey) = try inv.pairingAnswers()
    let requireMITM = inv.arguments.has("--require-mitm")
    if requireMITM, io == .noInputNoOutput {
        // NoInputNoOutput gives Just Works with every peer (Vol 3 Part H §2.3.5.1, Table 2.8).
        throw UsageError("--require-mitm needs an --io that can show or enter a passkey (display, yesno, keyboard, keyboard-display): with none every pairing is Just Works, without MITM protection",
                         token: "--require-mitm", command: "pair")
    }
    let prompts = Pairing.terminalPrompts(passkey: passkey, console: inv.console,
                                          acceptJustWorks: inv.arguments.has("--accept-just-works"))
    // Coexistence: bluetoothd owns pairing and the keys while it runs (GATTPeer's Pairing.bond refuses then).
    let (outcome, adapter, bond) = try Pairing.bond(address: address, type: target.addressType, adapter: inv.global.adapter, io: io,
                                                    prompts: prompts, dropPrivileges: { Privilege.dropAll($0) }, requireMITM: requireMITM,
                                                    replacing: inv.global.repair, now: Int(time(nil)), note: { inv.console.err("note: \($0)") })
    if inv.global.json {
        inv.console.json(JSONValue.object([
            ("address", .string(outcome.address.description)), ("type", .string(outcome.type.description)),
            ("adapter", .string(adapter.name)), ("method", .string(outcome.method.rawValue)),
            ("alreadyPaired", .bool(outcome.alreadyPaired)), ("bondFile", bond?.file.map { .string($0) } ?? .null),
            ("authenticated", outcome.authenticated.map { .bool($0) } ?? .null),
        ]))
    } else if outcome.alreadyPaired {
        inv.console.out("already paired with \(outcome.address) (\(outcome.type)) on \(adapter.name): the kernel holds its keys")
    } else {
        inv.console.out("paired with \(outcome.address) (\(outcome.type)) on \(adapter.name): \(outcome.method.rawValue)")
        if let line = Pairing.protectionLine(outcome) { inv.console.err(line) }
        if let bond { inv.console.err(bond.text) }
    }
    return .success
}

extension Pairing.AgentSetup {
    /// A connecting command's --pair agent: NoInputNoOutput (Just Works), the terminal prompts, lines on stderr.
    static func standard(console: Console, acceptJustWorks: Bool = false) -> Pairing.AgentSetup {
        Pairing.AgentSetup(io: .noInputNoOutput, prompts: Pairing.terminalPrompts(passkey: nil, console: console, acceptJustWorks: acceptJustWorks),
                           say: { console.err($0) })
    }
}

extension Pairing {
    /// The answers a command gives: `passkey` when given; else, on a terminal, asked there (each within the
    /// answer limit); else refused (the error then says to give --passkey). A passkey to show is printed on stderr.
    /// Just Works left to this host (Confirm_Hint 1) is accepted with `acceptJustWorks`, else asked on a terminal,
    /// else refused.
    static func terminalPrompts(passkey: UInt32?, console: Console, acceptJustWorks: Bool = false,
                                input: TerminalAnswers = .standard()) -> PairingPrompts {
        // Asked on stderr; a question unanswered (its limit, the input's end) is declined, and said so.
        let ask = { @Sendable (question: String) -> String? in
            console.err(question)
            do { return try input.answer(question) } catch {
                console.err("pair: \(error): declined")
                return nil
            }
        }
        return PairingPrompts(
            confirm: { value, peer in
                if let passkey { return passkey == value }
                guard input.isTerminal else { return false }
                return (ask("pair: does \(peer) show \(sixDigits(value))? [y/N] ") ?? "").lowercased().hasPrefix("y")
            },
            passkey: { peer in
                if let passkey { return passkey }
                guard input.isTerminal else { return nil }
                return ask("pair: enter the passkey \(peer) shows: ").flatMap { try? parsePasskey(String($0.filter { !$0.isWhitespace })) }
            },
            display: { value, peer in console.err("pair: type \(sixDigits(value)) on \(peer)") },
            justWorks: { peer in
                if acceptJustWorks { return true }
                guard input.isTerminal else { return false }
                let question = "pair: \(peer) asks to pair with Just Works (no MITM protection) though this host did not ask for it, or holds a bond with it: accept? [y/N] "
                return (ask(question) ?? "").lowercased().hasPrefix("y")
            })
    }

    /// The line `mirror pair` says about the key's protection: Just Works's key is unauthenticated, so a device in
    /// the middle could have paired in the peer's place (Vol 3 Part H §2.3.1, §2.3.5.1); nil for an authenticated key.
    static func protectionLine(_ outcome: PairingOutcome) -> String? {
        guard !outcome.alreadyPaired, outcome.authenticated == false || (outcome.authenticated == nil && outcome.method == .justWorks) else { return nil }
        return "note: no MITM protection: \(outcome.method.rawValue) gives an unauthenticated key (nothing shows the peer is the device you meant); --require-mitm refuses such a pairing"
    }
}
