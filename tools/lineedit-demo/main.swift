// lineedit-demo: LineEditor with a completer over a fixed word list and a background task printing
// "notification N" above the prompt every 300 ms (`--every-ms N`, 0 for none); echoes each line as "got: LINE".
// `prompt WORD` makes the prompt "WORD> "; `secret` keeps the next line out of the history; `--timeout-ms N` gives each read that limit (the error, exit 3);
// `--drop-on-timeout` instead drops the timed-out line (dropLine, "dropped" printed above) and reads on, as the
// shell's pairing questions do; `--stop-after-ms N` calls stop() from another task; `--history-limit N` keeps N lines. LineEditorTests drive it in a pseudo-terminal and over a
// pipe. `quit` or Ctrl-D ends it.
import LineEditor
#if canImport(Glibc)
import Glibc
#endif

/// One line on stderr (write(2): stdio's `stderr` is shared mutable state to Swift 6).
func complain(_ text: String) {
    let line = text + "\n"
    _ = line.withCString { write(2, $0, strlen($0)) }
}

let words = ["help", "listen", "quit", "read", "scan", "scanner", "subscribe", "unsubscribe", "wifi", "write"]
var every = 300
var timeout: Duration?
var stopAfter: Int?
var historyLimit = LineEditor.defaultHistoryLimit
var dropOnTimeout = false
var arguments = CommandLine.arguments.dropFirst()
while let a = arguments.popFirst() {
    if a == "--drop-on-timeout" {
        dropOnTimeout = true
        continue
    }
    let value = arguments.popFirst().flatMap { Int($0) }
    switch (a, value) {
    case ("--every-ms", let v?): every = v
    case ("--timeout-ms", let v?): timeout = .milliseconds(v)
    case ("--stop-after-ms", let v?): stopAfter = v
    case ("--history-limit", let v?): historyLimit = v
    default:
        complain("usage: lineedit-demo [--every-ms N] [--timeout-ms N] [--drop-on-timeout] [--stop-after-ms N] [--history-limit N]")
        exit(2)
    }
}

do {
    let editor = try LineEditor(prompt: "demo> ", historyLimit: historyLimit, completer: { _ in words })
    if every > 0 {
        let period = every
        Task.detached {
            var n = 1
            while true {
                try? await Task.sleep(for: .milliseconds(period))
                editor.printAbove("notification \(n)")
                n += 1
            }
        }
    }
    if let stopAfter {
        Task.detached {
            try? await Task.sleep(for: .milliseconds(stopAfter))
            editor.stop()
        }
    }
    loop: while true {
        let event: LineEvent
        do {
            event = try editor.readEvent(timeout: timeout)
        } catch {
            if dropOnTimeout, case .timeout = error {
                editor.dropLine()
                editor.printAbove("dropped: \(error)")
                timeout = nil
                continue
            }
            editor.close()
            complain("lineedit-demo: \(error)")
            exit(3)
        }
        switch event {
        case .line(let line):
            print("got: \(line)")
            if line == "quit" { break loop }
            if line.hasPrefix("prompt ") { editor.setPrompt(line.dropFirst(7) + "> ") }
            // `secret`: the next line is an answer, kept out of the history (as the shell's passkey answers).
            if line == "secret" { editor.setRememberNextLine(false) }
        case .interrupt:
            editor.printAbove("interrupted")
        case .end:
            print("end")
            break loop
        }
    }
    editor.close()
} catch {
    complain("lineedit-demo: \(error)")
    exit(1)
}
