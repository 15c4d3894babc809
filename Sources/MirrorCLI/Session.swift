// The connection to one GATT server as the commands use it: a thin layer over the GATT client.
// Until the engine (branch engine) and the bearer (branch bearer) are merged, opening a session fails
// with a clear message; the commands, their arguments and their output formats are complete.
import MirrorCommandLine

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
struct ListenEvent: Sendable {
    var time: Double
    var handle: UInt16
    var indication: Bool
    var value: [UInt8]
}

/// What Exchange MTU did.
struct MTUExchangeInfo: Sendable {
    var clientRxMTU: Int
    /// Nil when the peer answered Request Not Supported.
    var serverRxMTU: Int?
}

/// A connected GATT client with the procedures the commands need.
final class Session: Sendable {
    let mtu: Int
    let mtuExchange: MTUExchangeInfo

    private init(mtu: Int, exchange: MTUExchangeInfo) {
        self.mtu = mtu
        self.mtuExchange = exchange
    }

    static func open(_ target: TargetArgument, _ inv: Invocation) async throws -> Session {
        throw CLIError.connection("cannot connect to \(target): this build has no GATT client yet (branch engine not merged)")
    }

    func database(readValues: Bool) async throws -> DatabaseModel {
        throw CLIError.failure("no GATT client in this build")
    }

    func read(_ selector: AttributeSelector) async throws -> [ReadValue] {
        throw CLIError.failure("no GATT client in this build")
    }

    func write(handle: UInt16, value: [UInt8], mode: WriteMode) async throws {
        throw CLIError.failure("no GATT client in this build")
    }

    func listen(handles: [UInt16], preferIndications: Bool, count: Int?,
                _ handler: @escaping @Sendable (ListenEvent) -> Void) async throws -> Int {
        throw CLIError.failure("no GATT client in this build")
    }

    func close() {}
}
