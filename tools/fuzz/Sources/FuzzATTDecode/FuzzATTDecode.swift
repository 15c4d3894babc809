// libFuzzer target for the ATT PDU decoder (Core Spec 5.4 Vol 3 Part F §3.4).
// Any input must decode or throw a typed error, never trap. What decodes must re-encode to the same
// bytes, decode again to an equal PDU, and agree across the three encoders; a mismatch traps, so the
// fuzzer records it as a crash.
import ATTStack

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzATTDecode(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let input = Array(UnsafeBufferPointer(start: data, count: size))
    // The same bytes at a non-zero start index, to catch slice-index mistakes.
    let shifted = ([0xA5] + input)[1...]
    let pdu: ATTPDU
    do {
        pdu = try ATTPDU.decode(input)
    } catch {
        check(error, input)
        do {
            let other = try ATTPDU.decode(shifted)
            fatalError("decoded only from a shifted slice: \(other) from \(input)")
        } catch let second {
            guard second == error else { fatalError("errors differ by start index: \(error) vs \(second)") }
        }
        return 0
    }
    guard let again = try? ATTPDU.decode(shifted), again == pdu else {
        fatalError("decoding a shifted slice differs for \(input)")
    }
    roundTrip(pdu, input)
    return 0
}

/// The error is consistent with the input and can be described.
func check(_ error: ATTDecodeError, _ input: [UInt8]) {
    if input.isEmpty {
        guard error.opcode == nil, error.problem == .empty else { fatalError("empty input gave \(error)") }
    } else {
        guard error.opcodeByte == input[0] else { fatalError("error names opcode \(String(describing: error.opcodeByte)) for \(input)") }
    }
    guard !error.description.isEmpty, !error.pduName.isEmpty else { fatalError("empty description") }
    _ = error.serverErrorCode
}

/// decode(encode(x)) == x, byte for byte, through every encoder.
func roundTrip(_ pdu: ATTPDU, _ input: [UInt8]) {
    guard pdu.opcode.rawValue == input[0] else { fatalError("opcode changed: \(pdu) from \(input)") }
    guard pdu.encodedLength == input.count else { fatalError("encodedLength \(pdu.encodedLength) for \(input.count) bytes") }
    let encoded = pdu.bytes
    guard encoded == input else { fatalError("re-encoding differs: \(input) → \(pdu) → \(encoded)") }
    var appended: [UInt8] = [0x5A]
    pdu.encode(appendingTo: &appended)
    guard appended.dropFirst().elementsEqual(input) else { fatalError("encode(appendingTo:) differs for \(input)") }
    var buffer = [UInt8](repeating: 0, count: input.count)
    let written: Int
    do {
        written = try buffer.withUnsafeMutableBytes { p throws(ATTEncodeError) in try pdu.encode(into: p) }
    } catch {
        fatalError("encode(into:) of a decoded PDU threw \(error): \(input)")
    }
    guard written == input.count, buffer == input else { fatalError("encode(into:) differs for \(input)") }
    guard let decoded = try? ATTPDU.decode(encoded), decoded == pdu else { fatalError("decode(encode(x)) != x for \(input)") }
    if input.count > 0 {
        var short = [UInt8](repeating: 0, count: input.count - 1)
        let threw = short.withUnsafeMutableBytes { p -> Bool in
            do { _ = try pdu.encode(into: p); return false } catch { return true }
        }
        guard threw else { fatalError("encode(into:) wrote into a buffer one byte short for \(input)") }
    }
    walk(pdu)
    _ = pdu.description
}

/// Reads every element of every list, so the views' subscripts and iterators run on fuzzed bytes.
func walk(_ pdu: ATTPDU) {
    var n = 0
    switch pdu {
    case .findInformationResponse(let list): for e in list { n &+= Int(e.handle) &+ e.type.attWireLength }
    case .findByTypeValueResponse(let list): for e in list { n &+= Int(e.found) &+ Int(e.groupEnd) }
    case .readByTypeResponse(let list): for e in list { n &+= Int(e.handle) &+ e.value.count }
    case .readByGroupTypeResponse(let list): for e in list { n &+= Int(e.endGroup) &+ e.value.count }
    case .readMultipleRequest(let list), .readMultipleVariableRequest(let list): for h in list { n &+= Int(h) }
    case .readMultipleVariableResponse(let list):
        for v in list { n &+= v.count }
        n &+= list.isTruncated ? 1 : 0
    case .multipleHandleValueNotification(let list): for e in list { n &+= Int(e.handle) &+ e.value.count }
    default: break
    }
    if n == -1 { fatalError("unreachable") }
}
