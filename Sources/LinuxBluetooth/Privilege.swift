// Least privilege, as iputils' ping and tcpdump do it: the capabilities a setcap'd `mirror` starts with
// (cap_net_raw, cap_net_admin) are gone from every thread before any argument or peer byte is parsed.
//
// Capabilities are per thread on Linux (capset(2) changes the calling thread only; a new thread copies its
// creator's). So the main thread drops every capability first thing, while it is the only thread, and every
// thread started later has none. A process that may need raw HCI first starts one keeper thread that keeps them
// and does nothing but the privileged calls handed to it (open and bind an HCI socket, set its filter, send an
// LE command: the kernel checks CAP_NET_RAW in hci_sock_sendmsg and hci_sock_setsockopt, net/bluetooth/hci_sock.c),
// until `dropAll` makes it drop them too and end. libpsx, libcap's way to change every thread at once, is not
// used: it reaches only threads created through its wrapped pthread_create, which libdispatch's and
// libmicrohttpd's shared libraries bypass.

import CBlueZSocket

/// The process's capabilities over its life: what it started with, whether the keeper still holds them.
public enum Privilege {
    /// How long `perform` waits for the keeper to take a call before running it on the caller (no privilege).
    public static let keeperAnswerLimit = Duration.seconds(5)

    struct State {
        /// What the process held at `start` (nil before `start`, or in a library user that never calls it).
        var startedWith: CapabilityState?
        var keeperAlive = false
        /// The one call handed to the keeper, and how many it has finished.
        var job: (@Sendable () -> Void)?
        var finished = 0
        var submitted = 0
        var ending = false
        /// Why the capabilities were dropped ("at start", "after the connect"), for messages.
        var droppedBecause: String?
    }

    static let state = Lock(State())

    /// Call first in `main`, before any other thread exists: records what the process holds, sets
    /// PR_SET_NO_NEW_PRIVS, starts the keeper when `keepForRawHCI` and there is anything to keep, then drops every
    /// capability on this (the main) thread. Without `keepForRawHCI` the process holds nothing from here on.
    public static func start(keepForRawHCI: Bool) throws(TransportError) {
        let held = try Capabilities.process()
        let anything = !held.effective.isEmpty || !held.permitted.isEmpty || !held.inheritable.isEmpty
        state.withLock { $0.startedWith = held }
        if cbz_set_no_new_privs() < 0 {
            throw .socket(lastSocketError("prctl(PR_SET_NO_NEW_PRIVS)", "making sure no exec can gain privileges", .local))
        }
        if keepForRawHCI && anything && !held.effective.intersection(.rawHCI).isEmpty {
            state.withLock { $0.keeperAlive = true }
            startDetachedThread { keeperLoop() }
        } else {
            state.withLock { $0.droppedBecause = "at start" }
        }
        try Capabilities.dropAll()
    }

    /// What the process held at start (empty when `start` never ran).
    public static var startedWith: CapabilityState? { state.current.startedWith }

    /// Whether a keeper still holds the start's capabilities (a privileged call can still be made).
    public static var isKept: Bool { state.current.keeperAlive }

    /// Why the capabilities are gone, when they were held at start and are now dropped: "at start", "after the connect".
    public static var droppedBecause: String? { state.current.droppedBecause }

    /// Runs `body` on the keeper while it lives (with the start's capabilities), else here (with none).
    public static func perform<T: Sendable>(_ body: @escaping @Sendable () -> T) -> T {
        let result = Lock<T?>(nil)
        let job: @Sendable () -> Void = { let r = body(); result.withLock { $0 = r } }
        let limit = Int(keeperAnswerLimit.components.seconds) * 1_000_000_000
        // One call at a time: wait for the slot, hand the call over, wait for it to finish.
        let ticket = state.wait(until: { s -> Int?? in
            guard s.keeperAlive, !s.ending else { return .some(nil) }
            guard s.job == nil else { return nil }
            s.job = job
            s.submitted += 1
            return .some(s.submitted)
        }, timeoutNanoseconds: limit) ?? nil
        if let ticket {
            state.withLockBroadcasting { _ in }
            // The keeper runs nothing but short syscalls on sockets it was handed: it finishes each call it took.
            state.wait(until: { $0.finished >= ticket ? () : nil })
            if let r = result.current { return r }
        }
        return body()
    }

    /// Ends the keeper (it drops every capability and exits), and drops them on the calling thread: call it as
    /// soon as the privileged sockets are open and the privileged commands sent. `why` goes into later messages.
    public static func dropAll(_ why: String) {
        let wasAlive = state.withLockBroadcasting { s -> Bool in
            let alive = s.keeperAlive && !s.ending
            if alive { s.ending = true }
            if s.droppedBecause == nil { s.droppedBecause = why }
            return alive
        }
        if wasAlive {
            _ = state.wait(until: { $0.keeperAlive ? nil : () }, timeoutNanoseconds: Int(keeperAnswerLimit.components.seconds) * 1_000_000_000)
        }
        try? Capabilities.dropAll()
    }

    /// The keeper: runs each call handed to it, then on `dropAll` drops everything and ends.
    private static func keeperLoop() {
        _ = cbz_set_thread_name("cap-keeper")
        while true {
            let next = state.wait(until: { s -> (@Sendable () -> Void)?? in
                if let job = s.job { return .some(job) }
                if s.ending { return .some(nil) }
                return nil
            })
            guard let job = next else { break }
            job()
            state.withLockBroadcasting { s in
                s.job = nil
                s.finished += 1
            }
        }
        try? Capabilities.dropAll()
        state.withLockBroadcasting { $0.keeperAlive = false }
    }
}
