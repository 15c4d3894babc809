// A wait that holds its thread (a link request's HCI answer, a pairing prompt's line, a blocking connect) while that
// thread may be the link's loop, the one reader of the process's signals (a signalfd source): such a wait polls the
// signal fd beside its own, so SIGINT and SIGTERM are acted on at once as they were when a handler took them.
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import CBlueZSocket

/// The process's interrupt fd (the signalfd of SIGINT and SIGTERM, MirrorCommandLine's Interrupts) and what reads
/// it, polled by every `BlockingWait.poll`. None is set in a process that handles no signals (tests, the tools).
public enum BlockingWait {
    static let interrupt = Lock<(fd: Int32, take: @Sendable () -> Void)?>(nil)

    /// Sets the fd a blocking wait polls beside its own and `take`, which reads it and acts (it may exit).
    public static func setInterruptSource(fd: Int32, take: @escaping @Sendable () -> Void) {
        interrupt.withLock { $0 = (fd, take) }
    }

    public static func clearInterruptSource() { interrupt.withLock { $0 = nil } }

    /// poll(2) on `fd` for `events` at most `timeoutMilliseconds` (-1: no limit), taking the interrupt fd's signals
    /// meanwhile. Returns `fd`'s revents (0 when the time is up), or -1 with errno set when poll fails (not EINTR).
    public static func poll(fd: Int32, events: Int16, timeoutMilliseconds: Int32) -> Int32 {
        let deadline = timeoutMilliseconds < 0 ? nil : monotonicNanoseconds() + UInt64(timeoutMilliseconds) * 1_000_000
        while true {
            var left: Int32 = -1
            if let deadline {
                let now = monotonicNanoseconds()
                left = now >= deadline ? 0 : Int32(clamping: (deadline - now + 999_999) / 1_000_000)
            }
            let source = interrupt.withLock { $0 }
            var r1: Int16 = 0, r2: Int16 = 0
            let n = source.map { cbz_poll_two(fd, events, $0.fd, Int16(CBZ_POLLIN), left, &r1, &r2) }
                ?? cbz_poll_one(fd, events, left, &r1)
            if n < 0 {
                if cbz_errno() == EINTR { continue }
                return -1
            }
            if r2 != 0 { source?.take() }
            if r1 != 0 { return Int32(r1) }
            if n == 0 || (left == 0 && r2 == 0) { return 0 }
        }
    }
}
