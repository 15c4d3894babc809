// Runs the built `mirror` binary as a subprocess and collects what it printed and how it exited.
import Foundation
import JSON
import XCTest
import MirrorCommandLine

/// One finished run of `mirror`.
struct MirrorRun {
    var status: Int32
    var stdout: String
    var stderr: String

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
    /// The `mirror` executable in the products directory that holds the test bundle (.build/<triple>/debug).
    static var executable: URL {
        var dir = Bundle(for: BundleMarker.self).bundleURL
        if dir.pathExtension == "xctest" { dir.deleteLastPathComponent() }
        return dir.appendingPathComponent("mirror")
    }

    /// Runs `mirror` with `arguments`; fails the test if it does not end within `timeout` seconds.
    static func run(_ arguments: [String], timeout: Double = 60, file: StaticString = #filePath, line: UInt = #line) throws -> MirrorRun {
        let process = Process()
        process.executableURL = executable
        process.arguments = arguments
        let out = Pipe()
        let err = Pipe()
        process.standardOutput = out
        process.standardError = err
        process.standardInput = FileHandle.nullDevice
        let done = DispatchSemaphore(value: 0)
        process.terminationHandler = { _ in done.signal() }
        try process.run()
        // Drain both pipes while it runs, so a large output cannot block it.
        nonisolated(unsafe) var outData = Data()
        nonisolated(unsafe) var errData = Data()
        let group = DispatchGroup()
        DispatchQueue.global().async(group: group) { outData = out.fileHandleForReading.readDataToEndOfFile() }
        DispatchQueue.global().async(group: group) { errData = err.fileHandleForReading.readDataToEndOfFile() }
        if done.wait(timeout: .now() + timeout) == .timedOut {
            process.terminate()
            _ = done.wait(timeout: .now() + 5)
            XCTFail("mirror \(arguments.joined(separator: " ")) did not finish in \(timeout) s", file: file, line: line)
        }
        group.wait()
        return MirrorRun(status: process.terminationStatus,
                         stdout: String(decoding: outData, as: UTF8.self),
                         stderr: String(decoding: errData, as: UTF8.self))
    }
}

private final class BundleMarker {}
