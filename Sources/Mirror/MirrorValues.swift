// What a mirror's value means: the profile's names for its enums, in the procedures' events and beside the bytes
// wherever a value is shown (GATTVocabulary's ValueFormatter for everything the profile does not name).
import ATTStack
import GATTVocabulary

/// Decodes a value of a named characteristic against the profile.
public func decodeMirrorValue(_ name: String?, _ value: [UInt8], profile: MirrorProfile) -> String? {
    switch name {
    case "scanState"?: return value.first.map(profile.scanStateName) ?? "empty"
    case "scanError"?: return value.first.map(profile.scanErrorName) ?? "empty"
    case "wifiConnectionStatus"?: return value.first.map(profile.wifiStatusName) ?? "empty"
    case "wifiNumNetworks"?: return value.first.map { "\($0)" } ?? "empty"
    case "scannerAction"?:
        guard value.count == 1 else { return nil }
        return profile.commands.first { $0.value == value[0] }?.key ?? "unknown(\(ATTHex.short(value[0])))"
    case "cloudToken"?, "wifiNetworkSSIDEnum"?, "wifiSetSSID"?: return String(decoding: value, as: UTF8.self)
    default: return nil
    }
}

extension ValueFormatter {
    /// The decoded form of `bytes`, the value of `uuid` that output calls `name`: the profile's enums first, then
    /// what `decode(_:uuid:presentation:)` knows; nil when nothing is known (the hex then says it all).
    public static func decode(_ bytes: [UInt8], uuid: BluetoothUUID?, name: String?, profile: MirrorProfile,
                              presentation: [UInt8]? = nil) -> String? {
        profileEnum(bytes, uuid: uuid, name: name, profile: profile) ?? decode(bytes, uuid: uuid, presentation: presentation)
    }

    /// scanState, scanError, wifiConnectionStatus and scannerAction by the profile's names ("error", "initDeviceForScan").
    static func profileEnum(_ bytes: [UInt8], uuid: BluetoothUUID?, name: String?, profile: MirrorProfile) -> String? {
        guard bytes.count == 1, let which = uuid.flatMap(profile.characteristicName) ?? name else { return nil }
        let b = bytes[0]
        switch which {
        case "scanState": return profile.scanStateName(b)
        case "scanError": return profile.scanErrorName(b)
        case "wifiConnectionStatus": return profile.wifiStatusName(b)
        case "scannerAction": return profile.commandName(b)
        default: return nil
        }
    }
}
