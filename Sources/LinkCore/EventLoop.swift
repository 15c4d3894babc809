// One event loop per link, in the shape of BlueZ's src/shared/att.c io loop and swift-nio's EventLoop: one thread
// ("att-bearer") waits in one epoll_wait on the link's sockets, a timerfd and an eventfd, and runs, in order, what
// the sockets report, the timers that fall due, and the work other threads post. It is a TaskExecutor: a task that
// prefers it is resumed on this thread, after the event that resumed it, with no hop and no signal.
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import CBlueZSocket
import Synchronization

/// The event loop of one link. State a loop owns (the ATT engine's, a bearer's receive path) is touched only on
/// its thread (`inEventLoop`), so it needs no lock; other threads `execute` work on it, which the loop's eventfd
/// wakes it for. Deadlines are its timer (`schedule`), on CLOCK_MONOTONIC. The thread ends once the loop is
/// released (every bearer registered on it holds it) and the work posted before that has run.
public final class EventLoop: TaskExecutor {
    let core: LoopCore
    /// The loop's thread (pthread_self there), published before `init` returns.
    @usableFromInline let thread: pthread_t
    /// No thread of its own: the creator's thread runs the work when it calls `runUntilIdle()`.
    @usableFromInline let embedded: Bool
    /// What the loop's thread holds in `cbz_thread_loop` (its core's address: the thread holds the core until it
    /// ends, so no other loop's can equal it meanwhile); an embedded loop's thread is compared with pthread_equal.
    @usableFromInline let identity: UInt

    /// Starts the loop's thread. Fails only when the kernel refuses an fd (epoll, eventfd, timerfd): errno named.
    public init() throws(TransportError) {
        let core = try LoopCore()
        self.core = core
        let identity = UInt(bitPattern: Unmanaged.passUnretained(core).toOpaque())
        self.identity = identity
        Self.counts.withLock { $0.live += 1 }
        let started = Lock<pthread_t?>(nil)
        startDetachedThread {
            _ = cbz_set_thread_name("att-bearer")
            cbz_set_current_loop(identity)
            started.withLockBroadcasting { $0 = pthread_self() }
            core.run()
            cbz_set_current_loop(0)
        }
        thread = started.wait(until: { $0 })
        embedded = false
    }

    /// A loop without a thread of its own, as swift-nio's EmbeddedEventLoop: the calling thread is its thread, and
    /// work (posted closures, jobs of tasks that prefer it) runs only when that thread calls `runUntilIdle()`. For a
    /// driver that runs every event itself, in order (the engine fuzzer). Its timers are not served: use a clock of
    /// the driver's own (`GATTClock.schedule(at:on:)` then runs the deadline's work on this thread).
    public init(embedded: Void) throws(TransportError) {
        core = try LoopCore()
        identity = UInt(bitPattern: Unmanaged.passUnretained(core).toOpaque())
        thread = pthread_self()
        self.embedded = true
    }

    deinit {
        if embedded {
            core.closeFDs()
            return
        }
        Self.counts.withLock { $0.stopping += 1 }
        core.post(.stop)
    }

    /// An embedded loop: runs what was posted and every job it leads to, on this (the loop's) thread, until nothing
    /// is left. Bounded: work that keeps posting itself a million times traps as a livelock.
    public func runUntilIdle() {
        precondition(embedded && inEventLoop, "runUntilIdle: only on an embedded loop, on its thread")
        core.runUntilIdle()
    }

    /// Loops with a thread (made and not ended), and those of them released whose thread has not ended yet (it runs
    /// what was posted, then closes its fds).
    static let counts = Lock<(live: Int, stopping: Int)>((0, 0))

    /// The loops whose thread runs now (each holds three fds and a thread).
    public static var liveLoops: Int { counts.withLock { $0.live } }

    /// Waits until every released loop's thread has ended and closed its fds, at most `seconds`: false if some had
    /// not by then. For a caller that counts fds or threads (a leak test) right after releasing bearers.
    public static func waitForStoppingLoops(seconds: Double) -> Bool {
        counts.wait(until: { $0.stopping == 0 ? true : nil }, timeoutNanoseconds: Int(seconds * 1e9)) != nil
    }

    /// Waits until at most `count` loops have a thread, at most `seconds`: false if more had by then. A loop whose
    /// last bearer just ended is still held for the rest of that event; a leak test waits for it this way.
    public static func waitForLiveLoops(atMost count: Int, seconds: Double) -> Bool {
        counts.wait(until: { $0.live <= count ? true : nil }, timeoutNanoseconds: Int(seconds * 1e9)) != nil
    }

    /// True on the loop's thread: its thread-local mark, or for an embedded loop its creator's thread. Inlined into
    /// its callers (the engine asks it per Write Command): one thread-local load and a compare.
    @inlinable public var inEventLoop: Bool {
        cbz_current_loop() == identity || (embedded && pthread_equal(pthread_self(), thread) != 0)
    }

    /// Runs `work` on the loop's thread, after what it is doing now, in the order posted (from any thread).
    public func execute(_ work: @escaping @Sendable () -> Void) {
        if inEventLoop { core.local.append(.closure(work)) } else { core.post(.closure(work)) }
    }

    /// TaskExecutor: a job of a task that prefers this loop runs on its thread, after the current event.
    public func enqueue(_ job: consuming ExecutorJob) {
        let work = LoopCore.Work.job(UnownedJob(job), asUnownedTaskExecutor())
        if inEventLoop { core.local.append(work) } else { core.post(work) }
    }

    /// Runs `body` on the loop's thread and returns its result: at once on the loop, else the caller blocks until
    /// the loop has run it. For rare reads of loop-owned state (statistics, a count); never from code the loop waits on.
    public func sync<T: Sendable>(_ body: @escaping @Sendable () -> T) -> T {
        if inEventLoop { return body() }
        core.blockedCallers.wrappingAdd(1, ordering: .relaxed)
        let box = Lock<T?>(nil)
        core.post(.closure { box.withLockBroadcasting { $0 = body() } })
        return box.wait(until: { $0 })
    }

    /// Runs `work` on the loop at `deadline` (CLOCK_MONOTONIC nanoseconds, `monotonicNanoseconds()`), through the
    /// loop's timerfd. `cancel()` on the loop's thread guarantees it will not run; elsewhere it is posted.
    public func schedule(atNanoseconds deadline: UInt64, _ work: @escaping @Sendable () -> Void) -> LoopTimer {
        let timer = LoopTimer(loop: self, id: core.makeTimerID())
        let add: @Sendable () -> Void = { [core] in core.addTimer(timer.id, deadline, work) }
        if inEventLoop { add() } else { core.post(.closure(add)) }
        return timer
    }

    /// How many times a thread other than the loop's has blocked in `sync`: what a test counts to show that no
    /// `loop.sync` is reached from a connection's async methods.
    package var blockedCallers: Int { core.blockedCallers.load(ordering: .relaxed) }

    /// A token for a source of this loop (`register`), unique on it.
    package func makeSourceToken() -> UInt64 { core.makeTimerID() | LoopCore.sourceBit }

    /// Adds `fd` to the loop's epoll set as `token` (level-triggered `events`, CBZ_EPOLL*); `handler` runs on the
    /// loop with the events reported. False (errno set) when epoll_ctl refuses. On the loop's thread only.
    package func register(fd: Int32, token: UInt64, events: UInt32, _ handler: @escaping (UInt32) -> Void) -> Bool {
        precondition(inEventLoop, "EventLoop.register off the loop's thread")
        guard cbz_epoll_add(core.epfd, fd, events, token) == 0 else { return false }
        core.sources.append((token, handler))
        return true
    }

    /// Changes a source's events (epoll_ctl is safe from any thread: the next wait sees the new set).
    package func modify(fd: Int32, token: UInt64, events: UInt32) -> Bool {
        cbz_epoll_mod(core.epfd, fd, events, token) == 0
    }

    /// Takes a source out of the set (before its fd is closed). On the loop's thread only.
    package func deregister(fd: Int32, token: UInt64) {
        precondition(inEventLoop, "EventLoop.deregister off the loop's thread")
        _ = cbz_epoll_del(core.epfd, fd)
        core.sources.removeAll { $0.token == token }
    }
}

/// A timer of an `EventLoop` (`schedule`); `cancel()` removes it.
public final class LoopTimer: Sendable {
    let loop: EventLoop
    let id: UInt64
    init(loop: EventLoop, id: UInt64) { self.loop = loop; self.id = id }

    public func cancel() {
        if loop.inEventLoop { loop.core.cancelTimer(id) } else { loop.execute { [loop, id] in loop.core.cancelTimer(id) } }
    }
}

/// The loop thread's state. `posted` is guarded by its Lock; every other `var` is touched only on the loop's thread
/// (`EventLoop.inEventLoop`), which is what makes this @unchecked Sendable.
final class LoopCore: @unchecked Sendable {
    enum Work {
        case closure(@Sendable () -> Void)
        case job(UnownedJob, UnownedTaskExecutor)
        case stop
    }

    static let wakeToken: UInt64 = 1
    static let timerToken: UInt64 = 2
    /// Source tokens carry this bit, so they never meet the two above.
    static let sourceBit: UInt64 = 1 << 63

    let epfd: Int32
    let wakefd: Int32
    let timerfd: Int32

    /// Work other threads posted, and whether the eventfd was signalled for it since the loop last took it.
    private let posted = Lock<(work: [Work], signalled: Bool)>(([], false))
    /// The last timer or source ID given (timers are made on any thread).
    private let ids = Lock<UInt64>(10)
    /// Callers from other threads that blocked in `EventLoop.sync` (counted for tests; an atomic, any thread).
    let blockedCallers = Atomic<Int>(0)

    // Loop thread only. Unchecked exclusivity: one thread touches them, one event at a time, so the runtime's dynamic
    // access checks (a thread-local look-up each, several per request) would guard nothing.
    @exclusivity(unchecked) var local: [Work] = []
    /// The registered sources: a link has a few (CID 4, its enhanced bearers), so a scan beats hashing the token.
    @exclusivity(unchecked) var sources: [(token: UInt64, handler: (UInt32) -> Void)] = []
    @exclusivity(unchecked) private var timers: [(id: UInt64, deadline: UInt64, work: @Sendable () -> Void)] = []
    /// The deadline the timerfd is armed for, 0 when disarmed.
    @exclusivity(unchecked) private var armedAt: UInt64 = 0
    @exclusivity(unchecked) private var stopping = false

    init() throws(TransportError) {
        var opened: [Int32] = []
        func fail(_ syscall: String) -> TransportError {
            let e = SocketError.last(syscall, "starting an event loop")
            for fd in opened { _ = cbz_close(fd) }
            return .socket(e)
        }
        let ep = cbz_epoll_create()
        if ep < 0 { throw fail("epoll_create1") }
        opened.append(ep)
        let wake = cbz_eventfd()
        if wake < 0 { throw fail("eventfd") }
        opened.append(wake)
        let timer = cbz_timerfd()
        if timer < 0 { throw fail("timerfd_create") }
        opened.append(timer)
        if cbz_epoll_add(ep, wake, CBZ_EPOLLIN, Self.wakeToken) < 0 || cbz_epoll_add(ep, timer, CBZ_EPOLLIN, Self.timerToken) < 0 {
            throw fail("epoll_ctl")
        }
        epfd = ep
        wakefd = wake
        timerfd = timer
    }

    func makeTimerID() -> UInt64 { ids.withLock { $0 += 1; return $0 } }

    /// From another thread: queues `work` and signals the eventfd once per batch the loop takes.
    func post(_ work: Work) {
        let signal = posted.withLock { p -> Bool in
            p.work.append(work)
            if p.signalled { return false }
            p.signalled = true
            return true
        }
        if signal { _ = cbz_eventfd_signal(wakefd) }
    }

    func addTimer(_ id: UInt64, _ deadline: UInt64, _ work: @escaping @Sendable () -> Void) {
        timers.append((id, deadline, work))
        rearm()
    }

    func cancelTimer(_ id: UInt64) {
        timers.removeAll { $0.id == id }
    }

    /// Arms the timerfd for the earliest deadline when that is earlier than what it is armed for (a later one is
    /// left: the early wake-up re-arms), so that steady growing deadlines cost no syscall.
    private func rearm() {
        guard let first = timers.min(by: { $0.deadline < $1.deadline })?.deadline else { return }
        if armedAt != 0 && armedAt <= first { return }
        armedAt = first
        _ = cbz_timerfd_set(timerfd, first)
    }

    private func fireTimers() {
        _ = cbz_timerfd_drain(timerfd)
        armedAt = 0
        let now = monotonicNanoseconds()
        var due: [(id: UInt64, deadline: UInt64, work: @Sendable () -> Void)] = []
        timers.removeAll { t in
            if t.deadline <= now { due.append(t); return true }
            return false
        }
        due.sort { ($0.deadline, $0.id) < ($1.deadline, $1.id) }
        for t in due { t.work() }
        rearm()
    }

    func runUntilIdle() {
        var rounds = 0
        while true {
            takePosted()
            if local.isEmpty { return }
            runLocal()
            rounds += 1
            if rounds > 1_000_000 { fatalError("livelock: a million rounds of work without going idle") }
        }
    }

    func closeFDs() {
        _ = cbz_close(epfd)
        _ = cbz_close(wakefd)
        _ = cbz_close(timerfd)
    }

    private func runLocal() {
        var i = 0
        // Work run here may append more; it runs in this same pass, in order.
        while i < local.count {
            let work = local[i]
            i += 1
            switch work {
            case .closure(let c): c()
            case .job(let job, let executor): job.runSynchronously(on: executor)
            case .stop: stopping = true
            }
        }
        local.removeAll(keepingCapacity: true)
    }

    private func takePosted() {
        _ = cbz_eventfd_drain(wakefd)
        let work = posted.withLock { p -> [Work] in
            p.signalled = false
            defer { p.work.removeAll(keepingCapacity: true) }
            return p.work
        }
        local.append(contentsOf: work)
    }

    func run() {
        let events = UnsafeMutableBufferPointer<cbz_epoll_event>.allocate(capacity: 16)
        events.initialize(repeating: cbz_epoll_event())
        defer {
            events.deallocate()
            closeFDs()
            EventLoop.counts.withLockBroadcasting { c in
                c.stopping -= 1
                c.live -= 1
            }
        }
        while true {
            runLocal()
            if stopping && sources.isEmpty {
                // Work posted before the stop has run; nothing can post any more (the EventLoop is gone).
                takePosted()
                runLocal()
                return
            }
            let n = cbz_epoll_wait(epfd, events.baseAddress, Int32(events.count), -1)
            for i in 0..<max(0, Int(n)) {
                let e = events[i]
                switch e.data {
                case Self.wakeToken: takePosted()
                case Self.timerToken: fireTimers()
                default: sources.first(where: { $0.token == e.data })?.handler(e.events)
                }
            }
        }
    }
}

extension EventLoop {
    /// The loop the current task's link code runs on (`withLinkLoop`); nil outside one. A task-local, so an unstructured
    /// `Task(executorPreference: EventLoop.current)` a command starts stays on its link's loop too.
    @TaskLocal public static var current: EventLoop?
}

/// Runs `body` with `loop` as the task's executor (SE-0417) and as `EventLoop.current`: a request made inside is
/// written, answered and resumed on the loop's thread, with no post through the eventfd and no pool thread.
public func withLinkLoop<T: Sendable, Failure: Error>(_ loop: EventLoop,
                                                      _ body: () async throws(Failure) -> T) async throws(Failure) -> T {
    let result: Result<T, Failure> = await EventLoop.$current.withValue(loop) {
        await withTaskExecutorPreference(loop) { () async -> Result<T, Failure> in
            do throws(Failure) { return .success(try await body()) } catch { return .failure(error) }
        }
    }
    return try result.get()
}

extension EventLoop {
    /// The most datagrams a source of the loop reads per wake: a socket that keeps receiving leaves the loop to its
    /// other sources between batches (the sources are level-triggered, so what is left wakes the next turn).
    public static let sourceBatch = 32

    /// One wake of a datagram source: up to `sourceBatch` reads. `stopping` asked before each (a close posted from
    /// another thread ends the source); `readOne` is true when a datagram came, false when none was there, nil when
    /// the socket ended or failed; `end` takes the source out.
    public static func readBatch(stopping: () -> Bool, _ readOne: () -> Bool?, end: () -> Void) {
        for _ in 0..<sourceBatch {
            if stopping() { return end() }
            switch readOne() {
            case true?: continue
            case false?: return
            case nil: return end()
            }
        }
    }
}
