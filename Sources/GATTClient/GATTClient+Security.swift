// The link's security (Core Spec 5.4 Vol 3 Part C §10.2) and the retry after an insufficient-security error.
import ATTStack
import LinkCore
import GATTVocabulary

extension GATTClient {
    // MARK: - Security

    /// The link's security level as this client last set it.
    public var securityLevel: BTSecurityLevel { security.withLock { $0.level } }

    /// Raises (or sets) the link's security level through `Configuration.setSecurityLevel` (the bearer's BT_SECURITY).
    public func setSecurityLevel(_ level: BTSecurityLevel) async throws(GATTError) {
        try await onLinkLoop { () async throws(GATTError) -> Void in
            guard let hook = configuration.setSecurityLevel else {
                throw .unsupported("this transport (\(label)) cannot change the link's security level")
            }
            // Counted before the hook: pairing starts inside it, and a request that meets it must see the raise.
            security.withLock { $0.raises += 1 }
            do {
                try await hook(level)
            } catch {
                throw GATTError.from(error, operation: "setting the link's security level to \(level)")
            }
            security.withLock { $0.level = level }
        }
    }

    /// True when an Insufficient Authentication / Encryption error can be retried after raising the security level.
    var canRetryAfterRaisingSecurity: Bool { configuration.retryAfterRaisingSecurity && configuration.setSecurityLevel != nil }

    /// Runs `body` and, on Insufficient Authentication / Encryption / Encryption Key Size from the peer, raises the
    /// level once and retries once (when `retryAfterRaisingSecurity` and a security hook are configured).
    nonisolated(nonsending) func withSecurityRetry<T: Sendable>(_ body: nonisolated(nonsending) () async throws(GATTError) -> T) async throws(GATTError) -> T {
        let raisesBefore = security.withLock { $0.raises }
        do {
            return try await body()
        } catch {
            // Requests in parallel on several bearers: another one raised the level. A send refused with ENOTCONN
            // after any raise met the pairing it started; an insufficient-security answer to a request in flight
            // across a raise predates it. Either goes again once the link takes data, without raising again.
            let (level, raises) = security.withLock { ($0.level, $0.raises) }
            if canRetryAfterRaisingSecurity,
               (error.isNotConnectedSend && raises > 0)
                || (raises != raisesBefore && error.attributeError.map({ $0.rejectedBy == .peer && Self.isInsufficientSecurity($0.code) }) == true) {
                return try await retryWhilePairing(after: level, body)
            }
            guard canRetryAfterRaisingSecurity, let a = error.attributeError, a.rejectedBy == .peer else { throw error }
            let current = securityLevel
            let target: BTSecurityLevel
            switch a.code {
            case .insufficientEncryption, .encryptionKeySizeTooShort:
                // At the level already: the answer predates the encryption the connect asked for (a peer's SMP can
                // finish after the kernel passes ATT, Vol 3 Part C §10.2); asking again holds sends until it is done.
                target = current < .medium ? .medium : current
            case .insufficientAuthentication:
                if current < .medium { target = .medium } else if current < .high { target = .high } else { throw error }
            default:
                throw error
            }
            if let limit = configuration.raiseLimit, target > limit { throw error }
            try await setSecurityLevel(target)
            return try await retryWhilePairing(after: target, body)
        }
    }

    /// The answers a raise of the link's security level can cure (Vol 3 Part F §3.4.1.1).
    static func isInsufficientSecurity(_ code: ATTErrorCode) -> Bool {
        code == .insufficientEncryption || code == .encryptionKeySizeTooShort || code == .insufficientAuthentication
    }

    /// How many sends that fail with ENOTCONN right after a raise are retried, each after a wait for POLLOUT.
    static let pairingSendRetries = 3

    /// The retry after raising the security level. While the pairing that BT_SECURITY started runs, the kernel keeps
    /// the socket in BT_CONFIG: sends fail with ENOTCONN and POLLOUT does not come until the link is encrypted (or
    /// lost). So a send that fails with ENOTCONN here waits for POLLOUT, at most the transaction timeout (named), and
    /// goes again, at most `pairingSendRetries` times; any other outcome is the caller's.
    nonisolated(nonsending) func retryWhilePairing<T: Sendable>(after level: BTSecurityLevel, _ body: nonisolated(nonsending) () async throws(GATTError) -> T) async throws(GATTError) -> T {
        var retries = 0
        while true {
            do {
                return try await body()
            } catch {
                guard error.isNotConnectedSend, retries < Self.pairingSendRetries else { throw error }
                retries += 1
                try await waitForTheLink(after: level)
            }
        }
    }

    /// Waits for POLLOUT on the transport after a raise to `level`: the link takes data again once pairing is
    /// done. A wake-up that was the link's end throws `.disconnected` naming the raise. Bounded by the transaction timeout.
    public func waitForTheLink(after level: BTSecurityLevel) async throws(GATTError) {
        try await onLinkLoop { () async throws(GATTError) -> Void in
            let what = "the link to take data again after raising security to \(level) (pairing)"
            let transport = engine.transport
            do {
                try await withDeadline(configuration.transactionTimeout, waitingFor: what,
                                       clock: configuration.clock) {
                    let once = OnceBox<Void>()
                    transport.whenWritable { once.finish(.success(())) }
                    try await once.value()
                }
            } catch {
                throw GATTError.from(error, operation: "waiting for \(what)")
            }
            // A wake-up that was the link's end is no link taking data: on a socket whose link is gone the kernel
            // takes BT_SECURITY and starts nothing (l2cap_sock.c), so only this says the raise failed.
            if let ended = engine.state.access({ $0.closedReason }) {
                throw .disconnected(GATTDisconnectedError(reason: ended, during: "the pairing raising the link's security to \(level)"))
            }
        }
    }
}
