// The built executables (mirror, mirror-sim, hostile-peer) as subprocesses of a test: one run to its end with
// what it printed, or a tool in the background until it says it is ready.
import LinkCore
import Dispatch
import Foundation

/// One finished run of a built executable.
public struct ToolRun: Sendable {
    /// The exit status, or the signal's number when a signal ended it (`signal`).
    public var status: Int32
    public var stdout: String
    public var stderr: String
    /// The signal that ended it (11: SIGSEGV), nil when it exited.
    public var signal: Int32? = nil
}

/// A run that did not end in time (it was terminated): the test fails with this.
public struct ToolTimeout: Error, CustomStringConvertible {
    public var description: String
}

/// A tool that ended (or closed its output) before it said it was ready.
public struct ToolDidNotStart: Error, CustomStringConvertible {
    public var description: String
}

public enum ToolProcess {
    /// The products directory that holds the test bundle (.build/<triple>/debug), where the built tools are.
    public static var productsDirectory: URL {
        var dir = Bundle(for: ProductsMarker.self).bundleURL
        if dir.pathExtension == "xctest" { dir.deleteLastPathComponent() }
        return dir
    }

    /// The built executable `name` ("mirror").
    public static func url(_ name: String) -> URL { productsDirectory.appendingPathComponent(name) }

    /// Runs `tool` with `arguments` and `input` on a pipe (no input: /dev/null), with `environment` over this
    /// process's; throws `ToolTimeout` if it does not end within `timeout` seconds.
    public static func run(_ tool: String, _ arguments: [String], input: String? = nil, environment: [String: String] = [:],
                           directory: URL? = nil, timeout: Double = 60) throws -> ToolRun {
        try run(executable: url(tool), arguments, input: input, environment: environment, directory: directory, timeout: timeout)
    }

    /// Runs the program at `executable` (a built tool, a script of the project, /usr/bin/env for a system tool) as
    /// `run(_:_:input:environment:timeout:)` does.
    public static func run(executable: URL, _ arguments: [String], input: String? = nil, environment: [String: String] = [:],
                           directory: URL? = nil, timeout: Double = 60) throws -> ToolRun {
        let tool = executable.lastPathComponent
        let process = Process()
        process.executableURL = executable
        process.arguments = arguments
        // The working directory (default: this process's): a tool that writes there (scan's ZIP) gets a scratch one.
        if let directory { process.currentDirectoryURL = directory }
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { _, given in given }
        let out = Pipe()
        let err = Pipe()
        process.standardOutput = out
        process.standardError = err
        let inPipe = input.map { _ in Pipe() }
        process.standardInput = inPipe ?? FileHandle.nullDevice
        let done = DispatchSemaphore(value: 0)
        process.terminationHandler = { _ in done.signal() }
        try process.run()
        if let inPipe, let input {
            // Written whole before the wait, on this thread: a pipe takes 64 KiB before a reader must read, more
            // than any test's script, and the pipe is gone when this returns, so no descriptor of this run is
            // closed later, under another test.
            precondition(input.utf8.count < 65536, "ToolProcess input must fit a pipe's buffer")
            try? inPipe.fileHandleForWriting.write(contentsOf: Data(input.utf8))
            try? inPipe.fileHandleForWriting.close()
        }
        // Drain both pipes while it runs, so a large output cannot block it.
        nonisolated(unsafe) var outData = Data()
        nonisolated(unsafe) var errData = Data()
        let group = DispatchGroup()
        DispatchQueue.global().async(group: group) { outData = out.fileHandleForReading.readDataToEndOfFile() }
        DispatchQueue.global().async(group: group) { errData = err.fileHandleForReading.readDataToEndOfFile() }
        var timedOut = false
        if done.wait(timeout: .now() + timeout) == .timedOut {
            timedOut = true
            process.terminate()
            _ = done.wait(timeout: .now() + 5)
        }
        group.wait()
        // Closed here, not at deinit: Foundation's Process keeps its pipes alive past this call, and a test run
        // leaked two descriptors per tool run until later sockets were numbered past FD_SETSIZE.
        try? out.fileHandleForReading.close()
        try? err.fileHandleForReading.close()
        if timedOut { throw ToolTimeout(description: "\(tool) \(arguments.joined(separator: " ")) did not finish in \(timeout) s") }
        return ToolRun(status: process.terminationStatus, stdout: String(decoding: outData, as: UTF8.self),
                       stderr: String(decoding: errData, as: UTF8.self),
                       signal: process.terminationReason == .uncaughtSignal ? process.terminationStatus : nil)
    }
}

/// A built tool running in the background until `stop()`: started, then read up to the line that says it is ready
/// (its "listening on unix:PATH"), without sleeping; its later output is drained so it never blocks on a full pipe.
public final class BackgroundTool: @unchecked Sendable {
    // @unchecked: `process` is configured in init and then only used through Foundation's thread-safe calls.
    public let process = Process()

    /// `stderrToo`: its standard error goes into the same pipe (else to /dev/null).
    public init(_ tool: String, _ arguments: [String], readyWhen ready: String, stderrToo: Bool = false) throws {
        process.executableURL = ToolProcess.url(tool)
        process.arguments = arguments
        let out = Pipe()
        process.standardOutput = out
        process.standardError = stderrToo ? out : FileHandle.nullDevice
        try process.run()
        var seen = Data()
        let handle = out.fileHandleForReading
        while !String(decoding: seen, as: UTF8.self).contains(ready) {
            let chunk = handle.availableData
            if chunk.isEmpty {
                if process.isRunning { process.terminate() }
                throw ToolDidNotStart(description: "\(tool) did not start: \(String(decoding: seen, as: UTF8.self))")
            }
            seen.append(chunk)
        }
        handle.readabilityHandler = { h in _ = h.availableData }
        output = handle
    }

    /// The read end of its output pipe, closed by `stop()`.
    private let output: FileHandle

    /// Terminates it (SIGTERM), waits for it to exit and closes the pipe's read end.
    public func stop() {
        if process.isRunning { process.terminate() }
        process.waitUntilExit()
        output.readabilityHandler = nil
        try? output.close()
    }
}

private final class ProductsMarker {}

/// A fresh socket path under /tmp, short enough for sun_path (108 bytes).
public func temporarySocketPath(_ tag: String) -> String {
    "/tmp/\(tag.prefix(16))-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).sock"
}

/// Bounds a test's own wait on a process it started (reading its pipes to the end, waitUntilExit): past `seconds`
/// the process is killed, so that its pipes end and the wait returns; `end()` then names the limit for the test to fail.
public final class ProcessWatchdog: Sendable {
    /// Whether `end()` has run, and whether the limit killed the process first.
    private let state = Lock((ended: false, fired: false))
    private let what: String
    private let seconds: Double

    /// Starts the watch on `process` (already running); `what` names it in the failure.
    public init(_ process: Process, _ what: String, seconds: Double = 60) {
        self.what = what
        self.seconds = seconds
        let pid = process.processIdentifier
        DispatchQueue.global().asyncAfter(deadline: .now() + seconds) { [state] in
            // Under the lock: after `end()` no kill goes out, to this process or a later one with its pid.
            state.withLock { s in
                guard !s.ended else { return }
                s.fired = true
                kill(pid, SIGKILL)
            }
        }
    }

    // A watch no test holds any more (an early return) ends too: nothing waits on the process then.
    deinit { state.withLock { $0.ended = true } }

    /// Ends the watch once the test's wait has returned: nil, or "timed out after N s waiting for WHAT to end" when
    /// the limit killed the process.
    @discardableResult
    public func end() -> String? {
        let fired = state.withLock { s in s.ended = true; return s.fired }
        return fired ? "timed out after \(seconds) s waiting for \(what) to end (killed)" : nil
    }
}
