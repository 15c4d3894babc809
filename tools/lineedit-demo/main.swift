// lineedit-demo: LineEditor with a completer over a fixed word list and a background task printing
// "notification N" above the prompt every 300 ms (`--every-ms N`, 0 for none); echoes each line as "got: LINE".
// LineEditorTests drive it in a pseudo-terminal and over a pipe. `quit` or Ctrl-D ends it.
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
var arguments = CommandLine.arguments.dropFirst()
while let a = arguments.popFirst() {
    if a == "--every-ms", let v = arguments.popFirst().flatMap({ Int($0) }) {
        every = v
    } else {
        complain("usage: lineedit-demo [--every-ms N]")
        exit(2)
    }
}

do {
    let editor = try LineEditor(prompt: "demo> ", completer: { _ in words })
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
    loop: while true {
        switch try editor.readEvent() {
        case .line(let line):
            print("got: \(line)")
            if line == "quit" { break loop }
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
