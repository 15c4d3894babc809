// mirror gatt TARGET [--read | --diff]: the whole GATT database, or what changed against the cached copy.
import ATTStack
import GATTClient
import GATTPeer
import GATTVocabulary
import JSON

let gattCommand = Command(CommandSpec(
    name: "gatt",
    summary: "show the whole GATT database: services, includes, characteristics, descriptors",
    discussion: """
        Discovers every primary and secondary service, their included services, every characteristic \
        (properties, declaration and value handles) and every descriptor, with names for well-known UUIDs. \
        With --read, reads each readable value (long values in full) and prints it as hex and text; a value \
        the peer refuses shows its exact ATT error. With --bearers N and Enhanced ATT bearers open, the values \
        are read as many at once as bearers are open (each bearer has its own request slot); what is printed \
        is in database order all the same.

        --json prints {"mtu", "services": [{"uuid", "start", "end", "primary", "characteristics": [{"uuid", \
        "handle", "valueHandle", "properties", "descriptors": [{"uuid", "handle"}]}]}]}; UUIDs are lowercase, \
        4 hex digits for 16-bit ones. A service with include declarations also has "includes"; with --read \
        characteristics and descriptors also have "value" (hex) and "text" (and "decoded" when the \
        value means something), or "readError". Each service, include, characteristic and descriptor the text \
        names has "name" last.

        With --diff, discovers the database afresh and prints what changed against the copy in the GATT cache         (`mirror cache`): each service, include, characteristic and descriptor added, removed or moved, with its         UUID and handles; the new database is then cached (when the peer's Database Hash is its hash). --json         prints {"target", "cached", "databaseHash", "changes": [{"change", "kind", "uuid", "handle", "from",         "parent"}]}.
        """,
    positionals: [PositionalSpec("TARGET", help: "the device address or unix:PATH")],
    options: [.flag("--read", help: "read every readable characteristic value and descriptor"),
              .flag("--diff", help: "print what changed against the cached copy (added, removed, moved), then cache the new one")],
    globals: GlobalOptionName.connection,
    examples: [
        ("mirror gatt unix:/tmp/mirror-sim.sock", "the database of the simulator"),
        ("mirror gatt C0:11:22:33:44:55 --type random --read", "every readable value of a device"),
        ("mirror gatt unix:/tmp/mirror-sim.sock --json", "the database as JSON for other tools"),
    ]
)) { inv in
    let target = try inv.target()
    let readValues = inv.arguments.has("--read")
    if inv.arguments.has("--diff") {
        if inv.global.noCache { throw UsageError("--diff compares with the GATT cache: it cannot be given with --no-cache", token: "--diff", command: "gatt") }
        let session = try await Session.open(target, inv)
        defer { session.close() }
        // The shell's connection may have been opened with --no-cache.
        guard session.peer.database.store != nil else {
            throw UsageError("--diff compares with the GATT cache: it cannot be given with --no-cache", token: "--diff", command: "gatt")
        }
        let (cached, peerHash, changes) = try await session.peer.database.changesSinceStored()
        if inv.global.json {
            inv.console.json(.object([
                ("target", .string(session.peer.database.target)), ("cached", .bool(cached != nil)),
                ("databaseHash", peerHash.map { .string(ATTHex.string($0)) } ?? .null),
                ("changes", .array(changes.map(\.json))),
            ]))
        } else if cached == nil {
            inv.console.out("no cached copy of \(session.peer.database.target) to compare with"
                            + (peerHash == nil ? " (it serves no Database Hash, so none is kept)" : ""))
        } else if changes.isEmpty {
            inv.console.out("no change against the cached copy of \(session.peer.database.target)")
        } else {
            for c in changes { inv.console.out(c.description) }
        }
        return .success
    }
    let session = try await Session.open(target, inv, surveying: readValues)
    defer { session.close() }
    let database = try await session.database(readValues: readValues)
    // Why a second gatt is not faster: the cache keys on the peer's Database Hash.
    if let note = session.noHashNote { inv.console.err(note) }
    if inv.global.json {
        inv.console.json(database.json)
    } else {
        for line in database.text { inv.console.out(line) }
    }
    return .success
}

extension GATTDatabaseChange {
    /// `{"change", "kind", "uuid", "handle", "from", "parent"}` ("from" for a move only).
    var json: JSONValue {
        .object([("change", .string(change.rawValue)), ("kind", .string(kind)), ("uuid", .string(uuid.description)),
                 ("handle", .int(Int(handle)))]
                + (from.map { [("from", JSONValue.int(Int($0)))] } ?? [])
                + [("parent", parent.map { .string($0) } ?? .null)])
    }
}

extension Session {
    /// The whole database (primary services, their includes, and the secondary services they include) as `gatt`
    /// prints it, with every readable value read (GATTPeer's `readEveryValueByHandle(of:decode:)`) and decoded when
    /// `readValues`.
    func database(readValues: Bool) async throws -> DatabaseListing {
        // Kept for the connection, so that names resolve later without discovering again (the shell).
        let services = try await peer.database.discovered().services
        peer.lookup.nameValueHandles(in: services)
        var listing = DatabaseListing(mtu: peer.mtu, services: services, names: profile.names(in: services))
        guard readValues else { return listing }
        // What each value means (ValueFormatter, with the profile's enums) with its Presentation Format.
        let profile = self.profile
        (listing.readings, listing.decoded) = try await peer.lookup.readEveryValueByHandle(of: services) { v, uuid, name, presentation in
            ValueFormatter.decode(v, uuid: uuid, name: name, profile: profile, presentation: presentation)
        }
        return listing
    }
}
