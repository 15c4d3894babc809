// mirror: the command-line tool. Only the entry point: the commands, the session, parsing, formatting and
// the error table are the MirrorCommandLine library (Sources/MirrorCommandLine, the table in Commands/CommandTable.swift).
import Dispatch
import MirrorCommandLine

#if canImport(Glibc)
import Glibc
#endif

// Help, the version and usage errors are answered without the concurrency runtime; only a command starts it
// (a detached task; this thread then waits in pause with the signals still blocked), so `mirror --help` starts no threads.
// Least privilege before anything else (MirrorMain.dropPrivileges): every capability is gone here unless the command
// may need raw HCI, and then they live only on one keeper thread until its privileged sockets are open.
// SIGINT and SIGTERM are blocked before any thread starts, so every thread inherits the mask and only the signalfd
// (Interrupts) sees them.
Interrupts.blockSignals()
if let status = MirrorMain.dropPrivileges(Array(CommandLine.arguments.dropFirst()), commands: commandTable) { exit(status) }
switch MirrorMain.prepare(Array(CommandLine.arguments.dropFirst()), commands: commandTable) {
case .finished(let status):
    exit(status)
case .command(let command, let arguments, let global):
    // Not dispatchMain: it parks this thread in sigsuspend with an empty mask (libdispatch's _dispatch_sig_thread),
    // where SIGINT and SIGTERM would kill the process before the signalfd saw them. Nothing needs the main queue.
    Task.detached { exit(await MirrorMain.run(command, arguments, global)) }
    while true { pause() }
}
