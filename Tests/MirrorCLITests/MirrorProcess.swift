// The built `mirror` as a subprocess (TestSupport's runner), and its output read as JSON.
import Foundation
import JSON
import MirrorCommandLine
import TestSupport
import XCTest

/// One finished run of `mirror`.
typealias MirrorRun = ToolRun

extension ToolRun {
    /// stdout parsed as one JSON document.
    func json(file: StaticString = #filePath, line: UInt = #line) throws -> JSONValue {
        do {
            return try parseJSON(stdout)
        } catch {
            XCTFail("stdout is not JSON (\(error)): \(stdout)", file: file, line: line)
            throw error
        }
    }

    /// stdout parsed as JSON lines.
    func jsonLines() throws -> [JSONValue] {
        try stdout.split(separator: "\n").map { try parseJSON(String($0)) }
    }
}

enum MirrorProcess {
    /// The built `mirror` executable.
    static var executable: URL { ToolProcess.url("mirror") }

    /// Runs `mirror` with `arguments`; throws if it does not end within `timeout` seconds.
    static func run(_ arguments: [String], timeout: Double = 60) throws -> MirrorRun {
        try ToolProcess.run("mirror", arguments, timeout: timeout)
    }

    /// Runs `mirror` with `input` on its standard input (a pipe: `mirror shell`'s script mode).
    static func run(_ arguments: [String], input: String, timeout: Double = 60) throws -> MirrorRun {
        try ToolProcess.run("mirror", arguments, input: input, timeout: timeout)
    }
}

/// Reads lines from `handle` until there are `count`, or `seconds` pass with none ready to read (the poll's limit):
/// the lines read, for the test to assert on.
func readLines(_ handle: FileHandle, count: Int, within seconds: Double) -> [String] {
    var lines: [String] = []
    let deadline = Date().addingTimeInterval(seconds)
    while lines.count < count {
        let left = Int32(max(0, deadline.timeIntervalSinceNow) * 1000)
        var pfd = pollfd(fd: handle.fileDescriptor, events: Int16(POLLIN), revents: 0)
        guard poll(&pfd, 1, left) > 0 else { break }
        let chunk = handle.availableData
        if chunk.isEmpty { break }
        lines += String(decoding: chunk, as: UTF8.self).split(separator: "\n").map(String.init)
    }
    return lines
}

/// Reads `handle` until what was read contains `marker`, or the stream ends (the process exited): what was read.
/// Bounded by the writer: each read returns what it wrote, or end of file once it has gone (a ProcessWatchdog
/// bounds a writer that hangs).
func readUntil(_ handle: FileHandle, contains marker: String) -> Data {
    var seen = Data()
    while !String(decoding: seen, as: UTF8.self).contains(marker) {
        let chunk = handle.availableData
        if chunk.isEmpty { break }
        seen.append(chunk)
    }
    return seen
}
