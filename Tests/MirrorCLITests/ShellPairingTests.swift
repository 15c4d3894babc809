// mirror shell --pair's questions (LineEditor's EditorQuestions, the CLI's pairingPrompts) over a fake editor: a question asked while a line runs is read
// by the agent, one asked at the prompt is answered by the loop's next line, one reader at a time, the time limit on
// both paths, Ctrl-C, an invalid passkey, and off a terminal the refusal that names --passkey; the option's usage.
import Foundation
import GATTClient
import LineEditor
import LinkCore
import LinuxBluetooth
@testable import MirrorCommandLine
import XCTest

/// A line editor whose lines the test types: it records the prompts set, the lines printed above and how many
/// reads ran at once.
final class FakeEditor: PromptingEditor, Sendable {
    struct State {
        var prompts: [String] = []
        var printed: [String] = []
        var typed: [LineEvent] = []
        var readers = 0
        var mostReaders = 0
        var reads = 0
        var dropped = 0
        /// Each setRememberNextLine, in order.
        var remember: [Bool] = []
    }

    let isTerminal: Bool
    let state = Lock(State())

    init(isTerminal: Bool) { self.isTerminal = isTerminal }

    func printAbove(_ line: String) { state.withLock { $0.printed.append(line) } }
    func setPrompt(_ prompt: String) { state.withLockBroadcasting { $0.prompts.append(prompt) } }
    func dropLine() { state.withLock { $0.dropped += 1 } }
    func setRememberNextLine(_ remember: Bool) { state.withLock { $0.remember.append(remember) } }
    /// Every typed event is read through `readEvent`, as at a terminal.
    func bufferedEvent() -> LineEvent? { nil }

    /// The next typed event, or a timeout at `timeout` as LineEditor's (10 s when none: the test's bound).
    func readEvent(timeout: Duration?) throws(LineEditorError) -> LineEvent {
        state.withLockBroadcasting { s in
            s.readers += 1
            s.reads += 1
            s.mostReaders = max(s.mostReaders, s.readers)
        }
        let limit = timeout ?? .seconds(10)
        let event = state.wait(until: { s -> LineEvent? in s.typed.isEmpty ? nil : s.typed.removeFirst() },
                               timeoutNanoseconds: Int(limit.nanosecondsClamped))
        state.withLockBroadcasting { $0.readers -= 1 }
        guard let event else { throw .timeout(GATTTimeoutError(waitingFor: "a line at the prompt", after: limit)) }
        return event
    }

    func type(_ event: LineEvent) { state.withLockBroadcasting { $0.typed.append(event) } }

    /// Waits (5 s at most) until `condition` holds of the state.
    func await(_ condition: @escaping (State) -> Bool, file: StaticString = #filePath, line: UInt = #line) {
        let held = state.wait(until: { condition($0) ? true : nil }, timeoutNanoseconds: 5_000_000_000)
        XCTAssertEqual(held, true, "the fake editor's state never got there: \(state.withLock { $0 })", file: file, line: line)
    }
}

/// Runs `body` on a thread of its own (the agent's, or the shell loop's); `value` waits for its result.
final class Background<T: Sendable>: Sendable {
    private let result = Lock<T?>(nil)
    init(_ body: @escaping @Sendable () -> T) {
        Thread.detachNewThread { [result] in
            let r = body()
            result.withLockBroadcasting { $0 = r }
        }
    }
    func value(file: StaticString = #filePath, line: UInt = #line) -> T? {
        let r = result.wait(until: { $0 }, timeoutNanoseconds: 10_000_000_000)
        if r == nil { XCTFail("the background thread did not finish within 10 s", file: file, line: line) }
        return r
    }
}

final class ShellPairingTests: XCTestCase {
    let peer = try! BluetoothAddress(parsing: "00:AA:01:01:00:01")
    let shellPrompt = "mirror 00:AA:01:01:00:01> "

    func testAPasskeyAskedWhileALineRunsIsReadByTheAgentAtItsPromptAndTheShellsComesBack() {
        let editor = FakeEditor(isTerminal: true)
        let questions = EditorQuestions(editor: editor, prompt: shellPrompt)
        let said = Lock<[String]>([])
        let prompts = questions.pairingPrompts(passkey: nil, say: { line in said.withLock { $0.append(line) } })
        editor.type(.line(" 012345 "))
        // The shell's loop is not reading (a `pair` line runs): the agent's thread reads the answer itself.
        XCTAssertEqual(prompts.passkey(peer), 12345)
        XCTAssertEqual(editor.state.withLock { $0.prompts }, ["pair: enter the passkey 00:AA:01:01:00:01 shows: ", shellPrompt])
        // Issue 36: the passkey typed is kept out of the history.
        XCTAssertEqual(editor.state.withLock { $0.remember }, [false])
        XCTAssertEqual(editor.state.withLock { $0.reads }, 1)
        // A passkey to show is printed above the line; a comparison answered y is confirmed.
        prompts.display(4321, peer)
        XCTAssertEqual(said.withLock { $0 }, ["pair: type 004321 on 00:AA:01:01:00:01"])
        editor.type(.line("y"))
        XCTAssertTrue(prompts.confirm(123456, peer))
        XCTAssertEqual(editor.state.withLock { $0.prompts.suffix(2) }, ["pair: does 00:AA:01:01:00:01 show 123456? [y/N] ", shellPrompt])
        editor.type(.line("n"))
        XCTAssertFalse(prompts.confirm(123456, peer))
    }

    func testAQuestionAtThePromptIsAnsweredByTheLoopsNextLineWithOneReaderAtATime() {
        let editor = FakeEditor(isTerminal: true)
        let questions = EditorQuestions(editor: editor, prompt: shellPrompt)
        let prompts = questions.pairingPrompts(passkey: nil, say: { _ in })
        let peer = self.peer
        // The loop waits at the prompt; the peer starts a pairing (a Security Request): the question is posted.
        let loop = Background { Result { () throws(LineEditorError) in try questions.readLine() } }
        editor.await { $0.readers == 1 }
        let agent = Background { prompts.passkey(peer) }
        editor.await { $0.prompts.last == "pair: enter the passkey 00:AA:01:01:00:01 shows: " }
        editor.type(.line("654321"))
        XCTAssertEqual(agent.value(), 654321, "the loop's line answered the question")
        XCTAssertEqual(editor.state.withLock { $0.prompts.last }, shellPrompt, "the shell's prompt came back")
        // The loop's read goes on: the next line is a command.
        editor.type(.line("read 0x0003"))
        XCTAssertEqual(try loop.value()?.get(), .line("read 0x0003"))

        // While the agent reads (a line runs), the loop's next read waits for it: never two readers.
        editor.state.withLock { $0.typed = [] }
        let agent2 = Background { prompts.passkey(peer) }
        editor.await { $0.readers == 1 && $0.prompts.last == "pair: enter the passkey 00:AA:01:01:00:01 shows: " }
        let loop2 = Background { Result { () throws(LineEditorError) in try questions.readLine() } }
        Thread.sleep(forTimeInterval: 0.1)
        XCTAssertEqual(editor.state.withLock { $0.reads }, 3, "the loop did not read while the agent did")
        editor.type(.line("111111"))
        XCTAssertEqual(agent2.value(), 111111)
        editor.await { $0.readers == 1 && $0.reads == 4 }
        editor.type(.end)
        XCTAssertEqual(try loop2.value()?.get(), .end)
        XCTAssertEqual(editor.state.withLock { $0.mostReaders }, 1)
        // The shell's prompt set during a question waits for its end.
        let agent3 = Background { prompts.passkey(peer) }
        editor.await { $0.readers == 1 }
        questions.setShellPrompt("mirror (disconnected)> ")
        XCTAssertEqual(editor.state.withLock { $0.prompts.last }, "pair: enter the passkey 00:AA:01:01:00:01 shows: ")
        editor.type(.interrupt)
        XCTAssertEqual(agent3.value(), .some(nil), "Ctrl-C refuses")
        XCTAssertEqual(editor.state.withLock { $0.prompts.last }, "mirror (disconnected)> ")
    }

    func testAQuestionUnansweredWithinItsLimitIsDeclinedOnBothPaths() throws {
        let editor = FakeEditor(isTerminal: true)
        let questions = EditorQuestions(editor: editor, prompt: shellPrompt, limit: .milliseconds(100))
        let said = Lock<[String]>([])
        let prompts = questions.pairingPrompts(passkey: nil, say: { line in said.withLock { $0.append(line) } })
        // The agent reads (no line runs): the editor's timeout, the line dropped, the prompt back.
        XCTAssertFalse(prompts.confirm(123456, peer))
        XCTAssertEqual(said.withLock { $0 }, ["pair: no answer within 100 ms to \"pair: does 00:AA:01:01:00:01 show 123456? [y/N] \": the comparison is declined"])
        XCTAssertEqual(editor.state.withLock { $0.dropped }, 1)
        XCTAssertEqual(editor.state.withLock { $0.prompts.last }, shellPrompt)
        // Posted to the loop at the prompt: the question's own limit (shell.pairQuestion), withdrawn, the prompt back.
        let loop = Background { Result { () throws(LineEditorError) in try questions.readLine() } }
        editor.await { $0.readers == 1 }
        XCTAssertThrowsError(try questions.ask("pair: enter the passkey 00:AA:01:01:00:01 shows: ")) { error in
            XCTAssertEqual(error as? ShellQuestionError, .timedOut(question: "pair: enter the passkey 00:AA:01:01:00:01 shows: ", after: .milliseconds(100)))
            XCTAssertEqual("\(error)", "no answer within 100 ms to \"pair: enter the passkey 00:AA:01:01:00:01 shows: \"")
        }
        XCTAssertEqual(editor.state.withLock { $0.prompts.last }, shellPrompt)
        // The withdrawn question's line is the loop's again.
        editor.type(.line("link"))
        XCTAssertEqual(try loop.value()?.get(), .line("link"))
    }

    /// Issue 36: the passkey can come from a file (or `mirror pair`'s standard input), never visible in
    /// /proc/PID/cmdline; a FIFO, a directory, a long or a malformed file is refused at once, naming the file.
    func testAPasskeyFileIsReadWhenItIsAPrivateSmallRegularFile() throws {
        let dir = NSTemporaryDirectory() + "passkey-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let good = dir + "/good"
        try Data(" 012345 \nignored\n".utf8).write(to: URL(fileURLWithPath: good))
        XCTAssertEqual(try readPasskeyFile(good, standardInputAllowed: false), 12345)
        let bad = dir + "/bad"
        try Data("12345678\n".utf8).write(to: URL(fileURLWithPath: bad))
        XCTAssertThrowsError(try readPasskeyFile(bad, standardInputAllowed: false)) { e in
            XCTAssertEqual("\(e)", "the first line of \(bad) is not a passkey: expected up to six decimal digits, 000000-999999")
        }
        let fifo = dir + "/fifo"
        XCTAssertEqual(mkfifo(fifo, 0o600), 0)
        XCTAssertThrowsError(try readPasskeyFile(fifo, standardInputAllowed: false)) { e in XCTAssertEqual("\(e)", "\(fifo) is not a regular file") }
        XCTAssertThrowsError(try readPasskeyFile(dir, standardInputAllowed: false)) { e in XCTAssertEqual("\(e)", "\(dir) is not a regular file") }
        XCTAssertThrowsError(try readPasskeyFile("-", standardInputAllowed: false)) { e in XCTAssertTrue("\(e)".contains("standard input"), "\(e)") }
        // Through the command line: the file's passkey stands where --passkey would, and the two exclude each other.
        let both = try MirrorProcess.run(["pair", "00:11:22:33:44:55", "--passkey-file", good, "--passkey", "1"])
        XCTAssertEqual(both.status, 2)
        XCTAssertTrue(both.stderr.contains("--passkey and --passkey-file cannot be used together"), both.stderr)
        let missing = try MirrorProcess.run(["pair", "00:11:22:33:44:55", "--passkey-file", dir + "/none"])
        XCTAssertEqual(missing.status, 2)
        XCTAssertTrue(missing.stderr.contains("cannot read \(dir)/none: ENOENT"), missing.stderr)
    }

    func testAnInvalidPasskeyIsRefusedAndSaysWhy() {
        let editor = FakeEditor(isTerminal: true)
        let questions = EditorQuestions(editor: editor, prompt: shellPrompt)
        let said = Lock<[String]>([])
        let prompts = questions.pairingPrompts(passkey: nil, say: { line in said.withLock { $0.append(line) } })
        editor.type(.line("12345x\u{1B}"))
        XCTAssertNil(prompts.passkey(peer))
        XCTAssertEqual(said.withLock { $0 }, ["pair: invalid passkey \"12345x\\x1b\": expected up to six decimal digits, 000000-999999: the pairing is refused"])
    }

    func testOffATerminalNothingIsReadAndOnlyPasskeyAnswers() {
        let editor = FakeEditor(isTerminal: false)
        let questions = EditorQuestions(editor: editor, prompt: shellPrompt)
        let said = Lock<[String]>([])
        let refusing = questions.pairingPrompts(passkey: nil, say: { line in said.withLock { $0.append(line) } })
        // Standard input is the script: no question reads it; the agent refuses (its report names --passkey).
        XCTAssertNil(refusing.passkey(peer))
        XCTAssertFalse(refusing.confirm(123456, peer))
        XCTAssertEqual(said.withLock { $0 }, ["pair: cannot ask whether 00:AA:01:01:00:01 shows 123456: standard input is not a terminal; give mirror shell --pair --passkey 123456 to accept that value"])
        let given = questions.pairingPrompts(passkey: 123456, say: { _ in })
        XCTAssertEqual(given.passkey(peer), 123456)
        XCTAssertTrue(given.confirm(123456, peer))
        XCTAssertFalse(given.confirm(654321, peer))
        XCTAssertEqual(editor.state.withLock { $0.reads }, 0, "nothing read off a terminal")
        XCTAssertEqual(editor.state.withLock { $0.prompts }, [])
    }

    func testTheShellTakesIoAndPasskeyOnlyWithPairAndParsesThemAsPairDoes() throws {
        let sock = "unix:/tmp/mirror-shellpair-\(getpid()).sock"
        let withoutPair = try MirrorProcess.run(["shell", sock, "--io", "keyboard"], input: "")
        XCTAssertEqual(withoutPair.status, 2, withoutPair.stderr)
        XCTAssertTrue(withoutPair.stderr.contains("--io sets the pairing agent of --pair: give --pair too"), withoutPair.stderr)
        let badPasskey = try MirrorProcess.run(["shell", sock, "--passkey", "1234567"], input: "")
        XCTAssertEqual(badPasskey.status, 2, badPasskey.stderr)
        XCTAssertTrue(badPasskey.stderr.contains("invalid passkey \"1234567\": expected up to six decimal digits"), badPasskey.stderr)
        let badIO = try MirrorProcess.run(["shell", "00:AA:01:01:00:01", "--io", "telepathy"], input: "")
        XCTAssertEqual(badIO.status, 2, badIO.stderr)
        XCTAssertTrue(badIO.stderr.contains("telepathy"), badIO.stderr)
    }

    func testThePairLineReportsTheMethodTheAgentServedAfterTheSecurity() {
        var passkey = ServedPairing()
        passkey.method = .passkeyEntry
        XCTAssertEqual(Shell.pairResult(security: "high", served: passkey, json: false),
                       ["pair: the link's security is high", "pair: method: Passkey Entry"])
        XCTAssertEqual(Shell.pairResult(security: "high", served: passkey, json: true), [#"{"security":"high","method":"Passkey Entry"}"#])
        // Keys with no request answered: Just Works; nothing served: the kernel's held key.
        var keys = ServedPairing()
        keys.longTermKeys = 2
        XCTAssertEqual(Shell.pairResult(security: "medium", served: keys, json: true), [#"{"security":"medium","method":"Just Works"}"#])
        XCTAssertEqual(Shell.pairResult(security: "medium", served: ServedPairing(), json: true), [#"{"security":"medium","method":null}"#])
        XCTAssertEqual(Shell.pairResult(security: "medium", served: ServedPairing(), json: false).last,
                       "pair: method: none (no pairing ran: the link is encrypted with a key the kernel holds)")
    }
}
