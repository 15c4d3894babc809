// bearer-e2e: drives the socket bearer end to end, for the Bluetooth VM (and AF_UNIX here). Prints JSON lines.
//
//   bearer-e2e listen [unix:/path] [--adapter hci1] [--type public|random] [--advertise NAME] [--accept-timeout S]
//       [--snoop FILE] [--drop-caps]   (--drop-caps: drop every capability once listening and advertising)
//       accepts one connection (LE CID 4 on the adapter, or the unix path), echoes every PDU back unchanged,
//       prints {"event":...} lines: listening, advertising, accepted, pdu, closed. Exits 0 when the peer ends
//       the link (EOF, or ECONNRESET: how a central's disconnect reaches an LE peripheral).
//   bearer-e2e connect ADDRESS|unix:/path [--adapter hci0] [--type public|random] [--timeout S] [--count N]
//       [--size B] [--echo-timeout S] [--security low|medium|high] [--snoop FILE]
//       connects, sends N PDUs (Write Command 0x52, handle = sequence number), checks each echo, prints one
//       JSON result: {"ok":true,...} or {"ok":false,"stage":...,"error":"<the error's sentence>",...}.
//   listen --eatt N [--eatt-mtu M]: also listens for Enhanced ATT bearers (ECRED, PSM 0x0027) on the adapter and
//       accepts up to N after the CID 4 connection, each echoing too ({"event":"eatt-accepted",...}, or "eatt-listen-failed").
//   connect --eatt N [--eatt-mtu M] [--eatt-pdu HEX]: after the CID 4 exchange opens N Enhanced ATT bearers, echoes
//       one PDU on each (or sends HEX and reports the answer), and reports each one's CIDs and MTUs in "eatt".
//   bearer-e2e drop-caps      prints CapEff/CapPrm from /proc/self/status before and after dropping every capability.
//   bearer-e2e bench [--count N] [--rounds R] [--size B]   round trips in microseconds: a bare blocking
//       send/recv loop against the bearer (with a semaphore hop, chained on the reader thread, server only).
//   bearer-e2e adapters [--json] | doctor [--json]
//   bearer-e2e scan --adapter hci0 [--seconds S]      LE scan (the kernel's discovery, mgmt), one JSON line per device.
//   bearer-e2e advertise --adapter hci1 [--name N] [--stop]
// Exit status: 0 on success, 1 on failure, 2 on a usage error.

import ATTStack
import HostEnvironment
import LinuxBluetooth
import LinkCore
import Dispatch
import Foundation
import JSON
import TestSupport

// MARK: Output

/// Prints `object` as one line of JSON with its keys sorted (the scripts in tools/vm read these lines).
func emit(_ object: [String: Any]) {
    FileHandle.standardOutput.write(Data((jsonValue(object).compact + "\n").utf8))
}

/// The JSON value of what `emit` is given: strings, numbers, booleans, arrays and objects (keys sorted).
func jsonValue(_ any: Any) -> JSONValue {
    switch any {
    case let b as Bool: return .bool(b)
    case let s as String: return .string(s)
    case let i as any BinaryInteger: return .int(Int(truncatingIfNeeded: i))
    case let d as Double: return .double(d)
    case let a as [Any]: return .array(a.map(jsonValue))
    case let o as [String: Any]: return .object(o.keys.sorted().map { ($0, jsonValue(o[$0]!)) })
    default: return .string(String(describing: any))
    }
}

func usage(_ message: String) -> Never {
    FileHandle.standardError.write(Data("bearer-e2e: \(message)\nusage: bearer-e2e listen|connect|drop-caps|adapters|doctor|scan|advertise ... (see tools/bearer-e2e/main.swift)\n".utf8))
    exit(2)
}

/// The fields of an error a script can check: kind, syscall, errno name, and the sentence.
func errorFields(_ e: TransportError) -> [String: Any] {
    var f: [String: Any] = ["error": e.description]
    switch e {
    case .socket(let s):
        f["kind"] = "socket"; f["syscall"] = s.syscall; f["errno"] = s.errnoName; f["errno_meaning"] = s.errnoMeaning
    case .connectTimedOut(_, let seconds): f["kind"] = "connectTimedOut"; f["seconds"] = seconds
    case .noSuchAdapter: f["kind"] = "noSuchAdapter"
    case .adapterDown: f["kind"] = "adapterDown"
    case .invalidTarget: f["kind"] = "invalidTarget"
    case .closedByPeer: f["kind"] = "closedByPeer"
    case .closedLocally: f["kind"] = "closedLocally"
    case .truncated: f["kind"] = "truncated"
    case .hciCommandFailed: f["kind"] = "hciCommandFailed"
    case .managementCommandFailed: f["kind"] = "managementCommandFailed"
    case .enhancedBearerRefused(_, let result): f["kind"] = "enhancedBearerRefused"; f["l2cap_result"] = Int(result.rawValue)
    case .handshakeTimedOut(_, _, let seconds): f["kind"] = "handshakeTimedOut"; f["seconds"] = seconds
    }
    return f
}

// MARK: Arguments

struct Options {
    var positional: [String] = []
    var values: [String: String] = [:]
    var flags: Set<String> = []

    init(_ args: ArraySlice<String>, valued: Set<String>, flags known: Set<String>) {
        var i = args.startIndex
        while i < args.endIndex {
            let a = args[i]
            if valued.contains(a) {
                guard i + 1 < args.endIndex else { usage("\(a) needs a value") }
                values[a] = args[i + 1]
                i += 2
            } else if known.contains(a) {
                flags.insert(a)
                i += 1
            } else if a.hasPrefix("--") {
                usage("unknown option \(a)")
            } else {
                positional.append(a)
                i += 1
            }
        }
    }

    func double(_ name: String, _ def: Double) -> Double {
        guard let v = values[name] else { return def }
        guard let d = Double(v), d >= 0 else { usage("\(name) needs a number of seconds, got \(v)") }
        return d
    }

    func int(_ name: String, _ def: Int) -> Int {
        guard let v = values[name] else { return def }
        guard let d = Int(v), d >= 0 else { usage("\(name) needs a whole number, got \(v)") }
        return d
    }

    var addressType: LEAddressType {
        guard let t = values["--type"] else { return .public }
        guard let type = LEAddressType(name: t) else { usage("--type is public or random, got \(t)") }
        return type
    }

    func snoop() -> BTSnoopWriter? {
        guard let path = values["--snoop"] else { return nil }
        do { return try BTSnoopWriter(path: path) } catch {
            emit(["ok": false, "stage": "snoop"].merging(errorFields(error)) { a, _ in a })
            exit(1)
        }
    }
}

// MARK: listen

/// Echoes every PDU back; waits for POLLOUT when the send buffer is full. Runs on the bearer's reader thread.
final class EchoSink: ATTTransportSink {
    private struct State {
        var bearer: ATTBearer?
        var queue: [[UInt8]] = []
        var count = 0
    }
    // Guards the echo queue and the bearer reference (set once after accept).
    private let state = Lock(State())
    let closed = DispatchSemaphore(value: 0)
    let reason = Lock<TransportError?>(nil)

    func attach(_ b: ATTBearer) { state.withLock { $0.bearer = b } }

    func transport(didReceive pdu: [UInt8]) {
        let n = state.withLock { s -> Int in
            s.count += 1
            s.queue.append(pdu)
            return s.count
        }
        emit(["event": "pdu", "seq": n, "length": pdu.count, "opcode": pdu.first.map { "0x" + ATTHex.fixed(UInt64($0), digits: 2, lowercase: true) } ?? "none"])
        flush()
    }

    private func flush() {
        guard let b = state.withLock({ $0.bearer }) else { return }
        while let next = state.withLock({ $0.queue.first }) {
            do {
                let r = try sendBytes(b, next)
                if r == .wouldBlock {
                    b.whenWritable { [self] in self.flush() }
                    return
                }
                state.withLock { _ = $0.queue.removeFirst() }
            } catch {
                emit(["event": "echo-failed"].merging(errorFields(error)) { a, _ in a })
                return
            }
        }
    }

    func transport(didCloseWith reason: TransportError) {
        let count = state.withLock { $0.count }
        emit(["event": "closed", "pdus": count].merging(errorFields(reason)) { a, _ in a })
        self.reason.withLock { $0 = reason }
        closed.signal()
    }
}

func listen(_ o: Options) -> Int32 {
    let snoop = o.snoop()
    let listener: ATTBearerListener
    do {
        if let t = o.positional.first {
            guard case .unix(let path) = try BearerTarget(parsing: t) else { usage("listen takes unix:/path or --adapter hciN") }
            listener = try ATTBearerListener.unix(path: path)
        } else {
            listener = try ATTBearerListener.le(adapter: o.values["--adapter"], addressType: o.addressType)
        }
    } catch let e as BearerTargetError {
        emit(["ok": false, "stage": "listen"].merging(errorFields(.invalidTarget(e))) { a, _ in a })
        return 1
    } catch {
        emit(["ok": false, "stage": "listen"].merging(errorFields(error as! TransportError)) { a, _ in a })
        return 1
    }
    emit(["event": "listening", "on": listener.label])
    if let name = o.values["--advertise"], let adapter = o.values["--adapter"] {
        do {
            try LEAdvertiser.start(adapter: adapter, name: name)
            emit(["event": "advertising", "adapter": adapter, "name": name])
        } catch {
            emit(["ok": false, "stage": "advertise"].merging(errorFields(error)) { a, _ in a })
            return 1
        }
    }
    if o.flags.contains("--drop-caps") {
        // The listening socket (and advertising) are set up: nothing privileged is needed from here on.
        do {
            try Capabilities.dropAll()
            emit(["event": "capabilities-dropped", "CapEff": statusCaps()["CapEff"] ?? "?"])
        } catch {
            emit(["ok": false, "stage": "drop-caps"].merging(errorFields(error)) { a, _ in a })
            return 1
        }
    }
    let eattCount = o.int("--eatt", 0)
    var eattListener: ATTBearerListener? = nil
    if eattCount > 0 {
        do {
            let l = try ATTBearerListener.leEnhanced(adapter: o.values["--adapter"], mtu: o.int("--eatt-mtu", ATTMTU.maximum))
            emit(["event": "eatt-listening", "on": l.label])
            eattListener = l
        } catch {
            emit(["event": "eatt-listen-failed"].merging(errorFields(error)) { a, _ in a })
        }
    }
    let bearer: ATTBearer
    do {
        bearer = try listener.accept(timeout: o.values["--accept-timeout"].map { _ in o.double("--accept-timeout", 0) })
    } catch {
        emit(["ok": false, "stage": "accept"].merging(errorFields(error)) { a, _ in a })
        return 1
    }
    listener.close()
    if let eattListener {
        // Each Enhanced ATT bearer echoes as CID 4 does, on its own reader; the listener closes with the link.
        let accept = Thread {
            for _ in 0..<eattCount {
                do throws(TransportError) {
                    let b = try eattListener.accept(timeout: 60)
                    var e: [String: Any] = ["event": "eatt-accepted", "peer": b.label]
                    if let cids = b.channelIDs { e["cid"] = Int(cids.local); e["remote_cid"] = Int(cids.remote) }
                    if let m = try? b.l2capMTUs() { e["l2cap_mtu"] = ["send": m.send, "receive": m.receive] }
                    emit(e)
                    let sink = EchoSink()
                    sink.attach(b)
                    b.start(sink)
                } catch {
                    emit(["event": "eatt-accept-failed"].merging(errorFields(error)) { a, _ in a })
                    return
                }
            }
        }
        accept.start()
    }
    var accepted: [String: Any] = ["event": "accepted", "peer": bearer.label]
    if case .le = bearer.endpoint, let m = try? bearer.l2capMTUs() {
        accepted["l2cap_mtu"] = ["send": m.send, "receive": m.receive]
    }
    emit(accepted)
    if let snoop { bearer.capture(into: snoop) }
    let sink = EchoSink()
    sink.attach(bearer)
    bearer.start(sink)
    sink.closed.wait()
    snoop?.close()
    // Over LE, a central's normal disconnect (Remote User Terminated) reaches the peripheral as ECONNRESET.
    switch sink.reason.withLock({ $0 }) {
    case .closedByPeer?, .closedLocally?: return 0
    case .socket(let e)? where e.errno == .connectionReset: return 0
    default: return 1
    }
}

// MARK: connect

/// Collects echoes for the connecting side.
final class CheckSink: ATTTransportSink {
    // Guards the received echoes and the close reason.
    let state = Lock<(pdus: [[UInt8]], closed: TransportError?)>(([], nil))
    let signal = DispatchSemaphore(value: 0)
    func transport(didReceive pdu: [UInt8]) {
        state.withLock { $0.pdus.append(pdu) }
        signal.signal()
    }
    func transport(didCloseWith reason: TransportError) {
        state.withLock { $0.closed = reason }
        signal.signal()
    }
}

func connect(_ o: Options) -> Int32 {
    guard let t = o.positional.first else { usage("connect needs an ADDRESS or unix:/path") }
    let target: BearerTarget
    do { target = try BearerTarget(parsing: t) } catch {
        emit(["ok": false, "stage": "parse"].merging(errorFields(.invalidTarget(error))) { a, _ in a })
        return 1
    }
    let count = o.int("--count", 10)
    let size = max(3, min(o.int("--size", 20), 517))
    let echoTimeout = o.double("--echo-timeout", 5)
    var security: BTSecurityLevel? = nil
    if let s = o.values["--security"] {
        guard let l = BTSecurityLevel(name: s) else { usage("--security is low, medium, high or fips") }
        security = l
    }
    let snoop = o.snoop()
    let started = ContinuousClock.now
    let bearer: ATTBearer
    do {
        bearer = try ATTBearer.connect(to: target, type: o.addressType, adapter: o.values["--adapter"],
                                       timeout: o.double("--timeout", ATTBearer.defaultConnectTimeout), security: security)
    } catch {
        var f: [String: Any] = ["ok": false, "stage": "connect", "target": target.description]
        f["elapsed_ms"] = ms(started.duration(to: .now))
        emit(f.merging(errorFields(error)) { a, _ in a })
        return 1
    }
    let connectMs = ms(started.duration(to: .now))
    if let snoop { bearer.capture(into: snoop) }
    let sink = CheckSink()
    bearer.start(sink)
    var rtts: [Double] = []
    var result: [String: Any] = ["target": target.description, "label": bearer.label, "connect_ms": connectMs, "count": count, "size": size]
    if case .le = bearer.endpoint, let m = try? bearer.l2capMTUs() { result["l2cap_mtu"] = ["send": m.send, "receive": m.receive] }
    var failure: [String: Any]? = nil
    exchange: for i in 0..<count {
        var pdu: [UInt8] = [0x52, UInt8(i & 0xFF), UInt8(i >> 8 & 0xFF)]
        pdu += (0..<(size - 3)).map { UInt8(truncatingIfNeeded: i &+ $0) }
        let t0 = ContinuousClock.now
        while true {
            do {
                let r = try sendBytes(bearer, pdu)
                if r == .sent { break }
                let writable = DispatchSemaphore(value: 0)
                bearer.whenWritable { writable.signal() }
                if writable.wait(timeout: .now() + echoTimeout) == .timedOut {
                    failure = ["stage": "send", "error": "the send buffer stayed full for \(echoTimeout) s", "seq": i]
                    break exchange
                }
            } catch {
                failure = ["stage": "send", "seq": i].merging(errorFields(error)) { a, _ in a }
                break exchange
            }
        }
        // Wait for echo number i.
        while true {
            let (n, closed) = sink.state.withLock { ($0.pdus.count, $0.closed) }
            if n > i { break }
            if let closed {
                failure = ["stage": "echo", "seq": i].merging(errorFields(closed)) { a, _ in a }
                break exchange
            }
            if sink.signal.wait(timeout: .now() + echoTimeout) == .timedOut {
                failure = ["stage": "echo", "seq": i, "error": "no echo of PDU \(i) within \(echoTimeout) s"]
                break exchange
            }
        }
        rtts.append(us(t0.duration(to: .now)))
        let echo = sink.state.withLock { $0.pdus[i] }
        if echo != pdu {
            failure = ["stage": "echo", "seq": i, "error": "echo \(i) differs: sent \(pdu.count) bytes starting \(pdu.prefix(4)), got \(echo.count) starting \(echo.prefix(4))"]
            break exchange
        }
    }
    let eattCount = o.int("--eatt", 0)
    if failure == nil, eattCount > 0, case .bluetooth(let address) = target {
        var opened: [ATTBearer] = []
        var reports: [[String: Any]] = []
        for n in 1...eattCount {
            do {
                let b = try ATTBearer.connectEnhanced(to: address, type: o.addressType, adapter: o.values["--adapter"],
                                                      mtu: o.int("--eatt-mtu", ATTMTU.maximum), timeout: o.double("--timeout", ATTBearer.defaultConnectTimeout))
                opened.append(b)
                var r: [String: Any] = ["bearer": n, "label": b.label]
                if let cids = b.channelIDs { r["cid"] = Int(cids.local); r["remote_cid"] = Int(cids.remote) }
                if let m = try? b.l2capMTUs() { r["l2cap_mtu"] = ["send": m.send, "receive": m.receive] }
                if let m = try? b.enhancedMTU() { r["mtu"] = m }
                let echoSink = CheckSink()
                b.start(echoSink)
                // --eatt-pdu HEX: a request whose answer is reported (a GATT server); else a Write Command to be echoed.
                let request = o.values["--eatt-pdu"].map { hex($0) }
                let pdu: [UInt8] = request ?? ([0x52, UInt8(n), 0x00] + [UInt8](repeating: UInt8(n), count: max(0, min(size, (try? b.enhancedMTU()) ?? 64) - 3)))
                do {
                    _ = try sendBytes(b, pdu)
                    _ = echoSink.signal.wait(timeout: .now() + echoTimeout)
                    let got = echoSink.state.withLock { $0.pdus.first }
                    if request != nil {
                        r["answer"] = got.map { ATTHex.string($0, separator: " ") } ?? "none within \(echoTimeout) s"
                    } else {
                        r["echoed"] = got == pdu
                        if got != pdu { r["echo_error"] = got == nil ? "no echo within \(echoTimeout) s" : "the echo differs" }
                    }
                } catch {
                    r["echo_error"] = "\(error)"
                }
                reports.append(r)
            } catch {
                reports.append(["bearer": n].merging(errorFields(error)) { a, _ in a })
            }
        }
        result["eatt"] = reports
        for b in opened { b.close(reason: "bearer-e2e done") }
    }
    bearer.close(reason: "bearer-e2e done")
    _ = sink.signal.wait(timeout: .now() + 5)
    snoop?.close()
    result["echoed"] = rtts.count
    if !rtts.isEmpty {
        let sorted = rtts.sorted()
        result["rtt_us"] = ["median": sorted[sorted.count / 2], "p99": sorted[min(sorted.count - 1, sorted.count * 99 / 100)], "max": sorted.last!]
    }
    if let failure {
        emit(result.merging(failure) { _, b in b }.merging(["ok": false]) { _, b in b })
        return 1
    }
    result["ok"] = true
    emit(result)
    return 0
}

/// Milliseconds, to 0.1 ms.
func ms(_ d: Duration) -> Double {
    ((Double(d.components.seconds) * 1000 + Double(d.components.attoseconds) / 1e15) * 10).rounded() / 10
}

/// Microseconds.
func us(_ d: Duration) -> Double {
    Double(d.components.seconds) * 1e6 + Double(d.components.attoseconds) / 1e12
}

func sendBytes(_ b: ATTBearer, _ pdu: [UInt8]) throws(TransportError) -> ATTSendResult {
    try pdu.withUnsafeBytes { p in Result { () throws(TransportError) in try b.trySend(p) } }.get()
}

// MARK: drop-caps

func statusCaps() -> [String: String] {
    let text = (try? String(contentsOfFile: "/proc/self/status", encoding: .utf8)) ?? ""
    var out: [String: String] = [:]
    for line in text.split(separator: "\n") where line.hasPrefix("Cap") {
        let parts = line.split(separator: ":", maxSplits: 1)
        if parts.count == 2 { out[String(parts[0])] = parts[1].trimmingCharacters(in: .whitespaces) }
    }
    return out
}

func dropCaps() -> Int32 {
    let before = statusCaps()
    do {
        try Capabilities.dropAll()
    } catch {
        emit(["ok": false, "before": before].merging(errorFields(error)) { a, _ in a })
        return 1
    }
    let after = statusCaps()
    let lib = try? Capabilities.process()
    emit(["ok": true, "before": before, "after": after, "libcap_effective_after": lib?.effective.description ?? "unknown",
          "raw_hci_check_after": Capabilities.checkRawHCI().summary])
    return 0
}

// MARK: bench

final class BenchEcho: ATTTransportSink {
    let peer = Lock<ATTBearer?>(nil)
    func transport(didReceive pdu: [UInt8]) { if let p = peer.withLock({ $0 }) { _ = try? sendBytes(p, pdu) } }
    func transport(didCloseWith reason: TransportError) {}
}

final class BenchWaiter: ATTTransportSink {
    let got = DispatchSemaphore(value: 0)
    func transport(didReceive pdu: [UInt8]) { got.signal() }
    func transport(didCloseWith reason: TransportError) { got.signal() }
}

/// The client's sink sends the next PDU itself, on the reader thread (no hop to a waiting thread).
final class BenchChain: ATTTransportSink {
    let left = Lock(0)
    let done = DispatchSemaphore(value: 0)
    let bearer = Lock<ATTBearer?>(nil)
    let pdu: [UInt8]
    init(pdu: [UInt8]) { self.pdu = pdu }
    func transport(didReceive _: [UInt8]) {
        let more = left.withLock { n -> Bool in n -= 1; return n > 0 }
        if more, let b = bearer.withLock({ $0 }) { _ = try? sendBytes(b, pdu) } else if !more { done.signal() }
    }
    func transport(didCloseWith reason: TransportError) { done.signal() }
}

/// Round trips of a Write Request-sized PDU, in microseconds each, four ways:
///   bare: a blocking send/recv loop against an echo thread (the baseline);
///   bearer: two bearers, the client thread waits on a semaphore its sink signals (one extra thread hop);
///   chained: two bearers, the client's sink sends the next PDU from the reader thread;
///   server: a bare blocking client against a bearer echo server (the bearer's own cost).
/// Each mode runs `rounds` times, interleaved; the report keeps each mode's best round (the least disturbed
/// by other processes on a shared machine) and the median round.
func bench(_ o: Options) -> Int32 {
    let count = o.int("--count", 20000)
    let rounds = max(1, o.int("--rounds", 5))
    let size = max(1, min(o.int("--size", 20), 517))
    // A Write Request to 0x0003 of `size` bytes in all (its value is size-3 bytes).
    let pdu = ATTPDU.writeRequest(handle: 0x0003, value: ArraySlice(repeating: 0x5A, count: max(0, size - 3))).bytes
    let perRound = max(1, count / rounds)

    func bare() -> Double {
        var fds: [Int32] = [-1, -1]
        guard socketpair(AF_UNIX, Int32(SOCK_SEQPACKET.rawValue), 0, &fds) == 0 else { usage("socketpair failed") }
        let server = fds[1], client = fds[0]
        let echo = Thread {
            var buf = [UInt8](repeating: 0, count: 1024)
            while true {
                let n = recv(server, &buf, buf.count, 0)
                if n <= 0 { break }
                _ = send(server, buf, n, 0)
            }
            close(server)
        }
        echo.start()
        var buf = [UInt8](repeating: 0, count: 1024)
        for _ in 0..<200 { _ = send(client, pdu, pdu.count, 0); _ = recv(client, &buf, buf.count, 0) }
        let t0 = ContinuousClock.now
        for _ in 0..<perRound {
            _ = send(client, pdu, pdu.count, 0)
            _ = recv(client, &buf, buf.count, 0)
        }
        let r = us(t0.duration(to: .now)) / Double(perRound)
        close(client)
        return r
    }

    func hop() -> Double {
        guard let (a, b) = try? ATTBearer.pair() else { usage("pair failed") }
        let e = BenchEcho()
        e.peer.withLock { $0 = b }
        b.start(e)
        let w = BenchWaiter()
        a.start(w)
        for _ in 0..<200 { _ = try? sendBytes(a, pdu); w.got.wait() }
        let t0 = ContinuousClock.now
        for _ in 0..<perRound {
            _ = try? sendBytes(a, pdu)
            w.got.wait()
        }
        let r = us(t0.duration(to: .now)) / Double(perRound)
        a.close(reason: "bench done")
        b.close(reason: "bench done")
        return r
    }

    func chained() -> Double {
        guard let (a, b) = try? ATTBearer.pair() else { usage("pair failed") }
        let e = BenchEcho()
        e.peer.withLock { $0 = b }
        b.start(e)
        let chain = BenchChain(pdu: pdu)
        chain.bearer.withLock { $0 = a }
        chain.left.withLock { $0 = perRound }
        a.start(chain)
        let t0 = ContinuousClock.now
        _ = try? sendBytes(a, pdu)
        chain.done.wait()
        let r = us(t0.duration(to: .now)) / Double(perRound)
        a.close(reason: "bench done")
        b.close(reason: "bench done")
        return r
    }

    func server() -> Double {
        var fds: [Int32] = [-1, -1]
        guard socketpair(AF_UNIX, Int32(SOCK_SEQPACKET.rawValue), 0, &fds) == 0 else { usage("socketpair failed") }
        guard let bearer = try? ATTBearer(adoptingConnected: fds[1], label: "bench server") else { usage("adopt failed") }
        let e = BenchEcho()
        e.peer.withLock { $0 = bearer }
        bearer.start(e)
        var buf = [UInt8](repeating: 0, count: 1024)
        for _ in 0..<200 { _ = send(fds[0], pdu, pdu.count, 0); _ = recv(fds[0], &buf, buf.count, 0) }
        let t0 = ContinuousClock.now
        for _ in 0..<perRound {
            _ = send(fds[0], pdu, pdu.count, 0)
            _ = recv(fds[0], &buf, buf.count, 0)
        }
        let r = us(t0.duration(to: .now)) / Double(perRound)
        close(fds[0])
        bearer.close(reason: "bench done")
        return r
    }

    var samples: [String: [Double]] = [:]
    for _ in 0..<rounds {
        samples["bare", default: []].append(bare())
        samples["bearer", default: []].append(hop())
        samples["chained", default: []].append(chained())
        samples["server", default: []].append(server())
    }
    func r2(_ x: Double) -> Double { (x * 100).rounded() / 100 }
    let best = samples.mapValues { $0.min()! }
    let median = samples.mapValues { $0.sorted()[$0.count / 2] }
    var out: [String: Any] = ["count": perRound * rounds, "rounds": rounds, "size": pdu.count]
    for mode in ["bare", "bearer", "chained", "server"] {
        out["\(mode)_us_best"] = r2(best[mode]!)
        out["\(mode)_us_median"] = r2(median[mode]!)
        if mode != "bare" {
            out["\(mode)_ratio_best"] = r2(best[mode]! / best["bare"]!)
            out["\(mode)_ratio_median"] = r2(median[mode]! / median["bare"]!)
        }
    }
    emit(out)
    return 0
}

// MARK: main

let args = CommandLine.arguments
guard args.count >= 2 else { usage("missing a subcommand") }
let rest = args.dropFirst(2)
let status: Int32
switch args[1] {
case "listen":
    status = listen(Options(rest, valued: ["--adapter", "--type", "--advertise", "--accept-timeout", "--snoop", "--eatt", "--eatt-mtu"], flags: ["--drop-caps"]))
case "connect":
    status = connect(Options(rest, valued: ["--adapter", "--type", "--timeout", "--count", "--size", "--echo-timeout", "--security", "--snoop", "--eatt", "--eatt-mtu", "--eatt-pdu"], flags: []))
case "drop-caps":
    status = dropCaps()
case "bench":
    status = bench(Options(rest, valued: ["--count", "--size", "--rounds"], flags: []))
case "adapters":
    let o = Options(rest, valued: [], flags: ["--json"])
    let r = AdaptersReport.collect()
    print(o.flags.contains("--json") ? r.json : r.text, terminator: o.flags.contains("--json") ? "\n" : "")
    status = r.error == nil ? 0 : 1
case "doctor":
    let o = Options(rest, valued: [], flags: ["--json"])
    let r = BluetoothDoctor.run()
    print(o.flags.contains("--json") ? r.json : r.text, terminator: o.flags.contains("--json") ? "\n" : "")
    status = r.isHealthy ? 0 : 1
case "scan":
    let o = Options(rest, valued: ["--adapter", "--seconds"], flags: [])
    guard let adapter = o.values["--adapter"] else { usage("scan needs --adapter hciN") }
    do {
        for r in try LEScanner.scan(adapter: adapter, seconds: o.double("--seconds", 3)) {
            emit(["address": r.address.description, "type": r.addressType.description, "rssi": Int(r.rssi),
                  "connectable": r.isConnectable, "name": r.localName ?? ""])
        }
        status = 0
    } catch {
        emit(["ok": false, "stage": "scan"].merging(errorFields(error)) { a, _ in a })
        status = 1
    }
case "advertise":
    let o = Options(rest, valued: ["--adapter", "--name"], flags: ["--stop"])
    guard let adapter = o.values["--adapter"] else { usage("advertise needs --adapter hciN") }
    do {
        if o.flags.contains("--stop") { try LEAdvertiser.stop(adapter: adapter) } else {
            try LEAdvertiser.start(adapter: adapter, name: o.values["--name"] ?? "bearer-e2e")
        }
        emit(["ok": true, "adapter": adapter, "advertising": !o.flags.contains("--stop")])
        status = 0
    } catch {
        emit(["ok": false, "stage": "advertise"].merging(errorFields(error)) { a, _ in a })
        status = 1
    }
default:
    usage("unknown subcommand \(args[1])")
}
exit(status)
