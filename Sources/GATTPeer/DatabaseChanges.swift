// What changed between two discoveries of a database (a stored copy and the one served now): services, includes,
// characteristics and descriptors added, removed or moved (Core Spec Vol 3 Part G §2.5.2: handles may change).
import ATTStack
import GATTClient
import GATTVocabulary

/// One difference between a stored database and the one discovered now, known by UUID and handle.
public struct GATTDatabaseChange: Sendable, Equatable, CustomStringConvertible {
    /// What happened to the item.
    public enum Change: String, Sendable { case added, removed, moved }
    /// Added, removed or moved.
    public var change: Change
    /// "service", "include", "characteristic", "descriptor".
    public var kind: String
    /// Its UUID (a service's, an include's, a characteristic's, a descriptor's type).
    public var uuid: BluetoothUUID
    /// Where it is now (removed: where it was).
    public var handle: UInt16
    /// Where it was, for a move.
    public var from: UInt16?
    /// What it belongs to: "service 180f", "characteristic 2a19 of service 180f"; nil for a service.
    public var parent: String?

    /// One change, as `between` finds them.
    public init(change: Change, kind: String, uuid: BluetoothUUID, handle: UInt16, from: UInt16? = nil, parent: String?) {
        self.change = change
        self.kind = kind
        self.uuid = uuid
        self.handle = handle
        self.from = from
        self.parent = parent
    }

    /// "moved characteristic 2a19 from 0x0007 to 0x000A in service 180f"
    public var description: String {
        let within = parent.map { " in \($0)" } ?? ""
        switch change {
        case .added: return "added \(kind) \(uuid) at \(ATTHex.handle(handle))\(within)"
        case .removed: return "removed \(kind) \(uuid) from \(ATTHex.handle(handle))\(within)"
        case .moved: return "moved \(kind) \(uuid) from \(ATTHex.handle(from ?? 0)) to \(ATTHex.handle(handle))\(within)"
        }
    }

    /// The changes from `old` to `new`, in the new database's handle order, then what was removed. Each item is
    /// known by its UUID, its parent's identity and its rank among its siblings with that UUID, so that an item
    /// at a new handle is a move, not a removal and an addition.
    public static func between(_ old: [GATTService], _ new: [GATTService]) -> [GATTDatabaseChange] {
        let before = items(old), after = items(new)
        let oldByKey = Dictionary(before.map { ($0.key, $0) }, uniquingKeysWith: { a, _ in a })
        let newKeys = Set(after.map(\.key))
        var out: [GATTDatabaseChange] = []
        for item in after {
            if let was = oldByKey[item.key] {
                if was.handle != item.handle {
                    out.append(GATTDatabaseChange(change: .moved, kind: item.kind, uuid: item.uuid, handle: item.handle,
                                                  from: was.handle, parent: item.parent))
                }
            } else {
                out.append(GATTDatabaseChange(change: .added, kind: item.kind, uuid: item.uuid, handle: item.handle, parent: item.parent))
            }
        }
        for item in before where !newKeys.contains(item.key) {
            out.append(GATTDatabaseChange(change: .removed, kind: item.kind, uuid: item.uuid, handle: item.handle, parent: item.parent))
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

extension GATTDatabaseCache {
    /// The store's copy (whatever the peer's hash says; nil when none is usable), the peer's Database Hash, and what
    /// changed from that copy to the database discovered now, which is stored as `discovered` would and kept for
    /// the connection (`storedAndDiscovered`).
    public func changesSinceStored() async throws(GATTError) -> (stored: GATTCachedDatabase?, peerHash: [UInt8]?, changes: [GATTDatabaseChange]) {
        let (stored, peerHash, services) = try await storedAndDiscovered()
        return (stored, peerHash, stored.map { GATTDatabaseChange.between($0.services, services) } ?? [])
    }
}
