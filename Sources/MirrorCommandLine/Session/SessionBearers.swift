// --bearers N: what the session's Enhanced ATT bearers (Core Spec 5.4 Vol 3 Part F §3.2.11, Part G §2.4; opened by
// GATTPeer's PeerBearerSetup, listed by its `bearerInfo`) came to, a bearer not opened said on stderr, and the
// bearers listed for `mirror mtu` and `mirror link`.
import ATTStack
import GATTClient
import GATTPeer
import JSON
import LinuxBluetooth
import LinkCore

extension Session {
    /// The notes for what `openEnhancedBearers` could not open: one line per problem, the last saying what the
    /// command goes on over. None when every bearer opened.
    static func bearerNotes(_ outcome: EnhancedBearerOutcome) -> [String] {
        let problems = outcome.problems
        guard !problems.isEmpty else { return [] }
        let open = 1 + outcome.opened.count
        let rest = open == 1 ? "going on over CID 4 alone"
            : "going on over \(open) bearers (CID 4 and \(open - 1) Enhanced ATT bearer\(open == 2 ? "" : "s"))"
        return problems.enumerated().map { i, p in
            "--bearers \(outcome.requested): \(p)" + (i == problems.count - 1 ? "; \(rest)" : "")
        }
    }

    /// The `bearers` object of `mtu --json` and `link --json`: asked, each bearer, and the notes.
    func bearersJSON() -> JSONValue? {
        guard let outcome = peer.enhancedBearerOutcome else { return nil }
        let rows = peer.bearerInfo().map { r -> JSONValue in
            .object([
                ("index", .int(r.index)), ("enhanced", .bool(r.enhanced)),
                ("cid", r.cids.map { .int(Int($0.local)) } ?? .null),
                ("peerCID", r.cids.map { .int(Int($0.remote)) } ?? .null),
                ("mtu", .int(r.mtu)), ("open", .bool(r.open)), ("requestsAnswered", .int(r.requestsAnswered)),
                ("credits", r.credits.jsonValue { .int($0) }),
            ])
        }
        return .object([
            ("asked", .int(outcome.requested)),
            ("open", .int(rows.count { $0["open"] == .bool(true) })),
            ("list", .array(rows)),
            ("notes", .array(Self.bearerNotes(outcome).map { .string($0) })),
        ])
    }

    /// The text lines of the bearers (`mtu`, `link`), when `--bearers` asked for more than one.
    func bearerText() -> [String] {
        guard let outcome = peer.enhancedBearerOutcome else { return [] }
        let rows = peer.bearerInfo()
        var lines = ["bearers: \(rows.count { $0.open }) open of \(outcome.requested) asked"]
        for r in rows {
            let kind = r.enhanced ? "EATT" : "ATT "
            let cid = r.cids.map { "CID \(ATTHex.handle($0.local)) (peer \(ATTHex.handle($0.remote)))" } ?? "CID not reported"
            let credits: String
            switch r.credits {
            case .known(let n, let source): credits = "credits \(n) (\(source))"
            case .unknown(let why): credits = "credits \(why)"
            }
            lines.append("  \(r.index) \(kind) \(cid.padded(toLength: 26)) MTU \(String(r.mtu).padded(toLength: 4)) "
                         + "\(r.open ? "open" : "closed"), \(r.requestsAnswered) answered, \(credits)")
        }
        lines += outcome.problems.map { "  not opened: \($0)" }
        return lines
    }
}
