// `mirror bench`: the session, the link and the bare loop's socket given to BenchMeasurement's run (BenchRun), its
// size probe said on stderr, its rounds recorded for an interrupt, its failures turned into the CLI's errors.
import BenchMeasurement
import ATTStack
import BareATT
import LinuxBluetooth
import LinkCore
import GATTClient
import GATTPeer
import LinkCeiling

#if canImport(Glibc)
import Glibc
#endif

/// A bench phase that failed ("the Write Request warm-up", "Write Command round 2 of 3"): the error as it is,
/// said to have happened there, with what to do where the bench knows.
struct PhaseError: Error, Sendable {
    var phase: String
    var underlying: any Error
    var hint: String?
}

extension PhaseError {
    /// The run's phase failure in the CLI's terms: the underlying error as the CLI reports it, and for an ATT 0x0D
    /// on a size the user gave, what to pass instead.
    init(_ e: BenchPhaseError) {
        var hint: String?
        if let a = (e.underlying as? GATTError)?.attributeError, a.code == .invalidAttributeValueLength, let size = e.givenSize {
            hint = a.rejectedBy == .peer
                ? "the characteristic refused \(size)-byte values: pass a smaller --size (or leave --size out: bench then finds the largest size it accepts)"
                : "pass a --size within the budget\(a.budget.map { " of \($0) bytes" } ?? "")"
        }
        self.init(phase: e.phase, underlying: benchCLIError(e.underlying), hint: hint)
    }
}

/// A failure of the run's own, or of its bare loop, as `mirror bench` reports it; any other error as it is.
func benchCLIError(_ error: any Error) -> any Error {
    switch error {
    case let e as BareATTError:
        return e.cliError
    case BenchFailure.noSizeAccepted(let size, let handle):
        return CLIError.failure("the peer refused every length from 1 to \(size) bytes on \(ATTHex.handle(handle)) with ATT error 0x0D Invalid Attribute Value Length: bench finds no size to write; check the handle, or give --size")
    case BenchFailure.bearerEndedBeforeBareTurn(let label):
        return CLIError.connection("the connection to \(label) ended before the bare socket loop's turn")
    case BenchFailure.secondConnectionNeedsUnixTarget:
        return UsageError(secondConnectionOnLE, command: "bench")
    case BenchFailure.sameConnectionNeedsSocketBearer:
        return CLIError.unsupported("--bare-loop same-connection needs a socket bearer under the GATT client")
    default:
        return error
    }
}

/// --bare-loop second-connection given for an LE target, refused before connecting or by `BareLoopSetup`.
let secondConnectionOnLE = "--bare-loop second-connection needs a unix: target: an LE link takes one ATT socket (a second connect on CID 4 to the same peer fails with EBUSY); use same-connection"

/// The bench's line about its link: what the ceiling is computed for, or which value is missing for one.
func benchLinkLine(_ s: LinkState, ceilingInput: LinkParameters?) -> String {
    let handle = s.handle.value.map { "handle \(ATTHex.handle($0)), " } ?? ""
    if let c = ceilingInput { return "link: \(handle)\(c.description)" }
    let missing = [("interval", s.intervalMilliseconds.unknownReason), ("TX PHY", s.txPHY.unknownReason),
                   ("data length", s.dataLength.unknownReason)].compactMap { name, why in why.map { "\(name) unknown (\($0))" } }
    return "link: \(handle)" + (missing.isEmpty ? "not known" : missing.joined(separator: "; "))
}

enum Bench {
    /// `link`: the LE link's PHY, data length and interval as measured (its MTU is replaced by the session's);
    /// nil when they are not known. The ceilings come from it (never for a unix: target: no radio).
    /// `handle` and `counter` (--handle, --counter), when given, replace the plan's, resolved on the connection.
    static func run(target: TargetArgument, plan: BenchPlan, inv: Invocation, link: LinkParameters? = nil,
                    handle: CharacteristicReference? = nil, counter: CharacteristicReference? = nil,
                    progress: BenchProgress? = nil) async throws -> BenchResult {
        // The same-connection bare loop borrows the bearer's socket for each turn (`ATTBearer.lend`).
        let session = try await Session.open(target, inv)
        defer { session.close() }
        var plan = plan
        if let handle { plan.handle = try await session.resolve(handle, command: "bench") }
        if let counter { plan.counter = try await session.resolve(counter, command: "bench") }
        do {
            return try await run(session, target: target, plan: plan, inv: inv, link: link, progress: progress)
        } catch let error as GATTError {
            throw await session.peer.lookup.labelled(error)
        }
    }

    static func run(_ session: Session, target: TargetArgument, plan: BenchPlan, inv: Invocation,
                    link: LinkParameters? = nil, progress: BenchProgress? = nil) async throws -> BenchResult {
        let connection = BenchConnection(client: session.peer.client, target: target.description, isUnix: target.isUnix,
                                         mtu: session.peer.mtu, timeout: session.timeout)
        let hooks = BenchHooks(
            prepare: { try prepare(session, target: target, plan: plan, inv: inv, link: link) },
            label: { await session.peer.lookup.labelled($0) },
            backpressure: {
                let o = session.peer.transport.observations
                return (o.blockedNanoseconds, o.wouldBlockCount)
            },
            sizeProbed: { inv.console.err("bench: \($0.text(handle: plan.handle))") },
            roundDone: { progress?.record($0) })
        do {
            return try await BenchRun.run(connection, plan: plan, hooks: hooks)
        } catch let error as BenchPhaseError {
            throw PhaseError(error)
        }
    }

    /// The link the run is on, read once before its first write (LE Read PHY goes out here, not during a round), and
    /// the bare loop's socket (BenchMeasurement's `BareLoopSetup`: a second connection for unix:, the bearer's own
    /// socket lent for an LE link).
    static func prepare(_ session: Session, target: TargetArgument, plan: BenchPlan, inv: Invocation,
                        link: LinkParameters?) throws -> BenchPreparation {
        let linkState = session.peer.link?.state()
        let link = link ?? linkState?.ceilingInput(mtu: session.peer.mtu)
        var unixPath: String?
        if case .unix(let path) = target.target { unixPath = path }
        do {
            let bare = try BareLoopSetup.socket(plan.bareLoop, unixPath: unixPath, bearer: session.peer.transport.bearer,
                                                timeout: inv.global.timeout, clientRxMTU: session.clientRxMTU)
            return BenchPreparation(link: link, linkJSON: session.linkJSON(linkState),
                                    linkLine: linkState.map { benchLinkLine($0, ceilingInput: link) }, bare: bare)
        } catch {
            throw benchCLIError(error)
        }
    }
}

/// Runs a call of the bare loop or the loopback peer, its failure thrown as the CLI's error.
func bareATT<T>(_ body: () throws -> T) throws -> T {
    do { return try body() } catch let error as BareATTError { throw error.cliError }
}

extension BareATTError {
    /// The error `mirror bench` reports for a failure of its bare loop or loopback peer: a SocketError for a
    /// syscall, else a CLIError (each with the text, JSON keys and exit status the bench has always had).
    var cliError: any Error {
        switch self {
        case .syscall(let name, let errno, let step):
            switch step {
            case .openingListener:
                return SocketError(syscall: name, errno: errno, context: "opening the loopback peer's socket")
            case .listening(let path):
                return SocketError(syscall: "bind/listen", errno: errno, context: "listening at \(path) for the loopback peer")
            case .settingUpPeer:
                return SocketError(syscall: name, errno: errno, context: "setting up the loopback peer")
            case .openingSocket, .connecting, .sending, .receiving:
                return SocketError(syscall: name, errno: errno, context: step.description)
            }
        case .timeout(let wait, let seconds):
            return CLIError.timeout(what: wait.description, seconds: seconds)
        case .closedByPeer:
            return CLIError.connection(description)
        case .unexpectedAnswer:
            return CLIError.protocolViolation(description)
        case .encoding:
            return CLIError.failure(description)
        }
    }
}

extension PlainPeer {
    /// `mirror bench --loopback`: the plain peer in this process, on a private unix socket.
    /// With `enhancedATT` (--bearers N > 1) it serves Enhanced ATT bearers at PATH.eatt too.
    static func loopback(enhancedATT: Bool = false) throws -> PlainPeer {
        try bareATT { try PlainPeer(path: "/tmp/mirror-bench-\(getpid()).sock", enhancedATT: enhancedATT) }
    }
}
