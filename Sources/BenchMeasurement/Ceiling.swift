// The bench against the radio's ceiling (docs/LINK-CEILING.md): for each mode, the most the link allows and the
// fraction of it the run reached; no ceiling where there is no radio (unix:) or the link is not known.
import LinkCeiling
import LinuxBluetooth

/// What the bench ran over, as far as the ceiling goes.
public enum BenchRadio: Sendable, Equatable {
    /// A unix: target: no radio, no ceiling.
    case unixSocket
    /// An LE link whose interval, PHY or data length is not known.
    case unknownLink
    /// An LE link with every parameter the ceiling needs (its MTU the session's).
    case link(LinkParameters)

    /// unix: has no radio; an LE link takes `link` (nil: unknown) with the MTU the session negotiated.
    public init(isUnix: Bool, link: LinkParameters?, mtu: Int) {
        if isUnix { self = .unixSocket; return }
        guard let link, let withMTU = LinkParameters(phy: link.phy, dataLength: link.dataLength,
                                                     intervalMilliseconds: link.intervalMilliseconds, mtu: mtu,
                                                     encrypted: link.encrypted) else {
            self = .unknownLink
            return
        }
        self = .link(withMTU)
    }

    /// The ceiling of one mode for writes of `size` bytes, judged against the measured rate.
    public func verdict(mode: BenchMode, size: Int, measuredWritesPerSecond: Double) -> CeilingVerdict {
        switch self {
        case .unixSocket:
            return CeilingVerdict(ceiling: nil, fraction: nil, basis: "unix socket", note: "no radio: unix socket")
        case .unknownLink:
            return CeilingVerdict(ceiling: nil, fraction: nil, basis: "unknown link",
                                  note: "unknown link (interval, PHY or data length not known)")
        case .link(let link):
            let ceilings = LinkCeiling(link, valueBytes: size)
            let ceiling = mode == .withResponse ? ceilings.writeRequest : ceilings.writeCommand
            let basis = link.description
            if ceiling.writesPerSecond <= 0 {
                return CeilingVerdict(ceiling: ceiling, fraction: nil, basis: basis,
                                      note: "no packet fits in one connection interval on this link")
            }
            let fraction = measuredWritesPerSecond / ceiling.writesPerSecond
            if fraction > 1 {
                return CeilingVerdict(ceiling: ceiling, fraction: nil, basis: basis,
                                      note: "not radio-limited: measured \(format2(fraction))x the ceiling (no radio timing, as under an emulated controller such as btvirt)")
            }
            return CeilingVerdict(ceiling: ceiling, fraction: fraction, basis: basis,
                                  note: "reached \(percent(fraction)) of the ceiling")
        }
    }
}

/// One mode's ceiling and how close the run came: `fraction` is nil without a ceiling or above it.
public struct CeilingVerdict: Sendable, Equatable {
    public var ceiling: ModeCeiling?
    public var fraction: Double?
    /// What the ceiling was computed for: the link ("1M, 251 B, 7.5 ms, MTU 247"), "unknown link" or "unix socket".
    public var basis: String
    /// One sentence: the fraction reached, or why there is none.
    public var note: String
}

/// "62.3 %"
func percent(_ fraction: Double) -> String {
    let t = Int((fraction * 1000).rounded())
    return "\(t / 10).\(t % 10) %"
}

/// "1.25": two decimals, as every ratio and rate of the bench is written (the ceiling's note here, the CLI's lines).
public func format2(_ v: Double) -> String {
    let hundredths = Int((v * 100).rounded())
    let frac = String(hundredths % 100)
    return "\(hundredths / 100).\(String(repeating: "0", count: 2 - frac.count))\(frac)"
}

extension LinkState {
    /// The radio link the ceiling arithmetic needs, when its PHY, data length and interval are known (`mtu`: the
    /// connection's ATT_MTU); nil otherwise, and the bench then says "unknown link".
    public func ceilingInput(mtu: Int) -> LinkParameters? {
        guard let phy = txPHY.value, let interval = intervalMilliseconds.value else { return nil }
        // A link watched from its connect without a Data Length Change runs at the initial 27 octets (Vol 6 Part B
        // §4.5.10); a link not watched has no known data length, and then no ceiling.
        let octets: Int
        if let d = dataLength.value {
            octets = d.maxTxOctets
        } else if case .notSeen? = dataLength.unknownReason {
            octets = 27
        } else {
            return nil
        }
        let radio: RadioPHY = phy == .le1M ? .le1M : phy == .le2M ? .le2M : .codedS8
        return LinkParameters(phy: radio, dataLength: octets, intervalMilliseconds: interval, mtu: mtu,
                              encrypted: encrypted.value ?? false)
    }
}
