// How `mirror scan` and `mirror wifi` print the Mirror library's events and results: text lines and JSON.
import ATTStack
import LinkCore
import JSON
import Mirror

/// One event as a JSON object: {"event", "time", then what the event has}.
func mirrorEventJSON(_ e: MirrorEvent) -> JSONValue {
    var f: [(String, JSONValue)] = [("event", .string(mirrorEventName(e))), ("time", .double((e.time * 1000).rounded() / 1000))]
    switch e.kind {
    case .notification(let h), .read(let h), .write(let h), .subscribed(let h): f.append(("handle", .int(Int(h))))
    case .writeResult(let h, let error):
        f.append(("handle", .int(Int(h))))
        f.append(("ok", .bool(error == nil)))
        if let error { f.append(("error", .string(error))) }
    case .upload(let u):
        switch u {
        case .received(let r):
            f.append(("path", .string(r.path)))
            f.append(("bytes", .int(r.bytes)))
            f.append(("sha256", .string(r.sha256)))
            f.append(("framing", .string(r.framing)))
            f.append(("entries", r.entries.map { .array($0.map { .string($0.name) }) } ?? .null))
            if let p = r.zipProblem { f.append(("zipProblem", .string(p))) }
        case .rejected(let method, let path, let status, let reason):
            f.append(("method", .string(method)))
            f.append(("path", .string(path)))
            f.append(("status", .int(status)))
            f.append(("reason", .string(reason)))
        }
    case .uploadListening, .step, .failed: break
    }
    if let c = e.characteristic { f.append(("characteristic", .string(c))) }
    if let v = e.value { f.append(("value", .string(ATTHex.string(v)))) }
    if let d = e.decoded { f.append(("decoded", .string(d))) }
    if let p = e.purpose { f.append(("purpose", .string(p))) }
    if let d = e.detail { f.append(("detail", .string(d))) }
    return .object(f)
}

func mirrorEventName(_ e: MirrorEvent) -> String {
    switch e.kind {
    case .notification: return e.purpose == "indication" ? "indication" : "notification"
    case .read: return "read"
    case .write: return "write"
    case .writeResult: return "writeResult"
    case .subscribed: return "subscribed"
    case .uploadListening: return "uploadListening"
    case .upload(let u): if case .received = u { return "upload" } else { return "uploadRejected" }
    case .step: return "step"
    case .failed: return "failed"
    }
}

/// One event as a text line: "  0.093  NOTIFY scanError = scaleAlignment (0b)". Escaped for a terminal as a
/// whole (TerminalText): a decoded SSID, an upload's ZIP entry names and a refused request's text are the peer's.
func mirrorEventText(_ e: MirrorEvent) -> String {
    TerminalText.escaped(mirrorEventLine(e))
}

private func mirrorEventLine(_ e: MirrorEvent) -> String {
    let t = fixedPoint(e.time, decimals: 3, width: 7)
    let name = e.characteristic ?? "?"
    let value: String = {
        guard let v = e.value else { return "" }
        let hex = ATTHex.string(v, separator: " ")
        if let d = e.decoded, !d.isEmpty { return "\(d) (\(hex.isEmpty ? "empty" : hex))" }
        return hex.isEmpty ? "(empty)" : hex
    }()
    switch e.kind {
    case .notification(let h): return "\(t)  NOTIFY \(e.characteristic ?? ATTHex.handle(h)) = \(value)"
    case .read: return "\(t)  read \(name) = \(value)" + (e.purpose.map { " [\($0)]" } ?? "")
    case .write: return "\(t)  write \(name) = \(value)" + (e.purpose.map { " [\($0)]" } ?? "")
    case .writeResult(_, let error): return "\(t)  \(name): " + (error.map { "write failed: \($0)" } ?? "Write Response")
    case .subscribed: return "\(t)  subscribed to \(name)"
    case .uploadListening: return "\(t)  upload receiver \(e.detail ?? "")"
    case .upload(let u):
        switch u {
        case .received(let r):
            let entries = r.zipProblem.map { "not the expected result ZIP: \($0)" } ?? (r.entries ?? []).map(\.name).joined(separator: ", ")
            return "\(t)  UPLOAD \(r.bytes) bytes (\(r.framing)) -> \(r.path), sha256 \(r.sha256), entries: \(entries)"
        case .rejected(let method, let path, let status, let reason):
            return "\(t)  upload refused: \(method) \(path): HTTP \(status), \(reason)"
        }
    case .step: return "\(t)  \(e.detail ?? "")"
    case .failed: return "\(t)  \(e.detail ?? "failed")"
    }
}

func uploadJSON(_ u: ReceivedUpload?) -> JSONValue {
    guard let u else { return .null }
    return .object([("path", .string(u.path)), ("bytes", .int(u.bytes)), ("sha256", .string(u.sha256)),
                    ("entries", u.entries.map { .array($0.map { .string($0.name) }) } ?? .null)])
}

/// The result object --json ends with.
func scanResultJSON(_ r: MirrorScanResult) -> JSONValue {
    func text(_ s: String?) -> JSONValue { s.map { JSONValue.string($0) } ?? .null }
    var f: [(String, JSONValue)] = []
    f.append(("event", .string("result")))
    f.append(("outcome", .string(r.outcome.rawValue)))
    f.append(("scanState", text(r.scanState)))
    f.append(("scanError", text(r.scanError)))
    f.append(("finalRead", .bool(r.finalRead)))
    f.append(("sawAnyScanState", .bool(r.sawAnyScanState)))
    f.append(("notifications", .int(r.notifications)))
    f.append(("preflightScanState", text(r.preflightScanState)))
    f.append(("resetAttempted", .bool(r.resetAttempted)))
    f.append(("resetWorked", r.resetWorked.map { JSONValue.bool($0) } ?? .null))
    f.append(("upload", uploadJSON(r.upload)))
    f.append(("scanID", .string(r.scanID)))
    f.append(("uploadURL", .string(r.uploadURL)))
    f.append(("failure", text(r.failure)))
    if r.scanErrorMeaning != nil || r.advice != nil {
        f.append(("scanErrorMeaning", text(r.scanErrorMeaning)))
        f.append(("advice", text(r.advice)))
    }
    f.append(("rejectedBy", text(r.rejectedBy)))
    if let found = r.cloudTokenLimit {
        f.append(("cloudTokenLimit", .object([("accepted", found.accepted.map { JSONValue.int($0) } ?? .null), ("refused", .int(found.refused))])))
    }
    if r.outcome == .interrupted { f.append(("cancelScanSent", r.cancelScanSent.map { JSONValue.bool($0) } ?? .null)) }
    f.append(("seconds", .double((r.seconds * 1000).rounded() / 1000)))
    return .object(f)
}

/// The result in words.
func scanResultText(_ r: MirrorScanResult) -> String {
    var lines = ["scan \(r.scanID): \(r.outcome.rawValue)" + (r.failure.map { ": \($0)" } ?? "")]
    lines.append("  final scanState \(r.scanState ?? "unknown"), scanError \(r.scanError ?? "unknown")"
                 + (r.finalRead ? "" : " (last known: the final read failed)"))
    if let advice = r.advice { lines.append("  what to do: \(advice)") }
    if let found = r.cloudTokenLimit { lines.append("  cloudToken: \(found)") }
    lines.append("  sawAnyScanState \(r.sawAnyScanState), \(r.notifications) notification\(r.notifications == 1 ? "" : "s")")
    lines.append("  pre-flight scanState \(r.preflightScanState ?? "not read")"
                 + (r.resetAttempted ? ", cancelScan sent, reset \(r.resetWorked == true ? "worked" : "did not work")" : ""))
    if r.outcome == .interrupted {
        lines.append("  " + (r.cancelScanSent.map { $0 ? "cancelScan sent after the interrupt: the mirror stops" : "cancelScan after the interrupt got no answer: the mirror may go on" }
                             ?? "nothing had started: no cancelScan needed"))
    }
    if let u = r.upload {
        lines.append("  upload: \(u.path), \(u.bytes) bytes, sha256 \(u.sha256)")
    } else {
        lines.append("  upload: none (the mirror was told \(r.uploadURL))")
    }
    return lines.map(TerminalText.escaped).joined(separator: "\n")
}
