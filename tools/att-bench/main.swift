// att-bench: the ATT codec benchmark (Core Spec 5.4 Vol 3 Part F §3.4 PDUs).
// For each PDU kind of a realistic client mix, and for the mix: PDUs per second and nanoseconds per
// PDU to decode and to encode (into a caller's buffer), and heap allocations per decode and per encode,
// counted by CAllocCounter's malloc interposition. Times are this thread's CPU time
// (CLOCK_THREAD_CPUTIME_ID), so time spent descheduled on a shared machine does not count. Run as release:
//   swift run -c release att-bench [--json] [--iterations N] [--check]
// --check exits 1 when decoding a fixed-size PDU or a notification allocates, or a 20-byte Write
// Command or notification takes 100 ns or more to decode or to encode.
import ATTStack
import LinuxBluetooth
import LinkCore
import CAllocCounter
#if canImport(Glibc)
import Glibc
#endif

/// One PDU kind of the mix: its wire bytes.
struct Kind {
    let name: String
    let bytes: [UInt8]
    /// Decoding it must not allocate (fixed-size PDUs and values read as borrowed views).
    let mustNotAllocate: Bool
}

/// What was measured for one kind.
struct Result {
    let name: String
    let length: Int
    let decodeNs: Double
    let encodeNs: Double
    let allocsPerDecode: Double
    let allocsPerEncode: Double
    var decodePerSecond: Double { 1e9 / decodeNs }
    var encodePerSecond: Double { 1e9 / encodeNs }
}

func pdu(_ p: ATTPDU) -> [UInt8] { p.bytes }
func payload(_ n: Int, seed: UInt8) -> ArraySlice<UInt8> { ArraySlice((0..<n).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ Int(seed)) }) }

// A realistic client mix at MTU 23 (Linux's default connection, no Exchange MTU): data flowing as
// notifications and write commands, a few acknowledged writes, discovery responses, and errors.
let kinds: [Kind] = [
    Kind(name: "notification20", bytes: pdu(.handleValueNotification(handle: 0x002A, value: payload(20, seed: 1))), mustNotAllocate: true),
    Kind(name: "writeCommand20", bytes: pdu(.writeCommand(handle: 0x0031, value: payload(20, seed: 2))), mustNotAllocate: true),
    Kind(name: "writeRequest4", bytes: pdu(.writeRequest(handle: 0x0032, value: payload(4, seed: 3))), mustNotAllocate: true),
    Kind(name: "writeResponse", bytes: pdu(.writeResponse), mustNotAllocate: true),
    Kind(name: "readByTypeResponse3", bytes: pdu(.readByTypeResponse(try! ATTAttributeDataList([
        (handle: 0x0002, value: [0x02, 0x03, 0x00, 0x00, 0x2A]),
        (handle: 0x0004, value: [0x02, 0x05, 0x00, 0x01, 0x2A]),
        (handle: 0x0006, value: [0x0A, 0x07, 0x00, 0x05, 0x2A]),
    ]))), mustNotAllocate: true),
    Kind(name: "readByGroupTypeResponse3", bytes: pdu(.readByGroupTypeResponse(try! ATTGroupAttributeDataList([
        (handle: 0x0001, endGroup: 0x0007, value: [0x00, 0x18]),
        (handle: 0x0008, endGroup: 0x000B, value: [0x01, 0x18]),
        (handle: 0x000C, endGroup: 0xFFFF, value: [0x0F, 0x18]),
    ]))), mustNotAllocate: true),
    Kind(name: "errorResponse", bytes: pdu(.errorResponse(requestOpcode: .readByTypeRequest, handle: 0x0007, error: .attributeNotFound)),
         mustNotAllocate: true),
]

/// The mix, by index into `kinds`: 40% notifications, 30% write commands, the rest spread out.
let mixPattern: [Int] = [0, 1, 0, 1, 0, 2, 3, 0, 1, 4, 5, 6, 0, 1, 0, 2, 3, 0, 1, 6]

// MARK: Measurement

@inline(never) func consume(_ pdu: ATTPDU) -> Int {
    // Reads what a receive path reads, through the borrowed views.
    switch pdu {
    case .handleValueNotification(let handle, let value), .writeCommand(let handle, let value), .writeRequest(let handle, let value):
        return Int(handle) &+ value.count &+ Int(value.first ?? 0)
    case .readByTypeResponse(let list):
        var n = 0
        for e in list { n &+= Int(e.handle) &+ e.value.count }
        return n
    case .readByGroupTypeResponse(let list):
        var n = 0
        for e in list { n &+= Int(e.endGroup) &+ e.value.count }
        return n
    case .errorResponse(_, let handle, let error): return Int(handle) &+ Int(error.rawValue)
    default: return 1
    }
}

@inline(never) func opaque<T>(_ x: T) -> T { x }

/// The bench runs on one thread: its cost is that thread's CPU time.
func now() -> UInt64 { threadCPUNanoseconds() }

/// Decodes each PDU of `inputs` in turn, `rounds` times; returns (ns per PDU, allocations per PDU).
func measureDecode(_ inputs: [[UInt8]], rounds: Int) -> (Double, Double) {
    let inputs = opaque(inputs)
    var sink = 0
    for input in inputs { sink &+= consume(try! ATTPDU.decode(input)) } // warm up
    let allocs0 = cac_allocation_count()
    let t0 = now()
    for _ in 0..<rounds {
        // Indexing borrows each input (iterating with `for in` would copy it: a retain per PDU).
        for i in inputs.indices {
            do { sink &+= consume(try ATTPDU.decode(inputs[i])) } catch { fatalError("\(error)") }
        }
    }
    let t1 = now()
    let allocs = cac_allocation_count() - allocs0
    let count = Double(rounds * inputs.count)
    _ = opaque(sink)
    return (Double(t1 - t0) / count, Double(allocs) / count)
}

/// Encodes each PDU into one caller buffer, `rounds` times; returns (ns per PDU, allocations per PDU).
func measureEncode(_ inputs: [[UInt8]], rounds: Int) -> (Double, Double) {
    let pdus = opaque(inputs.map { try! ATTPDU.decode($0) })
    var sink = 0
    let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: ATTMTU.maximum, alignment: 8)
    defer { buffer.deallocate() }
    for p in pdus { sink &+= try! p.encode(into: buffer) }
    let allocs0 = cac_allocation_count()
    let t0 = now()
    // Through a buffer pointer each PDU is borrowed in place (an array subscript would copy it out).
    pdus.withUnsafeBufferPointer { pdus in
        for _ in 0..<rounds {
            for i in pdus.indices {
                do { sink &+= try pdus[i].encode(into: buffer) &+ Int(buffer[0]) } catch { fatalError("\(error)") }
            }
        }
    }
    let t1 = now()
    let allocs = cac_allocation_count() - allocs0
    let count = Double(rounds * pdus.count)
    _ = opaque(sink)
    return (Double(t1 - t0) / count, Double(allocs) / count)
}

// MARK: Arguments

var json = false
var check = false
var only: String? = nil
var iterations = 2_000_000
var args = CommandLine.arguments.dropFirst()
while let arg = args.popFirst() {
    switch arg {
    case "--json": json = true
    case "--check": check = true
    case "--only": only = args.popFirst()
    case "--iterations":
        guard let v = args.popFirst(), let n = Int(v), n > 0 else {
            print("att-bench: --iterations needs a positive number")
            exit(2)
        }
        iterations = n
    case "-h", "--help":
        print("usage: att-bench [--json] [--iterations N] [--only KIND] [--check]   (build with -c release)")
        exit(0)
    default:
        print("att-bench: unknown argument \(arg) (try --help)")
        exit(2)
    }
}

#if DEBUG
if !json { print("att-bench: warning: a debug build; run `swift run -c release att-bench` for real figures") }
#endif

// The counter must see allocations, or its zeros would mean nothing.
let before = cac_allocation_count()
let probe = opaque([UInt8](repeating: 1, count: opaque(64)))
guard cac_allocation_count() > before, probe.count == 64 else {
    print("att-bench: the allocation counter saw no allocation for a new array: malloc is not interposed")
    exit(1)
}

var results: [Result] = []
for kind in kinds where only == nil || only == kind.name {
    // Best of three runs, so a neighbour's burst on a shared machine does not pose as our cost.
    var best: (Double, Double, Double, Double) = (.infinity, 0, .infinity, 0)
    for _ in 0..<3 {
        let d = measureDecode([kind.bytes], rounds: iterations)
        let e = measureEncode([kind.bytes], rounds: iterations)
        if d.0 < best.0 { best.0 = d.0 }
        if e.0 < best.2 { best.2 = e.0 }
        best.1 = max(best.1, d.1)
        best.3 = max(best.3, e.1)
    }
    results.append(Result(name: kind.name, length: kind.bytes.count, decodeNs: best.0, encodeNs: best.2,
                          allocsPerDecode: best.1, allocsPerEncode: best.3))
}
let mixInputs = mixPattern.map { kinds[$0].bytes }
var mixBest: (Double, Double, Double, Double) = (.infinity, 0, .infinity, 0)
for _ in 0..<3 where only == nil || only == "mix" {
    let rounds = max(1, iterations / mixInputs.count)
    let d = measureDecode(mixInputs, rounds: rounds)
    let e = measureEncode(mixInputs, rounds: rounds)
    if d.0 < mixBest.0 { mixBest.0 = d.0 }
    if e.0 < mixBest.2 { mixBest.2 = e.0 }
    mixBest.1 = max(mixBest.1, d.1)
    mixBest.3 = max(mixBest.3, e.1)
}
let mixLength = mixInputs.reduce(0) { $0 + $1.count } / mixInputs.count
if only == nil || only == "mix" {
results.append(Result(name: "mix", length: mixLength, decodeNs: mixBest.0, encodeNs: mixBest.2,
                      allocsPerDecode: mixBest.1, allocsPerEncode: mixBest.3))
}

// MARK: Output

func fixed(_ v: Double, _ digits: Int) -> String {
    var scale = 1.0
    for _ in 0..<digits { scale *= 10 }
    let r = (v * scale).rounded() / scale
    var s = "\(r)"
    if let dot = s.firstIndex(of: ".") {
        let decimals = s.distance(from: dot, to: s.endIndex) - 1
        if decimals < digits { s += String(repeating: "0", count: digits - decimals) }
    } else if digits > 0 {
        s += "." + String(repeating: "0", count: digits)
    }
    return s
}

func pad(_ s: String, _ width: Int) -> String { s.count >= width ? s : String(repeating: " ", count: width - s.count) + s }

if json {
    var parts: [String] = []
    for r in results {
        parts.append("\"\(r.name)\": {\"bytes\": \(r.length), \"decodeNs\": \(fixed(r.decodeNs, 2)), \"encodeNs\": \(fixed(r.encodeNs, 2)), "
            + "\"decodePerSecond\": \(Int(r.decodePerSecond)), \"encodePerSecond\": \(Int(r.encodePerSecond)), "
            + "\"allocsPerDecode\": \(fixed(r.allocsPerDecode, 4)), \"allocsPerEncode\": \(fixed(r.allocsPerEncode, 4))}")
    }
    print("{" + parts.joined(separator: ", ") + "}")
} else {
    print("att-bench: \(iterations) PDUs per kind, best of 3 runs; encode = encode(into:) a caller's buffer")
    print(pad("kind", 26) + pad("bytes", 7) + pad("decode ns", 11) + pad("decode/s", 13) + pad("encode ns", 11)
        + pad("encode/s", 13) + pad("allocs/dec", 12) + pad("allocs/enc", 12))
    for r in results {
        print(pad(r.name, 26) + pad("\(r.length)", 7) + pad(fixed(r.decodeNs, 1), 11) + pad("\(Int(r.decodePerSecond))", 13)
            + pad(fixed(r.encodeNs, 1), 11) + pad("\(Int(r.encodePerSecond))", 13)
            + pad(fixed(r.allocsPerDecode, 3), 12) + pad(fixed(r.allocsPerEncode, 3), 12))
    }
}

var failures: [String] = []
for r in results where r.allocsPerDecode > 0 && kinds.contains(where: { $0.name == r.name && $0.mustNotAllocate }) {
    failures.append("\(r.name): \(r.allocsPerDecode) allocations per decode (expected 0)")
}
for r in results where r.name == "notification20" || r.name == "writeCommand20" {
    if r.decodeNs >= 100 { failures.append("\(r.name): decode \(fixed(r.decodeNs, 1)) ns (bar: under 100 ns)") }
    if r.encodeNs >= 100 { failures.append("\(r.name): encode \(fixed(r.encodeNs, 1)) ns (bar: under 100 ns)") }
}
if check {
    for f in failures { print("att-bench: FAIL \(f)") }
    if !failures.isEmpty { exit(1) }
    if !json { print("att-bench: bars met (no allocation per decode; 20-byte Write Command and notification under 100 ns)") }
}
