// What a check found: each broken rule with what was seen and the exchange that shows it, as text for a person
// and as JSON for CI.
import ATTStack
import JSON
import LinkCore

/// One rule broken once: what was seen, and the PDUs that show it.
public struct ConformanceFinding: Sendable {
    public var rule: ConformanceRule
    /// What was seen, in one line ("handle 0x0003: Error Response code 0x00, not 0x01 Invalid Handle").
    public var observed: String
    /// The exchange that shows it, as logged.
    public var evidence: [ProbeRecord]

    public init(rule: ConformanceRule, observed: String, evidence: [ProbeRecord]) {
        self.rule = rule
        self.observed = observed
        self.evidence = evidence
    }

    public var json: JSONValue {
        .object([
            ("id", .string(rule.id)), ("level", .string(rule.level.rawValue)), ("citation", .string(rule.citation)),
            ("rule", .string(rule.rule)), ("observed", .string(observed)), ("advice", .string(rule.advice)),
            ("evidence", .array(evidence.map { r in
                .object([("seconds", .double((r.seconds * 1e6).rounded() / 1e6)),
                         ("direction", .string(r.sent ? "sent" : "received")),
                         ("pdu", .string(r.decoded)), ("bytes", .string(ATTHex.string(r.bytes)))])
            })),
        ])
    }
}

/// A rule that was not judged, and why.
public struct ConformanceSkip: Sendable {
    public var rule: ConformanceRule
    public var reason: String
}

/// Everything one check found.
public struct ConformanceReport: Sendable {
    public var target: String
    /// The ATT_MTU the check ran at.
    public var mtu: Int
    /// The rules judged (after --only / --skip).
    public var checked: [ConformanceRule]
    public var findings: [ConformanceFinding]
    public var notRun: [ConformanceSkip]
    /// Requests sent and attributes found.
    public var requests: Int
    public var attributes: Int
    public var seconds: Double
    /// Why the check stopped before its end (the bearer timed out or closed), if it did.
    public var stopped: String?
    /// Whether it stopped because the connection ended or a send failed (not a finding: the check is incomplete).
    public var lostConnection = false

    /// PDUs the server sent past the probe's stored limit (ATTProbe.storedPDULimit): counted, not kept.
    public var notStored = 0

    /// Whether every rule was checked: the check ran to its end.
    public var complete: Bool { stopped == nil }

    /// Whether the check ran to its end and no SHALL is broken: a check that stopped early never passes.
    public var passes: Bool { complete && !brokeShall }

    /// Whether a SHALL is broken.
    public var brokeShall: Bool { findings.contains { $0.rule.level == .shall } }

    /// Evidence lines printed per finding in text (JSON has all).
    public static let textEvidence = 6

    /// Instances (findings) at `level`.
    public func count(_ level: ConformanceLevel) -> Int { findings.filter { $0.rule.level == level }.count }

    /// Rules with at least one finding at `level`.
    public func rulesFound(_ level: ConformanceLevel) -> Int { Set(findings.filter { $0.rule.level == level }.map(\.rule.id)).count }

    /// The findings of each rule, in the catalogue's order, most serious level first.
    public var grouped: [(rule: ConformanceRule, findings: [ConformanceFinding])] {
        var out: [(ConformanceRule, [ConformanceFinding])] = []
        for level in ConformanceLevel.allCases {
            for rule in checked where rule.level == level {
                let mine = findings.filter { $0.rule == rule }
                if !mine.isEmpty { out.append((rule, mine)) }
            }
        }
        return out
    }

    /// The reason of each rule a stopped check did not reach (`stopped` says why it stopped, once).
    public static let stoppedBefore = "the check stopped before it (see stopped)"

    /// Evidence lines printed per rule in text (JSON has all).
    public static let textInstances = 3

    /// The report as text lines; the time of each PDU is seconds since the check began.
    public var textLines: [String] {
        let rules = checked.count == 1 ? "1 rule" : "\(checked.count) rules"
        var lines = ["checked \(target): \(rules), \(requests) requests, \(attributes) attributes, ATT_MTU \(mtu), \(format(seconds)) s"]
        if let stopped { lines.append("stopped early: \(stopped)") }
        if notStored > 0 {
            lines.append("\(notStored) PDUs from the server past the \(ATTProbe.storedPDULimit) kept were counted, not kept")
        }
        var lastLevel: ConformanceLevel?
        for (rule, found) in grouped {
            if rule.level != lastLevel {
                lines.append("")
                lines.append("\(rule.level.heading):")
                lastLevel = rule.level
            }
            lines.append("  \(rule.id) [\(rule.level.rawValue), \(rule.citation)]")
            lines.append("    rule: \(rule.rule)")
            for f in found.prefix(Self.textInstances) {
                lines.append("    seen: \(TerminalText.escaped(f.observed))")
                for r in f.evidence.prefix(Self.textEvidence) {
                    lines.append("      +\(format6(r.seconds)) \(r.sent ? ">" : "<") \(TerminalText.escaped(r.decoded))")
                }
                if f.evidence.count > Self.textEvidence {
                    lines.append("      and \(f.evidence.count - Self.textEvidence) more PDUs (--json lists every one)")
                }
            }
            if found.count > Self.textInstances {
                lines.append("    and \(found.count - Self.textInstances) more like it (--json lists every one)")
            }
            lines.append("    fix: \(rule.advice)")
        }
        if !notRun.isEmpty {
            lines.append("")
            lines.append("not checked:")
            // The rules the stop left unchecked share its one reason, said above: their ids, on one line.
            let unreached = notRun.filter { $0.reason == Self.stoppedBefore }.map(\.rule.id)
            for s in notRun where s.reason != Self.stoppedBefore { lines.append("  \(s.rule.id): \(s.reason)") }
            if !unreached.isEmpty { lines.append("  stopped before: " + unreached.joined(separator: ", ")) }
        }
        lines.append("")
        if findings.isEmpty {
            lines.append("no finding: every rule checked holds")
        } else {
            // Rules counted, their instances beside: 2 rules broken 22 times is "2 SHALL rules broken (22 instances)".
            func counted(_ level: ConformanceLevel, _ what: String) -> String {
                let rules = rulesFound(level), n = count(level)
                return "\(rules) \(what)" + (n == rules ? "" : " (\(n) instances)")
            }
            lines.append(counted(.shall, rulesFound(.shall) == 1 ? "SHALL rule broken" : "SHALL rules broken") + ", "
                         + counted(.should, rulesFound(.should) == 1 ? "SHOULD rule not followed" : "SHOULD rules not followed") + ", "
                         + counted(.note, rulesFound(.note) == 1 ? "note" : "notes"))
        }
        return lines
    }

    public var json: JSONValue {
        .object([
            ("target", .string(target)), ("mtu", .int(mtu)), ("passes", .bool(passes)),
            ("counts", .object(ConformanceLevel.allCases.map { ($0.rawValue, .int(count($0))) })),
            ("ruleCounts", .object(ConformanceLevel.allCases.map { ($0.rawValue, .int(rulesFound($0))) })),
            ("checked", .array(checked.map { .string($0.id) })),
            ("findings", .array(findings.map(\.json))),
            ("notChecked", .array(notRun.map { .object([("id", .string($0.rule.id)), ("reason", .string($0.reason))]) })),
            ("requests", .int(requests)), ("attributes", .int(attributes)),
            ("seconds", .double((seconds * 1000).rounded() / 1000)),
            ("stopped", stopped.map { .string($0) } ?? .null), ("lostConnection", .bool(lostConnection)),
            ("complete", .bool(complete)), ("notStored", .int(notStored)),
        ])
    }
}

/// "1.234" (three decimals).
func format(_ s: Double) -> String { fixedPoint(s, decimals: 3) }

/// "0.012345" (six decimals).
func format6(_ s: Double) -> String { fixedPoint(s, decimals: 6) }
