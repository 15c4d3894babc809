// `mirror bonds list`: the bonds on disk per adapter, mirror's (BondStore) and bluetoothd's (BlueZStorage, read only),
// as lines and as JSON; no key value is ever in either.
import ATTStack
import JSON
import LinuxBluetooth

/// `bonds list`: mirror's bonds and bluetoothd's, per adapter.
public struct BondsListing: Sendable {
    public var directory: String
    /// Per file: the bond and who holds it ("mirror", "bluetoothd"), or why it is ignored.
    public var entries: [(entry: BondEntry, heldBy: String)]

    /// The adapters given, else every adapter with a bonds directory here or in bluetoothd's store.
    public init(store: BondStore, adapters: [BluetoothAddress]?, bluezRoot: String = BlueZStorage.defaultRoot) {
        directory = store.directory
        let fromBlueZ = BondStore.namesOfAdapters(in: bluezRoot)
        let all = adapters ?? Array(Set(store.adapters() + fromBlueZ)).sorted { $0.bytes.lexicographicallyPrecedes($1.bytes) }
        entries = all.flatMap { a in
            store.list(adapter: a).map { ($0, "mirror") } + BlueZStorage.bonds(adapter: a, root: bluezRoot).map { ($0, "bluetoothd") }
        }
    }

    /// One line per file: "PEER (type) on ADAPTER: keys; key size N, authenticated, how, bonded WHEN  PATH".
    public var lines: [String] {
        if entries.isEmpty { return ["no bonds in \(directory)"] }
        return entries.map { e in
            switch e.entry.bond {
            case .success(let b):
                let held = e.heldBy == "mirror" ? "" : ", held by \(e.heldBy)"
                return "\(b.peer) (\(b.peerType)) on \(b.adapter): \(b.keySummary); key size \(b.keySize), "
                    + (b.authenticated ? "authenticated" : "unauthenticated")
                    + (b.method == .unknown ? "" : " (\(b.method.rawValue))") + ", bonded \(utcDateTime(unixSeconds: b.bondedAt))\(held)  \(e.entry.path)"
            case .failure(let problem):
                return "ignored (\(problem))"
            }
        }
    }

    /// `{"directory", "bonds": [{"adapter", "peer", "peerType", "keys", "keySize", "authenticated", "method", "bonded",
    /// "heldBy", "path"} or {"path", "ignored"}]}`.
    public var json: JSONValue {
        .object([
            ("directory", .string(directory)),
            ("bonds", .array(entries.map { e in
                switch e.entry.bond {
                case .success(let b):
                    return .object([
                        ("adapter", .string(b.adapter.description)), ("peer", .string(b.peer.description)),
                        ("peerType", .string(b.peerType.description)), ("keys", .string(b.keySummary)),
                        ("keySize", .int(b.keySize)), ("authenticated", .bool(b.authenticated)), ("method", .string(b.method.rawValue)),
                        ("bonded", .string(utcDateTime(unixSeconds: b.bondedAt))), ("heldBy", .string(e.heldBy)), ("path", .string(e.entry.path)),
                    ])
                case .failure(let problem):
                    return .object([("path", .string(e.entry.path)), ("ignored", .string(problem.description))])
                }
            })),
        ])
    }
}
