// mirror clone TARGET -o FILE: the device rebuilt as a file (GATTPeer's DeviceClone), which mirror-sim serves with
// --from FILE.
import ATTStack
import CaptureReader
import FoundationEssentials
import GATTPeer
import HostEnvironment
import JSON
import Mirror

let cloneCommand = Command(CommandSpec(
    name: "clone",
    summary: "rebuild a device as a file: its whole database, every readable value, its Database Hash",
    discussion: """
        Connects, discovers everything (primary and secondary services, includes, characteristics, every \
        descriptor, the Extended Properties the Database Hash covers), reads every readable value and descriptor \
        (long values whole) and writes a device file: JSON, private (mode 0600), a superset of the mirror \
        profile's schema ("name", "characteristics": each named value's UUID) that `mirror-sim --from FILE` \
        serves at the same handles, with the same values, refusing what the device refused with the same ATT \
        error. The file records the Database Hash the device serves and the one computed over what was found: \
        equal, the clone is complete ("databaseHash": {"served", "computed", "complete"}); a device that serves \
        none leaves "complete" null. --redact NAME|HANDLE keeps only the length of a value that must not leave \
        the building. Values that could not be read are listed ("unread"), and each refusal kept with its code: \
        a value that needs encryption is recorded as refused (the permission it reveals) and starts no pairing, \
        unless --pair (this process pairs, Just Works, then reads it) or a bond of this host's encrypts the link. \
        A target reached over the air also leaves the advertising data seen before the connect ("advertising": \
        {"kind", "eventType", "address", "addressType", "data"} per PDU type), which `mirror-sim --from FILE \
        --adapter hciN` advertises again.

        With --from CAPTURE (and no TARGET), the device file comes from a capture alone: btsnoop as btmon writes \
        it (Linux monitor format), as Android's HCI snoop log writes it (H4) and this tool's --btsnoop files. \
        It follows ATT over each LE connection in the capture (L2CAP reassembled), takes the one --connection \
        N or ADDRESS names (the only one, when there is one; with several it lists them), rebuilds what the \
        capture's discovery and reads revealed, and says exactly what it could not see: the handle ranges no \
        discovery looked at and the values never read.

        With --diff FILE, writes nothing: compares the device file FILE with TARGET (a device now, or another \
        device file) and prints what differs, by name: attributes added, removed or moved, characteristics whose \
        properties changed, values that differ. --json prints {"structure": [{"change", "kind", "uuid", \
        "handle", "from", "parent"}], "properties": [{"handle", "name", "before", "after"}], "values": \
        [{"handle", "name", "before", "after"}]}.
        """,
    positionals: [PositionalSpec("TARGET", optional: true, help: "the device address or unix:PATH (with --diff, also a device file; none with --from)")],
    options: [{ var o = OptionSpec.value("--output", "FILE", help: "the device file to write (also -o FILE); it is replaced whole, mode 0600"); o.short = "-o"; return o }(),
              .value("--redact", "H", repeatable: true, help: "keep only the length of this value: HANDLE|UUID|NAME (repeatable)"),
              .value("--from", "CAPTURE", help: "rebuild the device from a btsnoop capture instead of a connection"),
              .value("--connection", "N", help: "with --from: the capture's connection, by number or by the peer's address"),
              .value("--diff", "FILE", help: "compare the device file FILE with TARGET (a device or a device file); nothing is written")],
    globals: GlobalOptionName.connection,
    examples: [
        ("mirror clone unix:/tmp/mirror-sim.sock -o mirror-sim.device.json", "the simulator as a device file"),
        ("mirror clone C0:11:22:33:44:55 --type random -o device.json --redact cloudToken", "a device, without its cloudToken"),
        ("mirror clone --diff mirror-sim.device.json unix:/tmp/mirror-sim.sock", "what changed since the clone was made"),
        ("mirror clone --from session.btsnoop -o device.json --connection 1", "a device from a capture of a connection to it"),
    ]
)) { inv in
    if let saved = inv.arguments.string("--diff") { return try await cloneDifferences(saved, inv) }
    guard let output = inv.arguments.string("--output") else {
        throw UsageError("mirror clone needs -o FILE: where to write the device file", token: "clone", command: "clone")
    }
    if let capture = inv.arguments.string("--from") { return try cloneFromCapture(capture, output: output, inv) }
    let target = try inv.target()
    let redactions = try (inv.arguments.values["--redact"] ?? []).map { (s: String) throws(UsageError) in
        (s, try parseCharacteristicReference(s))
    }
    let session = try await Session.open(target, inv, surveying: true)
    defer { session.close() }
    var redacting: Set<UInt16> = []
    for (token, reference) in redactions {
        if case .handle(let h) = reference { redacting.insert(h); continue }
        do { redacting.insert(try await session.peer.characteristic(reference).characteristic.valueHandle) } catch let e as CharacteristicLookupError {
            throw UsageError("--redact \(token): \(e)", token: token, command: "clone")
        }
    }
    let clone = try await session.peer.clone(source: "live \(target.description)", redacting: redacting)
    try PrivateFile.replace(output, with: clone.json.pretty + "\n", what: "the device file")
    let characteristics = clone.services.flatMap(\.characteristics)
    let refused = clone.readings.values.filter { if case .refused = $0 { true } else { false } }.count
    let complete: String = switch clone.isComplete {
    case true?: "complete: the Database Hash it serves is the one computed over what was found"
    case false?: "NOT complete: the Database Hash it serves differs from the one computed over what was found"
    case nil: "completeness unknown: it serves no Database Hash"
    }
    if inv.global.json {
        inv.console.json(.object([
            ("file", .string(output)), ("services", .int(clone.services.count)), ("characteristics", .int(characteristics.count)),
            ("readings", .int(clone.readings.count)), ("refused", .int(refused)), ("unread", .int(clone.unread.count)),
            ("redacted", .int(redacting.count)), ("complete", clone.isComplete.map(JSONValue.bool) ?? .null),
        ]))
    } else {
        inv.console.out("cloned \(target.description) (\(TerminalText.escaped(clone.name))) to \(output): \(clone.services.count) services, "
                        + "\(characteristics.count) characteristics, \(clone.readings.count) value\(clone.readings.count == 1 ? "" : "s") read (\(refused) refused), "
                        + "\(clone.unread.count) not read, \(redacting.count) redacted")
        inv.console.out(complete)
    }
    return .success
}

/// `mirror clone --diff FILE TARGET`: the clone in FILE against TARGET now, or against another device file.
private func cloneDifferences(_ saved: String, _ inv: Invocation) async throws -> ExitStatus {
    if inv.arguments.has("--output") || inv.arguments.has("--redact") {
        throw UsageError("--diff compares and writes nothing: it cannot be given with -o or --redact", token: "--diff", command: "clone")
    }
    let old = try loadDeviceFile(saved)
    let new: DeviceClone
    let other = inv.arguments.positionals.first ?? ""
    if !other.hasPrefix("unix:"), (try? BluetoothAddress(parsing: other)) == nil, FileManager.default.fileExists(atPath: other) {
        new = try loadDeviceFile(other)
    } else {
        let target = try inv.target()
        let session = try await Session.open(target, inv, surveying: true)
        defer { session.close() }
        new = try await session.peer.clone(source: "live \(target.description)")
    }
    let d = DeviceDifferences(from: old, to: new)
    func named(_ h: UInt16, _ name: String?) -> String { ATTHex.handle(h) + (name.map { " (\(TerminalText.escaped($0)))" } ?? "") }
    if inv.global.json {
        func reading(_ r: DeviceClone.Reading?) -> JSONValue { r.map { .string($0.description) } ?? .null }
        inv.console.json(.object([
            ("structure", .array(d.structure.map(\.json))),
            ("properties", .array(d.properties.map { p in
                .object([("handle", .int(Int(p.valueHandle))), ("name", p.name.map(JSONValue.string) ?? .null),
                         ("before", .array(propertyNames(p.before.rawValue).map(JSONValue.string))),
                         ("after", .array(propertyNames(p.after.rawValue).map(JSONValue.string)))])
            })),
            ("values", .array(d.values.map { v in
                .object([("handle", .int(Int(v.handle))), ("name", v.name.map(JSONValue.string) ?? .null),
                         ("before", reading(v.before)), ("after", reading(v.after))])
            })),
        ]))
    } else if d.isEmpty {
        inv.console.out("no difference between \(saved) (\(TerminalText.escaped(old.source))) and \(TerminalText.escaped(new.source))")
    } else {
        for c in d.structure { inv.console.out(c.description) }
        for p in d.properties { inv.console.out("properties of \(named(p.valueHandle, p.name)): "
                                                 + "\(propertyNames(p.before.rawValue).joined(separator: ", ")) -> \(propertyNames(p.after.rawValue).joined(separator: ", "))") }
        for v in d.values {
            inv.console.out("value of \(named(v.handle, v.name)): \(v.before.map { "\($0)" } ?? "not read") -> \(v.after.map { "\($0)" } ?? "not read")")
        }
    }
    return .success
}

/// A device file, read and parsed (`DeviceClone(contentsOf:)`); what is wrong with it names the file.
private func loadDeviceFile(_ path: String) throws -> DeviceClone {
    do { return try DeviceClone(contentsOf: path) } catch { throw CLIError.failure(error.description) }
}

/// `mirror clone --from CAPTURE -o FILE [--connection N|ADDRESS]`.
private func cloneFromCapture(_ path: String, output: String, _ inv: Invocation) throws -> ExitStatus {
    if !inv.arguments.positionals.isEmpty {
        throw UsageError("--from rebuilds the device from the capture: give no TARGET", token: inv.arguments.positionals[0], command: "clone")
    }
    if inv.arguments.has("--redact") {
        throw UsageError("--redact applies to a live clone; a capture's values are what it holds", token: "--redact", command: "clone")
    }
    let capture: BTSnoopCapture
    do { capture = try BTSnoopCapture(path: path) } catch { throw CLIError.failure("capture \(path): \(error)") }
    let connections = LEConnectionTracker.connectionsWithATT(of: capture)
    func listing() -> String {
        connections.map { c in
            "  \(c.number): \(c.peer) (\(c.peerIsRandom ? "random" : "public")), handle \(ATTHex.handle(c.handle)) on index \(c.adapter), \(c.pdus.count) ATT PDUs"
        }.joined(separator: "\n")
    }
    guard !connections.isEmpty else {
        throw CLIError.failure("capture \(path): no LE connection with ATT in its \(capture.records) records (an LE Connection Complete event, then ATT on CID 0x0004)")
    }
    let chosen: CapturedConnection
    if let wanted = inv.arguments.string("--connection") {
        guard let c = connections.first(where: { $0.isNamed(by: wanted) }) else {
            throw UsageError("--connection \(wanted): the capture has no such LE connection with ATT; it has:\n\(listing())", token: wanted, command: "clone")
        }
        chosen = c
    } else {
        guard connections.count == 1 else {
            throw UsageError("the capture has \(connections.count) LE connections with ATT: choose one with --connection N or ADDRESS:\n\(listing())",
                             token: "--from", command: "clone")
        }
        chosen = connections[0]
    }
    let profile = try inv.global.profile.map { path throws(MirrorProfileError) in try MirrorProfile.load(path: path) } ?? .bundled
    let (clone, gaps, undecodable) = DeviceClone.rebuilding(chosen, source: "capture \(path) connection \(chosen.number) (\(chosen.peer))",
                                                           names: CharacteristicNames(profile.characteristics))
    try PrivateFile.replace(output, with: clone.json.pretty + "\n", what: "the device file")
    func ranges(_ r: [ATTHandleRange]) -> String { r.map(\.description).joined(separator: ", ") }
    let notRead = gaps.valuesNotRead.map { h in ATTHex.handle(h) + (clone.label(of: h).map { " (\(TerminalText.escaped($0)))" } ?? "") }
    if inv.global.json {
        func json(_ r: [ATTHandleRange]) -> JSONValue { .array(r.map { .object([("start", .int(Int($0.start))), ("end", .int(Int($0.end)))]) }) }
        inv.console.json(.object([
            ("file", .string(output)), ("connection", .int(chosen.number)), ("peer", .string(chosen.peer)),
            ("services", .int(clone.services.count)), ("characteristics", .int(clone.services.flatMap(\.characteristics).count)),
            ("readings", .int(clone.readings.count)), ("complete", clone.isComplete.map(JSONValue.bool) ?? .null),
            ("notDiscovered", .object([("services", json(gaps.servicesNotDiscovered)), ("characteristics", json(gaps.characteristicsNotDiscovered)),
                                       ("descriptors", json(gaps.descriptorsNotDiscovered))])),
            ("notRead", .array(gaps.valuesNotRead.map { .int(Int($0)) })),
            ("undecodable", .int(undecodable)), ("brokenFrames", .int(chosen.brokenFrames)),
        ]))
        return .success
    }
    inv.console.out("cloned connection \(chosen.number) (\(chosen.peer)) of \(path) to \(output): \(clone.services.count) services, "
                    + "\(clone.services.flatMap(\.characteristics).count) characteristics, \(clone.readings.count) value\(clone.readings.count == 1 ? "" : "s") read")
    switch clone.isComplete {
    case true?: inv.console.out("complete: the Database Hash it served is the one computed over what the capture showed")
    case false?: inv.console.out("NOT complete: the Database Hash it served differs from the one computed over what the capture showed")
    case nil: inv.console.out("completeness unknown: the capture holds no Database Hash it served")
    }
    if !gaps.servicesNotDiscovered.isEmpty { inv.console.out("services never discovered in \(ranges(gaps.servicesNotDiscovered))") }
    if !gaps.characteristicsNotDiscovered.isEmpty { inv.console.out("characteristics never discovered in \(ranges(gaps.characteristicsNotDiscovered))") }
    if !gaps.descriptorsNotDiscovered.isEmpty { inv.console.out("descriptors never discovered in \(ranges(gaps.descriptorsNotDiscovered))") }
    if !notRead.isEmpty { inv.console.out("values never read: \(notRead.joined(separator: ", "))") }
    if gaps.isEmpty { inv.console.out("the capture showed every handle range and every readable value") }
    if undecodable > 0 || chosen.brokenFrames > 0 {
        inv.console.err("note: \(undecodable) ATT PDUs did not decode and \(chosen.brokenFrames) L2CAP frames could not be reassembled; left out")
    }
    return .success
}
