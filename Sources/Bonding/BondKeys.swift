// The bond store between pairings and connections: a pairing's keys saved, and the adapter's stored keys loaded
// into the kernel before a connection to a bonded peer (the kernel keeps them only in memory: a reset, a replug or a
// reboot forgets them; mgmt Load Long Term Keys, Load Identity Resolving Keys).
import LinuxBluetooth

/// Why the adapter's stored keys were not loaded into the kernel.
public enum BondKeysError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The store holds more keys for `adapter` than one Load Long Term Keys command takes (`maximum`).
    case tooManyKeys(adapter: String, maximum: Int)

    public var description: String {
        switch self {
        case .tooManyKeys(let adapter, let maximum):
            "the bond store for \(adapter) holds more keys than Load Long Term Keys takes (\(maximum))"
        }
    }
}

public enum BondKeys {
    /// Saves the bond a pairing's key events give (only keys with Store_Hint: both sides asked to bond); the
    /// sentence to print, and the file.
    public static func save(_ events: [ManagementEvent], peer: BluetoothAddress, method: BondMethod, adapter: HCIAdapter,
                     now: Int) throws -> (text: String, file: String?) {
        guard let bond = Bond(adapter: adapter.address, peer: peer, events: events, method: method, bondedAt: now) else {
            return ("not bonded: no key to keep (the peer asked for no bonding), so the next connection pairs again", nil)
        }
        let store = try BondStore.standard()
        try store.save(bond)
        let file = store.path(adapter: adapter.address, peer: bond.peer)
        return ("bonded: \(bond.keySummary); kept in \(file)", file)
    }

    /// Before a connection to `peer` on `adapter`: when this tool's store holds a bond with it (and bluetoothd does
    /// not run: the caller asks, as bluetoothd loads its own keys and a Load Long Term Keys replaces the adapter's whole
    /// list), loads every key the store holds for the adapter into the kernel. Needs the capability
    /// keeper (a trusted management socket). Returns a note for stderr when keys were loaded, and whether the bond's
    /// key is authenticated (else a raise to high would need a new MITM pairing: Vol 3 Part H §2.3.5.1).
    /// `identity`: for a resolvable private address resolved by a stored IRK (now in the kernel too), the bonded
    /// identity to connect to: with the IRK loaded the kernel resolves the peer's advertisements to its identity and
    /// matches a pending LE connection by that (hci_event.c), so a connection asked by the RPA would never be made.
    public static func loadIfBonded(peer: BluetoothAddress, type: LEAddressType = .public, adapter: HCIAdapter) throws
        -> (note: String, authenticated: Bool, identity: (address: BluetoothAddress, type: LEAddressType)?)? {
        let store = try BondStore.standard()
        guard let (bond, resolvedNote) = bond(in: store, adapter: adapter.address, peer: peer, type: type) else { return nil }
        let keys = store.keys(adapter: adapter.address)
        guard !keys.longTermKeys.isEmpty else { return nil }
        guard let ltks = ManagementCommand.loadLongTermKeys(index: adapter.index, keys: keys.longTermKeys),
              let irks = ManagementCommand.loadIdentityResolvingKeys(index: adapter.index, keys: keys.identityResolvingKeys) else {
            throw BondKeysError.tooManyKeys(adapter: adapter.name, maximum: ManagementCommand.maximumLongTermKeys)
        }
        let socket = try ManagementSocket(adapter: adapter.name)
        try socket.run(ltks)
        try socket.run(irks)
        let head = resolvedNote.map { "\($0)\nnote: " } ?? ""
        let loadedNote = "loaded \(keys.longTermKeys.count) long term key\(keys.longTermKeys.count == 1 ? "" : "s") of \(store.adapterDirectory(adapter.address)) into the kernel for \(adapter.name) (the bond with \(peer))"
        guard resolvedNote != nil, bond.identityResolvingKey != nil else { return (head + loadedNote, bond.authenticated, nil) }
        return (head + loadedNote + "\nnote: connecting to the identity \(bond.peer) (\(bond.peerType)): the kernel, holding its IRK now, finds the peer by its private addresses",
                bond.authenticated, (bond.peer, bond.peerType))
    }

    /// The bond with `peer` in `store`: by its address, or, for a resolvable private address (Vol 6 Part B
    /// §1.3.2.2), the bond whose IRK resolves it (Vol 3 Part H §2.2.2), with a note saying so.
    public static func bond(in store: BondStore, adapter: BluetoothAddress, peer: BluetoothAddress,
                     type: LEAddressType) -> (Bond, String?)? {
        if let bond = try? store.load(adapter: adapter, peer: peer) { return (bond, nil) }
        guard type == .random, AddressResolution.isResolvable(peer),
              let bond = (try? store.resolve(peer, adapter: adapter)) ?? nil else { return nil }
        return (bond, "\(peer) (resolvable private address) resolves to the bonded identity \(bond.peer) (\(bond.peerType)), bonded \(utcDateTime(unixSeconds: bond.bondedAt))")
    }

    /// What is said under bluetoothd when the adapter is not known: it owns the keys, none of this store's are loaded.
    public static let daemonRunsNote = "bluetoothd runs: it holds the keys on this machine, so mirror loads none of its own bonds"

    /// Under bluetoothd (the coexistence rule): it owns the adapter's keys, so this tool loads none of its store and
    /// says whose bond the link encrypts with: bluetoothd's for `peer` (its info file), none (how to pair), or not
    /// known (its store is root's).
    public static func daemonNote(peer: BluetoothAddress, adapter: BluetoothAddress, adapterName: String,
                                  root: String = BlueZStorage.defaultRoot) -> String {
        let head = daemonRunsNote
        do {
            if try BlueZStorage.bond(adapter: adapter, peer: peer, root: root) != nil {
                return "\(head); the link encrypts with bluetoothd's bond with \(peer) (\(root)/\(adapter)/\(peer)/info)"
            }
            return "\(head); bluetoothd has no bond with \(peer) on \(adapterName): pair with `bluetoothctl pair \(peer)`"
        } catch {
            return "\(head); whether bluetoothd has a bond with \(peer) is not known here (\(error))"
        }
    }
}
