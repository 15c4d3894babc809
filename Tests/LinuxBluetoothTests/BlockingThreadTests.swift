// LinkCore's BlockingThread: the blocking calls of async code run in order on one kept thread ("mirror-input"), never
// the caller's, and a second call starts no second thread.
import Foundation
import LinkCore
import XCTest

final class BlockingThreadTests: XCTestCase {
    func testCallsRunInOrderOnOneKeptThreadThatIsNotTheCallers() async {
        let thread = BlockingThread.shared
        let order = Lock<[Int]>([])
        let first = await thread.run { () -> pthread_t in order.withLock { $0.append(1) }; return pthread_self() }
        let second = await thread.run { () -> pthread_t in order.withLock { $0.append(2) }; return pthread_self() }
        XCTAssertNotEqual(pthread_equal(first, second), 0, "one kept thread serves every call")
        XCTAssertEqual(pthread_equal(first, pthread_self()), 0, "not the caller's thread")
        XCTAssertEqual(order.withLock { $0 }, [1, 2])
        let name = await thread.run { (try? String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8)) ?? "" }
        XCTAssertEqual(name, "mirror-input\n")
    }
}
