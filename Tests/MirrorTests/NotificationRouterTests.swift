// Issue 37 point 4: one notification printed once in the shell. GATTPeer's NotificationRouter hands each value to
// exactly one consumer as it is delivered: a claim (a listen) while it holds, else its handle's route (a background
// subscription). Fed by hand here, in a fixed order: nothing depends on when a consumer runs.
import GATTPeer
import XCTest

final class NotificationRouterTests: XCTestCase {
    func n(_ handle: UInt16, _ byte: UInt8) -> GATTNotification { GATTNotification(handle: handle, value: [byte], kind: .notification) }

    /// Finishes `handle`'s route and returns what it was given, in order.
    func drained(_ router: NotificationRouter, _ routed: RoutedNotifications, _ handle: UInt16) async -> [[UInt8]] {
        router.endRoute(handle: handle)
        var values: [[UInt8]] = []
        for await v in routed { values.append(v.value) }
        return values
    }

    func testAValueAClaimHoldsIsNotRoutedAndOneAfterIs() async {
        let router = NotificationRouter()
        let routed = router.route(handle: 0x000C)
        router.deliver(n(0x000C, 1))
        // A listen --count 2: the next two values are its own, whichever handle; the third is the subscription's,
        // whenever the listen itself ends.
        let (_, armed) = router.claim(count: 2) { "armed" }
        XCTAssertEqual(armed, "armed")
        router.deliver(n(0x000C, 2))
        router.deliver(n(0x000F, 3))
        XCTAssertFalse(router.claimed, "let go at its count, as the value was delivered")
        router.deliver(n(0x000C, 4))
        router.deliver(n(0x000F, 5))
        let values = await drained(router, routed, 0x000C)
        XCTAssertEqual(values, [[1], [4]])
    }

    func testAClaimWithoutACountHoldsUntilReleasedAndAnOldReleaseReleasesNoNewClaim() async {
        let router = NotificationRouter()
        let routed = router.route(handle: 0x000C)
        let (first, _) = router.claim(count: nil) { 0 }
        router.deliver(n(0x000C, 1))
        let finished = Lock(false)
        router.release(first) { finished.withLock { $0 = true } }
        XCTAssertTrue(finished.withLock { $0 }, "the claimer's stream is finished in the same turn")
        router.deliver(n(0x000C, 2))
        let (second, _) = router.claim(count: nil) { 0 }
        router.release(first)
        XCTAssertTrue(router.claimed, "the first claim's release leaves the second")
        router.deliver(n(0x000C, 3))
        router.release(second)
        router.deliver(n(0x000C, 4))
        let values = await drained(router, routed, 0x000C)
        XCTAssertEqual(values, [[2], [4]])
    }

    func testARouteThatFellBehindCountsItsDropsAndSaysSoOnTheNextValue() async {
        let router = NotificationRouter()
        let routed = router.route(handle: 0x000C, limit: 1)
        for b in UInt8(1)...3 { router.deliver(n(0x000C, b)) }
        XCTAssertEqual(routed.droppedCount, 2)
        var iterator = routed.makeAsyncIterator()
        let first = await iterator.next()
        XCTAssertEqual(first?.value, [1])
        router.deliver(n(0x000C, 4))
        let next = await iterator.next()
        XCTAssertEqual(next?.value, [4])
        XCTAssertEqual(next?.droppedBefore, 2)
        // Another handle's values, and those after the route ended, go nowhere.
        router.deliver(n(0x000F, 5))
        router.endRoute(handle: 0x000C)
        router.deliver(n(0x000C, 6))
        let end = await iterator.next()
        XCTAssertNil(end)
    }
}
