// The bench's bare socket loop, timed as its rounds are: BareATT's `BareLoop` on a socket of its own, or on the
// GATT client's, lent by the bearer for each turn.
import BareATT
import LinuxBluetooth

/// Where the bare loop's socket comes from: a connection of its own (unix:), or the GATT client's socket, lent by
/// the bearer for each turn (an LE link takes one ATT socket). One owner at a time either way.
public enum BareSocket {
    case own(BareLoop)
    case lent(ATTBearer, timeout: Double)

    /// Runs one turn of the bare loop: at once on its own socket, or on the bearer's event loop while the bearer
    /// reads nothing and sends nothing (`ATTBearer.lend`).
    func run<T: Sendable>(_ body: @escaping @Sendable (BareLoop) throws -> T) async throws -> T {
        switch self {
        case .own(let loop):
            return try body(loop)
        case .lent(let bearer, let timeout):
            return try await withCheckedThrowingContinuation { (c: CheckedContinuation<T, any Error>) in
                bearer.lend { fd in
                    guard let fd else { return c.resume(throwing: BenchFailure.bearerEndedBeforeBareTurn(bearer.label)) }
                    // The loop borrows the socket: it never closes it.
                    c.resume(with: Result { try body(BareLoop(borrowing: fd, label: bearer.label, timeout: timeout)) })
                }
            }
        }
    }

    /// Closes the bare loop's own connection (a lent socket stays the bearer's).
    public func close() {
        if case .own(let loop) = self { loop.close() }
    }
}

/// The bare loop's turns as the benches time them; its failures are BareATTErrors.
extension BareLoop {
    /// The same Write Requests as the client's, timed: send, then poll and receive, each awaited.
    @discardableResult
    public func requests(handle: UInt16, value: [UInt8], writes: Int) throws(BareATTError) -> RoundFigures {
        let watch = Stopwatch()
        try writeRequests(handle: handle, value: value, count: writes)
        return RoundFigures(writes: writes, watch.elapsed())
    }

    /// Write Commands, then one Read Request whose answer proves they were handled (the peer handles PDUs in order):
    /// of the counter when there is one (then also read just before, untimed, and the increase returned), else of
    /// `handle`.
    @discardableResult
    public func commands(handle: UInt16, value: [UInt8], writes: Int, counter: UInt16? = nil) throws(BareATTError) -> (RoundFigures, counted: Int?) {
        var before: Int?
        if let counter { before = try readCounter(handle: counter) }
        let watch = Stopwatch()
        try writeCommands(handle: handle, value: value, count: writes)
        var counted: Int?
        if let counter, let before {
            counted = try readCounter(handle: counter) - before
        } else {
            try readAnyAnswer(handle: handle)
        }
        return (RoundFigures(writes: writes, watch.elapsed()), counted)
    }
}

/// Where the bare loop runs (--bare-loop, else the target's default) and its socket: a second connection to a unix:
/// peer with the client's MTU, or the GATT client's own socket, lent by its bearer (an LE link takes one ATT socket:
/// a second connect on CID 4 to the same peer is EBUSY, l2cap_chan_connect finding the fixed channel taken).
public enum BareLoopSetup {
    /// The placement `option` asks for, or the target's default: a second connection for unix:, the same one for LE.
    public static func placement(_ option: BareLoopOption?, isUnix: Bool) -> BareLoopPlacement? {
        switch option ?? (isUnix ? .secondConnection : .sameConnection) {
        case .secondConnection: return .secondConnection
        case .sameConnection: return .sameConnection
        case .none: return nil
        }
    }

    /// The bare loop's socket for `option`: `unixPath` is the target's (nil for LE), `bearer` the socket bearer under
    /// the GATT client (nil when it is not one). Nil for no bare loop.
    public static func socket(_ option: BareLoopOption?, unixPath: String?, bearer: ATTBearer?, timeout: Double,
                              clientRxMTU: Int) throws -> (socket: BareSocket, placement: BareLoopPlacement)? {
        switch placement(option, isUnix: unixPath != nil) {
        case .secondConnection:
            guard let unixPath else { throw BenchFailure.secondConnectionNeedsUnixTarget }
            // The same MTU as the GATT client's, so the peer takes the same values.
            return (.own(try BareLoop(connectingTo: unixPath, timeout: timeout, clientRxMTU: UInt16(clientRxMTU))), .secondConnection)
        case .sameConnection:
            guard let bearer else { throw BenchFailure.sameConnectionNeedsSocketBearer }
            return (.lent(bearer, timeout: timeout), .sameConnection)
        case nil:
            return nil
        }
    }
}
