// The connection to one GATT server as the commands use it: GATTPeer's Peer, connected with the global options
// (`Session.open` fills Peer.Options and words its progress on stderr). No protocol logic here: every procedure is
// GATTPeer's (GATTProcedures.swift, through `lookup`) or the GATT client's.
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

/// One notification or indication as `mirror listen` prints it.
struct ListenEvent: Sendable {
    var time: Double
    var handle: UInt16
    /// Its characteristic's label (GATTPeer's `CharacteristicNames.label`), when it has one.
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

/// A connected GATT client with the procedures the commands need: GATTPeer's Peer, and what the CLI says of it.
final class Session: Sendable {
    /// The connection: the link, its bearers, the GATT client and the cache (GATTPeer).
    let peer: Peer
    let clientRxMTU: Int
    /// The ATT transaction timeout (--timeout).
    let timeout: Duration
    /// Names the mirror's characteristics (--profile, or the bundled profile).
    let profile: MirrorProfile
    /// The shell's connection: a command's `close()` leaves it open; only the shell ends it (`closeConnection`).
    let heldByShell: Bool
    /// Where the cache's warnings and findings go (stderr).
    let warn: @Sendable (String) -> Void
    /// The shell's consumers of the connection's values (GATTPeer's SharedNotifications): a running listen's claim,
    /// else a background subscription's route; each value printed once. Nil one-shot.
    let shared: SharedNotifications?
    /// Where a procedure (listen, scan, wifi join) reads its notifications: GATTPeer's choice, one-shot or shared.
    let notifications: ProcedureNotifications
    /// The shell's discovery in the background at a terminal (for Tab), if one was started.
    let backgroundDiscovery = Lock<Task<Void, Never>?>(nil)

    /// Returns once the shell's background discovery, if any, has ended (it sends nothing more): what a value read by
    /// handle is named from then does not depend on when the read ran.
    func backgroundDiscoveryDone() async {
        guard let task = backgroundDiscovery.withLock({ $0 }) else { return }
        await task.value
    }

    private init(peer: Peer, clientRxMTU: Int, timeout: Duration, profile: MirrorProfile, heldByShell: Bool,
                 warn: @escaping @Sendable (String) -> Void) {
        self.peer = peer
        self.heldByShell = heldByShell
        self.warn = warn
        self.profile = profile
        self.timeout = timeout
        self.clientRxMTU = clientRxMTU
        shared = heldByShell ? SharedNotifications(client: peer.client) : nil
        notifications = ProcedureNotifications(client: peer.client, shared: shared)
    }

    var mtuExchange: MTUExchangeInfo {
        MTUExchangeInfo(clientRxMTU: clientRxMTU, serverRxMTU: peer.client.serverRxMTU)
    }

    /// Connects to `target` with the global options (adapter, type, timeout, security, btsnoop, trace, the link
    /// options) and exchanges the MTU (--mtu, default 517). Over LE the link's HCI events are watched from before
    /// the connect; what the link options came to is printed on stderr unless `announceLink` is false (`mirror
    /// link` prints it itself) or --json is given (the JSON's `link` object carries it). Inside `mirror shell` the
    /// invocation carries the shell's open session, which is returned as it is (no second connection).
    /// `capture`: a btsnoop writer of the caller's (the shell's) to capture into instead of opening --btsnoop's.
    /// `exchangeMTU`: false for `mirror check`, which sends its own Exchange MTU (and opens no Enhanced ATT bearer).
    /// `agent`: how --pair's agent answers (the shell's: --io, --passkey, questions at its prompt); default Just Works.
    /// `surveying`: the command reads every value (`gatt --read`, `clone`): a refusal for security is the answer,
    /// recorded as the permission it reveals, unless --pair or a bond of ours can answer the pairing a raise starts
    /// (`Peer.Options.raisesSecurityThroughDaemon`: no pairing by bluetoothd's agent as a survey's side effect).
    static func open(_ target: TargetArgument, _ inv: Invocation, announceLink: Bool = true,
                     heldByShell: Bool = false, capture shellCapture: BTSnoopWriter? = nil,
                     exchangeMTU: Bool = true, agent: Pairing.AgentSetup? = nil, surveying: Bool = false) async throws -> Session {
        if let attached = inv.attached {
            inv.notes.setLinkDrop { [link = attached.peer.link] in link?.dropReason() }
            return attached
        }
        let g = inv.global
        let profile = try g.profile.map { path throws(MirrorProfileError) in try MirrorProfile.load(path: path) } ?? .bundled
        let console = inv.console, notes = inv.notes
        let warn: @Sendable (String) -> Void = { console.err("mirror: " + terminalLines($0)) }
        var options = Peer.Options()
        options.loop = inv.loop
        options.adapter = g.adapter
        options.addressType = target.addressType
        options.security = g.security.flatMap { BTSecurityLevel(name: $0.rawValue) }
        options.mtu = g.mtu ?? ATTMTU.maximum
        options.exchangesMTU = exchangeMTU
        options.transactionTimeout = .milliseconds(Int64((g.timeout * 1000).rounded()))
        options.connectTimeout = g.timeout
        options.names = CharacteristicNames(profile.characteristics)
        options.cache = g.noCache ? nil : FileDatabaseStore.standard(writeAdvice: Session.cacheWriteAdvice)
        // --pair: this process answers the kernel's pairing requests; --repair: a lost bond is paired again.
        options.pairing = g.pair ? agent ?? .standard(console: console) : nil
        options.repair = g.repair ? Pairing.terminalPrompts(passkey: nil, console: console) : nil
        options.raisesSecurityThroughDaemon = !surveying
        options.linkRequests = g.link
        options.records = LinkRecordSink(tracing: g.trace) { console.err($0) }
        options.trace = { console.err($0) }
        options.tracing = g.trace
        options.capture = shellCapture.map { .writer($0) } ?? g.btsnoop.map { .file($0) }
        options.enhancedBearers = g.bearers
        options.dropPrivileges = { Privilege.dropAll($0) }
        options.progress = { [key = target.target.description] event in
            switch event {
            case .note(let s): console.err("note: \(s)")
            case .repair(let s): console.err("repair: \(s)")
            case .linkRequests(let requests):
                if announceLink, !g.json { for r in requests { console.err("link: \(r.text)") } }
            case .linked(let link): notes.setLinkDrop { link.dropReason() }
            case .captureFailed(let error):
                // Said at the first failed write, and the command's status made 1 (Runner.execute).
                console.err("mirror: \(error)")
                notes.captureFailure.withLock { $0 = $0 ?? error }
            case .cache(let e): warn(Session.cacheText(e, target: key))
            case .bearers(let outcome): for line in Self.bearerNotes(outcome) { warn(line) }
            }
        }
        let peer = try await Peer.connect(to: target.target, options: options)
        return Session(peer: peer, clientRxMTU: g.mtu ?? ATTMTU.maximum, timeout: options.transactionTimeout, profile: profile,
                       heldByShell: heldByShell, warn: warn)
    }

    /// What a command does when it is done with its session: closes it, unless it is the shell's.
    func close() {
        guard !heldByShell else { return }
        closeConnection()
    }

    /// Ends the connection (the GATT client, the link watch, the agent, the btsnoop file it opened).
    func closeConnection(reason: String = "mirror is done") { peer.close(reason: reason) }

    /// The `link` object of `mtu`, `bench`, `scan` and `link --json`: every value with its source or why it is
    /// unknown, the ATT MTU, and what the link options came to.
    /// `state`: the link as already read (the bench reads it once before its rounds); nil reads it now.
    /// `sayingOnce`: a reason every radio value shares is said once (`LinkState.jsonValueSayingOnce`: the scan's result).
    func linkJSON(_ state: LinkState? = nil, sayingOnce: Bool = false) -> JSONValue {
        let state = state ?? peer.linkState()
        var fields: [(String, JSONValue)] = []
        if case .object(let f) = sayingOnce ? state.jsonValueSayingOnce : state.jsonValue { fields = f }
        fields.append(("attMTU", .sortedObject([("value", .int(peer.mtu)), ("source", .string("Exchange MTU"))])))
        fields.append(("requests", .array(peer.linkRequests.map(\.json))))
        fields.append(("watch", peer.link.map { l in l.monitorNote.map { .string($0) } ?? .string("every HCI event of the link") } ?? .null))
        return .object(fields)
    }
}
