// mirror read TARGET HANDLE|UUID|NAME: one value (long reads automatic), or every value of a UUID.
import ATTStack
import GATTPeer
import JSON

let readCommand = Command(CommandSpec(
    name: "read",
    summary: "read a value by handle, or every value of a characteristic UUID (long reads automatic)",
    discussion: """
        A HANDLE (decimal, or hex with 0x) is read with Read Request, then Read Blob Requests while the value \
        fills the response, up to 512 bytes. A UUID reads with Read By Type over the whole database and prints \
        every matching handle. "1234" is a handle (four decimal digits say so in a note); write "uuid:1234" for the \
        16-bit UUID 0x1234, or "handle:1234" for the handle without the note.

        A NAME is a characteristic's name: the profile's (cloudToken, scanState; --profile) or its User \
        Description (0x2901), found by discovery and read by its value handle like a HANDLE; "name:X" is the \
        name X where X would read as a UUID. A NAME that names no characteristic, or several, is bad usage \
        (exit status 2): the error lists the names known, or the candidates with their value handles. The name \
        `gatt` prints for a well-known UUID works too, quoted when it has spaces ("Device Name").

        A value is printed with its name and what it means beside its hex, however it was asked for: the \
        profile's names (scanState invalid), a Device Name as text, Appearance by its name, CCCD bits (a \
        descriptor named with its characteristic), Battery Level, PnP ID (JSON adds "decoded" and "name"). A \
        UUID says what its values are; a HANDLE is read with no discovery, so it is named from the database known \
        without sending anything (the GATT cache's copy, or what the shell discovered), else printed raw with a \
        note on stderr saying why.
        """,
    positionals: [
        PositionalSpec("TARGET", help: "the device address or unix:PATH"),
        PositionalSpec("HANDLE|UUID|NAME", help: "a handle (18, 0x0012), a UUID (2a00, uuid:1234, 128-bit form) or a name (scanState)",
                       missing: "NAME|HANDLE|UUID (a characteristic's name (scanState, \"Device Name\"), a handle (18, 0x0012) or a UUID (2a00, uuid:1234, 128-bit form))"),
    ],
    globals: GlobalOptionName.connection,
    examples: [
        ("mirror read unix:/tmp/mirror-sim.sock 0x0003", "the value at handle 0x0003"),
        ("mirror read unix:/tmp/mirror-sim.sock 2a00", "the Device Name, by UUID"),
        ("mirror read unix:/tmp/mirror-sim.sock scanState", "a characteristic by its profile name, its value decoded (invalid  [00])"),
        ("mirror read unix:/tmp/mirror-sim.sock uuid:2a01", "the Appearance, by UUID (uuid: and handle: say which a number is)"),
        ("mirror read 00:AA:01:01:00:01 0x0012 --json", "a value as JSON"),
    ]
)) { inv in
    let target = try inv.target()
    let reference = try inv.positional(1, parseCharacteristicReference)!
    if let note = try inv.positional(1, referenceAmbiguity) ?? nil { inv.console.err(note) }
    let session = try await Session.open(target, inv)
    defer { session.close() }
    // A UUID keeps its meaning (Read By Type: every value of it); a name is one characteristic's value handle.
    // After Database Out Of Sync (0x12) the database is resynchronized and a UUID or name read again once.
    let byUUID: Bool
    let values: [(handle: UInt16, value: [UInt8])]
    if case .uuid(let u) = reference {
        byUUID = true
        values = try await session.peer.database.retryingOutOfSync { try await session.peer.lookup.read(uuid: u) }
    } else {
        byUUID = false
        values = try await session.retryingOutOfSync(reference, command: "read") { h in [(h, try await session.peer.lookup.read(handle: h))] }
    }
    // What each value is, however it was asked for (GATTPeer's AttributeIdentity): from the database known without
    // sending anything, or the UUID read; a raw handle neither knows stays raw, and a note says why.
    await session.backgroundDiscoveryDone()
    let identities = await session.peer.lookup.identify(values.map(\.handle), readAs: reference)
    let meanings = zip(values, identities).map { v, identity -> (name: String?, decoded: String?) in
        guard case .success(let identity) = identity else { return (nil, nil) }
        return session.meaning(of: v.value, identity)
    }
    for case .failure(let why) in identities { inv.console.err(notDecodedNote(why)) }
    if inv.global.json {
        let items: [JSONValue] = zip(values, meanings).map { v, m in
            .object([("handle", .int(Int(v.handle))), ("value", .string(ATTHex.string(v.value))),
                     ("text", .string(printableText(v.value))), ("length", .int(v.value.count))]
                    + (m.decoded.map { [("decoded", JSONValue.string($0))] } ?? []) + (m.name.map { [("name", JSONValue.string($0))] } ?? []))
        }
        if !byUUID, let only = items.first {
            inv.console.json(only)
        } else {
            inv.console.json(JSONValue.object([("values", .array(items))]))
        }
    } else {
        for (v, m) in zip(values, meanings) {
            inv.console.out("\(ATTHex.handle(v.handle))\(labelSuffix(m.name)): \(valueText(v.value, decoded: m.decoded))")
        }
    }
    return .success
}

/// Why a value read by handle is printed raw: "note: 0x000C not named or decoded: ...", with what would name it.
func notDecodedNote(_ why: AttributeNotIdentified) -> String {
    let handle = ATTHex.handle(why.handle)
    switch why {
    case .noDatabase:
        return "note: \(handle) not named or decoded: a handle is read with no discovery, and no database of this peer is known or "
            + "cached; read it by name or UUID, or cache the database with `mirror gatt` (a peer with a Database Hash)"
    case .notInDatabase(_, let source):
        return "note: \(handle) not named or decoded: the \(source == .cache ? "cached database" : "database") of this peer has no "
            + "characteristic value or descriptor there"
    }
}
