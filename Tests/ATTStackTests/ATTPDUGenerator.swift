import TestSupport
@testable import ATTStack

/// Builds random well-formed PDUs of every kind from a seeded generator (deterministic across runs).
struct ATTPDUGenerator {
    var rng: SplitMix64

    init(seed: UInt64) { rng = SplitMix64(seed: seed) }

    /// How many PDU kinds `make(kind:)` knows: one per `ATTPDU` case.
    static let kindCount = 31

    mutating func int(_ range: ClosedRange<Int>) -> Int { Int.random(in: range, using: &rng) }
    mutating func u8() -> UInt8 { UInt8.random(in: 0...255, using: &rng) }
    mutating func u16() -> UInt16 { UInt16.random(in: 0...UInt16.max, using: &rng) }
    mutating func handle() -> UInt16 { UInt16.random(in: 1...UInt16.max, using: &rng) }
    mutating func bytes(_ range: ClosedRange<Int>) -> ArraySlice<UInt8> {
        let n = int(range)
        return ArraySlice((0..<n).map { _ in u8() })
    }
    mutating func uuid() -> BluetoothUUID {
        switch int(0...2) {
        case 0: return .bit16(u16())
        case 1: return .bit128(UInt128(u16()) << 96 | BluetoothUUID.baseUUID)
        default: return .bit128(UInt128(UInt64.random(in: 0...UInt64.max, using: &rng)) << 64
                                | UInt128(UInt64.random(in: 0...UInt64.max, using: &rng)))
        }
    }
    mutating func range() -> ATTHandleRange { ATTHandleRange(start: handle(), end: u16()) }

    mutating func make() -> ATTPDU { make(kind: int(0...(Self.kindCount - 1))) }

    // The generator only builds valid lists, so `try!` cannot fail here.
    mutating func make(kind: Int) -> ATTPDU {
        switch kind {
        case 0: return .errorResponse(requestOpcode: ATTOpcode(u8()), handle: u16(), error: ATTErrorCode(u8()))
        case 1: return .exchangeMTURequest(clientRxMTU: u16())
        case 2: return .exchangeMTUResponse(serverRxMTU: u16())
        case 3: return .findInformationRequest(range())
        case 4:
            let wide = int(0...1) == 1
            let n = int(1...(wide ? 3 : 10))
            var elements: [ATTFindInformationList.Element] = []
            for _ in 0..<n {
                elements.append((handle(), wide ? .bit128(UInt128(u16()) << 100 | 0x1234) : .bit16(u16())))
            }
            return .findInformationResponse(try! ATTFindInformationList(elements))
        case 5: return .findByTypeValueRequest(range: range(), type: u16(), value: bytes(0...30))
        case 6: return .findByTypeValueResponse(try! ATTHandlesInformationList((0..<int(1...8)).map { _ in (handle(), handle()) }))
        case 7: return .readByTypeRequest(range: range(), type: uuid())
        case 8:
            let len = int(0...30)
            return .readByTypeResponse(try! ATTAttributeDataList((0..<int(1...6)).map { _ in (handle(), bytes(len...len)) }))
        case 9: return .readRequest(handle: handle())
        case 10: return .readResponse(value: bytes(0...40))
        case 11: return .readBlobRequest(handle: handle(), offset: u16())
        case 12: return .readBlobResponse(value: bytes(0...40))
        case 13: return .readMultipleRequest(try! ATTHandleList((0..<int(2...10)).map { _ in handle() }))
        case 14: return .readMultipleResponse(values: bytes(0...40))
        case 15: return .readByGroupTypeRequest(range: range(), type: uuid())
        case 16:
            let len = int(0...20)
            return .readByGroupTypeResponse(try! ATTGroupAttributeDataList((0..<int(1...5)).map { _ in (handle(), handle(), bytes(len...len)) }))
        case 17: return .writeRequest(handle: handle(), value: bytes(0...40))
        case 18: return .writeResponse
        case 19: return .writeCommand(handle: handle(), value: bytes(0...40))
        case 20: return .signedWriteCommand(handle: handle(), value: bytes(0...30), signature: bytes(12...12))
        case 21: return .prepareWriteRequest(handle: handle(), offset: u16(), value: bytes(0...30))
        case 22: return .prepareWriteResponse(handle: handle(), offset: u16(), value: bytes(0...30))
        case 23: return .executeWriteRequest(flags: int(0...1) == 0 ? .cancelAll : .writeAll)
        case 24: return .executeWriteResponse
        case 25: return .readMultipleVariableRequest(try! ATTHandleList((0..<int(2...10)).map { _ in handle() }))
        case 26:
            let values = (0..<int(1...5)).map { _ in bytes(0...12) }
            let full = values.reduce(0) { $0 + 2 + $1.count }
            let limit = int(0...1) == 0 ? nil : int(2...max(2, full))
            return .readMultipleVariableResponse(try! ATTLengthValueList(values, limit: limit))
        case 27:
            return .multipleHandleValueNotification(try! ATTHandleLengthValueList((0..<int(2...5)).map { _ in (handle(), bytes(0...12)) }))
        case 28: return .handleValueNotification(handle: handle(), value: bytes(0...40))
        case 29: return .handleValueIndication(handle: handle(), value: bytes(0...40))
        default: return .handleValueConfirmation
        }
    }
}
