// What the hostile peer does wrong: one scenario per way an ATT server can break Core Spec 5.4 Vol 3 Part F
// (§3.3 the transaction model, §3.4 the PDUs) or Part G (the procedures' rules), applied to chosen requests.

/// One way of breaking the protocol (Core Spec 5.4 Vol 3 Part F §3.3, §3.4; Part G §4). Every scenario answers
/// well, as a small GATT server, everything it does not attack, so a client gets as far as the attacked request.
public enum HostileScenario: String, Sendable, CaseIterable {
    /// Answers correctly (the control case).
    case wellBehaved = "well-behaved"
    /// Answers with a response opcode that does not belong to the request.
    case wrongOpcode = "wrong-opcode"
    /// Answers with an Error Response that names another request opcode.
    case errorForOtherRequest = "error-for-other-request"
    /// After each answer, sends responses nobody asked for, then a marker notification on handle 0x00FF.
    case unsolicitedResponses = "unsolicited-responses"
    /// Answers only after `delayMilliseconds` (longer than the client's timeout).
    case lateResponse = "late-response"
    /// Sends only the first two bytes of the answer.
    case truncated
    /// Pads the answer to ATT_MTU + 8 bytes (within a 1024-byte receive buffer).
    case oversized
    /// Pads the answer to 2000 bytes (larger than the client's receive buffer).
    case overBuffer = "over-buffer"
    /// Answers Exchange MTU with a Server Rx MTU of 10 (below the minimum of 23).
    case mtuBelowMinimum = "mtu-below-23"
    /// Answers Exchange MTU with a Server Rx MTU of 65535 (above the largest useful 517).
    case mtuAboveMaximum = "mtu-above-517"
    /// Discovery responses list their handles in reverse order (handles that go backwards).
    case handlesBackwards = "handles-backwards"
    /// Every discovery response repeats the first one, whatever the start handle (a loop if unchecked).
    case handlesRepeat = "handles-repeat"
    /// Read and Read Blob always return a full part: a long read that never ends.
    case endlessBlob = "endless-blob"
    /// Prepare Write Responses echo a value that differs from the one sent.
    case prepareEchoDiffers = "prepare-echo-differs"
    /// A CCCD write starts `count` notifications, sent as fast as the socket takes them (default a million).
    case notificationFlood = "notification-flood"
    /// A CCCD write starts `count` indications without waiting for confirmations and without reading.
    case indicationStorm = "indication-storm"
    /// Never answers the first discovery request (Read By Group Type) and floods 23-byte notifications meanwhile
    /// (`count`, default a million): what a checker that keeps every PDU cannot survive.
    case floodInRequest = "flood-in-request"
    /// Find By Type Value finds a service at every start handle asked, ending there: one handle of progress per
    /// answer, a walk of 65,535 requests per UUID if unchecked.
    case endlessServices = "endless-services"
    /// Never answers any request.
    case silent
    /// Closes the socket on receiving the attacked request.
    case close
    /// Answers the first connection well; every later one is accepted and read but never answered (what
    /// `mirror bench`'s bare loop, its second connection, then waits for: a response).
    case laterConnectionsSilent = "later-connections-silent"
    /// Answers the first connection well; on every later one answers Exchange MTU, then never reads again, so
    /// the connection's buffer fills (what `mirror bench`'s bare loop then waits for: room to send).
    case laterConnectionsStopReading = "later-connections-stop-reading"

    /// One line for `hostile-peer --list`.
    public var summary: String {
        switch self {
        case .wellBehaved: return "answers every request correctly (control)"
        case .wrongOpcode: return "answers with a response opcode that does not match the request"
        case .errorForOtherRequest: return "answers with an Error Response naming another request opcode"
        case .unsolicitedResponses: return "after each answer, sends responses nobody asked for, then a marker notification (handle 0x00FF)"
        case .lateResponse: return "answers after --delay-ms (default 2000)"
        case .truncated: return "sends the first two bytes of each answer"
        case .oversized: return "pads each answer to ATT_MTU + 8 bytes"
        case .overBuffer: return "pads each answer to 2000 bytes (over the client's receive buffer)"
        case .mtuBelowMinimum: return "answers Exchange MTU with a Server Rx MTU of 10"
        case .mtuAboveMaximum: return "answers Exchange MTU with a Server Rx MTU of 65535"
        case .handlesBackwards: return "discovery responses list handles in reverse order"
        case .handlesRepeat: return "every discovery response repeats the first one"
        case .endlessBlob: return "Read and Read Blob always fill the response: a long read that never ends"
        case .prepareEchoDiffers: return "Prepare Write Responses echo a different value"
        case .notificationFlood: return "a CCCD write starts --count notifications (default 1000000)"
        case .indicationStorm: return "a CCCD write starts --count indications (default 100000) without waiting or reading"
        case .floodInRequest: return "leaves the first Read By Group Type unanswered and floods --count 23-byte notifications (default 1000000)"
        case .endlessServices: return "Find By Type Value finds a one-handle service at every start handle asked"
        case .silent: return "never answers"
        case .close: return "closes the socket on the attacked request (--nth, default the first)"
        case .laterConnectionsSilent: return "answers the first connection; reads every later one and never answers"
        case .laterConnectionsStopReading: return "answers the first connection; on later ones answers Exchange MTU, then never reads"
        }
    }

    /// The request opcodes the scenario attacks unless told otherwise (`--on`).
    public var defaultVictims: Set<UInt8> {
        let allButMTU = HostileScenario.requestOpcodes.subtracting([0x02])
        switch self {
        case .wellBehaved, .laterConnectionsSilent, .laterConnectionsStopReading: return []
        case .wrongOpcode, .errorForOtherRequest, .unsolicitedResponses, .lateResponse, .oversized, .overBuffer, .close:
            return allButMTU
        case .truncated:
            // A Read or Read Blob Response has no length field: a cut one is a shorter value, undetectable.
            return allButMTU.subtracting([0x0A, 0x0C])
        case .mtuBelowMinimum, .mtuAboveMaximum: return [0x02]
        case .handlesBackwards, .handlesRepeat: return [0x04, 0x06, 0x08, 0x10]
        case .endlessBlob: return [0x0A, 0x0C]
        case .prepareEchoDiffers: return [0x16]
        case .notificationFlood, .indicationStorm: return [0x12]
        case .floodInRequest: return [0x10]
        case .endlessServices: return [0x06]
        case .silent: return HostileScenario.requestOpcodes
        }
    }

    /// The `mirror check` rules (their ids, Sources/Conformance) each scenario is built to break, so that
    /// `hostile-peer --fault RULE-ID` names a scenario by the rule, as `mirror-sim --fault RULE-ID` does; the rules of
    /// §3.3 (the transaction model) and §3.4 (the PDUs' form) only: the GATT rules are mirror-sim's.
    public static let faults: [(rule: String, scenario: HostileScenario)] = [
        ("mtu-exchange", .mtuBelowMinimum),
        ("mtu-answered-once", .unsolicitedResponses),
        ("no-unsolicited-response", .unsolicitedResponses),
        ("response-within-timeout", .lateResponse),
        ("response-well-formed", .truncated),
        ("error-echo", .errorForOtherRequest),
        ("handles-ascending", .handlesBackwards),
        ("read-blob-offset", .endlessBlob),
        ("read-blob-at-end", .endlessBlob),
        ("read-blob-past-end", .endlessBlob),
        ("prepare-write-echo", .prepareEchoDiffers),
    ]

    /// Every ATT request opcode a client sends (Core Spec 5.4 Vol 3 Part F §3.4.8).
    public static let requestOpcodes: Set<UInt8> = [0x02, 0x04, 0x06, 0x08, 0x0A, 0x0C, 0x0E, 0x10, 0x12, 0x16, 0x18, 0x20]
}

/// How a hostile peer behaves: the scenario and its knobs.
public struct HostileOptions: Sendable {
    public var scenario: HostileScenario
    /// The request opcodes attacked; nil: the scenario's `defaultVictims`.
    public var victims: Set<UInt8>?
    /// Attack only the nth attacked request (1-based) and answer the others well; nil: every one
    /// (`close` defaults to the first).
    public var nth: Int?
    /// How many notifications (flood) or indications (storm).
    public var count: Int?
    /// How late `late-response` answers.
    public var delayMilliseconds: Int = 2000
    /// The Server Rx MTU a well-behaved Exchange MTU answer offers.
    public var serverRxMTU: Int = 517

    public init(_ scenario: HostileScenario, victims: Set<UInt8>? = nil, nth: Int? = nil, count: Int? = nil,
                delayMilliseconds: Int = 2000) {
        self.scenario = scenario
        self.victims = victims
        self.nth = nth
        self.count = count
        self.delayMilliseconds = delayMilliseconds
    }

    var effectiveVictims: Set<UInt8> { victims ?? scenario.defaultVictims }
    var effectiveNth: Int? { nth ?? (scenario == .close || scenario == .floodInRequest ? 1 : nil) }
    var effectiveCount: Int {
        count ?? (scenario == .indicationStorm ? 100_000 : 1_000_000)
    }
}
