import TestSupport
import XCTest
@testable import ATTStack

/// Decodes `bytes`, checks the result equals `expected`, and that every encoder writes exactly `bytes`.
func assertVector(_ bytes: [UInt8], _ expected: ATTPDU, file: StaticString = #filePath, line: UInt = #line) {
    do {
        let decoded = try ATTPDU.decode(bytes)
        XCTAssertEqual(decoded, expected, "decode", file: file, line: line)
        XCTAssertEqual(decoded.opcode.rawValue, bytes[0], "opcode", file: file, line: line)
    } catch {
        XCTFail("decode threw \(error)", file: file, line: line)
    }
    XCTAssertEqual(expected.bytes, bytes, "bytes", file: file, line: line)
    XCTAssertEqual(expected.encodedLength, bytes.count, "encodedLength", file: file, line: line)
    var out: [UInt8] = [0xAA, 0xBB]
    expected.encode(appendingTo: &out)
    XCTAssertEqual(out, [0xAA, 0xBB] + bytes, "encode(appendingTo:)", file: file, line: line)
    var buffer = [UInt8](repeating: 0xEE, count: bytes.count + 4)
    do {
        let n = try buffer.withUnsafeMutableBytes { p throws(ATTEncodeError) in try expected.encode(into: p) }
        XCTAssertEqual(n, bytes.count, "encode(into:) count", file: file, line: line)
        XCTAssertEqual(Array(buffer[..<n]), bytes, "encode(into:)", file: file, line: line)
        XCTAssertEqual(Array(buffer[n...]), [0xEE, 0xEE, 0xEE, 0xEE], "encode(into:) wrote past the PDU", file: file, line: line)
    } catch {
        XCTFail("encode(into:) threw \(error)", file: file, line: line)
    }
}

/// Decodes `bytes` and checks it fails with exactly `expected`.
func assertDecodeError(_ bytes: [UInt8], _ expected: ATTDecodeError, file: StaticString = #filePath, line: UInt = #line) {
    do {
        let pdu = try ATTPDU.decode(bytes)
        XCTFail("decoded \(pdu), expected \(expected)", file: file, line: line)
    } catch {
        XCTAssertEqual(error, expected, file: file, line: line)
    }
}

func slice(_ bytes: [UInt8]) -> ArraySlice<UInt8> { bytes[...] }

