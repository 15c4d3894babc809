// One reader of the line editor at a time: the program's loop (a line at a time) and another thread's question (a
// pairing agent's passkey or comparison, Core Spec 5.4 Vol 3 Part H §2.3.5) share it, the question within a limit.
import LinkCore
#if canImport(Glibc)
import Glibc
#endif

/// What the shell's questions need of the line editor: LineEditor, or a test's fake.
public protocol PromptingEditor: Sendable {
    var isTerminal: Bool { get }
    func printAbove(_ line: String)
    func setPrompt(_ prompt: String)
    func readEvent(timeout: Duration?) throws(LineEditorError) -> LineEvent
    /// The next event when it needs no wait (a script's line already read), else nil.
    func bufferedEvent() -> LineEvent?
    func dropLine()
    /// Whether the next line goes into the history: not an answer to a question (a passkey).
    func setRememberNextLine(_ remember: Bool)
}

extension LineEditor: PromptingEditor {}

/// Why a question at the shell's prompt got no answer.
public enum ShellQuestionError: Error, Sendable, Equatable, CustomStringConvertible {
    /// No line within the limit: the question, and the limit.
    case timedOut(question: String, after: Duration)
    /// Ctrl-C at the question.
    case interrupted(question: String)
    /// Ctrl-D, or the shell's end, at the question.
    case ended(question: String)
    /// Another question of the agent is being asked.
    case busy(question: String)
    case editor(LineEditorError)

    public var description: String {
        switch self {
        case .timedOut(let q, let after): return "no answer within \(after.spoken) to \"\(q)\""
        case .interrupted(let q): return "Ctrl-C at \"\(q)\""
        case .ended(let q): return "the input ended at \"\(q)\""
        case .busy(let q): return "another question was being asked at \"\(q)\""
        case .editor(let e): return "\(e)"
        }
    }
}

/// The shell's line editor shared by its loop (a line at a time) and its pairing agent's thread (a question now and
/// then): LineEditor.readEvent allows one reader. A question asked while the loop waits at the prompt becomes the
/// prompt, and the loop's next line is its answer (not a command); one asked while a line runs (the loop is not
/// reading: the `pair` line awaits the raise) is read by the agent's thread itself, the loop waiting for it. (A
/// command line Entered in the instant the question is posted answers it, and is refused as an answer.)
public final class EditorQuestions: Sendable {
    /// How long a question waits for its answer: less than SMP's 30 s timeout (Vol 3 Part H §3.4), after which an
    /// answer comes too late.
    public static let answerLimit: Duration = .seconds(25)

    struct State {
        /// The shell's own prompt, put back after a question.
        var shellPrompt: String
        var loopReading = false
        var agentReading = false
        /// A question the loop's reader answers with its next line.
        var posted: String?
        var answer: Result<String, ShellQuestionError>?
    }

    public let editor: any PromptingEditor
    public let limit: Duration
    private let state: Lock<State>

    public init(editor: any PromptingEditor, prompt: String, limit: Duration = EditorQuestions.answerLimit) {
        self.editor = editor
        self.limit = limit
        state = Lock(State(shellPrompt: prompt))
    }

    public var isTerminal: Bool { editor.isTerminal }

    /// The shell's prompt (connected, disconnected): shown at once unless a question is on the line, else after it.
    public func setShellPrompt(_ prompt: String) {
        state.withLock { s in
            s.shellPrompt = prompt
            if s.posted == nil, !s.agentReading { editor.setPrompt(prompt) }
        }
    }

    /// The shell loop's next line when it needs no wait (a script's line already read, no question asked and the
    /// agent not reading): read on the loop itself, with no thread; nil when `readLine` must wait.
    public func bufferedLine() -> LineEvent? {
        let mine = state.withLock { s -> Bool in
            guard !s.agentReading, s.posted == nil else { return false }
            s.loopReading = true
            return true
        }
        guard mine else { return nil }
        let event = editor.bufferedEvent()
        state.withLockBroadcasting { $0.loopReading = false }
        return event
    }

    /// The shell loop's next line (or Ctrl-C, or the end): waits while the agent reads an answer (bounded by its
    /// limit); a line that answers a question posted meanwhile is handed to it, and the next one read.
    public func readLine() throws(LineEditorError) -> LineEvent {
        while true {
            // Bounded: the agent reads for at most `limit`.
            _ = state.wait(until: { s -> Bool? in
                guard !s.agentReading else { return nil }
                s.loopReading = true
                return true
            })
            let event: LineEvent
            do {
                event = try editor.readEvent(timeout: nil)
            } catch {
                loopRead(.failure(.editor(error)))
                throw error
            }
            let answered: Bool
            switch event {
            case .line(let text): answered = loopRead(.success(text))
            case .interrupt: answered = loopRead(nil, interrupted: true)
            case .end: answered = loopRead(nil, interrupted: false)
            }
            if !answered { return event }
        }
    }

    /// The loop's read ended: it answers a posted question (true) or is the loop's own (false).
    @discardableResult
    private func loopRead(_ result: Result<String, ShellQuestionError>?, interrupted: Bool = false) -> Bool {
        state.withLockBroadcasting { s in
            s.loopReading = false
            guard let question = s.posted, s.answer == nil else { return false }
            s.answer = result ?? .failure(interrupted ? .interrupted(question: question) : .ended(question: question))
            return true
        }
    }

    /// Asks `question` at the prompt and returns the line typed, within `limit`; the shell's prompt comes back
    /// after. Only on a terminal (the caller checks `isTerminal`: off one, stdin is the script).
    public func ask(_ question: String) throws(ShellQuestionError) -> String {
        let started = MonotonicClock().now()
        let posted = try state.withLock { (s) throws(ShellQuestionError) -> Bool in
            guard s.posted == nil, !s.agentReading else { throw .busy(question: question) }
            editor.setPrompt(question)
            // The answer (a passkey, a yes) is not a command: it never reaches the history file.
            editor.setRememberNextLine(false)
            if s.loopReading {
                s.posted = question
                s.answer = nil
                return true
            }
            s.agentReading = true
            return false
        }
        if posted {
            let ns = Int(limit.nanosecondsClamped)
            // The loop's read answers a posted question with whatever ends it (a line, Ctrl-C, the end, a failure).
            let answer: Result<String, ShellQuestionError>? = state.wait(until: { s -> Result<String, ShellQuestionError>? in
                guard let a = s.answer else { return nil }
                s.answer = nil
                s.posted = nil
                editor.setPrompt(s.shellPrompt)
                return a
            }, timeoutNanoseconds: ns)
            if let answer { return try answer.get() }
            // The limit: withdrawn (unless answered at the last moment), the shell's prompt back.
            let late = state.withLock { s -> Result<String, ShellQuestionError>? in
                defer {
                    s.answer = nil
                    s.posted = nil
                    editor.setPrompt(s.shellPrompt)
                    editor.setRememberNextLine(true)
                }
                return s.answer
            }
            if let late { return try late.get() }
            throw .timedOut(question: question, after: limit)
        }
        defer {
            state.withLockBroadcasting { s in
                s.agentReading = false
                editor.setPrompt(s.shellPrompt)
            }
        }
        let left = limit - MonotonicClock().now().duration(since: started)
        let event: LineEvent
        do {
            event = try editor.readEvent(timeout: max(left, .zero))
        } catch {
            if case .timeout = error {
                // The question's line ends with it: the running command's output goes on below, not into it.
                editor.setRememberNextLine(true)
                editor.dropLine()
                throw .timedOut(question: question, after: limit)
            }
            throw .editor(error)
        }
        switch event {
        case .line(let text): return text
        case .interrupt: throw .interrupted(question: question)
        case .end: throw .ended(question: question)
        }
    }
}

/// Where a question without the line editor reads its answer (`mirror pair`'s and --pair's): standard input, asked
/// only when it and standard error are terminals, each answer awaited at most `limit` (the shell's, under SMP's
/// 30 s: Vol 3 Part H §3.4).
public struct TerminalAnswers: Sendable {
    public var isTerminal: Bool
    public var fd: Int32
    public var limit: Duration
    public var readLine: @Sendable () -> String?

    public init(isTerminal: Bool, fd: Int32, limit: Duration, readLine: @escaping @Sendable () -> String?) {
        self.isTerminal = isTerminal
        self.fd = fd
        self.limit = limit
        self.readLine = readLine
    }

    public static func standard() -> TerminalAnswers {
        TerminalAnswers(isTerminal: isatty(0) == 1 && isatty(2) == 1, fd: 0, limit: EditorQuestions.answerLimit,
                        readLine: { Swift.readLine() })
    }

    /// The line typed after `question` (already printed), within `limit`. A prompt of --pair's agent holds the link's
    /// loop, where the signals are read, so the wait takes them (BlockingWait) and Ctrl-C still ends the command.
    public func answer(_ question: String) throws(ShellQuestionError) -> String {
        let ms = Int32(clamping: limit.nanosecondsClamped / 1_000_000)
        let ready = BlockingWait.poll(fd: fd, events: Int16(POLLIN), timeoutMilliseconds: ms)
        guard ready != 0 else { throw .timedOut(question: question, after: limit) }
        guard ready > 0, let line = readLine() else { throw .ended(question: question) }
        return line
    }
}
