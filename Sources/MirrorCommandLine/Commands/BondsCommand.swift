// mirror bonds list|remove [TARGET]: the bonds on disk (Bonding's BondStore, $XDG_STATE_HOME/mirror/bonds), and
// bluetoothd's (/var/lib/bluetooth, read only). `remove` also asks the kernel to forget its copy (Unpair Device,
// mgmt-api.txt 0x001B) when an adapter with that address is here.
import ATTStack
import Bonding
import JSON
import LinkCore
import LinuxBluetooth

let bondsCommand = Command(CommandSpec(
    name: "bonds",
    summary: "list or remove the bonds (LE pairing keys) kept per adapter and peer",
    discussion: """
        A bond is the keys two devices exchanged when they paired (Core Spec Vol 3 Part H §3.6): Long Term Keys \
        (one per role after legacy pairing, one for both after Secure Connections), the peer's Identity Resolving \
        Key and signature keys. mirror keeps them in readable JSON files, private to the user (files 0600, \
        directories 0700), in $XDG_STATE_HOME/mirror/bonds/ADAPTER/PEER.json (else ~/.local/state/mirror/bonds). \
        `list` shows each peer with its address type, the keys held, the key size, whether the pairing was \
        authenticated (MITM protection), how and when it was made; bonds that bluetoothd holds in \
        /var/lib/bluetooth (readable by root) are listed too, marked as bluetoothd's; no key is printed. \
        `remove` deletes TARGET's file and, when an adapter with that address is here and the kernel lets this \
        process (CAP_NET_ADMIN), sends Unpair Device so that the kernel forgets its copy too; otherwise it says \
        that the kernel's copy was not touched. bluetoothd's files are never changed (`bluetoothctl remove TARGET`).

        --adapter hciN: only the bonds of that adapter. --json: list prints {"directory", "bonds": [{"adapter", \
        "peer", "peerType", "keys", "keySize", "authenticated", "method", "bonded", "heldBy", "path"} or \
        {"path", "ignored"}]}; remove prints {"removed": [paths], "kernel": [notes], "bluetoothd": [paths]}.
        """,
    positionals: [PositionalSpec("list|remove", help: "what to do"),
                  PositionalSpec("TARGET", optional: true, help: "the peer's identity address (remove)")],
    globals: [.json, .adapter],
    examples: [
        ("mirror bonds list", "every bond, per adapter"),
        ("mirror bonds remove C4:F2:17:1A:1D:BB", "forget the bond with that peer, here and in the kernel"),
    ]
)) { inv in
    let action = inv.arguments.positionals[0]
    guard action == "list" || action == "remove" else {
        throw UsageError("unknown action \"\(action)\": expected list or remove", token: action, command: inv.arguments.command)
    }
    let peer = try inv.positional(1, parseAddress)
    if action == "remove" && peer == nil {
        throw UsageError("missing TARGET: the peer's identity address, as in C4:F2:17:1A:1D:BB", command: inv.arguments.command)
    }
    if action == "list", let extra = inv.arguments.positionals.dropFirst().first {
        throw UsageError("list takes no TARGET", token: extra, command: inv.arguments.command)
    }
    let store = try BondStore.standard()
    let adapters: [BluetoothAddress]? = try inv.global.adapter.map { [try HCIAdapter.resolve($0).address] }
    if let peer {
        // `remove` kept the capabilities on the keeper (MirrorMain.mayNeedRawHCI) to bind a trusted management socket.
        defer { Privilege.dropAll("after bonds remove's Unpair Device") }
        let outcome = try BondsRemoval.run(store: store, peer: peer, adapters: adapters)
        if inv.global.json {
            inv.console.json(outcome.json)
        } else {
            for line in outcome.lines { inv.console.out(TerminalText.escaped(line)) }
        }
    } else {
        let listing = BondsListing(store: store, adapters: adapters)
        if inv.global.json {
            inv.console.json(listing.json)
        } else {
            for line in listing.lines { inv.console.out(TerminalText.escaped(line)) }
        }
    }
    return .success
}
