// Pairing without bluetoothd (Vol 3 Part H: the kernel runs SMP, this process answers it through the management
// interface): the agent opened and prepared, a pairing, the agent serving a connection, and --repair's new bond.
import ATTStack
import Bonding
import Glibc
import LinkCore
import LinuxBluetooth

/// Why this process cannot be the pairing agent here: the management socket needs CAP_NET_ADMIN to be trusted.
public struct PairingUnavailableError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The sentence: what was asked, what is missing, and the line that grants it.
    public var description: String
    /// An error saying `description`.
    public init(_ description: String) { self.description = description }
}

/// `mirror pair --require-mitm` refused a pairing that ended in unauthenticated keys (Just Works, Vol 3 Part H
/// §2.3.5.1: no MITM protection): the kernel's copy was removed (Unpair Device) and no bond was saved.
public struct PairingWithoutMITMError: Error, Sendable, Equatable, CustomStringConvertible {
    public var peer: String
    public var adapter: String
    public var method: PairingMethod
    /// Whether Unpair Device removed the kernel's keys (false: it failed, and `removalProblem` says why).
    public var removalProblem: String?

    public init(peer: String, adapter: String, method: PairingMethod, removalProblem: String? = nil) {
        self.peer = peer
        self.adapter = adapter
        self.method = method
        self.removalProblem = removalProblem
    }

    public var description: String {
        let removed = removalProblem.map { "removing the kernel's keys for it failed (\($0)): `mirror bonds remove \(peer)`" }
            ?? "the kernel's keys for it were removed (Unpair Device)"
        return "pairing with \(peer) on \(adapter) reached \(method.rawValue), whose key is unauthenticated (no MITM protection), and --require-mitm asks for an authenticated one: no bond was saved and \(removed); give both sides an IO capability that can show or enter a passkey (--io keyboard-display)"
    }
}

/// Pairing's orchestration over LinuxBluetooth's `PairingAgent` and Bonding's stores.
public enum Pairing {
    /// How a connection's agent answers: the IO capability it gives the adapter (Part H §2.3.2), its prompts, and
    /// where its lines go ("pair: ..." and "note: ...").
    public struct AgentSetup: Sendable {
        /// This side's IO capability.
        public var io: IOCapability
        /// The answers to the kernel's User Confirmation and Passkey requests.
        public var prompts: PairingPrompts
        /// Where the agent's lines go.
        public var say: @Sendable (String) -> Void
        /// Whether the agent's management socket (and its SMP watch) may be sources of the link's loop: false when
        /// its prompts are answered by that loop's own next work (the shell's, at its prompt), which would deadlock,
        /// so the agent keeps a thread of its own.
        public var servesOnLinkLoop: Bool

        /// An agent answering with `prompts` as `io`, its lines to `say`.
        public init(io: IOCapability, prompts: PairingPrompts, say: @escaping @Sendable (String) -> Void, servesOnLinkLoop: Bool = true) {
            self.io = io
            self.prompts = prompts
            self.say = say
            self.servesOnLinkLoop = servesOnLinkLoop
        }
    }

    /// The agent on `adapter`: checks CAP_NET_ADMIN first (a management socket is trusted only when bound with it),
    /// opens the socket and prepares the adapter for `io`. An LE-only adapter cannot be asked whether the kernel has
    /// SMP on it: it is powered off and on only when that disturbs nobody (no connection on it, and no bluetoothd,
    /// which powers adapters through the interface: `daemonRuns`). `what` begins a refusal's sentence.
    public static func openAgent(adapter name: String?, io: IOCapability, prompts: PairingPrompts, daemonRuns: Bool,
                                 what: String, note: (String) -> Void) throws -> (PairingAgent, HCIAdapter) {
        let capabilities = Capabilities.checkRawHCI()
        guard capabilities.isSatisfied else { throw PairingUnavailableError(what + capabilities.summary) }
        let adapter = try HCIAdapter.resolve(try HCIAdapter.chosen(name))
        let agent = PairingAgent(socket: try ManagementSocket(adapter: adapter.name), index: adapter.index, prompts: prompts)
        let idle = !daemonRuns && (try? HCIAdapter.connectionCount(index: adapter.index)) == 0
        if let prepared = try agent.prepare(io: io, mayPowerCycle: idle) { note(prepared) }
        return (agent, adapter)
    }

    /// Opens the agent and pairs with `address` (Pair Device); bluetoothd must not run. `dropPrivileges` is called
    /// once the agent's socket is bound (nil keeps them: --repair connects again after it). `requireMITM`
    /// refuses Just Works (its confirmation declined; keys that came unauthenticated removed from the kernel:
    /// `PairingWithoutMITMError`).
    public static func pair(address: BluetoothAddress, type: LEAddressType, adapter name: String?, io: IOCapability,
                            prompts: PairingPrompts, dropPrivileges: ((String) -> Void)?, requireMITM: Bool = false,
                            note: (String) -> Void) throws -> (PairingOutcome, HCIAdapter) {
        let why = "after the management socket was opened"
        defer { dropPrivileges?(why) }
        let (agent, adapter) = try openAgent(adapter: name, io: io, prompts: prompts, daemonRuns: false, what: "", note: note)
        // The SMP watch's filter passes ACL data only with CAP_NET_RAW: opened before the capabilities go.
        let watch = SMPFailureWatch(index: adapter.index, adapter: adapter.name)
        dropPrivileges?(why)
        // A bond kept here: Just Works from the peer is not taken as this pairing's intent (asked, or refused).
        let bonded = ((try? BondStore.standard()).flatMap { try? $0.load(adapter: adapter.address, peer: address) }) != nil
        let outcome = try agent.pair(address: address, type: type, io: io, watch: watch, requireMITM: requireMITM, peerBonded: bonded)
        try refuseWithoutMITM(outcome, agent: agent, adapter: adapter.name, required: requireMITM)
        return (outcome, adapter)
    }

    /// `mirror pair`: refuses while bluetoothd runs (it answers the kernel's pairing requests too and owns the
    /// adapter's keys), pairs (`pair`), and keeps the new bond (`BondKeys.save`, replacing a bonded identity's only
    /// when `replacing`) unless the kernel already held keys. Returns the pairing, the adapter and the bond kept.
    public static func bond(address: BluetoothAddress, type: LEAddressType, adapter name: String?, io: IOCapability,
                            prompts: PairingPrompts, dropPrivileges: ((String) -> Void)?, requireMITM: Bool = false,
                            replacing: Bool, now: Int, note: (String) -> Void) throws
        -> (outcome: PairingOutcome, adapter: HCIAdapter, bond: (text: String, file: String?)?) {
        let adapterName = try HCIAdapter.chosen(name)
        if let pid = BluetoothDaemon.runningPID() {
            throw PairingUnavailableError("bluetoothd runs (pid \(pid)) and owns pairing and the keys on this machine: pair with it (`bluetoothctl pair \(address)`, its agent answering), and mirror uses that bond; or stop it (`sudo systemctl stop bluetooth`) to pair with mirror")
        }
        let (outcome, adapter) = try pair(address: address, type: type, adapter: adapterName, io: io, prompts: prompts,
                                          dropPrivileges: dropPrivileges, requireMITM: requireMITM, note: note)
        let bond = outcome.alreadyPaired ? nil : try BondKeys.save(outcome.keyEvents, peer: outcome.address, method: BondMethod(outcome.method),
                                                                   adapter: adapter, now: now, replacing: replacing)
        return (outcome, adapter, bond)
    }

    /// Under `required`, a pairing whose LTKs are unauthenticated (legacy Just Works asks user space nothing, so it
    /// is known only from New Long Term Key's Key_Type, Vol 3 Part H §2.3.1) is undone: Unpair Device on the agent's
    /// socket (trusted from its bind), then `PairingWithoutMITMError`.
    static func refuseWithoutMITM(_ outcome: PairingOutcome, agent: PairingAgent, adapter: String, required: Bool) throws {
        guard required, !outcome.alreadyPaired, outcome.authenticated == false else { return }
        var problem: String?
        if let key = outcome.keyEvents.lazy.compactMap({ e -> LongTermKey? in if case .newLongTermKey(_, _, let k) = e { return k } else { return nil } }).first {
            do { try agent.socket.run(.unpairDevice(index: agent.index, address: key.address, addressType: key.addressType)) } catch { problem = "\(error)" }
        }
        throw PairingWithoutMITMError(peer: "\(outcome.address) (\(outcome.type))", adapter: adapter,
                                      method: outcome.method, removalProblem: problem)
    }

    /// --repair after a lost bond: removes this host's bond with `address` (the store's file and the kernel's keys,
    /// `BondsRemoval`), pairs again as NoInputNoOutput with `prompts` and keeps the new bond; each step a line for
    /// `say` (shown after "repair: "), the agent's notes for `note`. The capabilities stay (the connect follows).
    public static func repair(address: BluetoothAddress, type: LEAddressType, adapter name: String?, prompts: PairingPrompts,
                              say: (String) -> Void, note: (String) -> Void) throws {
        let adapter = try HCIAdapter.resolve(try HCIAdapter.chosen(name))
        let removal = try BondsRemoval.run(store: try BondStore.standard(), peer: address, adapters: [adapter.address])
        for line in removal.lines { say(TerminalText.escaped(line)) }
        let (outcome, _) = try pair(address: address, type: type, adapter: adapter.name, io: .noInputNoOutput,
                                    prompts: prompts, dropPrivileges: nil, note: note)
        say("paired with \(outcome.address) (\(outcome.type)) on \(adapter.name) again: \(outcome.method.rawValue)")
        if !outcome.alreadyPaired {
            // --repair: the user asked to replace the bond, so a new identity's bond may replace a stored one.
            let bond = try BondKeys.save(outcome.keyEvents, peer: outcome.address, method: BondMethod(outcome.method),
                                         adapter: adapter, now: Int(time(nil)), replacing: true)
            say(bond.text)
        }
    }

    /// Opens the agent on `adapter` (default: the first that is up) and answers every pairing request there until
    /// the returned service stops (a connection's agent): `setup`'s IO capability and prompts, its lines to its
    /// `say`. A failed pairing is reported with its SMP Pairing Failed reason and sender (Part H §3.5.5; the watch
    /// is opened here, before the connect drops CAP_NET_RAW). The keys of a pairing are saved as a bond.
    /// With `loop` (the link's) the management socket and the SMP watch are sources of it: no thread of their own.
    public static func serve(adapter name: String?, peer: BluetoothAddress, daemonRuns: Bool, setup: AgentSetup,
                             loop: EventLoop? = nil) throws -> PairingService {
        let say = setup.say
        let (agent, adapter) = try openAgent(adapter: name, io: setup.io, prompts: setup.prompts,
                                             daemonRuns: daemonRuns, what: "--pair: ", note: { say("note: \($0)") })
        let watch = SMPFailureWatch(index: adapter.index, adapter: adapter.name, loop: loop)
        // Saved as a bond once the LTKs have come (each event saves what has come so far; a later one of the same
        // role replaces it).
        let events = Lock<[ManagementEvent]>([])
        let refusedOverwrite = Lock(false)
        // Whether the store holds a bond with `address` when the connection starts (the kernel holds its keys then).
        let bondedAtStart = { @Sendable (address: BluetoothAddress) -> Bool in
            ((try? BondStore.standard()).flatMap { try? $0.load(adapter: adapter.address, peer: address) }) != nil
        }
        let peerBonded = bondedAtStart(peer)
        return try agent.startServing(report: { say("pair: \($0)") }, keys: { event in
            let all = events.withLock { $0.append(event); return $0 }
            // The method is not known here (the kernel may pair with no request to answer): recorded as unknown.
            do {
                let saved = try BondKeys.save(all, peer: peer, method: .unknown, adapter: adapter, now: Int(time(nil)))
                if saved.file != nil, case .newLongTermKey = event { say("pair: \(saved.text)") }
            } catch let refusal as BondOverwriteError {
                // Said once: each later key event of the pairing meets the same stored bond.
                if !refusedOverwrite.withLock({ r in defer { r = true }; return r }) { say("pair: \(refusal)") }
            } catch {}
        }, watch: watch, bonded: { address in
            // The store's bond for this adapter and peer, before this connection's keys replace it.
            guard events.withLock({ $0.isEmpty }), let store = try? BondStore.standard(),
                  let bond = try? store.load(adapter: adapter.address, peer: address) else { return nil }
            return "\(bond.method.rawValue), kept in \(store.path(adapter: adapter.address, peer: address))"
        }, intended: { address in
            // --pair's own peer, with no bond here: the user asked for this pairing. A bonded peer asking to pair
            // again (the kernel leaves that to user space) or another peer is asked (Vol 3 Part H §2.3.5.1).
            address == peer && !peerBonded
        }, on: loop)
    }
}

extension Peer {
    /// How long `raiseSecurity` waits for the keys after the link is encrypted (they follow at once, Vol 3 Part H
    /// §3.6.1); a link encrypted with a key the kernel holds gets none, and waits it out.
    public static let keysAfterRaiseWait: Duration = .seconds(1)

    /// Raises the link's security to `level` when it is below (BT_SECURITY: the kernel runs SMP with this connection's
    /// agent, `Options.pairing`, or encrypts with a key it holds) and waits for the link to take data again; returns
    /// the level then and what the agent served since the connect or the last raise (a raise with no request answered
    /// was Just Works or the kernel's held key: the New Long Term Key, awaited at most `keysWait`, tells them apart).
    /// Throws `PairingUnavailableError` without an agent, or the raise's `GATTError`.
    public func raiseSecurity(to level: BTSecurityLevel, keysWait: Duration = Peer.keysAfterRaiseWait) async throws
        -> (level: BTSecurityLevel, served: ServedPairing) {
        guard let agent = pairing else {
            throw PairingUnavailableError("raising the security of \(target) needs this process's pairing agent: connect with Options.pairing")
        }
        return try await withLinkLoop(loop) { () async throws -> (level: BTSecurityLevel, served: ServedPairing) in
            var raised = false
            if client.securityLevel < level {
                try await client.setSecurityLevel(level)
                // The kernel holds the socket in BT_CONFIG until SMP ends: the link takes data again once encrypted.
                try await client.waitForTheLink(after: level)
                raised = true
            }
            let now = client.securityLevel
            var served = agent.takeServed()
            if raised, served.method == nil, served.longTermKeys == 0 {
                served = await BlockingThread.shared.run { agent.takeServed(awaitingKeysFor: keysWait) }
            }
            return (now, served)
        }
    }
}
