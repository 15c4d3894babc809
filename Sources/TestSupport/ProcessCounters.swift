// The test process's own resource counters, for leak tests: open descriptors and resident memory (Linux /proc).
import Foundation
import CBlueZSocket

/// The process's open file descriptors (/proc/self/fd).
public func openFileDescriptors() -> Int {
    ((try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd"))?.count ?? 1) - 1
}

/// The process's open file descriptors, each as "number -> what it names" (a socket's or pipe's inode, a file's
/// path), without the directory listing itself. A leak test compares two of these: an entry present after and not
/// before is a descriptor the work opened and kept, whatever other threads closed meanwhile.
public func openFileDescriptorTable() -> Set<String> {
    let dir = "/proc/self/fd"
    guard let names = try? FileManager.default.contentsOfDirectory(atPath: dir) else { return [] }
    var table = Set<String>()
    for name in names {
        guard let target = try? FileManager.default.destinationOfSymbolicLink(atPath: dir + "/" + name) else { continue }
        if target.hasPrefix("/proc/") && target.hasSuffix("/fd") { continue }
        table.insert("\(name) -> \(target)")
    }
    return table
}

/// The entries of `after` that `before` did not have, sorted: what a leak test reports.
public func descriptorsOpened(between before: Set<String>, and after: Set<String>) -> [String] {
    after.subtracting(before).sorted { (Int($0.prefix { $0 != " " }) ?? 0) < (Int($1.prefix { $0 != " " }) ?? 0) }
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
