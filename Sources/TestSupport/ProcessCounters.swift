// The test process's own resource counters, for leak tests: open descriptors and resident memory (Linux /proc).
import Foundation
import CBlueZSocket

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

/// Heap bytes allocated and not yet freed, in KiB: what a leak of objects grows, without the allocator's cached
/// pages, thread stacks or a sanitizer's own shadow memory that RSS also counts.
public func heapInUseKiB() -> Int { Int(cbz_heap_in_use() / 1024) }

/// Whether a sanitizer's runtime (ASan, TSan) is in this process: its shadow memory and thread records grow RSS
/// with every thread made, whatever the program frees.
public var underSanitizer: Bool { cbz_under_sanitizer() != 0 }
