// The write benchmark behind `mirror bench`.
import MirrorCommandLine

/// Which write modes `mirror bench` measures.
enum BenchMode: String, Sendable, CaseIterable {
    case withResponse = "with-response"
    case withoutResponse = "without-response"
    case both
}

/// What to measure.
struct BenchPlan: Sendable {
    var handle: UInt16
    /// Value bytes per write; nil for the MTU's budget.
    var size: Int?
    /// Writes per mode; nil when `duration` is set.
    var count: Int?
    var duration: Double?
    var warmup: Int
    var mode: BenchMode
}

/// The figures of one run.
struct BenchResult: Sendable {
    var json: JSONValue
    var text: [String]
}

enum Bench {
    static func run(target: TargetArgument, plan: BenchPlan, inv: Invocation) async throws -> BenchResult {
        _ = try await Session.open(target, inv)
        throw CLIError.failure("no GATT client in this build")
    }
}
