// The radio's ceiling for ATT writes on one LE link: the most application bytes per second Write Commands and
// Write Requests can carry for a PHY, data length, connection interval and ATT MTU. Pure arithmetic: no I/O.
//
// The model (docs/LINK-CEILING.md shows the formula and the table):
// - An ATT PDU of MTU octets plus the 4-octet L2CAP basic header (Vol 3 Part A §3.1) is cut into
//   ceil((MTU + 4) / dataLength) link-layer data packets, each carrying dataLength octets but the last
//   (Vol 6 Part B §2.4, the LL Data PDU's payload; plus the 4-octet MIC when the link is encrypted, §5.1.3).
// - In a connection event (Vol 6 Part B §4.5.1) the central sends a data packet, the peripheral answers
//   with an empty packet, T_IFS = 150 µs after each (§4.1.1): one exchange costs
//   airtime(data) + T_IFS + airtime(empty) + T_IFS. The event carries as many exchanges, in order, as fit
//   in the connection interval; a packet that does not fit waits for the next event.
// - Write Command (Vol 3 Part F §3.4.5.3): no answer, so packets follow each other back to back.
// - Write Request (Vol 3 Part F §3.4.5.1): one in flight (§3.3.2); its packets go in the events they need,
//   the Write Response comes back in the next event (it cannot be ready within T_IFS), and the next request
//   leaves in the event after it: (events for the request) + 1 events per write, 2 when it fits in one.
// - Each write carries MTU - 3 value bytes (opcode and handle, §3.4.5.1).
// Assumptions: the controllers fill the whole connection event (no early close, no peripheral latency, no
// controller limit on packets per event), no packet is lost or retransmitted, and nothing else shares the link.

/// The LE PHY of the link (Vol 6 Part A §3; Part B §2.1 packet formats).
public enum RadioPHY: String, Sendable, CaseIterable, Equatable {
    case le1M = "1M"
    case le2M = "2M"
    /// LE Coded, S=2 (500 kb/s).
    case codedS2 = "Coded S=2"
    /// LE Coded, S=8 (125 kb/s).
    case codedS8 = "Coded S=8"

    /// Airtime of one LL data packet with `payload` octets in its PDU payload (MIC included), in microseconds.
    /// Uncoded (Vol 6 Part B §2.1.1): preamble (1 octet on 1M, 2 on 2M), access address 4, header 2, payload,
    /// CRC 3, at 1 or 2 Mb/s. Coded (§2.2): preamble 80 µs, then FEC block 1 at S=8 (access address 32 bits,
    /// CI 2, TERM1 3 = 37 bits: 296 µs), then FEC block 2 at S=2 or S=8 (header 16 bits, payload, CRC 24,
    /// TERM2 3), 1 µs per symbol.
    public func airtimeMicroseconds(payload: Int) -> Int {
        switch self {
        case .le1M: return (1 + 4 + 2 + payload + 3) * 8
        case .le2M: return (2 + 4 + 2 + payload + 3) * 4
        case .codedS2: return 80 + 296 + (16 + 8 * payload + 24 + 3) * 2
        case .codedS8: return 80 + 296 + (16 + 8 * payload + 24 + 3) * 8
        }
    }
}

/// The link a ceiling is computed for.
public struct LinkParameters: Sendable, Equatable {
    public var phy: RadioPHY
    /// The LL payload octets per data packet (connEffectiveMaxTxOctets, MIC excluded): 27 to 251.
    public var dataLength: Int
    /// The connection interval in milliseconds (7.5 to 4000).
    public var intervalMilliseconds: Double
    /// The ATT MTU (23 to 517).
    public var mtu: Int
    /// An encrypted link adds the 4-octet MIC to every non-empty packet (Vol 6 Part B §5.1.3).
    public var encrypted: Bool

    public static let dataLengthRange = 27...251
    public static let intervalRange = 7.5...4000.0
    public static let mtuRange = 23...517

    /// Nil when a value is outside the ranges above: no ceiling is computed for a link that cannot exist.
    public init?(phy: RadioPHY, dataLength: Int, intervalMilliseconds: Double, mtu: Int, encrypted: Bool = false) {
        guard Self.dataLengthRange.contains(dataLength), Self.intervalRange.contains(intervalMilliseconds),
              Self.mtuRange.contains(mtu) else { return nil }
        self.phy = phy
        self.dataLength = dataLength
        self.intervalMilliseconds = intervalMilliseconds
        self.mtu = mtu
        self.encrypted = encrypted
    }

    /// "1M, 251 B, 7.5 ms, MTU 247" (", encrypted" when it is).
    public var description: String {
        "\(phy.rawValue), \(dataLength) B, \(formatMilliseconds(intervalMilliseconds)) ms, MTU \(mtu)" + (encrypted ? ", encrypted" : "")
    }
}

/// One mode's ceiling.
public struct ModeCeiling: Sendable, Equatable {
    public var writesPerSecond: Double
    /// Application (value) bytes per second: writesPerSecond × (MTU - 3).
    public var bytesPerSecond: Double
}

/// The ceilings of both write modes on one link, and the figures they come from.
public struct LinkCeiling: Sendable, Equatable {
    public var link: LinkParameters
    /// LL data packets per write: ceil((MTU + 4) / dataLength) (with values of MTU - 3 bytes).
    public var packetsPerWrite: Int
    /// Value bytes per write: MTU - 3 unless fewer were asked for.
    public var valueBytesPerWrite: Int
    /// One data packet, its empty answer and two T_IFS, for a full packet, in microseconds.
    public var exchangeMicroseconds: Int
    /// Write Commands: average LL data packets per connection event (0 when not even one fits in an interval).
    public var packetsPerEvent: Double
    /// Write Requests: connection events per write (nil when a packet never fits in an interval).
    public var eventsPerRequest: Int?
    public var writeCommand: ModeCeiling
    public var writeRequest: ModeCeiling

    /// T_IFS, the inter-frame space (Vol 6 Part B §4.1.1).
    public static let interFrameSpaceMicroseconds = 150
    /// The L2CAP basic header ahead of every ATT PDU on the fixed channel (Vol 3 Part A §3.1).
    public static let l2capHeaderOctets = 4
    /// The MIC of an encrypted packet with a non-empty payload (Vol 6 Part B §5.1.3).
    public static let micOctets = 4

    /// The ceilings for writes of `valueBytes` each (nil: the MTU's budget, MTU - 3; more is cut to it): the PDU
    /// is then valueBytes + 3 octets (opcode, handle).
    public init(_ link: LinkParameters, valueBytes: Int? = nil) {
        self.link = link
        valueBytesPerWrite = min(max(valueBytes ?? link.mtu - 3, 0), link.mtu - 3)
        let pdu = valueBytesPerWrite + 3 + Self.l2capHeaderOctets
        packetsPerWrite = (pdu + link.dataLength - 1) / link.dataLength
        // The payload octets of each packet of one write: full ones, then the rest.
        let sizes = (0..<packetsPerWrite).map { min(link.dataLength, pdu - $0 * link.dataLength) }
        let mic = link.encrypted ? Self.micOctets : 0
        let empty = link.phy.airtimeMicroseconds(payload: 0)
        let exchanges = sizes.map { link.phy.airtimeMicroseconds(payload: $0 + mic) + empty + 2 * Self.interFrameSpaceMicroseconds }
        exchangeMicroseconds = exchanges[0]
        // Microseconds are integral in the model's terms except the interval (7.5 ms = 7500 µs): round down.
        let interval = Int((link.intervalMilliseconds * 1000).rounded(.down))
        let seconds = link.intervalMilliseconds / 1000

        // Write Commands: events fill greedily; which packet of a write an event starts with is the state, so
        // the sequence of events repeats within packetsPerWrite events. Average over that cycle.
        if exchanges.contains(where: { $0 > interval }) {
            packetsPerEvent = 0
            eventsPerRequest = nil
        } else {
            var firstEvent: [Int: Int] = [:]   // starting packet index -> event number
            var sentBefore: [Int] = []         // packets sent before each event
            var start = 0, sent = 0, event = 0
            while firstEvent[start] == nil {
                firstEvent[start] = event
                sentBefore.append(sent)
                var used = 0
                while used + exchanges[start] <= interval {
                    used += exchanges[start]
                    start = (start + 1) % exchanges.count
                    sent += 1
                }
                event += 1
            }
            let cycleStart = firstEvent[start]!
            packetsPerEvent = Double(sent - sentBefore[cycleStart]) / Double(event - cycleStart)
            // Write Requests: the request's packets from an empty event on, then one event for the response.
            var events = 1, used = 0
            for exchange in exchanges {
                if used + exchange > interval { events += 1; used = 0 }
                used += exchange
            }
            eventsPerRequest = events + 1
        }
        let commandWrites = packetsPerEvent / Double(packetsPerWrite) / seconds
        writeCommand = ModeCeiling(writesPerSecond: commandWrites, bytesPerSecond: commandWrites * Double(valueBytesPerWrite))
        let requestWrites = eventsPerRequest.map { 1 / (Double($0) * seconds) } ?? 0
        writeRequest = ModeCeiling(writesPerSecond: requestWrites, bytesPerSecond: requestWrites * Double(valueBytesPerWrite))
    }
}

/// "7.5", "30", "11.25": an interval without a trailing ".0".
func formatMilliseconds(_ ms: Double) -> String {
    let hundredths = Int((ms * 100).rounded())
    if hundredths % 100 == 0 { return String(hundredths / 100) }
    let frac = hundredths % 100
    return "\(hundredths / 100)." + (frac % 10 == 0 ? String(frac / 10) : (frac < 10 ? "0\(frac)" : String(frac)))
}
