// A peer's Enhanced ATT bearers (Vol 3 Part F §3.2.11, Part G §2.4), opened after Exchange MTU through the GATT
// client's one flow (`openEnhancedBearers`): ECRED channels on SPSM 0x0027 over LE, `PATH.eatt` over unix:.
import ATTStack
import GATTClient
import LinkCore
import LinuxBluetooth

/// One Enhanced ATT bearer a peer opened: its socket (for its CIDs) and its trace (the caller's lines).
public struct PeerEnhancedBearer: Sendable {
    /// Its index in `GATTClient.bearers`.
    public var index: Int
    /// The ECRED channel's socket.
    public var bearer: ATTBearer
    /// The watch on it: its trace.
    public var observed: ObservedTransport
}

/// How the Enhanced ATT bearers are connected: the target's, the MTU's and the security's of the connect.
struct PeerBearerSetup {
    var target: BearerTarget
    var options: Peer.Options
    /// The security the CID 4 connect asked for (nil over unix:).
    var security: BTSecurityLevel?

    /// Opens `options.enhancedBearers - 1` bearers beside CID 4 on `peer`, each traced like CID 4 (their
    /// indications, Service Changed too, join the client's one notification path); what opened is kept on the peer.
    func open(on peer: Peer) async -> EnhancedBearerOutcome {
        let opened = Lock<[(bearer: ATTBearer, observed: ObservedTransport)]>([])
        let mtu = options.mtu ?? ATTMTU.minimumLE
        let client = peer.client
        let outcome = await client.openEnhancedBearers(options.enhancedBearers) { [options, target, security] n throws(TransportError) in
            let bearer: ATTBearer
            switch target {
            case .unix(let path):
                bearer = try ATTBearer.connectEnhanced(unixPath: path, mtu: mtu, timeout: options.connectTimeout, loop: client.eventLoop)
            case .bluetooth(let address):
                bearer = try ATTBearer.connectEnhanced(to: address, type: options.addressType, adapter: options.adapter,
                                                       mtu: mtu, timeout: options.connectTimeout, security: security,
                                                       loop: client.eventLoop)
            }
            let channel = try EnhancedBearerChannel(bearer)
            // The trace names the bearer on its lines; btsnoop records it on the link's index, on its channel's CIDs.
            let observed = ObservedTransport(bearer, tracing: peer.transport.isTracing,
                                             name: ObservedTransport.bearerName(index: n, localCID: bearer.channelIDs?.local),
                                             lines: options.trace ?? { _ in })
            if let c = peer.records.capture.withLock({ $0 }) { bearer.capture(into: c.writer, linkIndex: c.index) }
            opened.withLock { $0.append((bearer, observed)) }
            return EnhancedBearerChannel(transport: bearer, mtu: channel.mtu)
        }
        // The bearers opened are the first connects, in order (the first failure ends the attempt).
        let links = zip(outcome.opened, opened.withLock { $0 }).map { PeerEnhancedBearer(index: $0, bearer: $1.bearer, observed: $1.observed) }
        peer.enhanced.withLock { s in
            s.outcome = outcome
            s.links = links
        }
        return outcome
    }
}

extension Peer {
    /// The Enhanced ATT bearers open beside CID 4.
    public var enhancedLinks: [PeerEnhancedBearer] { enhanced.withLock { $0.links } }
    /// What `Options.enhancedBearers` came to (nil when it asked for one bearer).
    public var enhancedBearerOutcome: EnhancedBearerOutcome? { enhanced.withLock { $0.outcome } }
}

/// One ATT bearer of a peer as a report lists it: CID 4 or an Enhanced ATT bearer, its channel IDs, MTU and load.
public struct PeerBearerInfo: Sendable {
    /// Its index in `GATTClient.bearers` (CID 4 is 0).
    public var index: Int
    /// An Enhanced ATT bearer (an ECRED channel), not CID 4.
    public var enhanced: Bool
    /// This side's and the peer's channel IDs: 0x0004 on the unenhanced bearer, the ECRED channel's on an
    /// enhanced one (0x0040 + n over unix:); nil when the socket does not say.
    public var cids: (local: UInt16, remote: UInt16)?
    /// The bearer's ATT_MTU.
    public var mtu: Int
    /// Whether it is still open.
    public var open: Bool
    /// How many responses it matched.
    public var requestsAnswered: Int
    /// The channel's credits: no socket option gives an ECRED channel's credits, so they are said unknown.
    public var credits: LinkValue<Int>
}

extension Peer {
    /// Every ATT bearer of the connection, CID 4 first, with its channel IDs where the socket gives them.
    public func bearerInfo() -> [PeerBearerInfo] {
        let links = enhancedLinks
        let noCredits = LinkValue<Int>.unknown(.unavailable("not reported: no socket option gives an ECRED channel's credits"))
        return client.bearers.map { b in
            guard b.isEnhanced else {
                return PeerBearerInfo(index: b.index, enhanced: false, cids: (0x0004, 0x0004), mtu: b.mtu, open: !b.isClosed,
                                      requestsAnswered: b.requestsAnswered,
                                      credits: .unknown(.unavailable("none: the ATT fixed channel has no credit-based flow control")))
            }
            let cids = links.first { $0.index == b.index }?.bearer.channelIDs
            return PeerBearerInfo(index: b.index, enhanced: true, cids: cids, mtu: b.mtu, open: !b.isClosed,
                                  requestsAnswered: b.requestsAnswered, credits: noCredits)
        }
    }
}
