// The check's program: Exchange MTU, discovery (Read By Group Type, Find Information, Read By Type), every attribute
// read, Read Blob inside and past the end of each value, the requests a server must refuse, then the GATT rules
// over what was discovered. Each step judges its rules from the logged PDUs (ATTProbe).
import ATTStack
import GATTVocabulary
import LinkCore

/// How to run a check.
public struct ConformanceOptions: Sendable {
    /// The target as the user named it.
    public var target: String
    /// The Client Rx MTU offered in Exchange MTU.
    public var clientRxMTU: Int
    /// The ATT transaction timeout (Vol 3 Part F §3.3.3): 30 s, or --timeout.
    public var limit: Duration
    /// The ATT_MTU already agreed when the connection's MTU was exchanged before the check (the shell's); nil: the
    /// check exchanges it itself.
    public var agreedMTU: Int?
    /// The rules reported (--only / --skip applied).
    public var rules: [ConformanceRule]
    /// The characteristics the write probes may write (`--writes`), each with the user's word for it.
    public var writes: [(label: String, target: ConformanceWriteTarget)] = []
    /// The whole check's deadline (`--max-time`): no request is sent after it, so a check ends within it and one
    /// transaction timeout, however slowly a server answers.
    public var deadline: Duration = ConformanceOptions.defaultDeadline
    /// The most requests the check sends (`--max-requests`), whatever a server's discovery answers claim.
    public var requestBudget: Int = ConformanceOptions.defaultRequestBudget
    /// Told the step under way and the counts so far, at each step and after each request (the CLI's progress
    /// line on a terminal); called on the check's task.
    public var progress: (@Sendable (_ step: String, _ requests: Int, _ attributes: Int) -> Void)?

    /// 120 s: a real device's check (a few hundred requests over a radio link) takes well under a minute.
    public static let defaultDeadline: Duration = .seconds(120)
    /// 5,000 requests: about four per attribute for a database of over a thousand attributes.
    public static let defaultRequestBudget = 5000

    public init(target: String, clientRxMTU: Int = ATTMTU.maximum, limit: Duration = .seconds(30), agreedMTU: Int? = nil,
                rules: [ConformanceRule] = ConformanceRule.catalogue) {
        self.target = target
        self.clientRxMTU = clientRxMTU
        self.limit = limit
        self.agreedMTU = agreedMTU
        self.rules = rules
    }
}

/// A characteristic the user allows the check to write: by value (or declaration) handle, or by UUID.
public enum ConformanceWriteTarget: Sendable, Equatable {
    case handle(UInt16)
    case uuid(BluetoothUUID)
}

/// An unassigned opcode without the Command Flag: a request no server supports (Vol 3 Part F §3.4.8 assigns none).
let unassignedRequestOpcode: UInt8 = 0x3E
/// An unassigned opcode with the Command Flag (bit 6) set: a command no server supports (§3.3.1).
let unassignedCommandOpcode: UInt8 = 0x7E

/// A characteristic as its declaration says (Vol 3 Part G §3.3.1), with the log indices of the exchange that found it.
struct FoundCharacteristic {
    var declaration: UInt16
    var properties: GATTCharacteristicProperties
    var valueHandle: UInt16
    var uuid: BluetoothUUID
    var evidence: [Int]
}

struct FoundService {
    var handle: UInt16
    var end: UInt16
    var uuid: BluetoothUUID
    var characteristics: [FoundCharacteristic] = []
    var evidence: [Int]
}

/// How an Error Response's handle must echo the request's (Vol 3 Part F §3.4.1.1).
enum EchoExpectation {
    case exact(UInt16)
    /// A range request: the Starting Handle when nothing was found or the range is invalid, else a handle in it.
    case range(ATTHandleRange)
}

/// Runs the check over `probe` (already receiving the bearer's PDUs).
public func runConformanceCheck(_ probe: ATTProbe, _ options: ConformanceOptions) async -> ConformanceReport {
    let check = ConformanceRun(probe: probe, options: options)
    return await check.run()
}

/// One run: what was found so far and the findings. Used by one task only.
final class ConformanceRun {
    let probe: ATTProbe
    let options: ConformanceOptions
    var findings: [ConformanceFinding] = []
    var notRun: [ConformanceSkip] = []
    /// Rules whose probes ran to their end.
    var judged: Set<String> = []
    var mtu = ATTMTU.minimumLE
    var requests = 0
    var quietPeriod: Duration = .milliseconds(100)
    /// The longest quiet period after a request kind, whatever the server's round trip: a server that answers late
    /// cannot stretch the check by its own delay.
    static let longestQuietPeriod: Duration = .seconds(1)
    /// When no request may be sent any more (options.deadline after the start).
    var stopSending: ClockInstant?
    /// Request opcodes already followed by a quiet period (each kind once is watched for a duplicate answer).
    var watched: Set<UInt8> = []
    var services: [FoundService] = []
    /// Every attribute Find Information gave, with the exchange that gave it.
    var attributes: [(handle: UInt16, type: BluetoothUUID, evidence: Int)] = []
    var values: [UInt16: [UInt8]] = [:]
    /// The exchanges that read each attribute.
    var reads: [UInt16: [Int]] = [:]

    init(probe: ATTProbe, options: ConformanceOptions) {
        self.probe = probe
        self.options = options
    }

    func find(_ rule: ConformanceRule, _ observed: String, _ evidence: [Int]) {
        let log = probe.log
        // In time order: a request's record is logged once its send returned, which may be after its answer's.
        let records = Array(Set(evidence)).filter { $0 < log.count }.map { log[$0] }.sorted { $0.time < $1.time }
        findings.append(ConformanceFinding(rule: rule, observed: observed, evidence: records))
    }

    func run() async -> ConformanceReport {
        let started = probe.clock.now()
        stopSending = started.advanced(by: options.deadline)
        // These judge every exchange as it happens.
        judged.formUnion([ConformanceRule.noUnsolicitedResponse.id, ConformanceRule.errorEcho.id, ConformanceRule.responseWithinTimeout.id,
                          ConformanceRule.responseWellFormed.id])
        var stopped: String?
        var lost = false
        do {
            step("Exchange MTU")
            try await exchangeMTU()
            step("discovery")
            try await discover()
            step("reading every attribute")
            try await readAll()
            step("Read Blob")
            try await readBlobs()
            step("Read By Type")
            try await readByType()
            step("Read Multiple")
            try await readMultiple()
            step("invalid handles")
            try await invalidHandles()
            step("an unassigned command")
            try await unsupportedCommand()
            judgeGATT()
            step("write probes")
            try await writeProbes()
            step("an unassigned request")
            try await unsupportedRequest()
        } catch {
            switch error {
            case .timedOut(let request, let limit, let strays):
                // A response of another opcode came instead (Part F §3.3.2): named before the silence.
                judgeStrays(strays, after: [request])
                let r = probe.record(request)
                if r.bytes.first == unassignedRequestOpcode {
                    find(.requestNotSupported, "no answer to the unassigned request opcode \(ATTHex.byte(unassignedRequestOpcode)) in \(limit.spoken)", [request])
                    judged.insert(ConformanceRule.requestNotSupported.id)
                } else {
                    find(.responseWithinTimeout, "no answer to \(r.decoded) in \(limit.spoken)", [request])
                }
                stopped = "a request got no answer in \(limit.spoken), and after a transaction timeout nothing more may be sent on the bearer (Vol 3 Part F §3.3.3)"
            case .closed(let reason):
                stopped = "the connection ended: \(reason)"
                lost = true
                // A PDU too long for any ATT_MTU ended the bearer: the server's, so a finding (Part F §3.2.8, §3.2.9).
                if case .truncated(let received, let buffer) = reason {
                    find(.responseWellFormed, "a \(received)-octet PDU, longer than the \(buffer)-octet receive buffer and than any ATT_MTU (at most \(ATTMTU.maximum)), ended the connection", [])
                }
            case .sendFailed(let reason):
                stopped = "a send failed: \(reason)"
                lost = true
            case .limitReached(let reason):
                stopped = reason
            }
        }
        let selected = Set(options.rules.map(\.id))
        if stopped != nil {
            for rule in ConformanceRule.catalogue where !judged.contains(rule.id) && !notRun.contains(where: { $0.rule == rule }) {
                notRun.append(ConformanceSkip(rule: rule, reason: ConformanceReport.stoppedBefore))
            }
        }
        var report = ConformanceReport(
            target: options.target, mtu: mtu, checked: options.rules,
            findings: findings.filter { selected.contains($0.rule.id) },
            notRun: notRun.filter { selected.contains($0.rule.id) },
            requests: requests, attributes: attributes.count,
            seconds: probe.clock.now().duration(since: started).seconds, stopped: stopped)
        report.lostConnection = lost
        report.notStored = probe.notStored.values.reduce(0, +)
        return report
    }

    // MARK: exchanges

    /// Sends a request and judges what came with its answer (strays, the Error Response's echo); the first request
    /// of each kind is followed by a quiet period, in which any response is unsolicited (a duplicate answer).
    /// `judgeForm` false leaves a malformed answer to the caller's own rule (read-by-type-consistent).
    func ask(_ bytes: [UInt8], echo: EchoExpectation, judgeForm: Bool = true) async throws(ProbeEnd) -> ProbeExchange {
        try withinBounds()
        requests += 1
        options.progress?(currentStep, requests, attributes.count)
        let exchange = try await probe.request(bytes, limit: options.limit)
        judgeStrays(exchange.strays, after: [exchange.request])
        if judgeForm { judgeWellFormed(exchange) }
        if case .errorResponse(let opcode, let handle, let code)? = exchange.pdu {
            judgeEcho(bytes[0], echo, opcode: opcode, handle: handle, code: code, exchange)
        }
        if watched.insert(bytes[0]).inserted {
            judgeStrays(try await probe.quiet(quietPeriod), after: [exchange.request, exchange.answer])
        }
        return exchange
    }

    /// The step under way, for `options.progress`.
    var currentStep = ""

    func step(_ name: String) {
        currentStep = name
        options.progress?(name, requests, attributes.count)
    }

    /// Throws `.limitReached` when the next request would pass the request budget or the deadline.
    func withinBounds() throws(ProbeEnd) {
        if requests >= options.requestBudget {
            throw .limitReached("the check sent its budget of \(options.requestBudget) requests (--max-requests) before it ended")
        }
        if let stopSending, probe.clock.now() >= stopSending {
            throw .limitReached("the check reached its deadline of \(options.deadline.spoken) (--max-time) before it ended")
        }
    }

    func ask(_ pdu: ATTPDU, echo: EchoExpectation, judgeForm: Bool = true) async throws(ProbeEnd) -> ProbeExchange {
        try await ask(pdu.bytes, echo: echo, judgeForm: judgeForm)
    }

    /// An answer that does not decode as its opcode's PDU, or is longer than ATT_MTU (Part F §3.2.8, §3.3, §3.4).
    func judgeWellFormed(_ exchange: ProbeExchange) {
        let answer = probe.record(exchange.answer)
        if exchange.pdu == nil {
            find(.responseWellFormed, "the answer does not parse: \(answer.decoded)", [exchange.request, exchange.answer])
        } else if answer.bytes.count > mtu {
            find(.responseWellFormed, "a \(answer.bytes.count)-octet response, longer than ATT_MTU \(mtu): \(answer.decoded)", [exchange.request, exchange.answer])
        }
    }

    /// Responses no request was waiting for: a second Exchange MTU Response, an answer to the unsupported command,
    /// or any other unsolicited or duplicate response.
    func judgeStrays(_ strays: [Int], after context: [Int]) {
        for i in strays {
            let r = probe.record(i)
            let what = r.decoded
            if r.bytes.first == ATTOpcode.exchangeMTUResponse.rawValue {
                find(.mtuAnsweredOnce, "a second Exchange MTU Response: \(what)", context + [i])
            } else if r.bytes.count >= 2, r.bytes[0] == ATTOpcode.errorResponse.rawValue, r.bytes[1] == unassignedCommandOpcode {
                find(.commandIgnored, "the command \(ATTHex.byte(unassignedCommandOpcode)) was answered: \(what)", context + [i])
            } else {
                let duplicate = context.count > 1 && probe.record(context[1]).bytes == r.bytes
                // One that came while the request (context's only entry) waited answers some other request.
                let during = context.count == 1 && r.time > probe.record(context[0]).time
                let kind = duplicate ? "a duplicate of the last answer"
                    : during ? "a response that does not answer the outstanding \(ATTOpcode(probe.record(context[0]).bytes.first ?? 0))"
                    : "a response with no request outstanding"
                find(.noUnsolicitedResponse, kind + ": \(what)", context + [i])
            }
        }
    }

    func judgeEcho(_ requestOpcode: UInt8, _ echo: EchoExpectation, opcode: ATTOpcode, handle: UInt16, code: ATTErrorCode,
                   _ exchange: ProbeExchange) {
        let evidence = [exchange.request, exchange.answer]
        if opcode.rawValue != requestOpcode {
            find(.errorEcho, "the Error Response names request opcode \(opcode), not \(ATTOpcode(requestOpcode))", evidence)
            return
        }
        switch echo {
        case .exact(let expected) where handle != expected:
            find(.errorEcho, "the Error Response names handle \(ATTHex.handle(handle)), not \(ATTHex.handle(expected))", evidence)
        case .range(let range):
            let atStart = code == .attributeNotFound || code == .invalidHandle
            if atStart ? handle != range.start : !range.contains(handle) {
                find(.errorEcho, "the Error Response (\(code)) names handle \(ATTHex.handle(handle)), not "
                     + (atStart ? "the Starting Handle \(ATTHex.handle(range.start))" : "a handle in \(range)"), evidence)
            }
        default: break
        }
    }

    // MARK: the program

    func exchangeMTU() async throws(ProbeEnd) {
        if let agreed = options.agreedMTU {
            mtu = agreed
            let why = "this connection exchanged its MTU when it opened, and Exchange MTU is sent once per connection (Vol 3 Part F §3.4.2.1): `mirror check TARGET` checks it on a connection of its own"
            notRun += [ConformanceSkip(rule: .mtuExchange, reason: why), ConformanceSkip(rule: .mtuAnsweredOnce, reason: why)]
            return
        }
        let clientRx = UInt16(clamping: options.clientRxMTU)
        let request = ATTPDU.exchangeMTURequest(clientRxMTU: clientRx)
        requests += 1
        let exchange = try await probe.request(request.bytes, limit: options.limit)
        judgeStrays(exchange.strays, after: [exchange.request])
        // The quiet period after it is a few round trips of this link (a radio link's answers take connection events).
        let rtt = probe.record(exchange.answer).time - probe.record(exchange.request).time
        quietPeriod = min(max(.milliseconds(100), rtt * 4), options.limit, Self.longestQuietPeriod)
        switch exchange.pdu {
        case .exchangeMTUResponse(let serverRx)?:
            if Int(serverRx) < ATTMTU.minimumLE {
                find(.mtuExchange, "Server Rx MTU \(serverRx), below the minimum \(ATTMTU.minimumLE)", [exchange.request, exchange.answer])
            }
            mtu = ATTMTU.negotiated(clientRxMTU: Int(clientRx), serverRxMTU: Int(serverRx))
        case .errorResponse(let opcode, let handle, let code)?:
            // Request Not Supported: the MTU stays 23 (a server may not support the exchange).
            judgeEcho(request.opcode.rawValue, .exact(0), opcode: opcode, handle: handle, code: code, exchange)
        default:
            find(.mtuExchange, "Exchange MTU was answered with \(probe.record(exchange.answer).decoded)", [exchange.request, exchange.answer])
        }
        watched.insert(request.opcode.rawValue)
        judgeStrays(try await probe.quiet(quietPeriod), after: [exchange.request, exchange.answer])
        judged.formUnion([ConformanceRule.mtuExchange.id, ConformanceRule.mtuAnsweredOnce.id])
    }

    /// The handles of one discovery response in ascending order and inside the range asked (Part F §3.4.3.2, §3.4.3.4,
    /// §3.4.4.2, §3.4.4.10).
    func judgeOrder(_ handles: [UInt16], _ range: ATTHandleRange, _ e: ProbeExchange) {
        if let outside = handles.first(where: { !range.contains($0) }) {
            find(.handlesAscending, "\(probe.record(e.answer).decoded.prefix(40))...: handle \(ATTHex.handle(outside)) is outside the range asked, \(range)", [e.request, e.answer])
        } else if zip(handles, handles.dropFirst()).contains(where: { $0 >= $1 }) {
            find(.handlesAscending, "the handles listed are not in ascending order: \(handles.map(ATTHex.handle).joined(separator: ", "))", [e.request, e.answer])
        }
    }

    /// Asks `request(range)` from `start` to 0xFFFF (or `end`) until the server says Attribute Not Found, each response
    /// handed to `take`, which returns the last handle it covers (the next request starts after it). Stops when a
    /// response makes no progress.
    func walk(from start: UInt16 = 0x0001, to end: UInt16 = 0xFFFF, _ request: (ATTHandleRange) -> ATTPDU,
              _ take: (ATTPDU, ATTHandleRange, ProbeExchange) -> UInt16?) async throws(ProbeEnd) {
        var start = start
        while start <= end {
            let range = ATTHandleRange(start: start, end: end)
            let e = try await ask(request(range), echo: .range(range))
            guard let pdu = e.pdu, let last = take(pdu, range, e), last >= start, last < end else { return }
            start = last + 1
        }
    }

    /// Primary services by Read By Group Type (Part G §4.4.1) and by Find By Type Value for each UUID (§4.4.2), every
    /// attribute by Find Information (§4.7.1), the includes and characteristics of each service by Read By Type
    /// (§4.5.1, §4.6.1); the procedures' results compared.
    func discover() async throws(ProbeEnd) {
        try await walk({ .readByGroupTypeRequest(range: $0, type: .primaryService) }) { pdu, range, e in
            guard case .readByGroupTypeResponse(let list) = pdu else { return nil }
            judgeOrder(list.map(\.handle), range, e)
            for s in list where range.contains(s.handle) {
                services.append(FoundService(handle: s.handle, end: s.endGroup, uuid: BluetoothUUID(littleEndian: s.value) ?? .bit16(0),
                                             evidence: [e.request, e.answer]))
            }
            return list.map(\.endGroup).max()
        }
        services.sort { $0.handle < $1.handle }
        try await walk({ .findInformationRequest($0) }) { pdu, range, e in
            guard case .findInformationResponse(let list) = pdu else { return nil }
            judgeOrder(list.map(\.handle), range, e)
            for a in list where range.contains(a.handle) && !attributes.contains(where: { $0.handle == a.handle }) {
                attributes.append((a.handle, a.type, e.answer))
            }
            return list.map(\.handle).max()
        }
        attributes.sort { $0.handle < $1.handle }
        for index in services.indices {
            let s = services[index]
            try await walk(from: s.handle, to: s.end, { .readByTypeRequest(range: $0, type: .include) }) { pdu, range, e in
                guard case .readByTypeResponse(let list) = pdu else { return nil }
                judgeOrder(list.map(\.handle), range, e)
                return list.map(\.handle).max()
            }
            try await walk(from: s.handle, to: s.end, { .readByTypeRequest(range: $0, type: .characteristic) }) { pdu, range, e in
                guard case .readByTypeResponse(let list) = pdu else { return nil }
                judgeOrder(list.map(\.handle), range, e)
                for d in list where d.value.count >= 5 && range.contains(d.handle) {
                    let v = Array(d.value)
                    services[index].characteristics.append(FoundCharacteristic(
                        declaration: d.handle, properties: GATTCharacteristicProperties(rawValue: v[0]),
                        valueHandle: UInt16(v[1]) | UInt16(v[2]) << 8, uuid: BluetoothUUID(littleEndian: v[3...]) ?? .bit16(0),
                        evidence: [e.request, e.answer]))
                }
                return list.map(\.handle).max()
            }
            services[index].characteristics.sort { $0.declaration < $1.declaration }
        }
        try await compareServices()
        compareCharacteristics()
    }

    /// Find By Type Value for each primary service UUID against what Read By Group Type found (Part G §4.4.2).
    func compareServices() async throws(ProbeEnd) {
        var uuids: [BluetoothUUID] = []
        for s in services where !uuids.contains(s.uuid) { uuids.append(s.uuid) }
        for uuid in uuids {
            var found: [(UInt16, UInt16)] = []
            var evidence: [Int] = []
            let grouped = services.filter { $0.uuid == uuid }
            let expected = Set(grouped.map { "\($0.handle)-\($0.end)" })
            try await walk({ .findByTypeValueRequest(range: $0, type: 0x2800, value: uuid.attWireBytes[...]) }) { pdu, range, e in
                evidence += [e.request, e.answer]
                guard case .findByTypeValueResponse(let list) = pdu else { return nil }
                judgeOrder(list.map(\.found), range, e)
                let known = Set(found.map { "\($0.0)-\($0.1)" })
                found += list.map { ($0.found, $0.groupEnd) }
                // Bounded by the ranges Read By Group Type gave: a range it did not give, or one given twice, is the
                // disagreement already, and walking on would cost a request per handle the server chooses to claim.
                if list.contains(where: { !expected.contains("\($0.found)-\($0.groupEnd)") || known.contains("\($0.found)-\($0.groupEnd)") }) { return nil }
                return list.map(\.groupEnd).max()
            }
            let a = Set(grouped.map { "\(ATTHex.handle($0.handle))-\(ATTHex.handle($0.end))" })
            let b = Set(found.map { "\(ATTHex.handle($0.0))-\(ATTHex.handle($0.1))" })
            if a != b {
                find(.discoveryServicesAgree, "service \(uuid): Read By Group Type finds \(a.sorted().joined(separator: ", ")), Find By Type Value "
                     + (b.isEmpty ? "none" : b.sorted().joined(separator: ", ")), grouped.flatMap(\.evidence) + evidence)
            }
        }
        judged.insert(ConformanceRule.discoveryServicesAgree.id)
    }

    /// The characteristic declarations of Read By Type against Find Information's 0x2803 attributes (Part G §4.6.1,
    /// §4.7.1), and each declaration's value handle (§3.3.1).
    func compareCharacteristics() {
        let declared = services.flatMap(\.characteristics)
        let byType = Set(declared.map(\.declaration))
        let byInformation = Set(attributes.filter { $0.type == .characteristic }.map(\.handle))
        for h in byType.subtracting(byInformation).sorted() {
            let c = declared.first { $0.declaration == h }!
            find(.discoveryCharacteristicsAgree, "the declaration at \(ATTHex.handle(h)) (\(c.uuid)) is found by Read By Type but Find Information does not list it as 0x2803"
                 + (attributes.first { $0.handle == h }.map { " (it lists \($0.type))" } ?? ""),
                 c.evidence + attributes.filter { $0.handle < h }.suffix(1).map(\.evidence))
        }
        for h in byInformation.subtracting(byType).sorted() {
            find(.discoveryCharacteristicsAgree, "Find Information lists a 0x2803 declaration at \(ATTHex.handle(h)) that Read By Type does not find",
                 attributes.filter { $0.handle == h }.map(\.evidence))
        }
        judged.insert(ConformanceRule.discoveryCharacteristicsAgree.id)
        for c in declared where c.valueHandle != c.declaration &+ 1 {
            find(.characteristicValueHandle, "the declaration at \(ATTHex.handle(c.declaration)) (\(c.uuid)) names value handle \(ATTHex.handle(c.valueHandle)), not \(ATTHex.handle(c.declaration &+ 1))",
                 c.evidence)
        }
        judged.insert(ConformanceRule.characteristicValueHandle.id)
        judged.insert(ConformanceRule.handlesAscending.id)
    }

    /// Reads every attribute (a long one by Read Blob after a full Read Response, §3.4.4.5); refusals are the
    /// server's right and leave the value unknown.
    func readAll() async throws(ProbeEnd) {
        for a in attributes {
            var indices: [Int] = []
            let e = try await ask(.readRequest(handle: a.handle), echo: .exact(a.handle))
            indices += [e.request, e.answer]
            guard case .readResponse(let first)? = e.pdu else { reads[a.handle] = indices; continue }
            var value = Array(first)
            var part = first.count
            while part == ATTMTU.readBlobPartBudget(mtu), value.count < ATTMTU.maximumAttributeValue {
                let offset = UInt16(value.count)
                let b = try await ask(.readBlobRequest(handle: a.handle, offset: offset), echo: .exact(a.handle))
                indices += [b.request, b.answer]
                guard case .readBlobResponse(let next)? = b.pdu else { break }
                value += next
                part = next.count
            }
            values[a.handle] = value
            reads[a.handle] = indices
        }
    }

    /// Read Blob at offset 1 (inside) and at length + 1 (past the end) of every value read.
    func readBlobs() async throws(ProbeEnd) {
        for a in attributes {
            guard let value = values[a.handle] else { continue }
            if value.count >= 2 {
                let e = try await ask(.readBlobRequest(handle: a.handle, offset: 1), echo: .exact(a.handle))
                let expected = Array(value[1...].prefix(ATTMTU.readBlobPartBudget(mtu)))
                switch e.pdu {
                case .readBlobResponse(let part)? where Array(part) == expected: break
                case .errorResponse(_, _, let code)? where code == .attributeNotLong:
                    break   // a fixed-length value within one Read Response may be refused so (§3.4.4.5)
                case .errorResponse?: break   // a refusal is not a wrong part
                default:
                    guard try await stillReads(a.handle, as: value) else { break }
                    find(.readBlobOffset, "handle \(ATTHex.handle(a.handle)): Read Blob at offset 1 of a \(value.count)-octet value did not return the value from octet 1",
                         (reads[a.handle] ?? []) + [e.request, e.answer])
                }
            }
            guard value.count < 0xFFFF else { continue }
            let end = try await ask(.readBlobRequest(handle: a.handle, offset: UInt16(value.count)), echo: .exact(a.handle))
            switch end.pdu {
            case .readBlobResponse(let part)? where part.isEmpty: break
            case .errorResponse(_, _, let code)? where code == .attributeNotLong: break
            default:
                find(.readBlobAtEnd, "handle \(ATTHex.handle(a.handle)): Read Blob at offset \(value.count), the length of the value, was answered with \(probe.record(end.answer).decoded), not an empty part",
                     (reads[a.handle] ?? []) + [end.request, end.answer])
            }
            let offset = UInt16(value.count + 1)
            let e = try await ask(.readBlobRequest(handle: a.handle, offset: offset), echo: .exact(a.handle))
            switch e.pdu {
            case .errorResponse(_, _, let code)? where code == .invalidOffset || code == .attributeNotLong: break
            default:
                find(.readBlobPastEnd, "handle \(ATTHex.handle(a.handle)): Read Blob at offset \(offset) of a \(value.count)-octet value was answered with \(probe.record(e.answer).decoded), not Invalid Offset",
                     (reads[a.handle] ?? []) + [e.request, e.answer])
            }
        }
        judged.formUnion([ConformanceRule.readBlobOffset.id, ConformanceRule.readBlobPastEnd.id, ConformanceRule.readBlobAtEnd.id])
    }

    /// Whether a Read of `handle` still gives `known` (its first ATT_MTU-1 octets): a value that changed since it was
    /// read is not the server's fault, so a mismatch is blamed only when this holds.
    func stillReads(_ handle: UInt16, as known: [UInt8]) async throws(ProbeEnd) -> Bool {
        let again = try await ask(.readRequest(handle: handle), echo: .exact(handle))
        guard case .readResponse(let now)? = again.pdu else { return false }
        return Array(now) == Array(known.prefix(now.count))
    }

    /// Read By Type for each readable characteristic's type: a Length that fits the pairs, and the values Read gave
    /// (Part F §3.4.4.2); a value that changed between the reads is read again before it is blamed.
    func readByType() async throws(ProbeEnd) {
        var types: [BluetoothUUID] = []
        for c in services.flatMap(\.characteristics) where c.properties.contains(.read) && !types.contains(c.uuid) { types.append(c.uuid) }
        for type in types {
            let e = try await ask(.readByTypeRequest(range: .all, type: type), echo: .range(.all), judgeForm: false)
            let bytes = probe.record(e.answer).bytes
            if bytes.first == ATTOpcode.readByTypeResponse.rawValue, e.pdu == nil {
                var why = "malformed"
                do { _ = try ATTPDU.decode(bytes) } catch { why = "\(error)" }
                find(.readByTypeConsistent, "the Read By Type Response for \(type) does not parse: \(why)", [e.request, e.answer])
                continue
            }
            guard case .readByTypeResponse(let list)? = e.pdu else { continue }
            let budget = ATTMTU.readByTypeValueBudget(mtu)
            for pair in list {
                guard let known = values[pair.handle] else { continue }
                let expected = Array(known.prefix(budget))
                guard Array(pair.value) != expected else { continue }
                guard try await stillReads(pair.handle, as: known) else { continue }
                find(.readByTypeConsistent, "Read By Type for \(type) gives handle \(ATTHex.handle(pair.handle)) the value [\(ATTHex.string(pair.value, separator: " "))], Read gives [\(ATTHex.string(expected, separator: " "))]",
                     (reads[pair.handle] ?? []) + [e.request, e.answer])
            }
        }
        judged.insert(ConformanceRule.readByTypeConsistent.id)
    }

    /// Read Multiple (§3.4.4.7) of the last values Read gave, asked in descending handle order: the response is
    /// those values in that order, concatenated, cut at ATT_MTU - 1 (§3.4.4.8); 0x06 says the server has none.
    func readMultiple() async throws(ProbeEnd) {
        let chosen = Array(attributes.filter { values[$0.handle].map { !$0.isEmpty } ?? false }.map(\.handle).reversed().prefix(3))
        guard chosen.count >= ATTHandleList.minimumCount, let list = try? ATTHandleList(chosen) else {
            notRun.append(ConformanceSkip(rule: .readMultiple, reason: "fewer than two attributes gave a value to Read"))
            return
        }
        let expected = Array(chosen.flatMap { values[$0] ?? [] }.prefix(ATTMTU.readBlobPartBudget(mtu)))
        let e = try await ask(.readMultipleRequest(list), echo: .exact(chosen[0]))
        let asked = "Read Multiple of \(chosen.map { ATTHex.handle($0) }.joined(separator: ", "))"
        let evidence = chosen.flatMap { reads[$0] ?? [] } + [e.request, e.answer]
        switch e.pdu {
        case .readMultipleResponse(let got)? where Array(got) == expected:
            break
        case .readMultipleResponse(let got)?:
            // A value that changed since it was read is not the server's fault (stillReads).
            for h in chosen {
                guard let known = values[h], try await stillReads(h, as: known) else {
                    judged.insert(ConformanceRule.readMultiple.id)
                    return
                }
            }
            find(.readMultiple, "\(asked) gave [\(ATTHex.string(Array(got), separator: " "))] (\(got.count) octets); the values Read gave, in that order and cut at \(ATTMTU.readBlobPartBudget(mtu)) octets, are [\(ATTHex.string(expected, separator: " "))] (\(expected.count) octets)",
                 evidence)
        case .errorResponse(_, _, let code)? where code == .requestNotSupported:
            notRun.append(ConformanceSkip(rule: .readMultiple, reason: "the server has no Read Multiple (it answered 0x06 Request Not Supported)"))
            return
        case .errorResponse(_, _, let code)?:
            find(.readMultiple, "\(asked) was refused with \(code), though Read gave each of those values", evidence)
        default:
            find(.readMultiple, "\(asked) was answered with \(probe.record(e.answer).decoded), not a Read Multiple Response", evidence)
        }
        judged.insert(ConformanceRule.readMultiple.id)
    }

    /// Read Request to 0x0000 and to the handle after the last attribute: Invalid Handle (§3.4.4.3).
    func invalidHandles() async throws(ProbeEnd) {
        for (rule, handle) in [(ConformanceRule.invalidHandleZero, UInt16(0))] + (attributes.last.map { $0.handle < 0xFFFF ? [(ConformanceRule.invalidHandlePastEnd, $0.handle + 1)] : [] } ?? []) {
            let e = try await ask(ATTPDU.readRequest(handle: handle).bytes, echo: .exact(handle))
            switch e.pdu {
            case .errorResponse(_, _, let code)? where code == .invalidHandle: break
            case .errorResponse(_, _, let code)?:
                find(rule, "Read Request to \(ATTHex.handle(handle)) was refused with \(code), not \(ATTErrorCode.invalidHandle)", [e.request, e.answer])
            default:
                find(rule, "Read Request to \(ATTHex.handle(handle)) was answered with \(probe.record(e.answer).decoded), not an Error Response", [e.request, e.answer])
            }
            judged.insert(rule.id)
        }
        if attributes.isEmpty {
            notRun.append(ConformanceSkip(rule: .invalidHandlePastEnd, reason: "Find Information found no attribute"))
        } else if attributes.last!.handle == 0xFFFF {
            notRun.append(ConformanceSkip(rule: .invalidHandlePastEnd, reason: "the last attribute has handle 0xFFFF"))
        }
    }

    /// An unassigned opcode with the Command Flag: nothing may answer it in the quiet period after it (§3.3.1).
    func unsupportedCommand() async throws(ProbeEnd) {
        let index = try await probe.send([unassignedCommandOpcode])
        judgeStrays(try await probe.quiet(quietPeriod), after: [index])
        judged.insert(ConformanceRule.commandIgnored.id)
    }

    /// An unassigned request opcode: Request Not Supported, handle 0x0000 (§3.4.1.1). Last: a server that does not
    /// answer ends the bearer's use (§3.3.3).
    func unsupportedRequest() async throws(ProbeEnd) {
        let e = try await ask([unassignedRequestOpcode], echo: .exact(0))
        switch e.pdu {
        case .errorResponse(_, _, let code)? where code == .requestNotSupported: break
        default:
            find(.requestNotSupported, "the unassigned request opcode \(ATTHex.byte(unassignedRequestOpcode)) was answered with \(probe.record(e.answer).decoded), not Request Not Supported",
                 [e.request, e.answer])
        }
        judged.insert(ConformanceRule.requestNotSupported.id)
    }

    // MARK: writes, only where the user named them

    /// The write rules on each characteristic `--writes` names: Write Not Permitted where it has no Write property; else
    /// a 513-octet value, a Prepare Write's echo, a long write read back and a cancelled one, a prepared part past
    /// the end. Each value the check changed is written back as it was read.
    func writeProbes() async throws(ProbeEnd) {
        guard !options.writes.isEmpty else {
            for rule in ConformanceRule.writeRules {
                notRun.append(ConformanceSkip(rule: rule, reason: "nothing is written unless named: --writes HANDLE|NAME"))
            }
            return
        }
        let all = services.flatMap(\.characteristics)
        var why: [String: String] = [:]
        for (label, target) in options.writes {
            let c: FoundCharacteristic? = switch target {
            case .handle(let h): all.first { $0.valueHandle == h || $0.declaration == h || $0.declaration &+ 1 == h }
            case .uuid(let u): all.first { $0.uuid == u }
            }
            guard let c else {
                for rule in ConformanceRule.writeRules { why[rule.id] = why[rule.id] ?? "\(label) names no characteristic discovered" }
                continue
            }
            if c.properties.contains(.write) {
                try await writableProbes(c, label, &why)
            } else {
                try await readOnlyProbe(c, label)
            }
        }
        for rule in ConformanceRule.writeRules where !judged.contains(rule.id) {
            notRun.append(ConformanceSkip(rule: rule, reason: why[rule.id] ?? (rule == .writeNotPermitted
                ? "no characteristic named by --writes lacks the Write property" : "no characteristic named by --writes has the Write property")))
        }
    }

    /// A characteristic without the Write property: Write Not Permitted (§3.4.5.1), with its own value if it was read.
    func readOnlyProbe(_ c: FoundCharacteristic, _ label: String) async throws(ProbeEnd) {
        // The value follows its declaration (Part G §3.3.2), whatever handle the declaration names (characteristic-value-handle).
        let v = c.declaration &+ 1
        let e = try await ask(.writeRequest(handle: v, value: (values[v] ?? [0x00])[...]), echo: .exact(v))
        if case .writeResponse? = e.pdu {
            find(.writeNotPermitted, "\(label) (\(c.properties), no Write) took a Write Request: Write Response", [e.request, e.answer])
        }
        judged.insert(ConformanceRule.writeNotPermitted.id)
    }

    /// Whether `code` is the link's security refusing (§3.2.5): the probe then says nothing of the rule.
    func isSecurityRefusal(_ code: ATTErrorCode) -> Bool {
        [.insufficientAuthentication, .insufficientAuthorization, .insufficientEncryption, .encryptionKeySizeTooShort].contains(code)
    }

    func writableProbes(_ c: FoundCharacteristic, _ label: String, _ why: inout [String: String]) async throws(ProbeEnd) {
        // The value follows its declaration (Part G §3.3.2), whatever handle the declaration names (characteristic-value-handle).
        let v = c.declaration &+ 1
        let original = values[v]
        /// Writes the value read at the start back (a probe that changed it).
        func restore() async throws(ProbeEnd) {
            if let original { _ = try await ask(.writeRequest(handle: v, value: original[...]), echo: .exact(v)) }
        }
        func readBack() async throws(ProbeEnd) -> (value: [UInt8]?, evidence: [Int]) {
            let e = try await ask(.readRequest(handle: v), echo: .exact(v))
            if case .readResponse(let value)? = e.pdu { return (Array(value), [e.request, e.answer]) }
            return (nil, [e.request, e.answer])
        }

        // 513 octets: longer than any attribute (§3.2.9).
        let tooLong = (0..<(ATTMTU.maximumAttributeValue + 1)).map { UInt8(truncatingIfNeeded: $0) }
        if tooLong.count <= ATTMTU.writeValueBudget(mtu) {
            let e = try await ask(.writeRequest(handle: v, value: tooLong[...]), echo: .exact(v))
            switch e.pdu {
            case .errorResponse(_, _, let code)? where code == .invalidAttributeValueLength || isSecurityRefusal(code): break
            case .writeResponse?:
                find(.writeTooLong, "\(label) took a \(tooLong.count)-octet value (no attribute holds more than 512): Write Response", [e.request, e.answer])
                try await restore()
            default:
                find(.writeTooLong, "\(label): a \(tooLong.count)-octet value was answered with \(probe.record(e.answer).decoded), not 0x0D Invalid Attribute Value Length",
                     [e.request, e.answer])
            }
            judged.insert(ConformanceRule.writeTooLong.id)
        } else {
            why[ConformanceRule.writeTooLong.id] = "a 513-octet Write Request needs an ATT_MTU of 516; this one is \(mtu)"
        }

        // A Prepare Write echoed (§3.4.6.2), then cancelled: the value must not change (§3.4.6.3).
        let part = Array((original.flatMap { $0.isEmpty ? nil : $0 } ?? Array("mirror".utf8)).reversed().prefix(min(ATTMTU.prepareWritePartBudget(mtu), 8)))
        let p = try await ask(.prepareWriteRequest(handle: v, offset: 0, value: part[...]), echo: .exact(v))
        let cancel = try await ask(.executeWriteRequest(flags: .cancelAll), echo: .exact(0))
        switch p.pdu {
        case .prepareWriteResponse(let h, let o, let value)?:
            if h != v || o != 0 || Array(value) != part {
                find(.prepareWriteEcho, "\(label): the Prepare Write Response echoes handle \(ATTHex.handle(h)), offset \(o), value [\(ATTHex.string(value, separator: " "))] for handle \(ATTHex.handle(v)), offset 0, value [\(ATTHex.string(part, separator: " "))]",
                     [p.request, p.answer])
            }
            judged.insert(ConformanceRule.prepareWriteEcho.id)
        case .errorResponse(_, _, let code)?:
            why[ConformanceRule.prepareWriteEcho.id] = "\(label): Prepare Write was refused with \(code)"
        default:
            find(.prepareWriteEcho, "\(label): Prepare Write was answered with \(probe.record(p.answer).decoded)", [p.request, p.answer])
            judged.insert(ConformanceRule.prepareWriteEcho.id)
        }
        guard let original else {
            why[ConformanceRule.executeWrite.id] = "\(label) could not be read, so a write cannot be read back"
            why[ConformanceRule.writeInvalidOffset.id] = "\(label) could not be read, so its length is unknown"
            return
        }
        if case .prepareWriteResponse? = p.pdu, case .executeWriteResponse? = cancel.pdu {
            let (after, evidence) = try await readBack()
            if let after, after != original {
                find(.executeWrite, "\(label): after Execute Write 0x00 (cancel) it reads [\(ATTHex.string(after, separator: " "))], not [\(ATTHex.string(original, separator: " "))] as before",
                     [p.request, p.answer, cancel.request, cancel.answer] + evidence)
                try await restore()
            }
        }

        // A long write in parts of 4 octets, executed and read back (§3.4.6.1, §3.4.6.3).
        var written = Array("mirror-check".utf8)
        if written == original { written.reverse() }
        var evidence: [Int] = []
        var refused: ATTErrorCode?
        for offset in stride(from: 0, to: written.count, by: 4) {
            let e = try await ask(.prepareWriteRequest(handle: v, offset: UInt16(offset), value: written[offset..<min(offset + 4, written.count)]), echo: .exact(v))
            evidence += [e.request, e.answer]
            if case .errorResponse(_, _, let code)? = e.pdu { refused = code; break }
        }
        let execute = try await ask(.executeWriteRequest(flags: refused == nil ? .writeAll : .cancelAll), echo: .exact(v))
        evidence += [execute.request, execute.answer]
        if let refused {
            why[ConformanceRule.executeWrite.id] = "\(label): a Prepare Write of the long write was refused with \(refused)"
        } else if case .executeWriteResponse? = execute.pdu {
            let (after, read) = try await readBack()
            if let after, after != written {
                find(.executeWrite, "\(label): after Prepare Writes of [\(ATTHex.string(written, separator: " "))] and Execute Write 0x01 it reads [\(ATTHex.string(after, separator: " "))]",
                     evidence + read)
            }
            judged.insert(ConformanceRule.executeWrite.id)
        } else {
            why[ConformanceRule.executeWrite.id] = "\(label): Execute Write was answered with \(probe.record(execute.answer).decoded)"
        }
        try await restore()

        // A part past the end of the value: Invalid Offset at Prepare Write or at Execute Write (§3.4.6.1, §3.4.6.3).
        let past = UInt16(clamping: original.count + 1)
        let e = try await ask(.prepareWriteRequest(handle: v, offset: past, value: [0x00][...]), echo: .exact(v))
        let run = try await ask(.executeWriteRequest(flags: .writeAll), echo: .exact(v))
        switch (e.pdu, run.pdu) {
        case (.errorResponse(_, _, let code)?, _) where code == .invalidOffset: break
        case (.prepareWriteResponse?, .errorResponse(_, _, let code)?) where code == .invalidOffset: break
        case (.errorResponse(_, _, let code)?, _) where isSecurityRefusal(code): break
        default:
            find(.writeInvalidOffset, "\(label): a part at offset \(past) of a \(original.count)-octet value got \(probe.record(e.answer).decoded), then \(probe.record(run.answer).decoded)",
                 [e.request, e.answer, run.request, run.answer])
            try await restore()
        }
        judged.insert(ConformanceRule.writeInvalidOffset.id)
    }

    // MARK: GATT rules over what was discovered

    /// The descriptors of `c`: the attributes after its value up to the next declaration or its service's end.
    func descriptors(of c: FoundCharacteristic, in s: FoundService) -> [(handle: UInt16, type: BluetoothUUID, evidence: Int)] {
        let next = s.characteristics.map(\.declaration).filter { $0 > c.declaration }.min() ?? (s.end == 0xFFFF ? 0xFFFF : s.end + 1)
        // After the value, which follows the declaration (§3.3.2), whatever handle the declaration names.
        return attributes.filter { $0.handle > c.declaration &+ 1 && ($0.handle < next || (next == 0xFFFF && $0.handle == 0xFFFF)) }
    }

    func judgeGATT() {
        // A CCCD on every characteristic that notifies or indicates (Part G §3.3.1.1).
        for s in services {
            for c in s.characteristics where c.properties.contains(.notify) || c.properties.contains(.indicate) {
                let found = descriptors(of: c, in: s)
                if !found.contains(where: { $0.type == .clientCharacteristicConfiguration }) {
                    find(.cccdPresent, "characteristic \(c.uuid) at \(ATTHex.handle(c.declaration)) (\(c.properties)) has no descriptor 0x2902"
                         + (found.isEmpty ? " (it has no descriptor)" : "; its descriptors: " + found.map { "\($0.type) at \(ATTHex.handle($0.handle))" }.joined(separator: ", ")),
                         c.evidence + found.map(\.evidence))
                }
            }
        }
        judged.insert(ConformanceRule.cccdPresent.id)

        // Extended Properties (bit 7) with its descriptor (Part G §3.3.1.1, §3.3.3.1).
        for s in services {
            for c in s.characteristics where c.properties.contains(.extendedProperties) {
                let found = descriptors(of: c, in: s)
                if !found.contains(where: { $0.type == .characteristicExtendedProperties }) {
                    find(.extendedPropertiesPresent, "characteristic \(c.uuid) at \(ATTHex.handle(c.declaration)) (\(c.properties)) has no descriptor 0x2900", c.evidence + found.map(\.evidence))
                }
            }
        }
        judged.insert(ConformanceRule.extendedPropertiesPresent.id)

        // Service Changed in the GATT service, indicating, with its CCCD (Part G §7.1).
        let gattService = services.first { $0.uuid == .genericAttribute }
        if let gattService, let changed = gattService.characteristics.first(where: { $0.uuid == .serviceChanged }) {
            let hasCCCD = descriptors(of: changed, in: gattService).contains { $0.type == .clientCharacteristicConfiguration }
            if !changed.properties.contains(.indicate) || !hasCCCD {
                find(.serviceChanged, "Service Changed at \(ATTHex.handle(changed.declaration)) has " + [
                    changed.properties.contains(.indicate) ? nil : "no Indicate property (\(changed.properties))",
                    hasCCCD ? nil : "no CCCD",
                ].compactMap { $0 }.joined(separator: " and "), changed.evidence)
            }
        } else {
            find(.serviceChanged, gattService == nil ? "no GATT service (0x1801)" : "the GATT service has no Service Changed characteristic (0x2A05)",
                 (gattService.map { $0.evidence + $0.characteristics.flatMap(\.evidence) }) ?? services.flatMap(\.evidence))
        }
        judged.insert(ConformanceRule.serviceChanged.id)

        // Client Supported Features beside the Database Hash; Server Supported Features' reserved bits (Part G §7.2, §7.4).
        let all = services.flatMap(\.characteristics)
        if let hash = all.first(where: { $0.uuid == .databaseHash }), !all.contains(where: { $0.uuid == .clientSupportedFeatures }) {
            find(.supportedFeatures, "the Database Hash at \(ATTHex.handle(hash.valueHandle)) is served without Client Supported Features (0x2B29), through which a client enables robust caching",
                 hash.evidence)
        }
        if let server = all.first(where: { $0.uuid == .serverSupportedFeatures }), let value = values[server.valueHandle] {
            if value.enumerated().contains(where: { $0.offset == 0 ? $0.element & 0xFE != 0 : $0.element != 0 }) {
                find(.supportedFeatures, "Server Supported Features [\(ATTHex.string(value, separator: " "))] sets a reserved bit (only bit 0, EATT, is defined)",
                     server.evidence + (reads[server.valueHandle] ?? []))
            }
        }
        judged.insert(ConformanceRule.supportedFeatures.id)

        // GAP's Device Name (Part C §12.1), readable.
        if let gap = services.first(where: { $0.uuid == .genericAccess }) {
            if let name = gap.characteristics.first(where: { $0.uuid == .deviceName }) {
                if !name.properties.contains(.read) {
                    find(.gapDeviceName, "Device Name at \(ATTHex.handle(name.valueHandle)) lacks the Read property (\(name.properties))", name.evidence)
                } else if values[name.valueHandle] == nil {
                    find(.gapDeviceName, "Device Name at \(ATTHex.handle(name.valueHandle)) could not be read", name.evidence + (reads[name.valueHandle] ?? []))
                }
            } else {
                find(.gapDeviceName, "the GAP service at \(ATTHex.handle(gap.handle))-\(ATTHex.handle(gap.end)) has no Device Name characteristic (0x2A00)",
                     gap.characteristics.flatMap(\.evidence) + gap.evidence)
            }
        } else {
            find(.gapDeviceName, "no GAP service (0x1800) among the primary services", services.flatMap(\.evidence))
        }
        judged.insert(ConformanceRule.gapDeviceName.id)

        judgeDatabaseHash()
    }

    /// The Database Hash recomputed from the attributes found and their values read (Part G §7.3).
    func judgeDatabaseHash() {
        let characteristics = services.flatMap(\.characteristics)
        guard let hash = characteristics.first(where: { $0.uuid == .databaseHash }) else {
            notRun.append(ConformanceSkip(rule: .databaseHash, reason: "the server has no Database Hash characteristic (0x2B2A)"))
            return
        }
        guard let served = values[hash.valueHandle] else {
            notRun.append(ConformanceSkip(rule: .databaseHash, reason: "the Database Hash at \(ATTHex.handle(hash.valueHandle)) could not be read"))
            return
        }
        var hashed: [GATTHashAttribute] = []
        for a in attributes {
            if GATTDatabaseHash.typesWithValue.contains(a.type) {
                guard let v = values[a.handle] else {
                    notRun.append(ConformanceSkip(rule: .databaseHash, reason: "the value of \(a.type) at \(ATTHex.handle(a.handle)), which the hash covers, could not be read"))
                    return
                }
                hashed.append(GATTHashAttribute(handle: a.handle, type: a.type, value: v))
            } else if GATTDatabaseHash.typesWithoutValue.contains(a.type) {
                hashed.append(GATTHashAttribute(handle: a.handle, type: a.type, value: []))
            }
        }
        let computed: [UInt8]
        do { computed = try GATTDatabaseHash.compute(hashed) } catch {
            notRun.append(ConformanceSkip(rule: .databaseHash, reason: "the hash could not be computed: \(error)"))
            return
        }
        let evidence = reads[hash.valueHandle] ?? []
        switch GATTDatabaseHash.order(computed: computed, served: served) {
        case .pts?: break
        case .bluez?:
            find(.databaseHash, "the hash is served in bluetoothd's octet order (CMAC's output as it comes, most significant octet first), not least significant octet first as PTS and Zephyr serve it: computed \(ATTHex.string(GATTHashOrder.pts.served(computed)))",
                 evidence)
        case nil:
            // A BlueZ peer: bluetoothd hashes fewer attributes than §7.3 (src/shared/gatt-db.c), so name its rule.
            let blueZ = (try? GATTDatabaseHash.blueZHashes(hashed))?.first { GATTDatabaseHash.order(computed: $0.hash, served: served) != nil }
            let cause = blueZ.map { "it is the hash bluetoothd computes (\($0.versions): src/shared/gatt-db.c leaves out attributes §7.3 hashes)" }
                ?? "the database changed without a new hash, or the hash covers other attributes"
            find(.databaseHash, "the hash served, \(ATTHex.string(served)), matches neither octet order of the hash computed over the database discovered (\(ATTHex.string(GATTHashOrder.pts.served(computed))) least significant octet first): \(cause)",
                 evidence)
        }
        judged.insert(ConformanceRule.databaseHash.id)
    }
}

extension Duration {
    var seconds: Double {
        let c = components
        return Double(c.seconds) + Double(c.attoseconds) / 1e18
    }
}
