// The terminal's one owner for an interactive tool: libedit (CLibEdit) edits the line, with history, Tab completion
// through a Swift callback, Ctrl-C and Ctrl-D as events; other threads print above the line being typed through
// `printAbove`, which the editor's poll loop writes (the line is redrawn after it). Off a terminal it reads plain
// lines: no prompt, no escape codes.
import CBlueZSocket
import ATTStack
import CLibEdit
import HostEnvironment
import LinuxBluetooth
import LinkCore
#if canImport(Glibc)
import Glibc
#endif

/// What `readEvent` returns.
public enum LineEvent: Sendable, Equatable {
    /// A line, without its newline (Enter at the terminal, or one line of the input).
    case line(String)
    /// Ctrl-C at the prompt: the line typed so far was dropped and a fresh prompt drawn.
    case interrupt
    /// Ctrl-D on an empty line, the end of the input, or `stop()`.
    case end
}

/// What Tab asks the completer: the word at the cursor, and the line before that word (the command and the
/// arguments typed so far).
public struct Completion: Sendable, Equatable {
    public var word: String
    public var before: String
    public init(word: String, before: String) {
        self.word = word
        self.before = before
    }

    /// What Tab offers of a completer's `candidates` for `word`: those that start with it, once each, in order,
    /// and none holding a terminal control (TerminalText.isUnsafe: a peer's User Description such as
    /// "\e]0;x\a"), which libedit would print raw in its list and insert raw in the line.
    public static func offered(_ candidates: [String], for word: String) -> [String] {
        var seen = Set<String>()
        return candidates.filter { c in
            c.hasPrefix(word) && !c.unicodeScalars.contains(where: TerminalText.isUnsafe) && seen.insert(c).inserted
        }
    }
}

public enum LineEditorError: Error, Sendable, Equatable, CustomStringConvertible {
    /// A syscall failed (poll, read, mkdir, open): which one, its errno, what for.
    case system(SocketError)
    /// The history file's directory could not be made private (0700), or is another user's.
    case directory(PrivateDirectoryError)
    /// `readEvent(timeout:)` ran out: "timed out after 2 s waiting for a line at the prompt" (off a terminal: "a
    /// line of input").
    case timeout(GATTTimeoutError)
    /// Another LineEditor owns the terminal (libedit's state is one per process).
    case terminalTaken
    /// libedit did not start on this terminal.
    case editorDidNotStart

    public var description: String {
        switch self {
        case .system(let e): return "\(e)"
        case .directory(let e): return "\(e)"
        case .timeout(let e): return "\(e)"
        case .terminalTaken: return "another line editor owns the terminal"
        case .editorDidNotStart: return "libedit did not start on this terminal"
        }
    }
}

/// Holds the completer for libedit's C callback (passed to it as an unretained pointer; the editor keeps it alive).
private final class CompleterBox: Sendable {
    let completer: (@Sendable (Completion) -> [String])?
    init(_ completer: (@Sendable (Completion) -> [String])?) { self.completer = completer }
}

public final class LineEditor: Sendable {
    /// How many lines the history keeps (the file and the list Up walks).
    public static let defaultHistoryLimit = 1000
    /// true: libedit edits the line (stdin and stdout are terminals); false: plain lines, no prompt, no escapes.
    public let isTerminal: Bool
    /// The history file (created 0600 in a 0700 directory), or nil when none is kept (off a terminal, or asked).
    public let historyFile: String?

    private struct Shared {
        var prompt: String
        /// A line is being edited: printAbove queues for the poll loop rather than printing.
        var atPrompt = false
        var pending: [String] = []
        var promptChanged = false
        var stopped = false
        var reading = false
        var closed = false
        /// The first failure to write the history file (the session goes on without it).
        var historyFailure: SocketError?
        /// Whether the next line read goes into the history: false while it answers a question (a passkey).
        var rememberNextLine = true
        /// Off a terminal: what was read and not yet returned as a line, and whether the input ended.
        var input: [UInt8] = []
        var inputEnded = false
    }

    private let shared: Lock<Shared>
    /// Wakes the poll loop: printAbove, setPrompt, stop (an eventfd).
    private let wake: Int32
    private let completer: CompleterBox
    /// Set while a LineEditor on the terminal exists: libedit is one per process.
    private static let terminalOwned = Lock(false)

    /// `historyFile`: where the history is kept (`defaultHistoryFile()` by default; nil keeps none). The file and
    /// its directory are created when missing. `completer`: Tab's candidates for the word at the cursor (only those
    /// that start with the word are offered).
    public init(prompt: String, historyFile: String? = LineEditor.defaultHistoryFile(), historyLimit: Int = LineEditor.defaultHistoryLimit,
                completer: (@Sendable (Completion) -> [String])? = nil) throws(LineEditorError) {
        // Every step that can fail comes before the stored properties are set: a throw then runs no deinit, and
        // each path undoes what it did itself.
        let terminal = cbz_isatty(0) == 1 && cbz_isatty(1) == 1
        let file = terminal ? historyFile : nil
        let box = CompleterBox(completer)
        let fd = cbz_eventfd()
        guard fd >= 0 else { throw .system(SocketError(syscall: "eventfd", errno: .current, context: "starting the line editor")) }
        if terminal {
            let taken = LineEditor.terminalOwned.withLock { owned in
                if owned { return false }
                owned = true
                return true
            }
            guard taken else {
                _ = cbz_close(fd)
                throw .terminalTaken
            }
            do throws(LineEditorError) {
                if let file { try LineEditor.preparePrivateFile(file) }
                guard cle_open(file, Int32(clamping: historyLimit), complete, Unmanaged.passUnretained(box).toOpaque()) == 0 else {
                    throw .editorDidNotStart
                }
            } catch {
                LineEditor.terminalOwned.withLock { $0 = false }
                _ = cbz_close(fd)
                throw error
            }
        }
        isTerminal = terminal
        self.historyFile = file
        self.completer = box
        shared = Lock(Shared(prompt: prompt))
        wake = fd
    }

    deinit { close() }

    /// `$XDG_STATE_HOME/mirror/history`, or `$HOME/.local/state/mirror/history` when XDG_STATE_HOME is unset or not
    /// absolute (the XDG Base Directory rule); nil without either.
    public static func defaultHistoryFile() -> String? {
        defaultHistoryFile(xdgStateHome: XDGDirectory.environment("XDG_STATE_HOME"), home: XDGDirectory.environment("HOME"))
    }

    /// The rule of `defaultHistoryFile()` over the two variables' values.
    public static func defaultHistoryFile(xdgStateHome: String?, home: String?) -> String? {
        XDGDirectory.state.mirrorDirectory { $0 == "HOME" ? home : xdgStateHome }.map { $0 + "/history" }
    }

    /// Creates the directories above `path` (0700 each, as XDG asks) and the file (0600) when they are missing; the
    /// directory holding it (mirror's under $XDG_STATE_HOME) is tightened to 0700 and the file to 0600 when looser.
    static func preparePrivateFile(_ path: String) throws(LineEditorError) {
        let directory = String(path[..<(path.lastIndex(of: "/") ?? path.startIndex)])
        if !directory.isEmpty {
            do throws(PrivateDirectoryError) { try XDGDirectory.preparePrivateDirectory(directory) } catch { throw .directory(error) }
        }
        let fd = cbz_open_private_file(path)
        guard fd >= 0 else { throw .system(SocketError(syscall: "open", errno: .current, context: "opening the history file \(path)")) }
        defer { _ = cbz_close(fd) }
        if fchmod(fd, 0o600) != 0 {
            throw .system(SocketError(syscall: "fchmod", errno: .current, context: "making the history file \(path) private (0600)"))
        }
    }

    /// The first failure to write the history file, if one happened (the editing goes on without it).
    public var historyFailure: SocketError? { shared.withLock { $0.historyFailure } }

    /// Prints `line` on its own line: above the prompt and the line being typed (which are redrawn after it), or
    /// at once when no line is being edited. Safe from any thread: while a line is edited it goes through the
    /// editor's poll loop, which alone writes to the terminal then.
    public func printAbove(_ line: String) {
        shared.withLock { s in
            if s.atPrompt {
                s.pending.append(line)
                _ = cbz_eventfd_signal(wake)
            } else {
                cle_print_line(line)
            }
        }
    }

    /// The prompt for the line being edited (redrawn at once) and the next ones. Safe from any thread.
    /// Whether the next line read at the terminal goes into the history (and its file): false for the answer to a
    /// question (a passkey typed at the prompt never reaches the history); each line read sets it back to true.
    public func setRememberNextLine(_ remember: Bool) {
        shared.withLock { $0.rememberNextLine = remember }
    }

    public func setPrompt(_ prompt: String) {
        shared.withLock { s in
            s.prompt = prompt
            if s.atPrompt {
                s.promptChanged = true
                _ = cbz_eventfd_signal(wake)
            }
        }
    }

    /// Ends the `readEvent` under way, and every later one, with `.end`. Safe from any thread.
    public func stop() {
        shared.withLock { s in
            s.stopped = true
            if !s.closed { _ = cbz_eventfd_signal(wake) }
        }
    }

    /// Waits for the next line, Ctrl-C or the end, drawing the prompt when a new line starts; printAbove's lines
    /// are printed meanwhile. The wait is the user's: unbounded by default (stop() ends it), or `timeout`, after
    /// which it throws `.timeout` naming what it waited for and the line typed so far stays on the prompt.
    /// One thread reads at a time.
    public func readEvent(timeout: Duration? = nil) throws(LineEditorError) -> LineEvent {
        let start = shared.withLock { s -> Bool in
            if s.reading || s.closed { return false }
            s.reading = true
            return true
        }
        precondition(start, "LineEditor.readEvent: called while another read is under way, or after close()")
        defer { shared.withLock { $0.reading = false } }
        let deadline = timeout.map { MonotonicClock().now().advanced(by: $0) }
        return isTerminal ? try readTerminal(deadline: deadline, limit: timeout) : try readPlain(deadline: deadline, limit: timeout)
    }

    /// The poll(2) timeout in milliseconds until `deadline` (-1: none), rounded up so that the wait does not end early.
    private func millisecondsLeft(_ deadline: ClockInstant?) -> Int32 {
        guard let deadline else { return -1 }
        let left = deadline.duration(since: MonotonicClock().now())
        if left <= .zero { return 0 }
        let (s, atto) = left.components
        return Int32(clamping: s * 1000 + (atto + 999_999_999_999_999) / 1_000_000_000_000_000)
    }

    private func timedOut(_ limit: Duration?, waitingFor what: String) -> LineEditorError {
        .timeout(GATTTimeoutError(waitingFor: what, after: limit ?? .zero))
    }

    private func readTerminal(deadline: ClockInstant?, limit: Duration?) throws(LineEditorError) -> LineEvent {
        let stopped = shared.withLock { s -> Bool in
            if s.stopped { return true }
            if !s.atPrompt {
                s.atPrompt = true
                s.promptChanged = false
                cle_begin_line(s.prompt)
            }
            return false
        }
        if stopped { return endLine() }
        while true {
            var rIn: Int16 = 0
            var rWake: Int16 = 0
            let r = cbz_poll_two(0, CBZ_POLLIN, wake, CBZ_POLLIN, millisecondsLeft(deadline), &rIn, &rWake)
            if r < 0 {
                let e = Errno.current
                if e == .interrupted { continue }
                throw .system(SocketError(syscall: "poll", errno: e, context: "waiting for a line at the prompt"))
            }
            if r == 0 { throw timedOut(limit, waitingFor: "a line at the prompt") }
            if rWake & CBZ_POLLIN != 0 {
                _ = cbz_eventfd_drain(wake)
                let (lines, prompt, stop) = shared.withLock { s -> ([String], String?, Bool) in
                    defer {
                        s.pending = []
                        s.promptChanged = false
                    }
                    return (s.pending, s.promptChanged ? s.prompt : nil, s.stopped)
                }
                for line in lines { cle_print_above(line) }
                if let prompt { cle_set_prompt(prompt) }
                if stop { return endLine() }
            }
            if rIn & CBZ_POLLIN != 0 {
                switch cle_feed() {
                case CLE_LINE:
                    let text = cle_take_line().map { p in
                        defer { free(p) }
                        return String(cString: p)
                    } ?? ""
                    leavePrompt()
                    let remember = shared.withLock { s -> Bool in
                        defer { s.rememberNextLine = true }
                        return s.rememberNextLine
                    }
                    if remember, !text.isEmpty, cle_history_add(text) != 0 {
                        let e = SocketError(syscall: "write", errno: .current, context: "writing the history file \(historyFile ?? "")")
                        shared.withLock { s in if s.historyFailure == nil { s.historyFailure = e } }
                    }
                    return .line(text)
                case CLE_END:
                    leavePrompt()
                    return .end
                case CLE_INTERRUPT:
                    return .interrupt
                default:
                    break
                }
            }
            // The terminal hung up (a read there fails, so libedit makes nothing of it).
            if rIn & (CBZ_POLLHUP | CBZ_POLLERR) != 0 { return endLine() }
        }
    }

    /// Ends the line being edited after a `readEvent(timeout:)` that timed out (from the thread that read): what was
    /// typed is dropped, the lines printAbove queued are printed, the terminal is given back, and printAbove prints
    /// at once again; the next read starts a fresh line. Nothing is edited: nothing happens.
    public func dropLine() {
        shared.withLock { s in
            guard s.atPrompt else { return }
            cle_end_line()
            for line in s.pending { cle_print_line(line) }
            s.pending = []
            s.atPrompt = false
        }
    }

    /// No line is edited any more: printAbove prints at once again.
    private func leavePrompt() {
        shared.withLock { $0.atPrompt = false }
    }

    /// Ends the line being edited (the terminal back to cooked) and answers `.end`.
    private func endLine() -> LineEvent {
        shared.withLock { s in
            if s.atPrompt { cle_end_line() }
            s.atPrompt = false
        }
        return .end
    }

    /// Off a terminal, the next event when it needs no wait and no syscall: a line already read (a script's lines
    /// come 4 KiB at a time), or the end. Nil on a terminal, while another read is under way, or when a read must wait.
    public func bufferedEvent() -> LineEvent? {
        guard !isTerminal else { return nil }
        return shared.withLock { s in s.reading || s.closed ? nil : Self.takeBuffered(&s) }
    }

    /// Off a terminal: the next line of what was read (a CR before its newline dropped), the last line even without
    /// a newline once the input ended, or the end; nil when more must be read.
    private static func takeBuffered(_ s: inout Shared) -> LineEvent? {
        if s.stopped { return .end }
        if let newline = s.input.firstIndex(of: 0x0A) {
            var line = Array(s.input[..<newline])
            s.input.removeSubrange(...newline)
            if line.last == 0x0D { line.removeLast() }
            return .line(String(decoding: line, as: UTF8.self))
        }
        if s.inputEnded {
            if s.input.isEmpty { return .end }
            defer { s.input = [] }
            return .line(String(decoding: s.input, as: UTF8.self))
        }
        return nil
    }

    /// Off a terminal: one line per newline (a CR before it dropped), the last line even without one.
    private func readPlain(deadline: ClockInstant?, limit: Duration?) throws(LineEditorError) -> LineEvent {
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            if let next = shared.withLock({ Self.takeBuffered(&$0) }) { return next }
            var rInput: Int16 = 0
            var rWake: Int16 = 0
            let r = cbz_poll_two(0, CBZ_POLLIN, wake, CBZ_POLLIN, millisecondsLeft(deadline), &rInput, &rWake)
            if r < 0 {
                let e = Errno.current
                if e == .interrupted { continue }
                throw .system(SocketError(syscall: "poll", errno: e, context: "waiting for a line of input"))
            }
            if r == 0 { throw timedOut(limit, waitingFor: "a line of input") }
            if rWake & CBZ_POLLIN != 0 { _ = cbz_eventfd_drain(wake) }
            if rInput & (CBZ_POLLIN | CBZ_POLLHUP | CBZ_POLLERR) != 0 {
                let n = chunk.withUnsafeMutableBytes { cbz_read(0, $0.baseAddress, $0.count) }
                if n < 0 { throw .system(SocketError(syscall: "read", errno: .current, context: "reading a line of input")) }
                shared.withLock { s in
                    if n == 0 { s.inputEnded = true } else { s.input += chunk[..<n] }
                }
            }
        }
    }

    /// Ends any line being edited and gives the terminal back (libedit torn down). Call it from the reading thread,
    /// or when no read is under way; later reads are refused.
    public func close() {
        let wasOpen = shared.withLock { s -> Bool in
            if s.closed { return false }
            s.closed = true
            s.atPrompt = false
            s.stopped = true
            // Under the lock: no signal from another thread can reach the fd's number once it is reused.
            _ = cbz_close(wake)
            return true
        }
        guard wasOpen, isTerminal else { return }
        cle_close()
        LineEditor.terminalOwned.withLock { $0 = false }
    }
}

/// libedit's completer callback: asks the Swift completer, keeps the candidates that start with the word.
private func complete(_ word: UnsafePointer<CChar>?, _ before: UnsafePointer<CChar>?, _ context: UnsafeMutableRawPointer?) {
    guard let word, let before, let context else { return }
    let box = Unmanaged<CompleterBox>.fromOpaque(context).takeUnretainedValue()
    guard let completer = box.completer else { return }
    let w = String(cString: word)
    for candidate in Completion.offered(completer(Completion(word: w, before: String(cString: before))), for: w) {
        cle_add_candidate(candidate)
    }
}
