// `mirror scan`: one body scan with nothing left to luck. Every notification is logged from the
// start; scanState and scanError are subscribed AND read; a pre-flight read with a cancelScan reset and a
// re-read that says whether it worked; the upload receiver starts before any write; the upload URL is checked
// against the profile's cloudTokenMaxLength and the MTU budget before it is sent; every handler is armed
// before the writes; one named deadline for COMPLETE plus the upload, or ERROR; a final read whatever happened.
import ATTStack
import CBlueZSocket
import HostEnvironment
import LinuxBluetooth
import LinkCore
import FoundationEssentials
import GATTClient
import Glibc
import GATTVocabulary

/// What `mirror scan` is asked to do.
public struct MirrorScanOptions: Sendable {
    public var profile: MirrorProfile
    /// The named deadline for COMPLETE plus the upload, or ERROR (default 90 s, `--timeout`).
    public var timeout: Duration = .seconds(90)
    /// The host the mirror is told to post to (`--upload-host`).
    public var uploadHost: String
    /// The port the receiver listens on and the mirror is told (`--upload-port`, default 7777; 0: any free port).
    public var uploadPort: UInt16 = 7777
    /// Where the receiver binds (`--upload-bind`): nil binds the upload host, which must then be a numeric address
    /// (never 0.0.0.0 unless asked for here).
    public var bindHost: String?
    /// Where a received ZIP is stored.
    public var uploadDirectory: String
    public var maxUploadBytes: Int = 512 << 20
    /// The receiver's connection limits and deadlines (maxBytes comes from `maxUploadBytes`).
    public var uploadLimits = UploadLimits()
    /// The whole database when the caller has it (the GATT cache): the mirror service is found there, with no
    /// discovery.
    public var database: [GATTService]?
    /// Runs once scanState and scanError are subscribed and read, before the pre-flight (the CLI enables robust
    /// caching there: after the scan's first work, for the long wait that follows).
    public var afterSubscribing: (@Sendable () async throws -> Void)?
    /// The pause after cancelScan before the re-read (a real mirror needs about 500 ms).
    public var settle: Duration = .milliseconds(500)
    /// The scan ID, shown and in the stored file's name (default: 6 random hex digits). The URL carries a secret.
    public var scanID: String?
    /// How long an interrupted scan waits for the Write Response to the cancelScan it sends before it ends.
    public var cancelScanLimit: Duration = .seconds(5)

    public init(profile: MirrorProfile, uploadHost: String, uploadDirectory: String) {
        self.profile = profile
        self.uploadHost = uploadHost
        self.uploadDirectory = uploadDirectory
    }
}

/// How a scan ended, with the keys `--json` prints in its result object.
public struct MirrorScanResult: Sendable, Equatable {
    /// How the scan ended: COMPLETE plus the upload, ERROR (or a disconnect), the deadline, or a refused write.
    public enum Outcome: String, Sendable, Equatable {
        case complete, error, timeout, writeFailed
        /// The upload arrived but is not a ZIP with the profile's resultEntries (exit status 8).
        case badUpload
        /// SIGINT or SIGTERM cancelled it; once a scan may have started, cancelScan was sent (`cancelScanSent`).
        case interrupted
    }
    public var outcome: Outcome
    /// The final read's scanState / scanError names (the last notified ones when the final read failed).
    public var scanState: String?
    public var scanError: String?
    public var scanStateByte: UInt8?
    public var scanErrorByte: UInt8?
    /// Whether the final reads succeeded (false: the values are the last known ones).
    public var finalRead: Bool
    /// Whether any scanState notification arrived after the handlers were armed.
    public var sawAnyScanState: Bool
    public var notifications: Int
    public var preflightScanState: String?
    public var resetAttempted: Bool
    /// Whether the re-read after cancelScan showed invalid (nil when no reset was attempted).
    public var resetWorked: Bool?
    public var upload: ReceivedUpload?
    public var scanID: String
    public var uploadURL: String
    /// Why the outcome is not complete, in words (the write's error, the named timeout, the error's names).
    public var failure: String?
    /// For writeFailed: who refused ("peer" or "local") and the limit that was broken.
    public var rejectedBy: String?
    /// Whether the outcome error is the mirror's own (scanState or scanError ERROR), not a lost link.
    public var mirrorReportedError = false
    /// For the mirror's error: what its last scanError usually means and what to do (ScanErrorAdvice).
    public var scanErrorMeaning: String?
    public var advice: String?
    /// What the scan learned of the mirror's own cloudToken limit when it answered 0x0D to a URL within the profile's
    /// (nil: it did not).
    public var cloudTokenLimit: CloudTokenLimitFound?
    /// For an interrupted scan: whether its cancelScan was answered (nil: none was needed, nothing had started).
    public var cancelScanSent: Bool?
    public var seconds: Double
}

/// The mirror's cloudToken limit as a refused write and its retry showed it: it refused `refused` bytes with 0x0D
/// and took `accepted` (nil: it refused the retry too), so its limit is at least `accepted` and below `refused`.
public struct CloudTokenLimitFound: Sendable, Equatable, CustomStringConvertible {
    public var accepted: Int?
    public var refused: Int
    public var description: String {
        if let accepted {
            return "the mirror took \(accepted) bytes and refused \(refused): its cloudToken limit is \(accepted)"
                + (refused - 1 > accepted ? " to \(refused - 1)" : "") + " bytes; put \"cloudTokenMaxLength\": \(accepted) in the profile (--profile)"
        }
        return "the mirror refused even the shortest upload URL (\(refused) bytes, a \(UploadURLBudget.bits(characters: UploadURLBudget.shortestSecret))-bit secret): "
            + "its cloudToken limit is below \(refused) bytes; a shorter --upload-host or --upload-port would shorten the URL"
    }
}

/// The scan procedure.
public enum MirrorScan {
    /// A short scan ID: 6 lowercase hex digits.
    public static func makeScanID() -> String { ATTHex.fixed(UInt64.random(in: 0...0xFF_FFFF), digits: 6, lowercase: true) }

    /// Runs a scan on a connected client. `emit` gets every event as it happens (from several threads, in order
    /// per source). `notifications` is the stream the scan logs (nil: the client's catch-all, which holds every
    /// value since the connect; a caller that runs procedures one after another gives each its own from its start).
    /// Throws only when the procedure cannot start (no mirror service, receiver cannot listen, no bind address).
    public static func run(client: GATTClient, options: MirrorScanOptions, notifications: GATTNotificationStream? = nil,
                           emit: @escaping @Sendable (MirrorEvent) -> Void) async throws -> MirrorScanResult {
        let notifications = notifications ?? client.notifications
        let profile = options.profile
        let started = MonotonicClock().now()
        let tracker = ScanTracker(profile: profile)
        let steps0 = MirrorSteps(client: client, profile: profile, handles: MirrorHandles(service: ATTHandleRange(start: 1, end: 1), valueHandles: [:], cccdHandles: [:]), started: started, emit: emit)

        // 1. Log every notification from now on (the engine buffers those since the bearer opened).
        let handlesBox = Lock<MirrorHandles?>(nil)
        let listener = Task {
            do {
                for try await n in notifications {
                    let name = handlesBox.withLock { $0?.name(of: n.handle) }
                    let decoded = decodeMirrorValue(name, n.value, profile: profile)
                    emit(MirrorEvent(time: steps0.now, kind: .notification(handle: n.handle), characteristic: name,
                                     value: n.value, decoded: decoded, purpose: n.kind.rawValue, detail: nil))
                    tracker.notified(name, n.value)
                }
                tracker.ended("the notification stream ended")
            } catch {
                tracker.ended("\(error)")
            }
        }
        defer { listener.cancel() }

        // 2. The upload receiver, before any write.
        let scanID = options.scanID ?? makeScanID()
        guard let bindHost = options.bindHost ?? (isNumericAddress(options.uploadHost) ? options.uploadHost : nil) else {
            throw UploadReceiverError(host: options.uploadHost, port: options.uploadPort, errno: .invalidArgument,
                                      problem: "the upload host is not a numeric address, so the receiver does not know which one to bind: "
                                          + "give --upload-bind ADDR (the local address the mirror reaches; 0.0.0.0 for every one)")
        }
        // The stored file is never overwritten (RENAME_NOREPLACE): a name already taken is said now, not after the scan.
        let target = uploadPath(options.uploadDirectory, "scan-\(scanID).zip")
        var uid: UInt32 = 0, mode: UInt32 = 0
        if cbz_lstat_owner_mode(target, &uid, &mode) == 0 {
            throw UploadReceiverError(host: bindHost, port: options.uploadPort, errno: Errno(EEXIST),
                                      problem: "\(target) exists already and is never overwritten: give another --scan-id or --upload-dir",
                                      directoryProblem: true)
        }
        var limits = options.uploadLimits
        limits.maxBytes = options.maxUploadBytes
        let receiver = try UploadReceiver(host: bindHost, port: options.uploadPort, directory: options.uploadDirectory,
                                          limits: limits, requiredEntries: profile.resultEntries) { event in
            emit(MirrorEvent(time: steps0.now, kind: .upload(event), characteristic: nil, value: nil, decoded: nil, purpose: nil, detail: nil))
            tracker.uploaded(event, scanID: scanID)
        }
        defer { receiver.stop() }
        // The secret takes what cloudToken's limits leave after http://HOST:PORT/ (UploadURLBudget); when even the
        // shortest secret does not fit, step 5 refuses before any write, so this URL is only reported.
        let budget = UploadURLBudget(host: options.uploadHost, port: receiver.port,
                                     limit: min(profile.cloudTokenMaxLength, client.writeValueBudget))
        receiver.expect(scanID: scanID, secret: try UploadReceiver.makeSecret(characters: budget.secretCharacters ?? UploadURLBudget.shortestSecret))
        var url = receiver.uploadURL(advertisedHost: options.uploadHost)!
        emit(MirrorEvent(time: steps0.now, kind: .uploadListening, characteristic: nil, value: nil, decoded: nil,
                         purpose: nil, detail: "listening on \(bindHost):\(receiver.port); the mirror will post to \(url) "
                             + "(\(url.utf8.count) bytes, a \(UploadURLBudget.bits(characters: budget.secretCharacters ?? UploadURLBudget.shortestSecret))-bit secret)"))

        // 3. Discovery, then subscribe AND read scanState and scanError.
        let handles = try await MirrorGATT.discover(client, profile: profile, required: ["scanState", "scanError", "cloudToken", "scannerAction"],
                                                    database: options.database)
        handlesBox.withLock { $0 = handles }
        let steps = MirrorSteps(client: client, profile: profile, handles: handles, started: started, emit: emit)
        var result = MirrorScanResult(outcome: .error, finalRead: false, sawAnyScanState: false, notifications: 0,
                                      resetAttempted: false, scanID: scanID, uploadURL: url, seconds: 0)
        func finish(_ r: inout MirrorScanResult) async -> MirrorScanResult {
            // 8. The final read of scanState and scanError, whatever happened.
            let t = tracker.snapshot
            r.sawAnyScanState = t.sawScanStateAfterArming
            r.notifications = t.notifications
            r.upload = t.upload
            // In its own task: an interrupted (cancelled) scan still gets its final read.
            let finalRead = Task { () async throws -> ([UInt8], [UInt8]) in
                (try await steps.read("scanState", purpose: "final"), try await steps.read("scanError", purpose: "final"))
            }
            do {
                let (s, e) = try await finalRead.value
                r.scanStateByte = s.first
                r.scanErrorByte = e.first
                r.finalRead = true
            } catch {
                steps.event(.failed, purpose: "final", detail: "final read failed: \(error)")
                r.scanStateByte = t.scanState
                r.scanErrorByte = t.scanError
            }
            r.scanState = r.scanStateByte.map(profile.scanStateName)
            r.scanError = r.scanErrorByte.map(profile.scanErrorName)
            // The mirror's ERROR is named by the last scanError seen (the final read, else the last notified one),
            // not the first notification's: scanState error often comes before its scanError.
            if r.mirrorReportedError, let name = r.scanError, let byte = r.scanErrorByte, let advice = ScanErrorAdvice.forName(name) {
                r.failure = "scanState \(r.scanState ?? "unknown"), scanError \(name) (\(ATTHex.byte(byte))): \(advice.meaning)"
                r.scanErrorMeaning = advice.meaning
                r.advice = advice.advice
            }
            r.seconds = steps.now
            return r
        }

        // An interrupt once the scan may have started: cancelScan, in a task of its own (this one is cancelled), with
        // a named limit, so the mirror does not go on and post to a receiver that is gone.
        func interrupted(_ r: inout MirrorScanResult, while what: String, started: Bool) async -> MirrorScanResult {
            r.outcome = .interrupted
            r.failure = "interrupted while \(what)"
            if started {
                steps.step("interrupted: sending cancelScan (\(ATTHex.short(profile.cancelScanCommand))) so the mirror stops")
                let cancel = Task { () async throws in
                    try await withDeadline(options.cancelScanLimit, waitingFor: "the Write Response to cancelScan") {
                        try await steps.write("scannerAction", [profile.cancelScanCommand], purpose: "interrupt")
                    }
                }
                do {
                    try await cancel.value
                    r.cancelScanSent = true
                } catch {
                    r.cancelScanSent = false
                    steps.event(.failed, purpose: "interrupt", detail: "cancelScan after the interrupt failed: \(error)")
                }
            }
            return await finish(&r)
        }

        do {
            let state = try await steps.subscribeAndRead("scanState")
            let error = try await steps.subscribeAndRead("scanError")
            tracker.read("scanState", state)
            tracker.read("scanError", error)
            try await options.afterSubscribing?()

            // 4. Pre-flight: not INVALID means an earlier session left state behind: cancelScan, settle, re-read.
            let invalid = profile.scanStateByte("invalid")!
            let pre = try await steps.read("scanState", purpose: "preflight")
            result.preflightScanState = pre.first.map(profile.scanStateName) ?? "empty"
            if pre.first != invalid {
                steps.step("pre-flight scanState is \(result.preflightScanState!): sending cancelScan (\(ATTHex.short(profile.cancelScanCommand)))")
                result.resetAttempted = true
                try await steps.write("scannerAction", [profile.cancelScanCommand], purpose: "reset")
                steps.step("settling \(options.settle) before the re-read")
                try await MonotonicClock().sleep(for: options.settle)
                let again = try await steps.read("scanState", purpose: "resetCheck")
                result.resetWorked = again.first == invalid
                steps.step(result.resetWorked! ? "cancelScan reset the mirror: scanState is invalid"
                           : "cancelScan did not reset the mirror: scanState is \(again.first.map(profile.scanStateName) ?? "empty")")
                tracker.read("scanState", again)
            }
        } catch {
            if Task.isCancelled { return await interrupted(&result, while: "subscribing, before the writes (no scan started)", started: false) }
            result.outcome = .error
            result.failure = "before the writes: \(error)"
            return await finish(&result)
        }

        // 5. The upload URL, checked here against both limits before anything is sent: http://HOST:PORT/ and a
        // secret of at least 12 characters (UploadURLBudget) must fit the profile's cloudTokenMaxLength and the MTU.
        if budget.secretCharacters == nil {
            var broken: [String] = []
            if budget.shortestURLBytes > profile.cloudTokenMaxLength {
                broken.append("the profile's cloudTokenMaxLength \(profile.cloudTokenMaxLength)")
            }
            if budget.shortestURLBytes > client.writeValueBudget {
                broken.append("the \(client.writeValueBudget)-byte Write Request budget of MTU \(client.mtu)")
            }
            result.outcome = .writeFailed
            result.rejectedBy = "local"
            result.failure = "not sent: the upload URL needs at least \(budget.shortestURLBytes) bytes (\(budget.prefix) is "
                + "\(budget.prefix.utf8.count) bytes, and the shortest secret \(UploadURLBudget.shortestSecret) characters, "
                + "\(UploadURLBudget.bits(characters: UploadURLBudget.shortestSecret)) bits), over \(broken.joined(separator: " and ")); "
                + budget.shorterAdvice(host: options.uploadHost, port: receiver.port)
            steps.event(.failed, "cloudToken", value: Array(url.utf8), purpose: "token", detail: result.failure)
            return await finish(&result)
        }

        // 6. Arm every handler, then write cloudToken and initDeviceForScan. A 0x0D from the mirror on a URL within
        // the profile's limit means its real limit is lower (seed 000): one retry with the shortest URL, and the
        // limit found is reported.
        let retrySecret = try UploadReceiver.makeSecret(characters: UploadURLBudget.shortestSecret)
        tracker.arm()
        steps.step("handlers armed; writing cloudToken, then initDeviceForScan")
        do throws(GATTError) {
            let token = Array(url.utf8)
            do {
                try await steps.write("cloudToken", token, purpose: "token")
            } catch let e where e.attributeError.map({ $0.rejectedBy == .peer && $0.code == .invalidAttributeValueLength }) == true
                        && token.count > budget.shortestURLBytes {
                receiver.expect(scanID: scanID, secret: retrySecret)
                url = receiver.uploadURL(advertisedHost: options.uploadHost)!
                result.uploadURL = url
                steps.step("the mirror refused a \(token.count)-byte cloudToken with 0x0D Invalid Attribute Value Length although "
                           + "the profile allows \(profile.cloudTokenMaxLength): its real limit is lower; retrying once with the "
                           + "shortest URL (\(url.utf8.count) bytes, a \(UploadURLBudget.bits(characters: retrySecret.count))-bit secret): \(url)")
                do throws(GATTError) {
                    try await steps.write("cloudToken", Array(url.utf8), purpose: "token")
                } catch {
                    result.cloudTokenLimit = CloudTokenLimitFound(accepted: nil, refused: url.utf8.count)
                    throw error
                }
                result.cloudTokenLimit = CloudTokenLimitFound(accepted: url.utf8.count, refused: token.count)
                steps.step(result.cloudTokenLimit!.description)
            }
            try await steps.write("scannerAction", [profile.initDeviceForScanCommand], purpose: "initDeviceForScan")
        } catch {
            if Task.isCancelled { return await interrupted(&result, while: "writing cloudToken and initDeviceForScan", started: true) }
            result.outcome = .writeFailed
            result.failure = error.description
            if let a = error.attributeError { result.rejectedBy = a.rejectedBy.rawValue }
            if let found = result.cloudTokenLimit, found.accepted == nil {
                result.failure! += "; \(found.description)"
            }
            return await finish(&result)
        }

        // Subscribe AND read: a state the mirror was already in sends no notification, so read it once more.
        do {
            tracker.readAfterArming("scanState", try await steps.read("scanState", purpose: "afterWrites"))
            tracker.readAfterArming("scanError", try await steps.read("scanError", purpose: "afterWrites"))
        } catch {
            steps.event(.failed, purpose: "afterWrites", detail: "read after the writes failed: \(error)")
        }

        // 7. One named deadline: COMPLETE plus the upload, or ERROR.
        let what = "scanState complete and the upload of scan \(scanID), or error"
        steps.step("waiting up to \(options.timeout) for \(what)")
        do {
            let verdict = try await withDeadline(options.timeout, waitingFor: what) { try await tracker.waitForVerdict() }
            switch verdict {
            case .complete: result.outcome = .complete
            case .error(let why): result.outcome = .error; result.failure = why
            case .mirrorError(let why): result.outcome = .error; result.failure = why; result.mirrorReportedError = true
            case .badUpload(let why): result.outcome = .badUpload; result.failure = why
            }
        } catch let e as GATTError {
            if case .timeout = e {
                result.outcome = .timeout
            } else {
                result.outcome = .error
            }
            result.failure = e.description
        } catch is CancellationError {
            return await interrupted(&result, while: "waiting for \(what)", started: true)
        } catch {
            result.outcome = .error
            result.failure = "\(error)"
        }
        return await finish(&result)
    }

    /// Whether `host` is written as an address (four decimal bytes, or IPv6 with colons), not a name.
    public static func isNumericAddress(_ host: String) -> Bool {
        let parts = host.split(separator: ".")
        if parts.count == 4, parts.allSatisfy({ UInt8($0) != nil }) { return true }
        return host.contains(":")
    }
}

/// What the scan has seen: the state behind the waiter. One lock guards it; `pokes` wakes the waiter after
/// every change, so a change between the check and the wait is never lost.
final class ScanTracker: Sendable {
    /// `mirrorError`: the mirror said ERROR (scanState or scanError); `error`: the link ended first.
    enum Verdict: Sendable, Equatable { case complete, error(String), mirrorError(String), badUpload(String) }
    struct State {
        var armed = false
        var scanState: UInt8?
        var scanError: UInt8?
        var sawScanStateAfterArming = false
        var sawComplete = false
        var errorSeen: String?
        var upload: ReceivedUpload?
        /// Why the upload is not the result ZIP the profile expects (it fails the scan).
        var badUpload: String?
        var ended: String?
        var notifications = 0
        /// scanError when the handlers were armed: a read that still shows it is old news, not this scan's error.
        var scanErrorAtArming: UInt8?
    }
    let profile: MirrorProfile
    private let state = Lock(State())
    private let pokes: AsyncStream<Void>
    private let poke: AsyncStream<Void>.Continuation

    init(profile: MirrorProfile) {
        self.profile = profile
        (pokes, poke) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
    }

    var snapshot: State { state.withLock { $0 } }

    func arm() {
        state.withLock { s in
            s.armed = true
            s.scanErrorAtArming = s.scanError
        }
        poke.yield()
    }

    func read(_ name: String, _ value: [UInt8]) {
        guard let b = value.first else { return }
        state.withLock { s in
            if name == "scanState" { s.scanState = b } else if name == "scanError" { s.scanError = b }
        }
    }

    /// A read after the writes: judged like a notification, but not counted as one.
    func readAfterArming(_ name: String, _ value: [UInt8]) { observe(name, value, notification: false) }

    func notified(_ name: String?, _ value: [UInt8]) { observe(name, value, notification: true) }

    private func observe(_ name: String?, _ value: [UInt8], notification: Bool) {
        state.withLock { s in
            if notification { s.notifications += 1 }
            guard let b = value.first else { return }
            switch name {
            case "scanState"?:
                s.scanState = b
                guard s.armed else { return }
                if notification { s.sawScanStateAfterArming = true }
                if profile.scanStateName(b) == "complete" { s.sawComplete = true }
                if profile.scanStateName(b) == "error" && s.errorSeen == nil {
                    s.errorSeen = "scanState error (scanError \(s.scanError.map(profile.scanErrorName) ?? "not seen"))"
                }
            case "scanError"?:
                s.scanError = b
                let n = profile.scanErrorName(b)
                guard s.armed, n != "invalid", n != "noError" else { return }
                if !notification && b == s.scanErrorAtArming { return }
                if s.errorSeen == nil { s.errorSeen = "scanError \(n) (\(ATTHex.short(b)))" }
            default: return
            }
        }
        poke.yield()
    }

    func uploaded(_ event: UploadEvent, scanID: String) {
        guard case .received(let upload) = event, upload.scanID == scanID else { return }
        state.withLock { s in
            s.upload = upload
            if let problem = upload.zipProblem { s.badUpload = "the upload (\(upload.bytes) bytes, \(upload.path)) is not the expected result ZIP: \(problem)" }
        }
        poke.yield()
    }

    func ended(_ reason: String) {
        state.withLock { $0.ended = reason }
        poke.yield()
    }

    private func verdict() -> Verdict? {
        state.withLock { s in
            guard s.armed else { return nil }
            if let bad = s.badUpload { return .badUpload(bad) }
            if let e = s.errorSeen { return .mirrorError(e) }
            if s.sawComplete && s.upload != nil { return .complete }
            if let ended = s.ended { return .error("disconnected while waiting: \(ended)") }
            return nil
        }
    }

    /// Waits until the scan completes (COMPLETE and the upload) or fails; ends early when cancelled.
    func waitForVerdict() async throws -> Verdict {
        if let v = verdict() { return v }
        for await _ in pokes {
            if let v = verdict() { return v }
        }
        throw CancellationError()
    }
}

extension MirrorScan {
    /// The address a mirror on the local network can post to: this machine's first IPv4 address that is not
    /// loopback (nil when it has none: then `--upload-host` must say it).
    public static func defaultUploadHost() -> String? {
        localIPv4Addresses().first { a in
            let parts = a.split(separator: ".")
            return parts.count == 4 && parts.allSatisfy { UInt8($0) != nil } && !a.hasPrefix("127.")
        }
    }

    /// Why the upload's addresses cannot be used: no host to post to, or an address the receiver cannot bind.
    public enum UploadAddressProblem: Error, Equatable {
        /// No host given, and this machine has no IPv4 address the mirror could post to.
        case noHost
        /// The bind address given is not numeric.
        case bindNotNumeric(String)
        /// No bind address given, and the host, which the receiver then binds, is not numeric.
        case hostNotNumeric(String)
    }

    /// Where the mirror posts (`host`, else 127.0.0.1 for a simulator on a unix: socket, else `defaultHost`) and
    /// the address the receiver binds (`bind`, else the host): libmicrohttpd binds a numeric address, not a name.
    public static func uploadAddresses(host: String?, bind: String?, overUnixSocket: Bool,
                                       defaultHost: () -> String? = defaultUploadHost) -> Result<(host: String, bind: String?), UploadAddressProblem> {
        guard let host = host ?? (overUnixSocket ? "127.0.0.1" : defaultHost()) else { return .failure(.noHost) }
        if let bind, !isNumericAddress(bind) { return .failure(.bindNotNumeric(bind)) }
        if bind == nil, !isNumericAddress(host) { return .failure(.hostNotNumeric(host)) }
        return .success((host, bind))
    }
}
