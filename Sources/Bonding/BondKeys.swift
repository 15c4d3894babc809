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

/// A pairing's bond refused: it came through another address than the identity it names (a resolvable private
/// address, Vol 6 Part B §1.3.2.2), that identity already has a bond here, and the stored bond's IRK does not
/// resolve that address (ah, Vol 3 Part H §2.2.2): another device may be claiming the identity (§2.4.2.1).
public struct BondOverwriteError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The identity address the pairing's Identity Address Information named.
    public var identity: BluetoothAddress
    /// The address the pairing came through.
    public var pairedThrough: BluetoothAddress
    /// The stored bond's file, left as it was.
    public var file: String
    /// Whether the stored bond has an IRK: without one nothing shows the two addresses are one device.
    public var storedHasIRK: Bool

    public init(identity: BluetoothAddress, pairedThrough: BluetoothAddress, file: String, storedHasIRK: Bool) {
        self.identity = identity
        self.pairedThrough = pairedThrough
        self.file = file
        self.storedHasIRK = storedHasIRK
    }

    public var description: String {
        let why = storedHasIRK ? "the stored bond's IRK does not resolve \(pairedThrough)"
                               : "the stored bond holds no IRK to show that \(pairedThrough) is the same device"
        return "refusing to save the bond of \(identity), paired through \(pairedThrough), over the bond of \(identity) kept in \(file): \(why), so another device may be claiming \(identity)'s identity address; the stored bond is kept. If \(identity) itself was reset and paired again, remove its old bond (`mirror bonds remove \(identity)`) and pair again, or pass --repair to replace it"
    }
}

public enum BondKeys {
    /// Saves the bond a pairing's key events give (only keys with Store_Hint: both sides asked to bond); the
    /// sentence to print, and the file. A bond of an identity other than `peer` (the pairing came through a private
    /// address) is not saved over that identity's stored bond unless its IRK resolves `peer` or `replacing`
    /// (--repair): `BondOverwriteError`. `store` defaults to the standard one.
    public static func save(_ events: [ManagementEvent], peer: BluetoothAddress, method: BondMethod, adapter: HCIAdapter,
                     now: Int, replacing: Bool = false, store given: BondStore? = nil) throws -> (text: String, file: String?) {
        guard let bond = Bond(adapter: adapter.address, peer: peer, events: events, method: method, bondedAt: now) else {
            return ("not bonded: no key to keep (the peer asked for no bonding), so the next connection pairs again", nil)
        }
        let store = try given ?? BondStore.standard()
        if !replacing { try checkIdentity(of: bond, pairedThrough: peer, store: store) }
        try store.save(bond)
        let file = store.path(adapter: adapter.address, peer: bond.peer)
        return ("bonded: \(bond.keySummary); kept in \(file)", file)
    }

    /// Throws `BondOverwriteError` when `bond` names an identity other than `address` (Identity Address Information,
    /// Vol 3 Part H §3.6.5) that has a stored bond whose IRK does not resolve `address` (ah, §2.2.2).
    public static func checkIdentity(of bond: Bond, pairedThrough address: BluetoothAddress, store: BondStore) throws {
        guard bond.peer != address, let stored = try store.load(adapter: bond.adapter, peer: bond.peer) else { return }
        if let irk = stored.identityResolvingKey, try AddressResolution.resolves(address, irk: irk) { return }
        throw BondOverwriteError(identity: bond.peer, pairedThrough: address, file: store.path(adapter: bond.adapter, peer: bond.peer),
                                 storedHasIRK: stored.identityResolvingKey != nil)
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
