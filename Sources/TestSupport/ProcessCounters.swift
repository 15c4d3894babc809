// The test process's own resource counters, for leak tests: open descriptors and resident memory (Linux /proc).
import Foundation

/// The process's open file descriptors (/proc/self/fd).
public func openFileDescriptors() -> Int {
    ((try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd"))?.count ?? 1) - 1
}

/// Resident set size in KiB (VmRSS of /proc/self/status).
public func residentKiB() -> Int {
    guard let s = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return 0 }
    for line in s.split(separator: "\n") where line.hasPrefix("VmRSS:") {
        return Int(line.split(separator: " ", omittingEmptySubsequences: true)[1]) ?? 0
    }
    return 0
}
