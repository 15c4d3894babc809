// Lock.current: a closure kept as a Lock's value, read once per PDU, stays one closure. Read through an inout
// access (`withLock { $0 }`) it was written back wrapped in two reabstraction thunks each time: after 20,000
// indications every call went through 40,000 nested thunks (the indication storm took 3.5 s instead of 0.2 s).
import XCTest
@testable import LinuxBluetooth
import LinkCore

final class LockTests: XCTestCase {
    func testAClosureReadOnEveryCallDoesNotGrow() {
        let calls = Lock(0)
        let observer = Lock<(@Sendable ([UInt8]) -> Void)?>(nil)
        observer.withLock { $0 = { _ in calls.withLock { $0 += 1 } } }
        // Deep enough that a chain of thunks growing by two per read overflows the 8 MiB stack long before the end.
        for _ in 0..<300_000 { observer.current?([0x1D, 0x08, 0x00]) }
        XCTAssertEqual(calls.current, 300_000)
    }

    func testCurrentReadsWhatWithLockWrote() {
        let value = Lock([1, 2])
        value.withLock { $0.append(3) }
        XCTAssertEqual(value.current, [1, 2, 3])
    }
}
