// The ceiling arithmetic against values computed by hand (Vol 6 Part B §2.1 airtimes, §4.5.1 events).
import LinkCeiling
import XCTest

final class LinkCeilingTests: XCTestCase {
    private func link(_ phy: RadioPHY, _ dataLength: Int, _ interval: Double, _ mtu: Int, encrypted: Bool = false) throws -> LinkCeiling {
        LinkCeiling(try XCTUnwrap(LinkParameters(phy: phy, dataLength: dataLength, intervalMilliseconds: interval, mtu: mtu, encrypted: encrypted)))
    }

    /// Airtimes: 1M 8 µs/octet over 10 octets of overhead; 2M 4 µs/octet over 11; Coded 376 µs + S × (43 + 8P).
    func testAirtimePerPHY() {
        XCTAssertEqual(RadioPHY.le1M.airtimeMicroseconds(payload: 0), 80)        // 10 × 8
        XCTAssertEqual(RadioPHY.le1M.airtimeMicroseconds(payload: 27), 296)      // 37 × 8
        XCTAssertEqual(RadioPHY.le1M.airtimeMicroseconds(payload: 255), 2120)    // 265 × 8: the spec's 1M maximum
        XCTAssertEqual(RadioPHY.le2M.airtimeMicroseconds(payload: 0), 44)        // 11 × 4
        XCTAssertEqual(RadioPHY.le2M.airtimeMicroseconds(payload: 255), 1064)    // 266 × 4: the spec's 2M maximum
        XCTAssertEqual(RadioPHY.codedS8.airtimeMicroseconds(payload: 0), 720)    // 376 + 8 × 43
        XCTAssertEqual(RadioPHY.codedS8.airtimeMicroseconds(payload: 255), 17040) // 376 + 8 × 2083: the spec's S=8 maximum
        XCTAssertEqual(RadioPHY.codedS2.airtimeMicroseconds(payload: 0), 462)    // 376 + 2 × 43
        XCTAssertEqual(RadioPHY.codedS2.airtimeMicroseconds(payload: 255), 4542) // 376 + 2 × 2083: the spec's S=2 maximum
    }

    /// 1M, 27 B, MTU 23, 7.5 ms: the PDU is 23 + 4 = 27 octets, one packet. Exchange 296 + 150 + 80 + 150 = 676 µs;
    /// 7500 / 676 = 11.09: 11 packets per event. 11 / 0.0075 s = 1466.67 writes/s × 20 B = 29333.3 B/s.
    /// Write Request: 2 events, 1 / 0.015 s = 66.67 writes/s × 20 B = 1333.3 B/s.
    func testDefaultLinkAtTheShortestInterval() throws {
        let c = try link(.le1M, 27, 7.5, 23)
        XCTAssertEqual(c.packetsPerWrite, 1)
        XCTAssertEqual(c.valueBytesPerWrite, 20)
        XCTAssertEqual(c.exchangeMicroseconds, 676)
        XCTAssertEqual(c.packetsPerEvent, 11)
        XCTAssertEqual(c.eventsPerRequest, 2)
        XCTAssertEqual(c.writeCommand.writesPerSecond, 11 / 0.0075, accuracy: 1e-6)
        XCTAssertEqual(c.writeCommand.bytesPerSecond, 11 / 0.0075 * 20, accuracy: 1e-6)
        XCTAssertEqual(c.writeRequest.writesPerSecond, 1 / 0.015, accuracy: 1e-6)
        XCTAssertEqual(c.writeRequest.bytesPerSecond, 20 / 0.015, accuracy: 1e-6)
    }

    /// 2M, 251 B, MTU 247, 30 ms: the PDU is 251 octets, one packet of 4 × 262 = 1048 µs; exchange
    /// 1048 + 150 + 44 + 150 = 1392 µs; 30000 / 1392 = 21.55: 21 per event. 21 / 0.03 = 700 writes/s × 244 B = 170800 B/s.
    func testTwoMegabitWithDataLengthExtension() throws {
        let c = try link(.le2M, 251, 30, 247)
        XCTAssertEqual(c.exchangeMicroseconds, 1392)
        XCTAssertEqual(c.packetsPerEvent, 21)
        XCTAssertEqual(c.writeCommand.writesPerSecond, 700, accuracy: 1e-9)
        XCTAssertEqual(c.writeCommand.bytesPerSecond, 170_800, accuracy: 1e-6)
        XCTAssertEqual(c.writeRequest.bytesPerSecond, 244 / 0.06, accuracy: 1e-6)
    }

    /// 1M, 27 B, MTU 247, 7.5 ms: the PDU is 251 octets, 10 packets: 9 of 27 (exchange 676 µs) and one of
    /// 251 - 243 = 8 (8 × 18 = 144 µs, exchange 524 µs). An event starting at packet s takes 9 - s long ones, the
    /// short one, then s + 1 long ones of the next write: 10 × 676 + 524 = 7284 µs
    /// ≤ 7500, one more long packet (7960) does not fit. So 11 packets per event, 1.1 writes per event:
    /// 1.1 / 0.0075 = 146.67 writes/s × 244 B = 35786.7 B/s. A request's 10 packets: 6084 + 524 = 6608 µs, one event,
    /// then the response's: 2 events, 66.67 writes/s.
    func testAPDUCutIntoPacketsOfDifferentSizes() throws {
        let c = try link(.le1M, 27, 7.5, 247)
        XCTAssertEqual(c.packetsPerWrite, 10)
        XCTAssertEqual(c.packetsPerEvent, 11, accuracy: 1e-9)
        XCTAssertEqual(c.writeCommand.writesPerSecond, 1.1 / 0.0075, accuracy: 1e-6)
        XCTAssertEqual(c.writeCommand.bytesPerSecond, 1.1 / 0.0075 * 244, accuracy: 1e-6)
        XCTAssertEqual(c.eventsPerRequest, 2)
    }

    /// A request that needs two events: 1M, 27 B, MTU 517 at 7.5 ms: 521 octets, 20 packets (19 × 27 + 8);
    /// 11 exchanges of 676 µs fill the first event (7436 µs), the other 9 the second, the response the third:
    /// 3 events, 1 / 0.0225 = 44.44 writes/s × 514 B.
    func testARequestThatSpansEvents() throws {
        let c = try link(.le1M, 27, 7.5, 517)
        XCTAssertEqual(c.packetsPerWrite, 20)
        XCTAssertEqual(c.eventsPerRequest, 3)
        XCTAssertEqual(c.writeRequest.writesPerSecond, 1 / 0.0225, accuracy: 1e-6)
        XCTAssertEqual(c.writeRequest.bytesPerSecond, 514 / 0.0225, accuracy: 1e-6)
    }

    /// Encryption adds the 4-octet MIC to the data packet, not to the empty one: 1M, 27 B, MTU 23, 7.5 ms:
    /// 8 × 41 = 328 µs, exchange 328 + 380 = 708 µs, 7500 / 708 = 10.59: 10 per event, 1333.3 writes/s.
    func testEncryptionAddsTheMIC() throws {
        let c = try link(.le1M, 27, 7.5, 23, encrypted: true)
        XCTAssertEqual(c.exchangeMicroseconds, 708)
        XCTAssertEqual(c.packetsPerEvent, 10)
        XCTAssertEqual(c.writeCommand.writesPerSecond, 10 / 0.0075, accuracy: 1e-6)
    }

    /// Coded S=8, 251 B, MTU 247, 7.5 ms: 376 + 8 × (43 + 2008) = 16784 µs, longer than the interval: nothing fits.
    /// At 50 ms: exchange 16784 + 150 + 720 + 150 = 17804 µs, 2 per event: 2 / 0.05 = 40 writes/s × 244 = 9760 B/s.
    /// Coded S=2, 27 B, MTU 23, 30 ms: 376 + 2 × (43 + 216) = 894; exchange 894 + 300 + 462 = 1656; 30000 / 1656 = 18.1:
    /// 18 per event, 600 writes/s × 20 = 12000 B/s.
    func testCodedPHY() throws {
        let short = try link(.codedS8, 251, 7.5, 247)
        XCTAssertEqual(short.packetsPerEvent, 0)
        XCTAssertNil(short.eventsPerRequest)
        XCTAssertEqual(short.writeCommand.bytesPerSecond, 0)
        XCTAssertEqual(short.writeRequest.bytesPerSecond, 0)
        let long = try link(.codedS8, 251, 50, 247)
        XCTAssertEqual(long.exchangeMicroseconds, 17804)
        XCTAssertEqual(long.writeCommand.bytesPerSecond, 9760, accuracy: 1e-6)
        let s2 = try link(.codedS2, 27, 30, 23)
        XCTAssertEqual(s2.exchangeMicroseconds, 1656)
        XCTAssertEqual(s2.writeCommand.writesPerSecond, 600, accuracy: 1e-9)
        XCTAssertEqual(s2.writeCommand.bytesPerSecond, 12000, accuracy: 1e-6)
    }

    /// Smaller values than the MTU's budget: 20-byte values on 1M, 27 B, MTU 247 make 20 + 3 + 4 = 27-octet PDUs,
    /// one packet each: the MTU 23 figures (1466.67 writes/s, 29333.3 B/s at 7.5 ms). More than MTU - 3 is cut to it.
    func testValuesSmallerThanTheBudget() throws {
        let small = LinkCeiling(try XCTUnwrap(LinkParameters(phy: .le1M, dataLength: 27, intervalMilliseconds: 7.5, mtu: 247)), valueBytes: 20)
        XCTAssertEqual(small.packetsPerWrite, 1)
        XCTAssertEqual(small.valueBytesPerWrite, 20)
        XCTAssertEqual(small.writeCommand.bytesPerSecond, 11 / 0.0075 * 20, accuracy: 1e-6)
        XCTAssertEqual(small.writeRequest.writesPerSecond, 1 / 0.015, accuracy: 1e-6)
        let big = LinkCeiling(try XCTUnwrap(LinkParameters(phy: .le1M, dataLength: 27, intervalMilliseconds: 7.5, mtu: 23)), valueBytes: 500)
        XCTAssertEqual(big.valueBytesPerWrite, 20)
    }

    func testALinkThatCannotExistHasNoParameters() {
        XCTAssertNil(LinkParameters(phy: .le1M, dataLength: 26, intervalMilliseconds: 30, mtu: 23))
        XCTAssertNil(LinkParameters(phy: .le1M, dataLength: 252, intervalMilliseconds: 30, mtu: 23))
        XCTAssertNil(LinkParameters(phy: .le1M, dataLength: 27, intervalMilliseconds: 5, mtu: 23))
        XCTAssertNil(LinkParameters(phy: .le1M, dataLength: 27, intervalMilliseconds: 4001, mtu: 23))
        XCTAssertNil(LinkParameters(phy: .le1M, dataLength: 27, intervalMilliseconds: 30, mtu: 22))
        XCTAssertNil(LinkParameters(phy: .le1M, dataLength: 27, intervalMilliseconds: 30, mtu: 518))
        XCTAssertEqual(LinkParameters(phy: .le2M, dataLength: 251, intervalMilliseconds: 7.5, mtu: 247)?.description, "2M, 251 B, 7.5 ms, MTU 247")
        XCTAssertEqual(LinkParameters(phy: .codedS8, dataLength: 27, intervalMilliseconds: 11.25, mtu: 23, encrypted: true)?.description,
                       "Coded S=8, 27 B, 11.25 ms, MTU 23, encrypted")
    }
}
