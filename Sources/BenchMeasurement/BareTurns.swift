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
