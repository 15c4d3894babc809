// A first-in first-out queue without per-element allocation: the engine's request queue and permit queue.

/// An array-backed FIFO: `append` at the back, `popFirst` from the front in O(1), removal anywhere in O(n).
struct FIFO<Element> {
    private var storage: [Element] = []
    private var head = 0

    @inline(__always) var isEmpty: Bool { head == storage.count }
    var count: Int { storage.count - head }
    var first: Element? { head < storage.count ? storage[head] : nil }

    mutating func append(_ e: Element) { storage.append(e) }

    /// Puts `e` back at the front (an element taken with `popFirst` that could not be used yet).
    mutating func prepend(_ e: Element) {
        if head > 0 {
            head -= 1
            storage[head] = e
        } else {
            storage.insert(e, at: 0)
        }
    }

    mutating func popFirst() -> Element? {
        guard head < storage.count else { return nil }
        let e = storage[head]
        head += 1
        if head == storage.count {
            storage.removeAll(keepingCapacity: true)
            head = 0
        } else if head >= 64 && head * 2 >= storage.count {
            storage.removeFirst(head)
            head = 0
        }
        return e
    }

    /// Removes and returns the first element matching `predicate`.
    mutating func remove(where predicate: (Element) -> Bool) -> Element? {
        var i = head
        while i < storage.count {
            if predicate(storage[i]) {
                return storage.remove(at: i)
            }
            i += 1
        }
        return nil
    }

    /// Removes and returns every element, in order.
    mutating func removeAll() -> [Element] {
        let all = Array(storage[head...])
        storage.removeAll()
        head = 0
        return all
    }

    /// Every element in order (a copy).
    var elements: ArraySlice<Element> { storage[head...] }

    mutating func removeAll(where predicate: (Element) -> Bool) -> [Element] {
        var removed: [Element] = []
        var kept: [Element] = []
        for e in storage[head...] {
            if predicate(e) { removed.append(e) } else { kept.append(e) }
        }
        if !removed.isEmpty {
            storage = kept
            head = 0
        }
        return removed
    }
}
