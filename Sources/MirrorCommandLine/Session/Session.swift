// The connection to one GATT server as the commands use it: the bearer, the CLI's observer (--trace, the
// Exchange MTU answer, backpressure), btsnoop capture, and the GATT client on top. No protocol logic here:
// every procedure is the GATT client's.
import ATTStack
import Bonding
import LinuxBluetooth
import HostEnvironment
import LinkCore
import GATTClient
import GATTPeer
import Mirror
import JSON
import GATTVocabulary

/// How `mirror write` writes (Core Spec Vol 3 Part G §4.9).
enum WriteMode: String, Sendable {
    case request = "request"
    case command = "command"
    case long = "long"
    case reliable = "reliable"

    var describe: String {
        switch self {
        case .request: return "Write Request, confirmed"
        case .command: return "Write Command, not confirmed"
        case .long: return "long write: Prepare Write + Execute Write, confirmed"
        case .reliable: return "reliable write: Prepare Write echoes checked + Execute Write, confirmed"
        }
    }
}

/// One value read: its handle and bytes.
struct ReadValue: Sendable {
    var handle: UInt16
    var value: [UInt8]
}

/// One notification or indication as `mirror listen` prints it.
/// What `listen` knows of its targets: each value handle's label and UUID, and the profile that decodes them.
struct ListenLabels: Sendable {
    var names: [UInt16: String]
    var uuids: [UInt16: BluetoothUUID]
    var profile: MirrorProfile
}

struct ListenEvent: Sendable {
    var time: Double
    var handle: UInt16
    /// Its characteristic's label (`Session.label`), when it has one.
    var name: String?
    /// What the value means (ValueFormatter), when known.
    var decoded: String? = nil
    var indication: Bool
    var value: [UInt8]
    /// Values the client dropped before this one because the output fell behind (its buffer was full).
    var droppedBefore: Int
}

/// What Exchange MTU did.
struct MTUExchangeInfo: Sendable {
    var clientRxMTU: Int
    /// Nil when the peer answered Request Not Supported (or sent no answer).
    var serverRxMTU: Int?
}

/// A connected GATT client with the procedures the commands need.
final class Session: Sendable {
    let client: GATTClient
    let transport: ObservedTransport
    let clientRxMTU: Int
    /// The btsnoop capture of this connection, if one is written: its writer, and whether the session opened it
    /// (--btsnoop, closed with the connection) or was given it (the shell's, which outlives connections).
    private let capture: Lock<(writer: BTSnoopWriter, owned: Bool)?>
    /// Where the link monitor's HCI records go (--trace lines, the capture).
    let records: LinkRecordSink
    /// The ATT transaction timeout (--timeout).
    let timeout: Duration
    /// Names the mirror's characteristics (--profile, or the bundled profile).
    let profile: MirrorProfile
    /// The LE link under the bearer (nil over unix:, which has none).
    let link: LinkSession?
    /// What the link options (--interval, --phy, ...) came to, in the order asked.
    let linkRequests: [LinkRequestReport]
    /// The database known on this connection, its user descriptions, and the GATT cache under it (GATTPeer's FileDatabaseStore):
    /// the GATT client's, with the cache files as its store (nil store with --no-cache).
    let databaseCache: GATTDatabaseCache
    /// This process's pairing agent for the connection (--pair), stopped with it.
    let pairing: PairingService?
    /// The shell's connection: a command's `close()` leaves it open; only the shell ends it (`closeConnection`).
    let heldByShell: Bool
    /// This peer's key in the GATT cache (the TARGET as given).
    var cacheTarget: String { databaseCache.target }
    /// Where the cache's warnings and findings go (stderr).
    let warn: @Sendable (String) -> Void
    /// Guards what --bearers came to (nil outcome with --bearers 1) and the Enhanced ATT bearers opened (SessionBearers.swift).
    let enhancedBearers = Lock<(outcome: EnhancedBearerOutcome?, links: [SessionEnhancedBearer])>((nil, []))

    private init(client: GATTClient, transport: ObservedTransport, clientRxMTU: Int,
                 capture: (writer: BTSnoopWriter, owned: Bool)?, records: LinkRecordSink,
                 timeout: Duration, profile: MirrorProfile, link: LinkSession?, linkRequests: [LinkRequestReport],
                 heldByShell: Bool, databaseCache: GATTDatabaseCache, warn: @escaping @Sendable (String) -> Void,
                 pairing: PairingService?) {
        self.pairing = pairing
        self.heldByShell = heldByShell
        self.databaseCache = databaseCache
        self.warn = warn
        self.client = client
        self.link = link
        self.linkRequests = linkRequests
        self.profile = profile
        self.timeout = timeout
        self.transport = transport
        self.clientRxMTU = clientRxMTU
        self.capture = Lock(capture)
        self.records = records
    }

    /// Whether `error` is the socket's EACCES (a security failure on an L2CAP socket).
    static func isPermissionDenied(_ error: any Error) -> Bool {
        if case .socket(let e)? = error as? TransportError { return e.errno == .permissionDenied }
        return false
    }

    /// The ATT_MTU in effect.
    var mtu: Int { client.mtu }

    var mtuExchange: MTUExchangeInfo {
        MTUExchangeInfo(clientRxMTU: clientRxMTU, serverRxMTU: client.serverRxMTU)
    }

    /// Connects to `target` with the global options (adapter, type, timeout, security, btsnoop, trace, the link
    /// options) and exchanges the MTU (--mtu, default 517). Over LE the link's HCI events are watched from before
    /// the connect; what the link options came to is printed on stderr unless `announceLink` is false (`mirror
    /// link` prints it itself) or --json is given (the JSON's `link` object carries it). Inside `mirror shell` the
    /// invocation carries the shell's open session, which is returned as it is (no second connection).
    /// `capture`: a btsnoop writer of the caller's (the shell's) to capture into instead of opening --btsnoop's.
    /// `exchangeMTU`: false for `mirror check`, which sends its own Exchange MTU (and opens no Enhanced ATT bearer).
    /// `agent`: how --pair's agent answers (the shell's: --io, --passkey, questions at its prompt); default Just Works.
    static func open(_ target: TargetArgument, _ inv: Invocation, announceLink: Bool = true,
                     heldByShell: Bool = false, capture shellCapture: BTSnoopWriter? = nil,
                     exchangeMTU: Bool = true, mayRepair: Bool = true, agent: Pairing.AgentSetup? = nil) async throws -> Session {
        if let attached = inv.attached {
            inv.notes.setLinkDrop { [link = attached.link] in link?.dropReason() }
            return attached
        }
        let g = inv.global
        let profile = try g.profile.map { path throws(MirrorProfileError) in try MirrorProfile.load(path: path) } ?? .bundled
        let asked = g.security.map { level -> BTSecurityLevel in
            switch level {
            case .low: return .low
            case .medium: return .medium
            case .high: return .high
            }
        }
        let records = LinkRecordSink(console: inv.console, tracing: g.trace)
        // --pair: this process answers the kernel's pairing requests for the connection's life (opened while the
        // capabilities are held: the management socket is trusted only then), and the link asks for encryption.
        let peerAddress: BluetoothAddress? = if case .bluetooth(let a) = target.target { a } else { nil }
        // Asked once, and only for a Bluetooth link: whether bluetoothd runs (it owns the keys and its own agent).
        let daemonRuns = peerAddress != nil && BluetoothDaemon.runningPID() != nil
        // The agent is a source of the link's loop; the shell's (`agent`: its questions are answered by the loop's
        // next line) keeps a thread of its own.
        let pairing = g.pair ? try peerAddress.map { try Pairing.serve(adapter: g.adapter, peer: $0, daemonRuns: daemonRuns, console: inv.console, setup: agent,
                                                                      loop: agent == nil ? inv.loop : nil) } : nil
        // A bond in this tool's store goes into the kernel first (it forgets keys at a reset or reboot).
        // Not under bluetoothd: it loads its own keys, and a Load Long Term Keys would replace its whole list.
        let loaded = try daemonRuns ? nil : peerAddress.flatMap {
            try BondKeys.loadIfBonded(peer: $0, type: target.addressType, adapter: HCIAdapter.resolve(Discovery.adapterName(g.adapter)))
        }
        if let loaded { inv.console.err("note: \(loaded.note)") }
        // Said when the link asks for encryption: whose keys it will use (README "Pairing and bonds").
        if daemonRuns, let peerAddress, (asked?.rawValue ?? 0) >= BTSecurityLevel.medium.rawValue || g.pair {
            let adapter = try? HCIAdapter.resolve(Discovery.adapterName(g.adapter))
            inv.console.err("note: \(adapter.map { BondKeys.daemonNote(peer: peerAddress, adapter: $0.address, adapterName: $0.name) } ?? BondKeys.daemonRunsNote)")
        }
        // A raise of the link's security after a peer's Insufficient Encryption / Authentication pairs, or encrypts
        // with a held key: only worth it with an agent here (--pair), a bond loaded, or bluetoothd (its bonds, its
        // agent); else nobody answers the kernel's confirmation and SMP's 30 s timeout ends the link, so the error
        // comes at once with how to pair.
        let mayRaiseSecurity = pairing != nil || loaded != nil || daemonRuns
        let security: BTSecurityLevel? = g.pair && !target.isUnix && (asked?.rawValue ?? 0) < BTSecurityLevel.medium.rawValue ? .medium : asked
        // A unix: target needs no capability: any the keeper still holds go now (Privilege).
        if target.isUnix { Privilege.dropAll("at the connect (a unix: target needs none)") }
        let (monitor, monitorNote) = target.isUnix ? (nil, nil) : LinkSession.openMonitor(adapter: g.adapter, sink: records, loop: inv.loop)
        let bearer: ATTBearer
        do {
            // A resolvable private address resolved to a bond: its identity (BondKeys.loadIfBonded says why).
            let (to, type): (BearerTarget, LEAddressType) = loaded?.identity.map { (.bluetooth($0.address), $0.type) } ?? (target.target, target.addressType)
            // On the loop the wait for the link is a source (the agent and the monitor, sources too, serve meanwhile).
            bearer = if let loop = inv.loop {
                try await ATTBearer.connect(to: to, type: type, adapter: g.adapter, timeout: g.timeout,
                                            security: target.isUnix ? nil : security, on: loop)
            } else {
                try ATTBearer.connect(to: to, type: type, adapter: g.adapter, timeout: g.timeout, security: target.isUnix ? nil : security)
            }
        } catch {
            // A connect that asked for encryption and got EACCES: the kernel ended the link on a failed Encryption
            // Change (net/bluetooth's bt_to_errno), which the monitor saw; its status says why.
            let encryption = (security?.rawValue ?? 0) >= BTSecurityLevel.medium.rawValue && Self.isPermissionDenied(error)
                ? monitor?.awaitEncryptionFailure(limit: LinkSession.disconnectReasonWait) : nil
            if !(g.repair && encryption == 0x06) { Privilege.dropAll("after a failed connect") }
            monitor?.close()
            pairing?.stop()
            if let encryption, case .bluetooth(let address) = target.target {
                let failure = EncryptionFailedError(peer: address.description, adapter: g.adapter ?? "the default adapter", status: encryption)
                // --repair: the peer forgot the bond; forget this host's, pair again, and connect afresh (once).
                if failure.isLostBond, g.repair, mayRepair, !daemonRuns {
                    inv.console.err("repair: \(failure)")
                    try Pairing.repair(address: address, type: target.addressType, adapter: g.adapter, console: inv.console)
                    return try await open(target, inv, announceLink: announceLink, heldByShell: heldByShell,
                                          capture: shellCapture, exchangeMTU: exchangeMTU, mayRepair: false, agent: agent)
                }
                throw failure
            }
            throw error
        }
        var capture: (writer: BTSnoopWriter, owned: Bool)?
        // The link monitor's records carry the real LE Connection Complete when it sees LE events; else one is synthesized.
        let opening = linkOpening(bearer: bearer, monitor: monitor, afterConnect: false, monitorNote: monitorNote)
        if let writer = shellCapture {
            attach(writer, bearer: bearer, records: records, link: opening)
            capture = (writer, false)
        } else if let path = g.btsnoop {
            do {
                let writer = try BTSnoopWriter(path: path)
                // Said at the first failed write, and the command's status made 1 (Runner.execute).
                writer.onFailure { [console = inv.console, notes = inv.notes] error in
                    console.err("mirror: \(error)")
                    notes.captureFailure.withLock { $0 = $0 ?? error }
                }
                attach(writer, bearer: bearer, records: records, link: opening)
                capture = (writer, true)
            } catch {
                bearer.close(reason: "could not open the btsnoop file")
                monitor?.close()
                throw error
            }
        }
        // The events seen since the connect (LE Connection Complete) reach --trace and btsnoop here, in order.
        if let monitor { _ = try? monitor.bind(to: bearer) }
        var link: LinkSession?
        let requests = LinkSession.ask(g.link, monitor: monitor, bearer: bearer,
                                       monitorNote: target.isUnix ? "\(target.target) is a unix socket, with no radio link" : monitorNote)
        // The last privileged work of a connection (the link options above, LE Read PHY and LE Read Buffer Size for
        // `link`), then every capability goes, before the GATT client reads a byte of the peer's (Privilege).
        if Privilege.isKept { monitor?.prefetchPrivilegedReads() }
        Privilege.dropAll("after the connect")
        if announceLink, !g.json { for r in requests { inv.console.err("link: \(r.text)") } }
        if !target.isUnix {
            link = LinkSession(bearer: bearer, monitor: monitor, monitorNote: monitorNote)
            inv.notes.setLinkDrop { [link] in link?.dropReason() }
        }
        let observed = ObservedTransport(bearer, tracing: g.trace) { [console = inv.console] in console.err($0) }
        var configuration = GATTClient.Configuration()
        let clientRxMTU = g.mtu ?? ATTMTU.maximum
        configuration.clientRxMTU = clientRxMTU
        configuration.transactionTimeout = .milliseconds(Int64((g.timeout * 1000).rounded()))
        if !target.isUnix {
            configuration.setSecurityLevel = { level in try bearer.setSecurityLevel(level) }
            configuration.retryAfterRaisingSecurity = mayRaiseSecurity
            // A bond's Just Works key with no agent here: a raise to high would start a MITM pairing that nobody
            // answers and that the kernel never reports to the socket, so 0x05 is the peer's answer to show.
            if pairing == nil, !daemonRuns, let loaded, !loaded.authenticated { configuration.raiseLimit = .medium }
            if let security { configuration.initialSecurityLevel = max(security, .low) }
        }
        let client = try await GATTClient.connect(transport: observed, configuration: configuration)
        let warn: @Sendable (String) -> Void = { [console = inv.console] in console.err("mirror: " + terminalLines($0)) }
        // Service Changed (Part G §7.1) invalidates what is known of the database, here and in the cache (the client's
        // indication path, every bearer's).
        let databaseCache = GATTDatabaseCache(client: client, store: g.noCache ? nil : FileDatabaseStore.standard(writeAdvice: Session.cacheWriteAdvice), target: target.cacheKey,
                                              adapter: target.isUnix ? nil : g.adapter,
                                              report: { [key = target.cacheKey] in warn(Session.cacheText($0, target: key)) })
        let session = Session(client: client, transport: observed, clientRxMTU: clientRxMTU, capture: capture, records: records,
                              timeout: configuration.transactionTimeout, profile: profile, link: link,
                              linkRequests: requests, heldByShell: heldByShell, databaseCache: databaseCache, warn: warn,
                              pairing: pairing)
        guard exchangeMTU else { return session }
        do {
            _ = try await client.exchangeMTU()
        } catch {
            session.closeConnection()
            throw error
        }
        await session.openEnhancedBearers(g, target: target, security: target.isUnix ? nil : security, console: inv.console)
        return session
    }

    /// The whole database (primary services, their includes, and the secondary services they include), with
    /// every readable value read when `readValues`.
    func database(readValues: Bool) async throws -> DatabaseModel {
        // Kept for the connection, so that names resolve later without discovering again (the shell).
        let services = try await discovered().services
        var model = DatabaseModel(services: services, mtu: mtu)
        for c in services.flatMap(\.characteristics) {
            if let name = name(of: c.uuid) { client.setName(name, for: c.valueHandle) }
            if let name = profile.characteristicName(c.uuid) { model.names[c.uuid.description] = name }
        }
        if services.contains(where: { $0.uuid == profile.service }) {
            model.names[profile.service.description] = "mirror service"
        }
        guard readValues else { return model }
        // Every readable value and every descriptor, in database order; the outcomes go back to their places.
        enum Place { case value(Int, Int), descriptor(Int, Int, Int) }
        var reads: [(place: Place, handle: UInt16)] = []
        for s in model.services.indices {
            for c in model.services[s].characteristics.indices {
                let characteristic = model.services[s].characteristics[c]
                if GATTCharacteristicProperties(rawValue: characteristic.properties).contains(.read) {
                    reads.append((.value(s, c), characteristic.valueHandle))
                }
                for d in characteristic.descriptors.indices {
                    reads.append((.descriptor(s, c, d), characteristic.descriptors[d].handle))
                }
            }
        }
        // The values are read as many at once as bearers are open (GATTClient.readLong(each:)).
        let outcomes: [DatabaseModel.ReadOutcome] = try await client.readLong(each: reads.map(\.handle)).map { r in
            switch r {
            case .success(let value): return .value(value)
            case .failure(let e): return .error(ATTErrorFacts(e))
            }
        }
        for (read, outcome) in zip(reads, outcomes) {
            switch read.place {
            case .value(let s, let c): model.services[s].characteristics[c].value = outcome
            case .descriptor(let s, let c, let d): model.services[s].characteristics[c].descriptors[d].value = outcome
            }
        }
        // What each value means (ValueFormatter), with the characteristic's Presentation Format when it has one.
        for c in services.flatMap(\.characteristics) {
            guard let m = model.services.lazy.flatMap(\.characteristics).first(where: { $0.valueHandle == c.valueHandle }) else { continue }
            func bytes(_ o: DatabaseModel.ReadOutcome?) -> [UInt8]? { if case .value(let b)? = o { return b }; return nil }
            let presentation = m.descriptors.first { $0.uuid == BluetoothUUID.bit16(0x2904).description }.flatMap { bytes($0.value) }
            if let v = bytes(m.value) {
                model.decoded[c.valueHandle] = ValueFormatter.decode(v, uuid: c.uuid, name: label(c.uuid, userDescription: nil),
                                                                     profile: profile, presentation: presentation)
            }
            for d in c.descriptors {
                guard let v = bytes(m.descriptors.first { $0.handle == d.handle }?.value) else { continue }
                model.decoded[d.handle] = ValueFormatter.decode(v, uuid: d.uuid, name: nil, profile: profile)
            }
        }
        return model
    }

    func read(_ selector: AttributeSelector) async throws -> [ReadValue] {
        switch selector {
        case .handle(let handle):
            do {
                return [ReadValue(handle: handle, value: try await client.readLong(handle: handle))]
            } catch {
                throw await labelled(error)
            }
        case .uuid(let uuid):
            let found = try await client.readLong(uuid: uuid)
            guard !found.isEmpty else {
                // The server answered Read By Type with Attribute Not Found over the whole range.
                throw CLIError.att(ATTErrorFacts(code: .attributeNotFound, request: .readByTypeRequest, handle: 0x0001,
                                                 handleLabel: "no attribute of type \(uuid)", rejectedBy: .peer))
            }
            return found.map { ReadValue(handle: $0.handle, value: $0.value) }
        }
    }

    func write(handle: UInt16, value: [UInt8], mode: WriteMode) async throws {
        do {
            switch mode {
            case .request: try await client.write(handle: handle, value: value)
            case .command: try await client.writeWithoutResponse(handle: handle, value: value, timeout: timeoutDuration)
            case .long: try await client.writeLong(handle: handle, value: value)
            case .reliable: try await client.writeReliable([(handle: handle, value: value)])
            }
        } catch {
            throw await labelled(error)
        }
    }

    var timeoutDuration: Duration { timeout }

    /// A peer's ATT error with the handle's name added when it has none: the characteristic's user description
    /// (0x2901) or its well-known UUID name, found after the fact so that success costs nothing.
    func labelled(_ error: GATTError) async -> GATTError {
        guard case .attribute(var e) = error, e.handleName == nil, !client.isClosed else { return error }
        e.handleName = await handleLabel(e.handle)
        return .attribute(e)
    }

    /// The name of the characteristic whose value is at `handle`, if the server says (GATTPeer's
    /// `CharacteristicLookup.label(ofValueHandle:)`).
    func handleLabel(_ handle: UInt16) async -> String? { await lookup.label(ofValueHandle: handle) }

    /// A characteristic's name: the mirror profile's, else the well-known one.
    func name(of uuid: BluetoothUUID) -> String? {
        profile.characteristicName(uuid) ?? uuid.name ?? wellKnownName(uuid.description)
    }

    /// Subscribes to `references` (value handles, UUIDs or names, CharacteristicNames.swift; all that notify or
    /// indicate when empty) and calls `handler` for each notification and indication until `count` arrived, the
    /// task is cancelled (Ctrl-C) or the link ends. `subscribed` is told each subscription with its label and the
    /// value read right after it; each event carries its characteristic's label when it has one. `armed` is called
    /// once every CCCD write is answered (and robust caching asked), before the wait; `duration` ends the wait that
    /// long after it (the values that came before it are still handled).
    func listen(_ references: [CharacteristicReference], command: String?, preferIndications: Bool, count: Int?,
                drops: ListenDrops? = nil, duration: Duration? = nil,
                subscribed: (GATTCharacteristic, String?, GATTSubscriptionMode, [UInt8]?) -> Void,
                armed: () -> Void = {},
                _ handler: @escaping @Sendable (ListenEvent) -> Void) async throws -> Int {
        let stream = try procedureNotifications()
        defer { endProcedureNotifications(stream) }
        drops?.watch(stream)
        var (targets, labels) = try await listenTargets(references, command: command)
        var retried = false
        while true {
            let named = labels
            let subscribedNamed = { (c: GATTCharacteristic, mode: GATTSubscriptionMode, value: [UInt8]?) in
                subscribed(c, named.names[c.valueHandle], mode, value)
            }
            do {
                try await subscribe(targets, preferIndications: preferIndications, subscribed: subscribedNamed)
                break
            } catch {
                // Database Out Of Sync (0x12): resynchronized, names resolved again, subscribed again once.
                if GATTDatabaseCache.isOutOfSync(error), !retried {
                    retried = true
                    try await databaseCache.resynchronize()
                    if let raw = references.first(where: { if case .handle = $0 { true } else { false } }) {
                        throw GATTDatabaseCache.outOfSync(error, "the database changed: its Database Hash was re-read and the database rediscovered; "
                                             + "\(raw.description) was given as a raw handle and is not remapped")
                    }
                    (targets, labels) = try await listenTargets(references, command: command)
                    continue
                }
                // The link ended while subscribing: print what arrived before it did (the stream ends after them).
                if case .disconnected = error {
                    var received = 0
                    do {
                        for try await n in stream {
                            handler(Self.listenEvent(n, labels))
                            received += 1
                            if let count, received >= count { return received }
                        }
                    } catch {}
                }
                throw error
            }
        }
        // Robust caching for the wait that follows (the peer answers 0x12 instead of serving moved handles).
        try await databaseCache.enableRobustCaching()
        drops?.subscriptionsCompleted()
        let finalLabels = labels
        let event = { @Sendable (n: GATTNotification) in Self.listenEvent(n, finalLabels) }
        armed()
        if let count, count <= 0 { return 0 }
        // --duration: the stream is ended from the consumer's side when it is up (what is buffered is still read).
        let timer = duration.map { limit in
            Task {
                try? await MonotonicClock().sleep(for: limit)
                if !Task.isCancelled {
                    stream.finish()
                }
            }
        }
        defer { timer?.cancel() }
        // The values are printed off the link's loop: a stalled stdout must never stop the loop reading the link (the
        // stream buffers what comes meanwhile and counts what it drops: ListenDrops), so printing runs on the pool.
        let printer = Task(executorPreference: globalConcurrentExecutor) { () async throws -> Int in
            var received = 0
            for try await n in stream {
                handler(event(n))
                received += 1
                if let count, received >= count { break }
            }
            return received
        }
        return try await withTaskCancellationHandler { try await printer.value } onCancel: { printer.cancel() }
    }

    /// What `listen` subscribes to for `references` (all that notify or indicate when empty), with the labels
    /// of each (their user descriptions read if not yet).
    private func listenTargets(_ references: [CharacteristicReference], command: String?) async throws
        -> ([GATTCharacteristic], ListenLabels)
    {
        let characteristics = try await discovered().services.flatMap(\.characteristics)
        var targets: [GATTCharacteristic] = []
        if references.isEmpty {
            targets = characteristics.filter { $0.properties.contains(.notify) || $0.properties.contains(.indicate) }
            guard !targets.isEmpty else {
                throw GATTError.unsupported("no characteristic of \(client.label) notifies or indicates")
            }
        } else {
            for reference in references {
                if case .handle(let h) = reference {
                    guard let c = characteristics.first(where: { $0.valueHandle == h || $0.declarationHandle == h }) else {
                        let list = characteristics.filter { $0.properties.contains(.notify) || $0.properties.contains(.indicate) }
                            .map { ATTHex.handle($0.valueHandle) }.joined(separator: ", ")
                        throw GATTError.unsupported("handle \(ATTHex.handle(h)) is not a characteristic of \(client.label); value handles that notify or indicate: \(list.isEmpty ? "none" : list)")
                    }
                    targets.append(c)
                } else {
                    targets.append(try await characteristic(reference, command: command).characteristic)
                }
            }
        }
        let catalog = try await self.catalog(describing: Set(targets.map(\.valueHandle)))
        let names = Dictionary(targets.compactMap { c in catalog.entry(at: c.valueHandle)?.label.map { (c.valueHandle, $0) } },
                               uniquingKeysWith: { a, _ in a })
        let uuids = Dictionary(targets.map { ($0.valueHandle, $0.uuid) }, uniquingKeysWith: { a, _ in a })
        return (targets, ListenLabels(names: names, uuids: uuids, profile: profile))
    }

    /// One notification or indication as `listen` reports it, with its characteristic's label.
    private static func listenEvent(_ n: GATTNotification, _ labels: ListenLabels) -> ListenEvent {
        let name = labels.names[n.handle]
        return ListenEvent(time: unixNow(), handle: n.handle, name: name,
                           decoded: ValueFormatter.decode(n.value, uuid: labels.uuids[n.handle], name: name, profile: labels.profile),
                           indication: n.kind == .indication, value: n.value, droppedBefore: n.droppedBefore)
    }

    /// The notifications a procedure (listen, scan, wifi join) reads from its start. One-shot: the bearer's
    /// catch-all, which holds what came since the connect. In the shell: a stream of the procedure's own from now
    /// on, since the catch-all holds every value since the connect and ends for good with its first reader.
    func procedureNotifications() throws(GATTError) -> GATTNotificationStream {
        heldByShell ? try client.notificationStream() : client.notifications
    }

    /// Ends a stream `procedureNotifications` gave, once its procedure is done with it (the shell's own streams
    /// only: the one-shot catch-all ends with the connection).
    func endProcedureNotifications(_ stream: GATTNotificationStream) {
        if heldByShell { stream.finish() }
    }

    /// Subscribes to each characteristic (the GATT client checks it and writes its CCCD) and tells `subscribed`
    /// the mode and the value read right after.
    private func subscribe(_ targets: [GATTCharacteristic], preferIndications: Bool,
                           subscribed: (GATTCharacteristic, GATTSubscriptionMode, [UInt8]?) -> Void) async throws(GATTError) {
        for c in targets {
            let (value, _) = try await client.subscribe(to: c, preferIndications: preferIndications)
            // subscribe(to:) has checked that the characteristic notifies or indicates.
            subscribed(c, GATTSubscriptionMode(for: c.properties, preferIndications: preferIndications)!, value)
        }
    }

    /// What a command does when it is done with its session: closes it, unless it is the shell's.
    func close() {
        guard !heldByShell else { return }
        closeConnection()
    }

    /// Ends the connection (the GATT client, the link watch, the btsnoop file it opened).
    func closeConnection(reason: String = "mirror is done") {
        client.close(reason: reason)
        link?.close()
        pairing?.stop()
        if let c = capture.withLock({ $0 }), c.owned { c.writer.close() }
    }

    /// The btsnoop file this connection is written to, if any.
    var snoop: BTSnoopWriter? { capture.withLock { $0?.writer } }

    /// Writes this connection's ATT PDUs, and its link's HCI records, to `writer` from now on, under an index of
    /// their own (`mirror shell`'s btsnoop FILE); a capture before it stops (`stopCapture`).
    func startCapture(_ writer: BTSnoopWriter) {
        stopCapture()
        guard let bearer = transport.inner as? ATTBearer else { return }
        // The link's LE Connection Complete came before this capture: it starts with a synthesized one.
        let opening = Session.linkOpening(bearer: bearer, monitor: link?.monitor, afterConnect: true, monitorNote: nil)
        let index = Session.attach(writer, bearer: bearer, records: records, link: opening)
        for link in enhancedBearers.withLock({ $0.links }) { link.bearer.capture(into: writer, linkIndex: index) }
        capture.withLock { $0 = (writer, false) }
    }

    /// Stops writing the capture (closing its file when the session opened it).
    func stopCapture() {
        guard let c = capture.withLock({ s in defer { s = nil }; return s }) else { return }
        (transport.inner as? ATTBearer)?.endCapture()
        for link in enhancedBearers.withLock({ $0.links }) { link.bearer.endCapture() }
        records.capture.withLock { $0 = nil }
        if c.owned { c.writer.close() }
    }

    /// The bearer's PDUs and the link's HCI records (from the next one) into `writer`, under one new index, after
    /// a synthesized LE Connection Complete where the capture would hold none (`linkOpening`; unix: always).
    @discardableResult
    private static func attach(_ writer: BTSnoopWriter, bearer: ATTBearer, records: LinkRecordSink,
                               link: BTSnoopWriter.LinkOpening?) -> UInt16 {
        let index = bearer.capture(into: writer, link: link)
        records.capture.withLock { $0 = (writer, index) }
        return index
    }

    /// The LE Connection Complete (Vol 4 Part E §7.7.65.1) an LE bearer's capture synthesizes because it will not
    /// hold the real one: the monitor does not see LE events (no CAP_NET_RAW), or the capture starts after the
    /// connect (`afterConnect`: the shell's btsnoop FILE). Its values are the link's where known (L2CAP_CONNINFO,
    /// HCIGETCONNINFO, the monitor's events), Linux's defaults otherwise. Nil when the real one is captured, and
    /// for a bearer without a radio (ATTBearer.capture synthesizes that one itself).
    static func linkOpening(bearer: ATTBearer, monitor: HCILinkMonitor?, afterConnect: Bool,
                            monitorNote: String?) -> BTSnoopWriter.LinkOpening? {
        guard case .le(let peer, let type, _) = bearer.endpoint else { return nil }
        if !afterConnect, monitor?.receivesLEEvents == true { return nil }
        let why = afterConnect ? "the capture began after the link's LE Connection Complete"
            : "the link's LE events are not watched (\(monitorNote ?? "no link monitor"))"
        return linkOpening(peer: peer, type: type, link: LinkState.read(bearer: bearer), events: monitor?.eventState(), why: why)
    }

    /// An LE link's synthesized event: the handle and role the kernel gave (`link`), and the interval, latency and
    /// supervision timeout the monitor's events gave (`events`), in the event's units; Linux's defaults where unknown.
    static func linkOpening(peer: BluetoothAddress, type: LEAddressType, link: LinkState, events: LinkState?,
                            why: String) -> BTSnoopWriter.LinkOpening {
        BTSnoopWriter.LinkOpening(
            handle: link.handle.value ?? BTSnoopWriter.aclHandle, role: link.role.value ?? .central,
            peerAddressType: type, peer: peer,
            interval: events?.intervalMilliseconds.value.map { UInt16(clamping: Int(($0 / 1.25).rounded())) }
                ?? BTSnoopWriter.LinkOpening.defaultInterval,
            latency: events?.peripheralLatency.value.map { UInt16(clamping: $0) } ?? 0,
            supervisionTimeout: events?.supervisionTimeoutMilliseconds.value.map { UInt16(clamping: $0 / 10) }
                ?? BTSnoopWriter.LinkOpening.defaultSupervisionTimeout,
            reason: why + "; a value the link did not show is Linux's default")
    }

    /// Starts or stops --trace: every ATT PDU, and the link's HCI commands and events where a monitor watches it.
    func setTracing(_ on: Bool) {
        transport.setTracing(on)
        for link in enhancedBearers.withLock({ $0.links }) { link.observed.setTracing(on) }
        records.setTracing(on)
    }

    /// The `link` object of `mtu`, `bench`, `scan` and `link --json`: every value with its source or why it is
    /// unknown, the ATT MTU, and what the link options came to.
    /// `state`: the link as already read (the bench reads it once before its rounds); nil reads it now.
    func linkJSON(_ state: LinkState? = nil) -> JSONValue {
        let state = state ?? link?.state() ?? (transport.inner as? ATTBearer).map { LinkState.read(bearer: $0) }
            ?? LinkState(allUnknown: .unavailable("\(transport.label) has no radio link"))
        var fields: [(String, JSONValue)] = []
        if case .object(let f) = state.jsonValue { fields = f }
        fields.append(("attMTU", .sortedObject([("value", .int(mtu)), ("source", .string("Exchange MTU"))])))
        fields.append(("requests", .array(linkRequests.map(\.json))))
        fields.append(("watch", link.map { l in l.monitorNote.map { .string($0) } ?? .string("every HCI event of the link") } ?? .null))
        return .object(fields)
    }
}

extension DatabaseModel {
    /// The CLI's model of what the GATT client discovered.
    init(services: [GATTService], mtu: Int) {
        self.init(mtu: mtu, services: services.map { s in
            DatabaseModel.Service(
                uuid: s.uuid.description, start: s.startHandle, end: s.endHandle, primary: s.isPrimary,
                includes: s.includedServices.map {
                    DatabaseModel.Include(handle: $0.declarationHandle, start: $0.startHandle, end: $0.endHandle,
                                          uuid: $0.uuid.description)
                },
                characteristics: s.characteristics.map { c in
                    DatabaseModel.Characteristic(
                        uuid: c.uuid.description, handle: c.declarationHandle, valueHandle: c.valueHandle,
                        properties: c.properties.rawValue,
                        descriptors: c.descriptors.map { DatabaseModel.Descriptor(uuid: $0.uuid.description, handle: $0.handle) })
                })
        })
    }
}
