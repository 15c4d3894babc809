// mirror gatt TARGET [--read]: the whole GATT database.
import JSON

let gattCommand = Command(CommandSpec(
    name: "gatt",
    summary: "show the whole GATT database: services, includes, characteristics, descriptors",
    discussion: """
        Discovers every primary and secondary service, their included services, every characteristic \
        (properties, declaration and value handles) and every descriptor, with names for well-known UUIDs. \
        With --read, reads each readable value (long values in full) and prints it as hex and text; a value \
        the peer refuses shows its exact ATT error.

        --json prints {"mtu", "services": [{"uuid", "start", "end", "primary", "characteristics": [{"uuid", \
        "handle", "valueHandle", "properties", "descriptors": [{"uuid", "handle"}]}]}]}; UUIDs are lowercase, \
        4 hex digits for 16-bit ones. A service with include declarations also has "includes"; with --read \
        characteristics and descriptors also have "value" (hex) and "text", or "readError".
        """,
    positionals: [PositionalSpec("TARGET", help: "the device address or unix:PATH")],
    options: [.flag("--read", help: "read every readable characteristic value and descriptor")],
    globals: GlobalOptionName.connection,
    examples: [
        ("mirror gatt unix:/tmp/mirror-sim.sock", "the database of the simulator"),
        ("mirror gatt C0:11:22:33:44:55 --type random --read", "every readable value of a device"),
        ("mirror gatt unix:/tmp/mirror-sim.sock --json", "the database as JSON for other tools"),
    ]
)) { inv in
    let target = try inv.target()
    let readValues = inv.arguments.has("--read")
    let session = try await Session.open(target, inv)
    defer { session.close() }
    let database = try await session.database(readValues: readValues)
    if inv.global.json {
        inv.console.json(database.json)
    } else {
        for line in database.text { inv.console.out(line) }
    }
    return .success
}
