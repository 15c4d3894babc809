// The hostile peer's database and its well-behaved answers, from GATTServer (Core Spec 5.4 Vol 3 Part F §3.4,
// Part G §3): the scenarios bend these answers, so everything they leave alone is the one server's.
import ATTStack
import LinuxBluetooth
import LinkCore
import GATTServer

extension HostilePeer {
    /// The Device Name value handle ("hostile-peer").
    public static let deviceNameHandle: UInt16 = 0x0003
    /// The 300-byte value: read, write, notify, indicate.
    public static let longValueHandle: UInt16 = 0x0008
    /// Its Client Characteristic Configuration descriptor.
    public static let cccdHandle: UInt16 = 0x0009
    /// A short value ("short"): read, write, write without response.
    public static let shortValueHandle: UInt16 = 0x000B
    /// The handle of the marker notification sent after unsolicited responses.
    public static let markerHandle: UInt16 = 0x00FF
    /// The long value's initial bytes.
    public static let longValue: [UInt8] = (0..<300).map { UInt8($0 & 0xFF) }

    /// Generic Access, and a service 0xFFF0 with the long value (0x0008, CCCD 0x0009) and the short one (0x000B).
    public static let database = AttributeDatabase { db in
        db.service(.genericAccess)
        db.characteristic(.deviceName, [.read], value: Array("hostile-peer".utf8))
        db.characteristic(.appearance, [.read], value: [0x00, 0x00])
        db.service(.bit16(0xFFF0))
        db.characteristic(.bit16(0xFFF1), [.read, .write, .notify, .indicate], value: longValue)
        db.characteristic(.bit16(0xFFF2), [.read, .writeWithoutResponse, .write], value: Array("short".utf8))
    }
}

/// How discovery answers are bent.
enum DiscoveryMode {
    case normal
    /// The elements in reverse order (one element: moved before the start handle).
    case backwards
    /// Answered as if the request started at this handle (the first request's).
    case from(UInt16)
}

enum Discovery {
    /// The start handle of a discovery request, nil for other PDUs.
    static func start(_ pdu: ATTPDU) -> UInt16? {
        switch pdu {
        case .findInformationRequest(let r), .findByTypeValueRequest(let r, _, _), .readByTypeRequest(let r, _),
             .readByGroupTypeRequest(let r, _):
            return r.start
        default: return nil
        }
    }

    /// The same discovery request from `start` instead (range end and type kept).
    static func starting(_ pdu: ATTPDU, at start: UInt16) -> ATTPDU {
        switch pdu {
        case .findInformationRequest(let r) where r.start != 0 && r.start <= r.end:
            return .findInformationRequest(ATTHandleRange(start: start, end: r.end))
        case .findByTypeValueRequest(let r, let type, let value) where r.start != 0 && r.start <= r.end:
            return .findByTypeValueRequest(range: ATTHandleRange(start: start, end: r.end), type: type, value: value)
        case .readByTypeRequest(let r, let type) where r.start != 0 && r.start <= r.end:
            return .readByTypeRequest(range: ATTHandleRange(start: start, end: r.end), type: type)
        case .readByGroupTypeRequest(let r, let type) where r.start != 0 && r.start <= r.end:
            return .readByGroupTypeRequest(range: ATTHandleRange(start: start, end: r.end), type: type)
        default: return pdu
        }
    }

    /// A discovery answer with its elements reversed; a single element's handle moved to `start - 1`.
    static func backwards(_ answer: ATTPDU, start: UInt16) -> ATTPDU {
        func bend<E>(_ list: [E], _ moved: (E, UInt16) -> E) -> [E] {
            if list.count >= 2 { return list.reversed() }
            return start > 1 ? list.map { moved($0, start - 1) } : list
        }
        switch answer {
        case .readByGroupTypeResponse(let l):
            let e = bend(Array(l)) { e, h in (h, e.endGroup, e.value) }
            return (try? ATTGroupAttributeDataList(e)).map { .readByGroupTypeResponse($0) } ?? answer
        case .readByTypeResponse(let l):
            let e = bend(Array(l)) { e, h in (h, e.value) }
            return (try? ATTAttributeDataList(e)).map { .readByTypeResponse($0) } ?? answer
        case .findInformationResponse(let l):
            let e = bend(Array(l)) { e, h in (h, e.type) }
            return (try? ATTFindInformationList(e)).map { .findInformationResponse($0) } ?? answer
        case .findByTypeValueResponse(let l):
            let e = bend(Array(l)) { e, h in (h, e.groupEnd) }
            return (try? ATTHandlesInformationList(e)).map { .findByTypeValueResponse($0) } ?? answer
        default: return answer
        }
    }
}
