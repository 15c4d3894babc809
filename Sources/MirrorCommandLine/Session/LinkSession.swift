// The LE link's figures for the bench's ceiling (LinkCeiling); the link itself is GATTPeer's PeerLink.
import GATTPeer
import LinkCeiling
import LinuxBluetooth

/// The CLI's name for a peer's LE link.
typealias LinkSession = PeerLink

extension LinkState {
    /// The radio link the ceiling arithmetic needs, when its PHY, data length and interval are known.
    func ceilingInput(mtu: Int) -> LinkParameters? {
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
