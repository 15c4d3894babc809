// The service UUIDs an advertiser lists in its advertising or scan response data (Core Spec Supplement Part A
// §1.1: AD types 0x02-0x07, incomplete and complete lists of 16-, 32- and 128-bit UUIDs).
import ATTStack

extension LEAdvertisingReport {
    /// The service UUIDs in this report's data, each once, in their shortest form.
    public var serviceUUIDs: [BluetoothUUID] { Self.serviceUUIDs(in: data) }

    /// The service UUIDs in advertising data (AD structures: length, type, body), each once, in their shortest
    /// form; a truncated structure ends the parse.
    public static func serviceUUIDs(in data: [UInt8]) -> [BluetoothUUID] {
        var uuids: [BluetoothUUID] = []
        var i = 0
        while i < data.count {
            let length = Int(data[i])
            guard length > 0, i + 1 + length <= data.count else { break }
            let type = data[i + 1]
            let body = data[(i + 2)..<(i + 1 + length)]
            let width: Int? = switch type {
            case 0x02, 0x03: 2
            case 0x04, 0x05: 4
            case 0x06, 0x07: 16
            default: nil
            }
            if let width {
                var j = body.startIndex
                while j + width <= body.endIndex {
                    if let u = BluetoothUUID(littleEndian: body[j..<(j + width)]), !uuids.contains(u) { uuids.append(u.shortest) }
                    j += width
                }
            }
            i += 1 + length
        }
        return uuids
    }
}
