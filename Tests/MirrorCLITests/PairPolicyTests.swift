// Issue 36 (the agent): mirror pair's terminal questions have the shell's deadline, Just Works the kernel leaves to
// this host (Confirm_Hint 1) is asked or refused, --require-mitm and the MITM line, and their errors' exit statuses.
import Foundation
import Bonding
import GATTPeer
import LineEditor
import LinkCore
import LinuxBluetooth
@testable import MirrorCommandLine
import XCTest

final class PairPolicyTests: XCTestCase {
    let peer = try! BluetoothAddress(parsing: "00:AA:01:01:00:01")

    /// A pipe standing for the terminal: answers written by the test, and stderr captured.
    final class Terminal: @unchecked Sendable {
        var input: [Int32] = [0, 0]
        var errors: [Int32] = [0, 0]
        init() {
            XCTAssertEqual(pipe(&input), 0)
            XCTAssertEqual(pipe(&errors), 0)
            _ = fcntl(errors[0], F_SETFL, O_NONBLOCK)
        }
        deinit { for fd in input + errors { close(fd) } }
        func type(_ text: String) { _ = text.withCString { write(input[1], $0, strlen($0)) } }
        /// The line read from the pipe, a byte at a time (no buffering beyond the line).
        var readLine: @Sendable () -> String? {
            let fd = input[0]
            return {
                var bytes: [UInt8] = []
                var b: UInt8 = 0
                while read(fd, &b, 1) == 1 { if b == 0x0A { return String(decoding: bytes, as: UTF8.self) }; bytes.append(b) }
                return bytes.isEmpty ? nil : String(decoding: bytes, as: UTF8.self)
            }
        }
        func answers(limit: Duration, isTerminal: Bool = true) -> TerminalAnswers {
            TerminalAnswers(isTerminal: isTerminal, fd: input[0], limit: limit, readLine: readLine)
        }
        var console: Console { Console(outFD: errors[1], errFD: errors[1]) }
        var said: [String] {
            var buffer = [UInt8](repeating: 0, count: 8192)
            let n = read(errors[0], &buffer, buffer.count)
            return n <= 0 ? [] : String(decoding: buffer.prefix(n), as: UTF8.self).split(separator: "\n").map(String.init)
        }
    }

    /// mirror pair's questions waited for ever (poll with -1): now each waits the shell's limit (25 s,
    /// EditorQuestions.answerLimit), then is declined, saying what it waited for.
    func testATerminalQuestionUnansweredWithinItsLimitIsDeclinedNamingTheQuestion() throws {
        XCTAssertEqual(TerminalAnswers.standard().limit, EditorQuestions.answerLimit)
        XCTAssertEqual(EditorQuestions.answerLimit, .seconds(25))
        let terminal = Terminal()
        let answers = terminal.answers(limit: .milliseconds(100))
        let started = ContinuousClock.now
        XCTAssertThrowsError(try answers.answer("pair: enter the passkey 00:AA:01:01:00:01 shows: ")) { error in
            XCTAssertEqual("\(error)", "no answer within 100 ms to \"pair: enter the passkey 00:AA:01:01:00:01 shows: \"")
        }
        let took = ContinuousClock.now - started
        XCTAssertGreaterThanOrEqual(took, .milliseconds(95))
        XCTAssertLessThan(took, .seconds(5))
        // Through the prompts: the comparison and the passkey are declined, and said so on stderr.
        let prompts = Pairing.terminalPrompts(passkey: nil, console: terminal.console, input: answers)
        XCTAssertFalse(prompts.confirm(123456, peer))
        XCTAssertNil(prompts.passkey(peer))
        XCTAssertEqual(terminal.said, [
            "pair: does 00:AA:01:01:00:01 show 123456? [y/N] ",
            "pair: no answer within 100 ms to \"pair: does 00:AA:01:01:00:01 show 123456? [y/N] \": declined",
            "pair: enter the passkey 00:AA:01:01:00:01 shows: ",
            "pair: no answer within 100 ms to \"pair: enter the passkey 00:AA:01:01:00:01 shows: \": declined",
        ])
        // Answered in time: the line is the answer.
        terminal.type("y\n012345\n")
        XCTAssertTrue(prompts.confirm(123456, peer))
        XCTAssertEqual(prompts.passkey(peer), 12345)
    }

    /// Just Works left to this host (Confirm_Hint 1): off a terminal refused, unless --accept-just-works; on one
    /// asked, and only "y" accepts.
    func testJustWorksLeftToThisHostIsAskedOnATerminalAndRefusedOffOne() throws {
        let terminal = Terminal()
        let off = Pairing.terminalPrompts(passkey: nil, console: terminal.console, input: terminal.answers(limit: .seconds(5), isTerminal: false))
        XCTAssertFalse(off.justWorks(peer))
        let accepting = Pairing.terminalPrompts(passkey: nil, console: terminal.console, acceptJustWorks: true,
                                                input: terminal.answers(limit: .seconds(5), isTerminal: false))
        XCTAssertTrue(accepting.justWorks(peer))
        XCTAssertEqual(terminal.said, [], "nothing asked off a terminal")
        let on = Pairing.terminalPrompts(passkey: nil, console: terminal.console, input: terminal.answers(limit: .milliseconds(200)))
        terminal.type("y\nn\n")
        XCTAssertTrue(on.justWorks(peer))
        XCTAssertFalse(on.justWorks(peer))
        XCTAssertFalse(on.justWorks(peer), "unanswered within the limit: declined")
        let said = terminal.said
        XCTAssertEqual(said.first, "pair: 00:AA:01:01:00:01 asks to pair with Just Works (no MITM protection) though this host did not ask for it, or holds a bond with it: accept? [y/N] ")
        XCTAssertTrue(said.last?.hasPrefix("pair: no answer within 200 ms to ") ?? false, "\(said)")
    }

    /// The shell's agent asks Just Works at its prompt (through the editor), refuses it off a terminal.
    func testTheShellsAgentAsksJustWorksAtThePromptAndRefusesItOffATerminal() {
        let editor = FakeEditor(isTerminal: true)
        let questions = EditorQuestions(editor: editor, prompt: "mirror> ", limit: .milliseconds(200))
        let prompts = questions.pairingPrompts(passkey: nil, say: { _ in })
        editor.type(.line("y"))
        XCTAssertTrue(prompts.justWorks(peer))
        XCTAssertEqual(editor.state.withLock { $0.remember }, [false], "the answer is not kept in the history")
        editor.type(.line("no"))
        XCTAssertFalse(prompts.justWorks(peer))
        let script = EditorQuestions(editor: FakeEditor(isTerminal: false), prompt: "mirror> ")
        XCTAssertFalse(script.pairingPrompts(passkey: nil, say: { _ in }).justWorks(peer))
        XCTAssertTrue(script.pairingPrompts(passkey: nil, acceptJustWorks: true, say: { _ in }).justWorks(peer))
    }

    /// mirror pair says when the key has no MITM protection; --require-mitm with --io none is bad usage (every
    /// pairing would be Just Works), and its refusal and a refused bond are this host's refusals (exit 4).
    func testMITMIsReportedAndRequiredAndTheNewErrorsAreLocalRefusals() throws {
        func ltk(_ type: LongTermKeyType) -> ManagementEvent {
            .newLongTermKey(index: 0, storeHint: true, key: LongTermKey(address: peer, addressType: .public, type: type, central: true,
                                                                      encryptionSize: 16, ediv: 0, rand: 0, value: Array(repeating: 1, count: 16)))
        }
        var justWorks = PairingOutcome(address: peer, type: .public, method: .justWorks, alreadyPaired: false)
        justWorks.keyEvents = [ltk(.unauthenticatedP256)]
        XCTAssertEqual(Pairing.protectionLine(justWorks), "note: no MITM protection: Just Works gives an unauthenticated key (nothing shows the peer is the device you meant); --require-mitm refuses such a pairing")
        var passkey = PairingOutcome(address: peer, type: .public, method: .passkeyEntry, alreadyPaired: false)
        passkey.keyEvents = [ltk(.authenticatedP256)]
        XCTAssertNil(Pairing.protectionLine(passkey))

        let usage = try MirrorProcess.run(["pair", "00:11:22:33:44:55", "--require-mitm"])
        XCTAssertEqual(usage.status, 2, usage.stderr)
        XCTAssertTrue(usage.stderr.contains("--require-mitm needs an --io that can show or enter a passkey"), usage.stderr)

        let mitm = ErrorReport(PairingWithoutMITMError(peer: "00:AA:01:01:00:01 (public)", adapter: "hci0", method: .justWorks))
        XCTAssertEqual(mitm.status, .localRefusal)
        XCTAssertEqual(mitm.message, "pairing with 00:AA:01:01:00:01 (public) on hci0 reached Just Works, whose key is unauthenticated (no MITM protection), and --require-mitm asks for an authenticated one: no bond was saved and the kernel's keys for it were removed (Unpair Device); give both sides an IO capability that can show or enter a passkey (--io keyboard-display)")
        XCTAssertTrue(mitm.json.compact.contains("\"authenticated\":false"), mitm.json.compact)
        let overwrite = ErrorReport(BondOverwriteError(identity: peer, pairedThrough: try BluetoothAddress(parsing: "4F:00:00:12:34:56"),
                                                       file: "/x/bonds/A/00:AA:01:01:00:01.json", storedHasIRK: true))
        XCTAssertEqual(overwrite.status, .localRefusal)
        XCTAssertTrue(overwrite.json.compact.contains("\"pairedThrough\":\"4F:00:00:12:34:56\""), overwrite.json.compact)
    }
}
