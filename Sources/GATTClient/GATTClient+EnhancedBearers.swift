// Opening Enhanced ATT bearers beside the unenhanced one (Core Spec 5.4 Vol 3 Part G §2.4, Part F §3.2.11): read
// the server's Server Supported Features, write Client Supported Features with the EATT bit, open the channels
// through the caller's connect function, and say for each bearer not opened why. The client goes on over CID 4.
import ATTStack
import LinkCore

/// One Enhanced ATT bearer's channel as a connect function opens it: its transport (not yet started) and the
/// channel's ATT_MTU (the smaller of both sides' MTUs, Part F §3.2.8; no Exchange MTU on it).
public struct EnhancedBearerChannel: Sendable {
    public var transport: any ATTTransport
    public var mtu: Int

    public init(transport: any ATTTransport, mtu: Int) {
        self.transport = transport
        self.mtu = mtu
    }

    /// An ECRED channel (or its unix: equivalent) with its MTU as the bearer reports it; closes it on failure.
    public init(_ bearer: some EnhancedATTTransport) throws(TransportError) {
        do {
            mtu = try bearer.enhancedMTU()
        } catch {
            bearer.close(reason: "its Enhanced ATT bearer MTU could not be read")
            throw error
        }
        transport = bearer
    }
}

/// Why an Enhanced ATT bearer was not opened.
public enum EnhancedBearerRefusal: Sendable, Equatable, CustomStringConvertible {
    /// The server has no Server Supported Features characteristic (0x2B3A, Part G §7.4): it offers no EATT.
    case noServerSupportedFeatures
    /// Its Server Supported Features has bit 0, EATT Supported, clear.
    case noEATTBit
    /// Reading Server Supported Features failed otherwise.
    case serverFeaturesUnreadable(GATTError)
    /// This kernel cannot open an ECRED channel: setsockopt(BT_MODE, BT_MODE_EXT_FLOWCTL) failed (a kernel
    /// before 5.7, or the bluetooth module's enable_ecred off).
    case kernelWithoutECRED(TransportError)
    /// The ECRED connection failed: the peer refused it (its L2CAP result code, Vol 3 Part A §4.26, over unix:;
    /// the kernel's errno for it and the syscall over a real adapter) or did not answer.
    case connectFailed(TransportError)
    /// The client could not take the channel (its unenhanced bearer closed meanwhile).
    case notAdded(GATTError)
    /// Not tried: what stopped bearer `after` stands for it (a refusing peer or kernel refuses the next as well).
    case notTried(after: Int)

    public var description: String {
        switch self {
        case .noServerSupportedFeatures:
            return "the server has no Server Supported Features (0x2B3A): it offers no Enhanced ATT bearer"
        case .noEATTBit:
            return "the server's Server Supported Features (0x2B3A) has no EATT Supported bit (bit 0)"
        case .serverFeaturesUnreadable(let e):
            return "reading the server's Server Supported Features (0x2B3A) failed: \(e)"
        case .kernelWithoutECRED(let e):
            return "this kernel opens no ECRED channel (it needs Linux 5.7+ with the bluetooth module's enable_ecred=1): \(e)"
        case .connectFailed(let e):
            return "the ECRED connection (PSM 0x0027) failed: \(e)"
        case .notAdded(let e):
            return "the client could not take the bearer: \(e)"
        case .notTried(let after):
            return "not tried after bearer \(after) was not opened"
        }
    }

    /// A transport error from opening an ECRED channel, sorted: the kernel's refusal of BT_MODE_EXT_FLOWCTL
    /// (`SocketError.enhancedModeSyscall`) is the kernel's, anything else the connection's.
    public init(opening error: TransportError) {
        if case .socket(let e) = error, e.syscall == SocketError.enhancedModeSyscall {
            self = .kernelWithoutECRED(error)
        } else {
            self = .connectFailed(error)
        }
    }
}

/// What `openEnhancedBearers` did.
public struct EnhancedBearerOutcome: Sendable, Equatable {
    /// One enhanced bearer not opened: its number (1 for the first beside CID 4) and why.
    public struct Failure: Sendable, Equatable {
        public var number: Int
        public var reason: EnhancedBearerRefusal
    }

    /// The bearers asked for in all, CID 4 included (`--bearers N`).
    public var requested: Int
    /// The server's EATT Supported bit (Server Supported Features bit 0); nil without 0x2B3A or when unread.
    public var serverSupportsEATT: Bool?
    /// The Client Supported Features bits written (nil when none were: no EATT bit, or no 0x2B29).
    public var clientFeaturesWritten: GATTClientFeatures?
    /// Why writing Client Supported Features failed, when it did (the bearers were tried all the same).
    public var clientFeaturesError: GATTError?
    /// The indices in `GATTClient.bearers` of the enhanced bearers opened, in order.
    public var opened: [Int]
    /// Each enhanced bearer asked for and not opened, in order.
    public var notOpened: [Failure]

    /// True when every bearer asked for is open.
    public var isComplete: Bool { notOpened.isEmpty }

    /// One line per problem, for a note: each run of bearers with one reason once ("bearers 1-2: the server has
    /// no Server Supported Features ...", "bearer 2: the ECRED connection (PSM 0x0027) failed: ...").
    public var problems: [String] {
        var lines: [String] = []
        if let e = clientFeaturesError { lines.append("writing Client Supported Features (0x2B29) failed: \(e)") }
        var i = 0
        while i < notOpened.count {
            var j = i
            while j + 1 < notOpened.count, notOpened[j + 1].reason == notOpened[i].reason { j += 1 }
            let numbers = i == j ? "bearer \(notOpened[i].number)" : "bearers \(notOpened[i].number)-\(notOpened[j].number)"
            lines.append("\(numbers): \(notOpened[i].reason)")
            i = j + 1
        }
        return lines
    }
}

extension GATTClient {
    /// Opens up to `count - 1` Enhanced ATT bearers beside the unenhanced one (`count` counts CID 4, as
    /// `--bearers` does; 1 or less does nothing and sends nothing). Reads Server Supported Features (0x2B3A,
    /// Part G §7.4); where it has the EATT bit, writes Client Supported Features (0x2B29, §7.2) with the EATT bit
    /// (`writeClientFeatures`, with the bits set before) and opens each channel with `connect(n)` (n = 1...count-1:
    /// `ATTBearer.connectEnhanced` over a real adapter or unix:), adding it with `addEnhancedBearer`. The first
    /// bearer not opened ends the attempt: the rest are `notTried` (all share a reason the server gave for every
    /// bearer). Never throws: the client goes on over what opened.
    public func openEnhancedBearers(_ count: Int,
                                    connect: (Int) async throws(TransportError) -> EnhancedBearerChannel) async -> EnhancedBearerOutcome {
        var outcome = EnhancedBearerOutcome(requested: count, serverSupportsEATT: nil, clientFeaturesWritten: nil,
                                            clientFeaturesError: nil, opened: [], notOpened: [])
        guard count > 1 else { return outcome }
        let numbers = 1..<count
        func refuseAll(_ reason: EnhancedBearerRefusal) -> EnhancedBearerOutcome {
            outcome.notOpened = numbers.map { .init(number: $0, reason: reason) }
            return outcome
        }
        do {
            outcome.serverSupportsEATT = try await serverSupportsEnhancedATT()
        } catch {
            return refuseAll(.serverFeaturesUnreadable(error))
        }
        switch outcome.serverSupportsEATT {
        case nil: return refuseAll(.noServerSupportedFeatures)
        case false?: return refuseAll(.noEATTBit)
        case true?: break
        }
        do {
            outcome.clientFeaturesWritten = try await writeClientFeatures(.enhancedATTBearer)
        } catch {
            if case .attribute = error { outcome.clientFeaturesError = error } else { return refuseAll(.notAdded(error)) }
        }
        for n in numbers {
            let reason: EnhancedBearerRefusal
            do throws(TransportError) {
                let channel = try await connect(n)
                do {
                    outcome.opened.append(try addEnhancedBearer(transport: channel.transport, mtu: channel.mtu))
                    continue
                } catch {
                    channel.transport.close(reason: "the client could not take it")
                    reason = .notAdded(error)
                }
            } catch {
                reason = EnhancedBearerRefusal(opening: error)
            }
            outcome.notOpened = numbers.filter { $0 >= n }.map { .init(number: $0, reason: $0 == n ? reason : .notTried(after: n)) }
            break
        }
        return outcome
    }
}
