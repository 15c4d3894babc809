// What changed between two discoveries of a database (`mirror gatt TARGET --diff`): services, includes,
// characteristics and descriptors added, removed or moved, each by UUID and handle.
import ATTStack
import GATTClient
import JSON
import GATTVocabulary

/// One difference between a cached database and the one discovered now.
struct DatabaseChange: Sendable, Equatable {
    enum Change: String, Sendable { case added, removed, moved }
    var change: Change
    /// "service", "include", "characteristic", "descriptor".
    var kind: String
    var uuid: BluetoothUUID
    /// Where it is now (removed: where it was).
    var handle: UInt16
    /// Where it was, for a move.
    var from: UInt16?
    /// What it belongs to: "service 180f", "characteristic 2a19 of service 180f"; nil for a service.
    var parent: String?

    var text: String {
        let within = parent.map { " in \($0)" } ?? ""
        switch change {
        case .added: return "added \(kind) \(uuid) at \(ATTHex.handle(handle))\(within)"
        case .removed: return "removed \(kind) \(uuid) from \(ATTHex.handle(handle))\(within)"
        case .moved: return "moved \(kind) \(uuid) from \(ATTHex.handle(from ?? 0)) to \(ATTHex.handle(handle))\(within)"
        }
    }

    var json: JSONValue {
        .object([("change", .string(change.rawValue)), ("kind", .string(kind)), ("uuid", .string(uuid.description)),
                 ("handle", .int(Int(handle)))]
                + (from.map { [("from", JSONValue.int(Int($0)))] } ?? [])
                + [("parent", parent.map { .string($0) } ?? .null)])
    }

    /// The changes from `old` to `new`, in the new database's handle order, then what was removed. Each item is
    /// known by its UUID, its parent's identity and its rank among its siblings with that UUID, so that an item
    /// at a new handle is a move, not a removal and an addition.
    static func between(_ old: [GATTService], _ new: [GATTService]) -> [DatabaseChange] {
        let before = items(old), after = items(new)
        let oldByKey = Dictionary(before.map { ($0.key, $0) }, uniquingKeysWith: { a, _ in a })
        let newKeys = Set(after.map(\.key))
        var out: [DatabaseChange] = []
        for item in after {
            if let was = oldByKey[item.key] {
                if was.handle != item.handle {
                    out.append(DatabaseChange(change: .moved, kind: item.kind, uuid: item.uuid, handle: item.handle,
                                              from: was.handle, parent: item.parent))
                }
            } else {
                out.append(DatabaseChange(change: .added, kind: item.kind, uuid: item.uuid, handle: item.handle, parent: item.parent))
            }
        }
        for item in before where !newKeys.contains(item.key) {
            out.append(DatabaseChange(change: .removed, kind: item.kind, uuid: item.uuid, handle: item.handle, parent: item.parent))
        }
        return out
    }

    private struct Item {
        var key: String
        var kind: String
        var uuid: BluetoothUUID
        var handle: UInt16
        var parent: String?
    }

    private static func items(_ services: [GATTService]) -> [Item] {
        var out: [Item] = []
        var rank: [String: Int] = [:]
        func key(_ base: String) -> String {
            let n = rank[base, default: 0]
            rank[base] = n + 1
            return "\(base)#\(n)"
        }
        for s in services {
            let sk = key("service \(s.uuid)")
            let sName = "service \(s.uuid)"
            out.append(Item(key: sk, kind: "service", uuid: s.uuid, handle: s.startHandle, parent: nil))
            for i in s.includedServices {
                out.append(Item(key: key("\(sk)/include \(i.uuid)"), kind: "include", uuid: i.uuid, handle: i.declarationHandle, parent: sName))
            }
            for c in s.characteristics {
                let ck = key("\(sk)/characteristic \(c.uuid)")
                out.append(Item(key: ck, kind: "characteristic", uuid: c.uuid, handle: c.valueHandle, parent: sName))
                for d in c.descriptors {
                    out.append(Item(key: key("\(ck)/descriptor \(d.uuid)"), kind: "descriptor", uuid: d.uuid, handle: d.handle,
                                    parent: "characteristic \(c.uuid) of \(sName)"))
                }
            }
        }
        return out
    }
}

extension Session {
    /// `gatt --diff`: the cached copy (whatever the peer's hash says; nil when there is none usable), and the database
    /// discovered now, stored as `discovered` would and kept for the connection (`GATTDatabaseCache.storedAndDiscovered`).
    func diffAgainstCache() async throws -> (cached: GATTCachedDatabase?, peerHash: [UInt8]?, changes: [DatabaseChange]) {
        guard databaseCache.store != nil else {
            throw UsageError("--diff compares with the GATT cache: it cannot be given with --no-cache", token: "--diff", command: "gatt")
        }
        let (cached, peerHash, services) = try await databaseCache.storedAndDiscovered()
        return (cached, peerHash, cached.map { DatabaseChange.between($0.services, services) } ?? [])
    }
}
