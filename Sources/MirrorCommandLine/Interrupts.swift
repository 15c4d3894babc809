// Ctrl-C (SIGINT) and SIGTERM for `mirror`: a command that streams (`mirror listen`) ends cleanly on the first
// one; every other command (or a second signal) ends at once with the shell's status, 128 + the signal number.

import LinuxBluetooth
import LinkCore

#if canImport(Glibc)
import Glibc
#endif

/// SIGINT and SIGTERM for `mirror`: LinuxBluetooth's `InterruptSignals` (the signalfd, its one reader, the
/// interruptible task and the same-signal window), with what the signal means for the command's exit status.
public enum Interrupts {
    /// `status`, then forgotten: the shell asks once per line whether a signal ended it.
    public static func take() -> ExitStatus? { status(of: InterruptSignals.takeReceivedSignal()) }

    /// How the interrupted command exits: 130 for SIGINT, 143 for SIGTERM; nil when no signal cancelled it.
    public static var status: ExitStatus? { status(of: InterruptSignals.receivedSignal) }

    private static func status(of signal: Int32) -> ExitStatus? {
        switch signal {
        case SIGINT: return .interrupted
        case SIGTERM: return .terminated
        default: return nil
        }
    }

    /// Blocks SIGINT and SIGTERM in every thread (first thing in main): only the signalfd sees them.
    public static func blockSignals() { InterruptSignals.blockSignals() }

    /// The signalfd's reader: a source of the command's `loop`, else a thread of its own.
    public static func install(on loop: EventLoop? = nil) { InterruptSignals.install(on: loop) }

    /// Takes the signalfd out of `loop`'s set at the end of the command.
    public static func stopServing(on loop: EventLoop) { InterruptSignals.stopServing(on: loop) }

    /// Runs `body` in a task that the first SIGINT or SIGTERM cancels (a second one exits at once); nests.
    public static func whileInterruptible<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) async throws -> T {
        try await InterruptSignals.whileInterruptible(body)
    }
}

/// What SIGINT (Ctrl-C) and SIGTERM do, per command: the one table the man page's SIGNALS section prints and the
/// README repeats (ReferenceTests keeps the two the same). Every row holds: the link is closed before the exit.
public let interruptTable: [(commands: String, sigint: String, sigterm: String)] = [
    ("scan", "once the scan may have started (initDeviceForScan sent), sends cancelScan and waits up to 5 s for its Write Response, reads the final state, prints the result (outcome interrupted, cancelScanSent); exit 130",
     "the same; exit 143"),
    ("bench", "prints the figures of the rounds done (\"interrupted by SIGINT after N rounds\", JSON interrupted); exit 130", "the same; exit 143"),
    ("discover", "stops the scan (Stop Discovery), prints the devices seen so far; exit 130", "the same; exit 143"),
    ("listen", "stops listening, prints the count (and the drops); exit 0, the normal end of a listen", "the same; exit 143"),
    ("shell", "at a terminal: cancels the running command and returns to the prompt; reading a script: cancels the running command and ends the script; exit 130",
     "cancels the running command, closes the connection and ends the shell; exit 143"),
    ("every other command", "ends at once; exit 130 (a second signal always does; the same signal again within 0.5 s of the first counts as the first, as GNU timeout sends it twice)", "ends at once; exit 143"),
]

