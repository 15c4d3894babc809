// A database placed at a device's handles (a clone) keeps its gaps: lookups and writes find each attribute by its
// handle, not by its index (Core Spec 5.4 Vol 3 Part F §3.2.2: handles increase, gaps allowed).
import ATTStack
import GATTServer
import GATTVocabulary
import XCTest

final class AttributeDatabaseGapTests: XCTestCase {
    func testAttributesPlacedWithGapsAreFoundByHandle() {
        var db = AttributeDatabase { b in
            b.place(.primaryService, role: .service(end: 0x0030), value: BluetoothUUID.bit16(0x180F).attWireBytes, permissions: [.read], at: 0x0010)
            b.place(.characteristic, role: .declaration(valueHandle: 0x0015), value: [0x02] + le16(0x0015) + le16(0x2A19), permissions: [.read], at: 0x0014)
            b.place(.bit16(0x2A19), role: .value, value: [99], permissions: [.read], at: 0x0015, name: "battery")
        }
        XCTAssertNil(db.attribute(0x0001))
        XCTAssertNil(db.attribute(0x0003), "index 3 exists, handle 3 does not")
        XCTAssertEqual(db.attribute(0x0015)?.value, [99])
        XCTAssertEqual(db.attribute(0x0010)?.role, .service(end: 0x0030), "a placed service keeps its discovered end")
        XCTAssertEqual(db.handle("battery"), 0x0015)
        db.setValue([42], at: 0x0015)
        XCTAssertEqual(db.attribute(0x0015)?.value, [42])
        db.setValue([1], at: 0x0016)
        XCTAssertEqual(db.attributes.map(\.value), [BluetoothUUID.bit16(0x180F).attWireBytes, [0x02, 0x15, 0x00, 0x19, 0x2A], [42]])
    }
}
