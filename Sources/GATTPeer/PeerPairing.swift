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
    /// once the agent's socket is bound (nil keeps them: --repair connects again after it).
    public static func pair(address: BluetoothAddress, type: LEAddressType, adapter name: String?, io: IOCapability,
                            prompts: PairingPrompts, dropPrivileges: ((String) -> Void)?,
                            note: (String) -> Void) throws -> (PairingOutcome, HCIAdapter) {
        let why = "after the management socket was opened"
        defer { dropPrivileges?(why) }
        let (agent, adapter) = try openAgent(adapter: name, io: io, prompts: prompts, daemonRuns: false, what: "", note: note)
        // The SMP watch's filter passes ACL data only with CAP_NET_RAW: opened before the capabilities go.
        let watch = SMPFailureWatch(index: adapter.index, adapter: adapter.name)
        dropPrivileges?(why)
        return (try agent.pair(address: address, type: type, io: io, watch: watch), adapter)
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
            let bond = try BondKeys.save(outcome.keyEvents, peer: outcome.address, method: BondMethod(outcome.method),
                                         adapter: adapter, now: Int(time(nil)))
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
        return try agent.startServing(report: { say("pair: \($0)") }, keys: { event in
            let all = events.withLock { $0.append(event); return $0 }
            // The method is not known here (the kernel may pair with no request to answer): recorded as unknown.
            if let saved = try? BondKeys.save(all, peer: peer, method: .unknown, adapter: adapter, now: Int(time(nil))), saved.file != nil,
               case .newLongTermKey = event { say("pair: \(saved.text)") }
        }, watch: watch, bonded: { address in
            // The store's bond for this adapter and peer, before this connection's keys replace it.
            guard events.withLock({ $0.isEmpty }), let store = try? BondStore.standard(),
                  let bond = try? store.load(adapter: adapter.address, peer: address) else { return nil }
            return "\(bond.method.rawValue), kept in \(store.path(adapter: adapter.address, peer: address))"
        }, on: loop)
    }
}
