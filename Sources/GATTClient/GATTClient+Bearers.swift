// Several ATT bearers on one link (Core Spec 5.4 Vol 3 Part F §3.2.11, Part G §2.4): the unenhanced bearer the
// client starts on, and Enhanced ATT bearers (L2CAP ECRED channels) added beside it, each an engine of its own.
import ATTStack
import LinkCore
import Synchronization

/// One ATT bearer of a client, as `GATTClient.bearers` lists it.
public struct GATTBearer: Sendable, Equatable {
    /// 0 is the unenhanced bearer (CID 4); 1... the enhanced bearers in the order they were added.
    public var index: Int
    /// The transport's label ("unix:/tmp/sim.sock.eatt.1", "hci0 AA:BB:.. PSM 0x0027 CID 0x0041").
    public var label: String
    /// True on an Enhanced ATT bearer.
    public var isEnhanced: Bool
    /// Its ATT_MTU: the Exchange MTU's on the unenhanced bearer, the channel's MTU on an enhanced one (§3.2.8).
    public var mtu: Int
    public var isClosed: Bool
    /// Responses (and Error Responses) matched to requests on this bearer so far: which bearer served what.
    public var requestsAnswered: Int
}

extension GATTClient {
    /// Adds an Enhanced ATT bearer over `transport` (not yet started; an ECRED channel on PSM 0x27, or any
    /// transport standing for one) whose ATT_MTU is `mtu` (the channel's: no Exchange MTU on it, Part F §3.2.8).
    /// From now on requests go to the least busy open bearer; its notifications join `notifications` in the order
    /// its reader receives them. A timeout closes only that bearer (§3.3.3); what was queued on it moves to the
    /// unenhanced bearer, but for a Prepare Write queue's parts, which fail with it. Returns the bearer's index.
    @discardableResult
    public func addEnhancedBearer(transport: any ATTTransport, mtu: Int) throws(GATTError) -> Int {
        guard !engine.isClosed else {
            throw .disconnected(GATTDisconnectedError(reason: "the unenhanced bearer is closed",
                                                      during: "adding an Enhanced ATT bearer (\(transport.label))"))
        }
        let e = ATTEngine(enhanced: transport, mtu: min(max(mtu, ATTMTU.minimumLE), ATTMTU.maximum), primary: engine)
        let index = enhanced.withLock { list in
            list.append(e)
            return list.count
        }
        engine.onLoopSync { $0.enhanced.append(e) }
        enhancedCount.store(index, ordering: .releasing)
        e.start()
        return index
    }

    /// Every bearer of the client, the unenhanced one first.
    public var bearers: [GATTBearer] {
        ([engine] + enhanced.withLock { $0 }).enumerated().map { i, e in
            GATTBearer(index: i, label: e.transport.label, isEnhanced: e.isEnhanced, mtu: e.mtu, isClosed: e.isClosed,
                       requestsAnswered: e.answeredCount)
        }
    }

    /// How many bearers are open (0 once the client closed).
    public var openBearerCount: Int { bearers.filter { !$0.isClosed }.count }

    /// Whether a request not pinned to a bearer is to be placed by `ATTEngine.pickOnLoop` (enhanced bearers exist).
    var picksBearer: Bool { enhancedCount.load(ordering: .acquiring) > 0 }

    /// The bearer a procedure of several requests stays on (a Prepare Write queue, Part F §3.4.6; a long read's
    /// parts, cut at its MTU), chosen on the loop as `ATTEngine.pickOnLoop` chooses and reserved there until
    /// `done` (the reservation counts as one request in its load, so parallel procedures spread).
    func withPinnedBearer<T>(_ body: (ATTEngine) async throws(GATTError) -> T) async throws(GATTError) -> T {
        guard picksBearer else { return try await body(engine) }
        let primary = engine
        let pinned = primary.onLoopSync { _ in
            let e = primary.pickOnLoop()
            e.reserve(1)
            return e
        }
        defer { pinned.reserve(-1) }
        return try await body(pinned)
    }
}
