// mirror read TARGET HANDLE|UUID|NAME: one value (long reads automatic), or every value of a UUID.
import ATTStack
import JSON

let readCommand = Command(CommandSpec(
    name: "read",
    summary: "read a value by handle, or every value of a characteristic UUID (long reads automatic)",
    discussion: """
        A HANDLE (decimal, or hex with 0x) is read with Read Request, then Read Blob Requests while the value \
        fills the response, up to 512 bytes. A UUID reads with Read By Type over the whole database and prints \
        every matching handle. "1234" is a handle; write "uuid:1234" for the 16-bit UUID 0x1234.

        A NAME is a characteristic's name: the profile's (cloudToken, scanState; --profile) or its User \
        Description (0x2901), found by discovery and read by its value handle like a HANDLE; "name:X" is the \
        name X where X would read as a UUID. A NAME that names no characteristic, or several, is bad usage \
        (exit status 2): the error lists the names known, or the candidates with their value handles.
        """,
    positionals: [
        PositionalSpec("TARGET", help: "the device address or unix:PATH"),
        PositionalSpec("HANDLE|UUID|NAME", help: "a handle (18, 0x0012), a UUID (2a00, uuid:1234, 128-bit form) or a name (scanState)",
                       missing: "HANDLE|UUID (a handle (18, 0x0012) or a UUID (2a00, uuid:1234, 128-bit form))"),
    ],
    globals: GlobalOptionName.connection,
    examples: [
        ("mirror read unix:/tmp/mirror-sim.sock 0x0003", "the value at handle 0x0003"),
        ("mirror read unix:/tmp/mirror-sim.sock 2a00", "the Device Name, by UUID"),
        ("mirror read unix:/tmp/mirror-sim.sock scanState", "a characteristic by its profile name"),
        ("mirror read 00:AA:01:01:00:01 0x0012 --json", "a value as JSON"),
    ]
)) { inv in
    let target = try inv.target()
    let reference = try inv.positional(1, parseCharacteristicReference)!
    let session = try await Session.open(target, inv)
    defer { session.close() }
    // A UUID keeps its meaning (Read By Type: every value of it); a name is one characteristic's value handle.
    // After Database Out Of Sync (0x12) the database is resynchronized and a UUID or name read again once.
    let byUUID: Bool
    let values: [ReadValue]
    if case .uuid(let u) = reference {
        byUUID = true
        values = try await session.retryingOutOfSync { try await session.read(.uuid(u)) }
    } else {
        byUUID = false
        values = try await session.retryingOutOfSync(reference, command: "read") { h in try await session.read(.handle(h)) }
    }
    if inv.global.json {
        let items: [JSONValue] = values.map { v in
            .object([("handle", .int(Int(v.handle))), ("value", .string(ATTHex.string(v.value))),
                     ("text", .string(printableText(v.value))), ("length", .int(v.value.count))])
        }
        if !byUUID, let only = items.first {
            inv.console.json(only)
        } else {
            inv.console.json(JSONValue.object([("values", .array(items))]))
        }
    } else {
        for v in values { inv.console.out("\(ATTHex.handle(v.handle)): \(valueText(v.value))") }
    }
    return .success
}
