// mirror-sim: the simulated body-scanning mirror. A GATT server on GATTServer serving the profile's mirror
// service (plus GAP and GATT) on a unix: SEQPACKET socket and/or a real adapter's LE CID 4, behaving as
// a real mirror does (see Sources/MirrorSimulator and `mirror-sim --help`).
import Mirror
import ATTStack
import LinuxBluetooth
import LinkCore
import Dispatch
import Foundation
import MirrorSimulator
import GATTClient
import GATTPeer
import GATTServer
import JSON

// SIGINT and SIGTERM stay pending from here on (before any thread exists) until the wait below takes one.
StopSignals.block()

let usage = """
    usage: mirror-sim [unix:PATH | --listen unix:PATH]... [--adapter hciN [--advertise NAME]] [options]
      --profile FILE          mirror profile JSON (default: the bundled simulator profile)
      --from FILE             serve a device file of `mirror clone` instead of the mirror: its database at its handles,
                              its values and refusals as read, writes stored (unix:PATH or --adapter; no mirror option);
                              a write a capture showed is answered as the device did, and what followed it replayed
      --pace recorded|fast    with --from: what followed a write at the capture's delays (default), or at once
                              (with --from and --adapter: the advertising data the file recorded, unless --advertise NAME)
      --scenario FILE         a JSON object of these options, e.g. {"scale":"misaligned","faults":["drop:cloudToken"]}
      --scale aligned|misaligned      initDeviceForScan scans, or notifies SCALE_ALIGNMENT in 60-90 ms (default aligned)
      --wifi connected|offline        offline: a cloudToken write latches ERROR / PROCESSOR_BUSY (default connected)
      --networks A,B,C        what wifiScan (0x31) finds; --network N adds one; --ssid N the joined one
      --token-limit N         the mirror's own cloudToken limit (default: the profile's cloudTokenMaxLength, 40 in the
                              bundled profile: the one length the seeds show a real mirror taking)
      --result zip|junk|partial  what a completed scan posts: the result ZIP (default), 42 bytes of text, or a ZIP
                              without measurements.json
      --cancel-resets yes|no  whether cancelScan (0x36) clears the state (default yes)
      --latched-error         start latched at ERROR / PROCESSOR_BUSY (or --scan-state N --scan-error N)
      --mtu N                 server Rx MTU for Exchange MTU (default 517)
      --pace fast|realistic   scan progression in about 0.1 s (default) or about 20 s; --step-ms N per state
      --fault KIND:CHAR[:MS]  once, on the next request to CHAR: drop, delay:CHAR:MS, disconnect, notify-first,
                              change-database (handles move, Service Changed, 0x12)
      --fault RULE-ID         break one rule of `mirror check` (repeatable), e.g. --fault cccd-present: scanState
                              without its CCCD; the declaration faults change cloudToken's, the Read Blob faults act
                              on every Read Blob Request, the Read faults on each connection's first Read Request
      --list-faults           print every fault: each RULE-ID with what it breaks, then the KIND:CHAR forms
      --caching yes|no        serve Client Supported Features and the Database Hash in the GATT service (robust
                              caching; the mirror service's handles move up by 4; default no)
      --hash-order pts|bluez  the Database Hash's octets least significant first, as PTS-qualified stacks serve
                              it (default), or as AES-CMAC gives them, as bluetoothd serves it
      --client-features N     the Client Supported Features a connection starts with (1: robust caching, as a
                              bonded client's kept value; default 0)
      --eatt yes|no           serve Enhanced ATT bearers: Server Supported Features (0x2B3A, bit 0) in the GATT
                              service (with Client Supported Features; the mirror service's handles move up by 4,
                              by 6 with --caching; default no), listening at PATH.eatt beside each unix:PATH (the
                              ECRED equivalent, docs/DESIGN.md) and on PSM 0x0027 of --adapter (ECRED channels)
      --eatt-refuse CODE      refuse every Enhanced ATT bearer with this L2CAP result (0x0004: no resources
                              available) over unix:; over an adapter, no PSM 0x0027 listener (the kernel refuses)
      --change-database-after MS  change the database MS after the first connection opens (as change-database)
      --secure CHAR[:encrypted|authenticated][:KEYSIZE]  CHAR's value (a profile name, or deviceName) asks the
                              link for encryption (default), an authenticated key, a key of KEYSIZE octets (7-16):
                              reads, writes and subscriptions get 0x0F, 0x05 or 0x0C until it has it, a Write
                              Command is dropped (as the profile's "security" and "minKeySize"; repeatable)
      --unix-security none|encrypted|authenticated[:KEYSIZE]  the link a unix: connection plays (it has none
                              to read; default none); an adapter's connections have their socket's BT_SECURITY
      --io CAPABILITY         with --adapter: answer pairing as this IO capability (display, yesno, keyboard, none:
                              Just Works, keyboard-display), this process as the agent (default: no agent)
      --passkey N             with --adapter: the passkey to enter when a central displays one (Passkey Entry;
                              implies --io keyboard unless --io is given)
      --verbose               log every PDU; --quiet logs nothing
      --once                  exit after the first connection closes
    """

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("mirror-sim: \(message)\n".utf8))
    exit(2)
}

struct Arguments {
    var options = SimOptions()
    var unixPaths: [String] = []
    var adapter: String?
    var advertiseName: String?
    var quiet = false
    var once = false
    /// The IO capability to pair as; nil: no agent (the kernel's pairing requests on the adapter go unanswered).
    var io: IOCapability?
    var passkey: UInt32?
    /// `--from FILE`: the device file served instead of the mirror, and how its recorded behaviour is paced.
    var from: String?
    var pace: ClonedDevice.Pace = .recorded
}

func parseArguments(_ raw: [String]) -> Arguments {
    var r = Arguments()
    var args = raw
    // A device file: nothing but where to listen and how much to log goes with it.
    if let f = args.firstIndex(of: "--from") {
        guard f + 1 < args.count else { fail("--from needs a device file (mirror clone TARGET -o FILE)") }
        r.from = args[f + 1]
        args.removeSubrange(f...(f + 1))
        if let p = args.firstIndex(of: "--pace") {
            guard p + 1 < args.count, let pace = ClonedDevice.Pace(rawValue: args[p + 1]) else { fail("--pace takes recorded or fast") }
            r.pace = pace
            args.removeSubrange(p...(p + 1))
        }
        for flag in ["--adapter", "--advertise"] {
            if let p = args.firstIndex(of: flag) {
                guard p + 1 < args.count else { fail("\(flag) needs a value") }
                if flag == "--adapter" { r.adapter = args[p + 1] } else { r.advertiseName = args[p + 1] }
                args.removeSubrange(p...(p + 1))
            }
        }
        for a in args where !a.hasPrefix("unix:") && !["--quiet", "--verbose", "--once"].contains(a) {
            fail("--from serves a device file as it is: \(a) is not taken with it (only unix:PATH, --adapter, --advertise, --pace, --quiet, --verbose, --once)")
        }
        r.unixPaths = args.filter { $0.hasPrefix("unix:") }.map { String($0.dropFirst(5)) }
        r.quiet = args.contains("--quiet")
        r.once = args.contains("--once")
        guard !r.unixPaths.isEmpty || r.adapter != nil else { fail("nothing to listen on: give unix:PATH or --adapter hciN\n\(usage)") }
        return r
    }
    // The profile first, so that options naming enum values (--latched-error) see it.
    if let p = args.firstIndex(of: "--profile"), p + 1 < args.count {
        do { try r.options.set("profile", args[p + 1]) } catch { fail(error.problem) }
        args.removeSubrange(p...(p + 1))
    }
    var i = 0
    func value(_ flag: String) -> String {
        i += 1
        guard i < args.count else { fail("\(flag) needs a value\n\(usage)") }
        return args[i]
    }
    while i < args.count {
        let a = args[i]
        switch a {
        case "-h", "--help": print(usage); exit(0)
        case "--list-faults": print(SimConformanceFault.listing); exit(0)
        case "--listen":
            let v = value(a)
            guard v.hasPrefix("unix:") else { fail("--listen takes unix:PATH (use --adapter hciN for Bluetooth)") }
            r.unixPaths.append(String(v.dropFirst(5)))
        case "--adapter": r.adapter = value(a)
        case "--io":
            let v = value(a)
            guard let io = IOCapability(name: v) else { fail("--io takes display, yesno, keyboard, none or keyboard-display, not \(v)") }
            r.io = io
        case "--passkey":
            let v = value(a)
            guard v.count <= 6, let n = UInt32(v), n <= 999_999 else { fail("--passkey takes up to six decimal digits, not \(v)") }
            r.passkey = n
            if r.io == nil { r.io = .keyboardOnly }
        case "--advertise": r.advertiseName = value(a)
        case "--scenario":
            let path = value(a)
            guard let data = FileManager.default.contents(atPath: path) else { fail("cannot read the scenario file \(path)") }
            do { try r.options.apply(scenario: data, source: path) } catch { fail(error.problem) }
        case "--latched-error": do { try r.options.set("latched-error", "yes") } catch { fail(error.problem) }
        case "--verbose": r.options.verbose = true
        case "--quiet": r.quiet = true
        case "--once": r.once = true
        default:
            if a.hasPrefix("unix:") {
                r.unixPaths.append(String(a.dropFirst(5)))
            } else if a.hasPrefix("--") {
                let key = String(a.dropFirst(2))
                // An unknown flag is named as such, before a value is looked for (exit status 2).
                guard SimOptions.keys.contains(key) else { fail("unknown option \(a) (mirror-sim --help lists the options)") }
                do { try r.options.set(key, value(a)) } catch { fail("\(error.problem)\n\(usage)") }
            } else {
                fail("unexpected argument \(a)\n\(usage)")
            }
        }
        i += 1
    }
    guard !r.unixPaths.isEmpty || r.adapter != nil else { fail("nothing to listen on: give unix:PATH or --adapter hciN\n\(usage)") }
    return r
}

let parsed = parseArguments(Array(CommandLine.arguments.dropFirst()))
let options = parsed.options
let unixPaths = parsed.unixPaths
let adapter = parsed.adapter

func makeLog(quiet: Bool) -> @Sendable (String) -> Void {
    if quiet { return { _ in } }
    return { line in FileHandle.standardError.write(Data("mirror-sim \(line)\n".utf8)) }
}
let log = makeLog(quiet: parsed.quiet)
let exitAfterOne = parsed.once

// `--from FILE`: the clone's database, served until a signal; the mirror below never starts.
if let file = parsed.from {
    let clone: DeviceClone
    do { clone = try DeviceClone(contentsOf: file) } catch { fail(error.description) }
    let hostBox = Lock<GATTServerHost?>(nil)
    var hooks = ClonedDevice.hooks(clone, pace: parsed.pace, host: hostBox, log: log)
    if exitAfterOne { hooks.closed = { _, _ in exit(0) } }
    var cloneListeners: [ATTBearerListener] = []
    do {
        for path in parsed.unixPaths { cloneListeners.append(try ATTBearerListener.unix(path: path)) }
        // On an adapter: its LE CID 4, advertising through raw HCI as the mirror does (again after each disconnect).
        if let adapter = parsed.adapter {
            cloneListeners.append(try ATTBearerListener.le(adapter: adapter))
            // The device's own advertising data when the file recorded it (and no --advertise NAME replaces it).
            let recorded = parsed.advertiseName == nil ? clone.advertising.first(where: \.isAdvertisingData) : nil
            let data = recorded?.data ?? HCICommand.advertisingData(name: parsed.advertiseName ?? clone.name)
            let scanResponse = recorded == nil ? nil : clone.advertising.first { !$0.isAdvertisingData }?.data
            try LEAdvertiser.start(adapter: adapter, data: data, scanResponse: scanResponse)
            if let recorded {
                log("advertising the recorded \(recorded.kind) data [\(ATTHex.string(data))]\(scanResponse.map { " and scan response [\(ATTHex.string($0))]" } ?? "") on \(adapter)")
            } else {
                log("advertising as \"\(TerminalText.escaped(parsed.advertiseName ?? clone.name))\" on \(adapter)")
            }
            let previous = hooks.closed
            hooks.closed = { c, reason in
                previous(c, reason)
                do { try LEAdvertiser.start(adapter: adapter, data: data, scanResponse: scanResponse) } catch { log("re-enabling advertising on \(adapter) failed: \(error)") }
            }
        }
    } catch { fail("\(error)") }
    let host = GATTServerHost(database: ClonedDevice.database(clone), hooks: hooks)
    hostBox.withLock { $0 = host }
    for listener in cloneListeners {
        host.acceptConnections(on: listener)
        FileHandle.standardOutput.write(Data("mirror-sim: listening on \(listener.label) (device file: \(clone.name), from \(clone.source))\n".utf8))
    }
    _ = StopSignals.wait()
    for l in cloneListeners { l.close() }
    host.disconnectAll(reason: "mirror-sim stopped")
    if let adapter = parsed.adapter { try? LEAdvertiser.stop(adapter: adapter) }
    exit(0)
}
let advertiseAdapter = adapter
let advertisedName = parsed.advertiseName ?? options.deviceName
let mirror = SimulatedMirror(options: options, log: log, connectionClosed: { remaining in
    if exitAfterOne && remaining == 0 { exit(0) }
    if let advertiseAdapter, remaining == 0 {
        do { try LEAdvertiser.start(adapter: advertiseAdapter, name: advertisedName) } catch {
            log("re-enabling advertising on \(advertiseAdapter) failed: \(error)")
        }
    }
})

var listeners: [ATTBearerListener] = []
/// The pairing agent answering on --adapter, for the process's life.
var pairingService: PairingService?
/// The listeners at PATH.eatt: each connection there asks for an Enhanced ATT bearer first.
var enhancedUnix: [ObjectIdentifier] = []
do {
    for path in unixPaths {
        listeners.append(try ATTBearerListener.unix(path: path))
        if options.eatt {
            let l = try ATTBearerListener.unixEnhanced(forUnixPath: path)
            listeners.append(l)
            enhancedUnix.append(ObjectIdentifier(l))
        }
    }
    if let adapter {
        listeners.append(try ATTBearerListener.le(adapter: adapter))
        if options.eatt && options.eattRefusal == nil {
            listeners.append(try ATTBearerListener.leEnhanced(adapter: adapter, mtu: Int(options.serverMTU)))
        }
        // The peripheral's side of pairing: the kernel asks user space to confirm or enter (mgmt.c); this process
        // answers with the same agent `mirror pair` uses, or the kernel's 30 s SMP timeout ends the pairing.
        if let io = parsed.io {
            let resolved = try HCIAdapter.resolve(adapter)
            let agent = PairingAgent(socket: try ManagementSocket(adapter: resolved.name), index: resolved.index,
                                     prompts: PairingPrompts(confirm: { _, _ in true }, passkey: { [passkey = parsed.passkey] _ in passkey },
                                                             display: { p, peer in log("pairing with \(peer): passkey \(sixDigits(p)) to type there") }))
            // Before advertising, nothing is connected to it yet: an LE-only adapter may be power-cycled to get SMP.
            if let note = try agent.prepare(io: io, mayPowerCycle: (try? HCIAdapter.connectionCount(index: resolved.index)) == 0) { log(note) }
            pairingService = try agent.startServing(report: log)
            log("pairing as \(io) (\(io.name)) on \(adapter)")
        }
        try LEAdvertiser.start(adapter: adapter, name: advertisedName)
        log("advertising as \"\(advertisedName)\" on \(adapter)")
    }
} catch {
    fail("\(error)")
}
for listener in listeners {
    FileHandle.standardOutput.write(Data("mirror-sim: listening on \(listener.label) (profile: \(options.profile.name))\n".utf8))
}
// What each secured value asks of the link (the profile's security and --secure), and the link unix: plays.
for (name, requirement) in options.effectiveSecurity.sorted(by: { $0.key < $1.key }) {
    log("\(name): reads, writes and subscriptions need a link that is \(requirement); a unix: connection plays \(options.unixSecurity)")
}

let allListeners = listeners
let enhancedUnixListeners = Set(enhancedUnix)
let stopping = Lock(false)
func shutdown(_ why: String) -> Never {
    stopping.withLock { $0 = true }
    for l in allListeners { l.close() }
    mirror.disconnectAll(reason: why)
    if let adapter = advertiseAdapter { try? LEAdvertiser.stop(adapter: adapter) }
    exit(0)
}
let signalThread = Thread {
    let sig = StopSignals.wait()
    shutdown(sig == SIGINT ? "interrupted" : "terminated")
}
signalThread.start()

// One accept loop per listener, each on its own thread (accept blocks in poll until close wakes it).
for listener in listeners {
    let thread = Thread {
        while true {
            do {
                switch listener.kind {
                case .unix where enhancedUnixListeners.contains(ObjectIdentifier(listener)):
                    mirror.acceptEnhanced(try listener.acceptEnhancedRequest())
                case .leEnhanced: mirror.attachEnhanced(try listener.accept())
                default: mirror.attach(try listener.accept())
                }
            } catch {
                if stopping.withLock({ $0 }) { return }
                log("accept on \(listener.label) failed: \(error)")
                if case TransportError.closedLocally = error { return }
            }
        }
    }
    thread.start()
}
dispatchMain()
