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
import LinkCore

/// The process's capabilities over its life: what it started with, and the keeper that holds them until the drop.
public enum Privilege {
    struct State {
        /// What the process held at `start` (nil before `start`, or in a library user that never calls it).
        var startedWith: CapabilityState?
        var keeper: CapabilityKeeper?
        /// Why the capabilities were dropped ("at start", "after the connect"), for messages.
        var droppedBecause: String?
    }

    static let state = Lock(State())

    /// Call first in `main`, before any other thread exists: records what the process holds, sets
    /// PR_SET_NO_NEW_PRIVS, starts the keeper when `keepForRawHCI` and there is raw HCI to keep, then drops every
    /// capability on this (the main) thread. Without `keepForRawHCI` the process holds nothing from here on.
    public static func start(keepForRawHCI: Bool) throws(TransportError) {
        let held = try Capabilities.process()
        if cbz_set_no_new_privs() < 0 {
            throw .socket(lastSocketError("prctl(PR_SET_NO_NEW_PRIVS)", "making sure no exec can gain privileges", .local))
        }
        let keeper = keepForRawHCI && !held.effective.intersection(.rawHCI).isEmpty
            ? CapabilityKeeper(name: "cap-keeper", keep: { try? Capabilities.keepOnly(.rawHCI) }, drop: { try? Capabilities.dropAll() }) : nil
        state.withLock { s in
            s.startedWith = held
            s.keeper = keeper
            if keeper == nil { s.droppedBecause = "at start" }
        }
        try Capabilities.dropAll()
    }

    /// What the process held at start (nil when `start` never ran).
    public static var startedWith: CapabilityState? { state.current.startedWith }

    /// Whether a keeper still holds the start's capabilities (a privileged call can still be made).
    public static var isKept: Bool { state.current.keeper?.isAlive ?? false }

    /// Why the capabilities are gone, when they were held at start and are now dropped: "at start", "after the connect".
    public static var droppedBecause: String? { state.current.droppedBecause }

    /// Runs `body` on the keeper while it lives (with the start's capabilities), else here (with none).
    public static func perform<T: Sendable>(_ body: @escaping @Sendable () -> T) -> T {
        guard let keeper = state.current.keeper else { return body() }
        return keeper.perform(body)
    }

    /// Ends the keeper (it drops every capability and exits) and drops them on the calling thread: call it as soon
    /// as the privileged sockets are open and the privileged commands sent. `why` goes into later messages.
    public static func dropAll(_ why: String) {
        let keeper = state.withLock { s -> CapabilityKeeper? in
            if s.droppedBecause == nil { s.droppedBecause = why }
            return s.keeper
        }
        keeper?.end()
        try? Capabilities.dropAll()
    }
}

/// One thread that runs the calls handed to it, one at a time, until `end`, when it runs `drop` and exits: the
/// thread that keeps the capabilities (Privilege). Its own type so that tests drive it without dropping theirs.
final class CapabilityKeeper: Sendable {
    /// How long `perform` waits for the keeper to take a call, and `end` for it to finish, before going on
    /// without it (the call then runs on the caller, with no privilege, and fails as unprivileged).
    let answerLimit: Duration

    private struct State {
        /// The one call handed over, and how many the keeper has finished.
        var job: (@Sendable () -> Void)?
        var submitted = 0
        var finished = 0
        var ending = false
        var alive = true
    }

    private let state = Lock(State())
    private let drop: @Sendable () -> Void

    /// `keep` runs first on the keeper's thread (the process's keeper narrows its capabilities to the two raw HCI
    /// needs: run as root, it would otherwise hold all of root's); `drop` runs last.
    init(name: String, answerLimit: Duration = .seconds(5), keep: @escaping @Sendable () -> Void = {},
         drop: @escaping @Sendable () -> Void) {
        self.answerLimit = answerLimit
        self.drop = drop
        startDetachedThread { [self] in
            _ = cbz_set_thread_name(name)
            keep()
            run()
        }
    }

    var isAlive: Bool { state.withLock { $0.alive && !$0.ending } }

    private var limitNanoseconds: Int {
        Int(answerLimit.components.seconds) * 1_000_000_000 + Int(answerLimit.components.attoseconds / 1_000_000_000)
    }

    /// Runs `body` on the keeper and returns its result; on the caller when the keeper has ended, or did not take
    /// the call within `answerLimit` (another call held it).
    func perform<T: Sendable>(_ body: @escaping @Sendable () -> T) -> T {
        let result = Lock<T?>(nil)
        let job: @Sendable () -> Void = { let r = body(); result.withLock { $0 = r } }
        // Hand the call over once the slot is free; nil: the keeper is gone, or the slot stayed taken.
        let handed: Int?? = state.wait(until: { s -> Int?? in
            guard s.alive, !s.ending else { return .some(nil) }
            guard s.job == nil else { return nil }
            s.job = job
            s.submitted += 1
            return .some(s.submitted)
        }, timeoutNanoseconds: limitNanoseconds)
        guard let ticket = handed ?? nil else { return body() }
        state.withLockBroadcasting { _ in }
        // The keeper runs nothing but short syscalls on sockets it was handed: it finishes each call it took.
        state.wait(until: { $0.finished >= ticket ? () : nil })
        return result.current ?? body()
    }

    /// Asks the keeper to drop and end, and waits for it at most `answerLimit`.
    func end() {
        state.withLockBroadcasting { $0.ending = true }
        _ = state.wait(until: { $0.alive ? nil : () }, timeoutNanoseconds: limitNanoseconds)
    }

    /// The keeper's loop: each call handed over, then on `end` the drop. It waits for work without a limit of its
    /// own: `end` is what ends it.
    private func run() {
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
        drop()
        state.withLockBroadcasting { $0.alive = false }
    }
}
