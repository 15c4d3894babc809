// Bond removal (`mirror bonds remove`, --repair): a peer's bond file deleted under each adapter, the kernel's copy
// forgotten with Unpair Device (mgmt-api.txt 0x001B), bluetoothd's copies named and left alone.
import ATTStack
import JSON
import LinkCore
import LinuxBluetooth

/// A bond removed (`bonds remove TARGET`): the files removed, what the kernel said, and bluetoothd's copies (left alone).
public struct BondsRemoval: Sendable {
    public var removed: [String] = []
    public var kernel: [String] = []
    public var bluetoothd: [String] = []
    public var directory = ""
    public var peer: BluetoothAddress

    /// Removes `peer`'s file under each adapter (the ones given, else every one with a bonds directory) and asks
    /// the kernel of each adapter here to unpair it; `unpair` is the kernel's side (replaced in tests).
    public static func run(store: BondStore, peer: BluetoothAddress, adapters: [BluetoothAddress]?, bluezRoot: String = BlueZStorage.defaultRoot,
                    unpair: (BluetoothAddress, BluetoothAddress, LEAddressType) -> String = kernelUnpair) throws(BondStoreError) -> BondsRemoval {
        var outcome = BondsRemoval(directory: store.directory, peer: peer)
        for adapter in adapters ?? store.adapters() {
            let type = (try? store.load(adapter: adapter, peer: peer))??.peerType ?? .public
            guard try store.remove(adapter: adapter, peer: peer) else { continue }
            outcome.removed.append(store.path(adapter: adapter, peer: peer))
            outcome.kernel.append(unpair(adapter, peer, type))
        }
        for adapter in adapters ?? BondStore.namesOfAdapters(in: bluezRoot) {
            if case .success(let b)? = BlueZStorage.bonds(adapter: adapter, root: bluezRoot).first(where: { (try? $0.bond.get().peer) == peer })?.bond {
                outcome.bluetoothd.append("\(bluezRoot)/\(b.adapter)/\(b.peer)/info")
            }
        }
        return outcome
    }

    /// Unpair Device (0x001B) on the adapter here whose address is `adapter`; the sentence saying what came of it.
    public static func kernelUnpair(adapter: BluetoothAddress, peer: BluetoothAddress, type: LEAddressType) -> String {
        let untouched = "the kernel's copy of the bond with \(peer) on \(adapter) was not touched"
        let here: HCIAdapter
        do {
            guard let a = try HCIAdapter.list().first(where: { $0.address == adapter }) else { return "\(untouched): no adapter \(adapter) here" }
            here = a
        } catch {
            return "\(untouched): \(error)"
        }
        do {
            let socket = try ManagementSocket(adapter: here.name)
            try socket.run(.unpairDevice(index: here.index, address: peer, addressType: type))
            return "the kernel forgot its keys for \(peer) on \(here.name) (Unpair Device)"
        } catch {
            // mgmt-api.txt's Not Paired (0x06): the kernel held no keys for it.
            if case .managementCommandFailed(_, _, 0x06?, _) = error { return "the kernel held no keys for \(peer) on \(here.name)" }
            return "\(untouched): \(error)"
        }
    }

    public var lines: [String] {
        if removed.isEmpty && bluetoothd.isEmpty { return ["no bond with \(peer) in \(directory)"] }
        return removed.map { "removed \($0)" } + kernel
            + bluetoothd.map { "bluetoothd holds a bond with \(peer) in \($0), left alone: `bluetoothctl remove \(peer)` forgets it" }
    }

    public var json: JSONValue {
        .object([("removed", .array(removed.map { .string($0) })), ("kernel", .array(kernel.map { .string($0) })),
                 ("bluetoothd", .array(bluetoothd.map { .string($0) }))])
    }
}

extension BondStore {
    /// The adapters (directories named by address) under `root`: bluetoothd's store, or a bonds directory.
    public static func namesOfAdapters(in root: String) -> [BluetoothAddress] {
        BondStore(directory: root).adapters()
    }
}
