// mirror cache list|clear [TARGET]: the GATT cache on disk (GATTPeer's FileDatabaseStore).
import ATTStack
import GATTPeer
import JSON

let cacheCommand = Command(CommandSpec(
    name: "cache",
    summary: "list or clear the GATT cache: the databases and Database Hashes kept per adapter and peer",
    discussion: """
        Commands that need a peer's database (gatt, listen, scan, wifi, and a UUID or NAME where a handle goes) \
        read its Database Hash (0x2B2A, one Read By Type) and use the copy cached here when the hash matches; \
        otherwise they discover the database and store it under the hash. A peer without a Database Hash is \
        never cached. The files are readable JSON in $XDG_CACHE_HOME/mirror (else ~/.cache/mirror), one per \
        adapter and TARGET. `list` shows each file with its TARGET, adapter, hash and how many services and \
        characteristics it holds (a file that is corrupted, of another format, or whose services do not hash to its hash is shown as ignored); `clear` \
        removes the file of TARGET (with --adapter, the one reached through it), or every file.

        --json: list prints {"directory", "entries": [{"path", "target", "adapter", "databaseHash", \
        "services", "characteristics"} or {"path", "ignored"}]}; clear prints {"removed": [paths]}.
        """,
    positionals: [PositionalSpec("list|clear", help: "what to do"),
                  PositionalSpec("TARGET", optional: true, help: "the device address or unix:PATH (clear: only its file)")],
    globals: [.json, .adapter],
    examples: [
        ("mirror cache list", "every cached database"),
        ("mirror cache clear unix:/tmp/mirror-sim.sock", "forget the simulator's database"),
        ("mirror cache clear", "remove every cache file"),
    ]
)) { inv in
    let action = inv.arguments.positionals[0]
    guard action == "list" || action == "clear" else {
        throw UsageError("unknown action \"\(action)\": expected list or clear", token: action, command: inv.arguments.command)
    }
    let target = inv.arguments.positionals.count > 1 ? try inv.target(at: 1) : nil
    guard let cache = FileDatabaseStore.standard() else {
        throw CLIError.unsupported("no cache directory: neither XDG_CACHE_HOME nor HOME is set")
    }
    if action == "clear" {
        let removed = try cache.remove(target: target?.target.description, adapter: target.map { $0.isUnix ? nil : inv.global.adapter } ?? nil)
        if inv.global.json {
            inv.console.json(.object([("removed", .array(removed.map { .string($0) }))]))
        } else if removed.isEmpty {
            inv.console.out(target.map { "no cached database of \($0.target.description) in \(cache.directory)" } ?? "no cached databases in \(cache.directory)")
        } else {
            for path in removed { inv.console.out("removed \(path)") }
        }
        return .success
    }
    let entries = cache.entries().filter { e in
        guard let target else { return true }
        if case .success(let db) = e.entry { return db.target == target.target.description }
        return false
    }
    if inv.global.json {
        inv.console.json(.object([
            ("directory", .string(cache.directory)),
            ("entries", .array(entries.map { e in
                switch e.entry {
                case .success(let db):
                    return .object([("path", .string(e.path)), ("target", .string(db.target)),
                                    ("adapter", db.adapter.map { .string($0) } ?? .null),
                                    ("databaseHash", .string(ATTHex.string(db.databaseHash))),
                                    ("services", .int(db.services.count)),
                                    ("characteristics", .int(db.services.flatMap(\.characteristics).count))])
                case .failure(let p):
                    return .object([("path", .string(e.path)), ("ignored", .string(p.problem))])
                }
            })),
        ]))
    } else if entries.isEmpty {
        inv.console.out("no cached databases in \(cache.directory)")
    } else {
        for e in entries {
            switch e.entry {
            case .success(let db):
                inv.console.out("\(db.target) on \(db.adapter ?? "the default adapter"): hash \(ATTHex.string(db.databaseHash)), "
                                + "\(db.services.count) services, \(db.services.flatMap(\.characteristics).count) characteristics  \(e.path)")
            case .failure(let p):
                inv.console.out("ignored (\(p.problem))  \(e.path)")
            }
        }
    }
    return .success
}
