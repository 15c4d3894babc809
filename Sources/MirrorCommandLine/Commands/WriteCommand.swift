// mirror write TARGET HANDLE|UUID|NAME HEX [--no-response | --long | --reliable]
import ATTStack
import GATTPeer
import JSON

let writeCommand = Command(CommandSpec(
    name: "write",
    summary: "write a value: Write Request, Write Command, or a long / reliable write",
    discussion: """
        By default a Write Request, whose value must fit the MTU's budget (MTU-3 bytes); a longer value is \
        refused locally and not sent. --no-response sends a Write Command (same budget, no answer). --long \
        writes up to 512 bytes with Prepare Write parts of MTU-5 bytes and Execute Write; --reliable does \
        the same and checks every echoed part, cancelling on a mismatch.

        HEX is the value: 0102ff, 0x0102ff, 01:02:ff or "01 02 ff" (hex:... says so explicitly); "" is the empty \
        value. Typed instead: text:STRING (its UTF-8 bytes), u8:N, u16:N, u32:N, i8:N, i16:N, i32:N (decimal or 0x \
        hex, little-endian as GATT carries numbers; out of range is bad usage), or a name the profile gives the \
        characteristic's values (scannerAction: wifiScan, initDeviceForScan, reboot, cancelScan). A token that is \
        valid hex is hex (cafe is 0xCA 0xFE).

        The characteristic is a HANDLE (sent as given, no discovery), a UUID, or a NAME: the profile's \
        (cloudToken, scannerAction; --profile) or its User Description (0x2901); "name:X" is the name X where X \
        would read as a UUID, and "handle:N" or "uuid:X" say which of the two a bare number is (four decimal digits are \
        taken as a handle, with a note). A name with spaces is quoted ("Device Name"). A UUID or NAME is found by discovery and must name exactly one characteristic: \
        none or several is bad usage (exit status 2), the error listing the names known or the candidates with \
        their value handles.
        """,
    positionals: [
        PositionalSpec("TARGET", help: "the device address or unix:PATH"),
        PositionalSpec("HANDLE|UUID|NAME", help: "the attribute handle (18 or 0x0012), a characteristic UUID or name",
                       missing: "NAME|HANDLE|UUID (the characteristic: its name (cloudToken), its value handle (18 or 0x0012) or its UUID)"),
        PositionalSpec("HEX", help: "the value in hex (0102ff, 01:02:ff), or text:STRING, u16:N, ..., a profile name",
                       missing: "HEX (the value in hex (0102ff, 01:02:ff))"),
    ],
    options: [
        .flag("--no-response", help: "send a Write Command (no response)"),
        .flag("--long", help: "a long write (Prepare Write + Execute Write), up to 512 bytes"),
        .flag("--reliable", help: "a reliable write: a long write that checks each echoed part"),
    ],
    globals: GlobalOptionName.connection,
    examples: [
        ("mirror write unix:/tmp/mirror-sim.sock 0x0012 0102ff", "a Write Request"),
        ("mirror write unix:/tmp/mirror-sim.sock 0x0014 01 --no-response", "a Write Command"),
        ("mirror write unix:/tmp/mirror-sim.sock scannerAction 36", "by the profile's name: cancelScan"),
        ("mirror write unix:/tmp/mirror-sim.sock scannerAction cancelScan", "the same, the value by the profile's name too"),
        ("mirror write unix:/tmp/mirror-sim.sock cloudToken text:http://192.168.1.23:8080/u", "text, as its UTF-8 bytes"),
        ("mirror write 00:AA:01:01:00:01 0x0012 $(head -c 36 /dev/urandom | xxd -p | tr -d '\\n') --long", "36 bytes as a long write (Prepare Write, Execute Write); the mirror's cloudToken takes at most 40"),
    ]
)) { inv in
    try inv.arguments.exclusive(["--no-response", "--long", "--reliable"])
    let target = try inv.target()
    let reference = try inv.positional(1, parseCharacteristicReference)!
    // A characteristic named by the profile has its own value names (or none): a bad value suggests only those.
    var valueNames: [String]?
    if case .name(let name) = reference, let profile = try? loadProfile(inv), profile.characteristics[name] != nil {
        valueNames = profile.namedValues(of: name).map { $0.sorted { $0.value < $1.value }.map(\.key) } ?? []
    }
    let written = try inv.positional(2) { (token: String) throws(UsageError) in try parseWriteValue(token, valueNames: valueNames) }!
    if let note = try inv.positional(1, referenceAmbiguity) ?? nil { inv.console.err(note) }
    let mode: GATTWriteMode = inv.arguments.has("--no-response") ? .command
        : inv.arguments.has("--long") ? .long
        : inv.arguments.has("--reliable") ? .reliable : .request
    let session = try await Session.open(target, inv)
    defer { session.close() }
    // A profile name (initDeviceForScan) becomes its byte once the characteristic is known.
    var value: [UInt8] = []
    if case .bytes(let b) = written { value = b }
    // A UUID or name is resolved again, and the write retried once, after Database Out Of Sync (0x12).
    let handle = try await session.retryingOutOfSync(reference, command: "write") { h in
        if case .enumName(let name) = written { value = [try await session.enumByte(name, at: h)] }
        try await session.peer.lookup.write(handle: h, value: value, mode: mode, timeout: session.timeout)
        return h
    }
    if inv.global.json {
        inv.console.json(JSONValue.object([
            ("handle", .int(Int(handle))), ("length", .int(value.count)), ("mode", .string(mode.rawValue)),
            ("mtu", .int(session.peer.mtu)), ("confirmed", .bool(mode != .command)),
        ]))
    } else {
        inv.console.out("wrote \(value.count) byte\(value.count == 1 ? "" : "s") to \(ATTHex.handle(handle)) (\(mode.describe))")
    }
    return .success
}

extension GATTWriteMode {
    /// What `write` says it sent (Core Spec Vol 3 Part G §4.9).
    var describe: String {
        switch self {
        case .request: return "Write Request, confirmed"
        case .command: return "Write Command, not confirmed"
        case .long: return "long write: Prepare Write + Execute Write, confirmed"
        case .reliable: return "reliable write: Prepare Write echoes checked + Execute Write, confirmed"
        }
    }
}
