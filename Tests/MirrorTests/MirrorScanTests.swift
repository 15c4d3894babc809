// `mirror scan` against the simulator over unix: sockets: the known failures of real mirrors as regression tests.
import TestSupport
import ATTStack
import Foundation
import GATTClient
@testable import Mirror
import MirrorSimulator
import LinkCore
import XCTest

final class MirrorScanTests: XCTestCase {
    func testCompleteScanReceivesAndChecksTheZIP() async throws {
        let h = try SimHarness()
        defer { h.stop() }
        let client = try await h.connect()
        let log = EventLog()
        let r = try await MirrorScan.run(client: client, options: h.scanOptions(), emit: log.emit)
        XCTAssertEqual(r.outcome, .complete, r.failure ?? "")
        XCTAssertEqual(r.scanState, "complete")
        XCTAssertEqual(r.scanError, "noError")
        XCTAssertTrue(r.finalRead)
        XCTAssertTrue(r.sawAnyScanState)
        XCTAssertEqual(r.preflightScanState, "invalid")
        XCTAssertFalse(r.resetAttempted)
        XCTAssertNil(r.resetWorked)
        XCTAssertLessThan(r.seconds, 5)
        let upload = try XCTUnwrap(r.upload)
        XCTAssertEqual(upload.entries?.map(\.name), ["mesh.ply", "measurements.json"])
        let zip = try [UInt8](Data(contentsOf: URL(fileURLWithPath: upload.path)))
        XCTAssertEqual(zip.count, upload.bytes)
        XCTAssertEqual(SHA256.hex(of: zip), upload.sha256)
        let json = try ZIPArchive.contents(of: upload.entries![1], in: zip)
        // The simulator names what it posts by the URL's last component (it never sees the scan ID).
        let secret = String(r.uploadURL.split(separator: "/").last ?? "")
        XCTAssertTrue(String(decoding: json, as: UTF8.self).contains(#""scanID":"\#(secret)""#))
        XCTAssertTrue(String(decoding: try ZIPArchive.contents(of: upload.entries![0], in: zip), as: UTF8.self).hasPrefix("ply\n"))
        // http://127.0.0.1:PORT/ (23 bytes with an ephemeral port) and a secret that fills the bundled profile's 40
        // bytes: 17 base64url characters, 102 bits; no scan ID.
        XCTAssertEqual(r.uploadURL, "http://127.0.0.1:\(URL(string: r.uploadURL)!.port!)/\(secret)")
        XCTAssertEqual(secret.count, 40 - "http://127.0.0.1:\(URL(string: r.uploadURL)!.port!)/".utf8.count)
        XCTAssertEqual(r.uploadURL.utf8.count, 40)
        XCTAssertFalse(r.uploadURL.contains(r.scanID))
        XCTAssertLessThanOrEqual(r.uploadURL.utf8.count, MirrorProfile.bundled.cloudTokenMaxLength)
        XCTAssertEqual(upload.path, h.directory + "/scan-\(r.scanID).zip", "the scan ID names the file")
        // Every state ALIGN_SCALE ... COMPLETE was notified, in order.
        let states = log.all.filter { if case .notification = $0.kind { return $0.characteristic == "scanState" }; return false }.compactMap(\.decoded)
        XCTAssertEqual(states, ["alignScale", "warmingUp", "waitingForWeight", "countDown", "preCheck", "scanning", "postCheck", "complete"])
        // The receiver listened, and both subscriptions were in place, before the first write.
        let firstWrite = try XCTUnwrap(log.index { if case .write = $0.kind { return true }; return false })
        let listening = try XCTUnwrap(log.index { $0.kind == .uploadListening })
        let subscribed = log.all.enumerated().filter { if case .subscribed = $0.element.kind { return true }; return false }.map(\.offset)
        XCTAssertLessThan(listening, firstWrite)
        XCTAssertEqual(subscribed.count, 2)
        XCTAssertTrue(subscribed.allSatisfy { $0 < firstWrite })
        client.close()
    }

    func testLatchedErrorIsResetByCancelScanAndTheScanThenCompletes() async throws {
        let h = try SimHarness { $0.initialScanState = 9; $0.initialScanError = 5 }
        defer { h.stop() }
        let client = try await h.connect()
        let r = try await MirrorScan.run(client: client, options: h.scanOptions(), emit: { _ in })
        XCTAssertEqual(r.preflightScanState, "error")
        XCTAssertTrue(r.resetAttempted)
        XCTAssertEqual(r.resetWorked, true)
        XCTAssertEqual(r.outcome, .complete, r.failure ?? "")
    }

    /// A mirror latched at ERROR that cancelScan cannot clear. initDeviceForScan changes nothing, so
    /// nothing is notified: the scan must still end, with the truth from its reads, not wait 90 s.
    func testLatchedErrorThatCancelCannotClearEndsAsErrorFromTheReadsNotATimeout() async throws {
        let h = try SimHarness { $0.initialScanState = 9; $0.initialScanError = 5; $0.cancelResets = false }
        defer { h.stop() }
        let client = try await h.connect()
        let log = EventLog()
        let r = try await MirrorScan.run(client: client, options: h.scanOptions(timeout: .seconds(20)), emit: log.emit)
        XCTAssertEqual(r.preflightScanState, "error")
        XCTAssertTrue(r.resetAttempted)
        XCTAssertEqual(r.resetWorked, false)
        XCTAssertEqual(r.outcome, .error)
        XCTAssertFalse(r.sawAnyScanState, "a latched ERROR sends nothing new")
        XCTAssertEqual(r.scanState, "error")
        XCTAssertEqual(r.scanError, "processorBusy")
        XCTAssertLessThan(r.seconds, 5)
        XCTAssertEqual(log.all.filter { if case .notification = $0.kind { return true }; return false }.count, 0)
    }

    /// A misaligned scale: SCALE_ALIGNMENT arrives 60-90 ms after initDeviceForScan, before its Write Response.
    func testEarlyScaleAlignmentBeforeTheWriteResponseIsCaught() async throws {
        let h = try SimHarness { $0.scaleAligned = false }
        defer { h.stop() }
        let client = try await h.connect()
        let log = EventLog()
        let r = try await MirrorScan.run(client: client, options: h.scanOptions(), emit: log.emit)
        XCTAssertEqual(r.outcome, .error)
        XCTAssertEqual(r.scanError, "scaleAlignment")
        XCTAssertTrue(r.failure?.contains("scaleAlignment") ?? false, r.failure ?? "")
        let note = try XCTUnwrap(log.index { if case .notification = $0.kind { return $0.decoded == "scaleAlignment" }; return false })
        let actionWrite = try XCTUnwrap(log.index { if case .write = $0.kind { return $0.purpose == "initDeviceForScan" }; return false })
        let actionAnswer = try XCTUnwrap(log.index { if case .writeResult(_, nil) = $0.kind { return $0.purpose == "initDeviceForScan" }; return false })
        XCTAssertLessThan(actionWrite, note)
        XCTAssertLessThan(note, actionAnswer, "the notification came before the Write Response and was caught")
        let delay = log.all[note].time - log.all[actionWrite].time
        XCTAssertGreaterThanOrEqual(delay, 0.055)
        XCTAssertLessThan(delay, 0.5)
    }

    /// A cloudToken write while Wi-Fi is not connected latches ERROR / PROCESSOR_BUSY.
    func testCloudTokenWhileOfflineEndsAsProcessorBusy() async throws {
        let h = try SimHarness { $0.wifiConnected = false }
        defer { h.stop() }
        let client = try await h.connect()
        let r = try await MirrorScan.run(client: client, options: h.scanOptions(), emit: { _ in })
        XCTAssertEqual(r.outcome, .error)
        XCTAssertEqual(r.scanState, "error")
        XCTAssertEqual(r.scanError, "processorBusy")
        XCTAssertTrue(r.sawAnyScanState)
        // The failure names the last scanError seen (scanState ERROR is notified before its scanError: the first
        // notification said "scanError invalid"), with its meaning; the advice says what to run.
        let failure = try XCTUnwrap(r.failure)
        XCTAssertTrue(failure.hasPrefix("scanState error, scanError processorBusy (0x05): "), failure)
        XCTAssertFalse(failure.contains("invalid"), failure)
        XCTAssertEqual(r.scanErrorMeaning, ScanErrorAdvice.forName("processorBusy")?.meaning)
        XCTAssertTrue(r.advice?.contains("mirror wifi status TARGET") ?? false, r.advice ?? "no advice")
    }

    /// Every scanError the APK names that means a failure has words; invalid, noError and unknown bytes have none.
    func testScanErrorAdviceKnowsTheAPKsErrorsAndNothingElse() {
        for name in ["scaleNotDetected", "scaleNotLevel", "mirrorNotLevel", "processorBusy", "internalError", "scaleAlignment"] {
            XCTAssertNotNil(ScanErrorAdvice.forName(name), name)
        }
        for name in ["invalid", "noError", "unknown(0x07)"] { XCTAssertNil(ScanErrorAdvice.forName(name), name) }
    }

    /// Invalid Attribute Value Length from the mirror's own limit while the MTU allows the value: the scan retries once
    /// with the shortest URL (a 12-character secret), and when the mirror refuses that too the write fails as the
    /// peripheral's rejection, naming the limit it showed.
    func testTooLongCloudTokenIsClassifiedAsThePeripheralsRejection() async throws {
        let h = try SimHarness { $0.cloudTokenLimit = 30 }
        defer { h.stop() }
        let client = try await h.connect()
        let log = EventLog()
        let r = try await MirrorScan.run(client: client, options: h.scanOptions(), emit: log.emit)
        XCTAssertEqual(r.outcome, .writeFailed)
        XCTAssertEqual(r.rejectedBy, "peer")
        let failure = r.failure ?? ""
        XCTAssertTrue(failure.contains("0x0D Invalid Attribute Value Length"), failure)
        XCTAssertTrue(failure.contains("rejected it at the application layer"), failure)
        // http://127.0.0.1:NNNNN/ is 23 bytes: 40 refused, then 35 (the 12-character secret) refused too.
        XCTAssertEqual(r.cloudTokenLimit, CloudTokenLimitFound(accepted: nil, refused: 35))
        XCTAssertTrue(failure.contains("the mirror refused even the shortest upload URL (35 bytes, a 72-bit secret): its cloudToken limit is below 35 bytes"), failure)
        let tokenWrites = log.all.filter { if case .write = $0.kind { return $0.characteristic == "cloudToken" }; return false }
        XCTAssertEqual(tokenWrites.map { $0.value?.count }, [40, 35], "one retry, with the shortest URL")
        XCTAssertFalse(log.all.contains { if case .writeResult(_, nil) = $0.kind { return $0.characteristic == "cloudToken" }; return false })
        XCTAssertEqual(h.sim.snapshot.cloudToken, "")
    }

    /// Issue 34: a mirror whose firmware takes less than its profile says answers 0x0D to the 44-byte URL; the scan
    /// says so, retries once with the shortest URL that keeps a 72-bit secret, completes, and reports the limit found.
    func testAMirrorThatRefuses44BytesAlthoughItsProfileSays64TeachesTheScanItsLimit() async throws {
        let h = try SimHarness { $0.cloudTokenLimit = 40 }
        defer { h.stop() }
        let client = try await h.connect()
        var o = h.scanOptions()
        o.profile.cloudTokenMaxLength = 64
        o.uploadPort = try freeFourDigitPort()
        let log = EventLog()
        let r = try await MirrorScan.run(client: client, options: o, emit: log.emit)
        XCTAssertEqual(r.outcome, .complete, r.failure ?? "")
        // http://127.0.0.1:PPPP/ is 22 bytes: the first URL carried 22 characters (44 bytes), the retry 12 (34 bytes).
        XCTAssertEqual(r.cloudTokenLimit, CloudTokenLimitFound(accepted: 34, refused: 44))
        XCTAssertEqual(r.uploadURL.utf8.count, 34)
        XCTAssertEqual(h.sim.snapshot.cloudToken, r.uploadURL)
        XCTAssertNotNil(r.upload, "the mirror posted to the retried URL")
        let steps = log.all.filter { $0.kind == .step }.compactMap(\.detail)
        XCTAssertTrue(steps.contains { $0.hasPrefix("the mirror refused a 44-byte cloudToken with 0x0D Invalid Attribute Value Length although the profile allows 64: its real limit is lower; retrying once with the shortest URL (34 bytes, a 72-bit secret): http://127.0.0.1:\(o.uploadPort)/") }, "\(steps)")
        XCTAssertTrue(steps.contains("the mirror took 34 bytes and refused 44: its cloudToken limit is 34 to 43 bytes; put \"cloudTokenMaxLength\": 34 in the profile (--profile)"), "\(steps)")
        client.close()
    }

    /// Issue 34: the secret takes what cloudToken's limit leaves after http://HOST:PORT/, on the loopback and on an
    /// address as long as a typical LAN one (127.100.100.123 is 15 characters, as 192.168.100.123 is, and stays on
    /// this machine), at limits 40, 48 and 64; each scan completes with the URL it was given.
    func testTheSecretFillsTheLimitLeftAfterHostAndPort() async throws {
        for host in ["127.0.0.1", "127.100.100.123"] {
            for limit in [40, 48, 64] {
                let h = try SimHarness { $0.cloudTokenLimit = limit }
                defer { h.stop() }
                let client = try await h.connect()
                var o = h.scanOptions()
                o.uploadHost = host
                o.uploadPort = try freeFourDigitPort()
                o.profile.cloudTokenMaxLength = limit
                let r = try await MirrorScan.run(client: client, options: o, emit: { _ in })
                XCTAssertEqual(r.outcome, .complete, "\(host) \(limit): \(r.failure ?? "")")
                let prefix = "http://\(host):\(o.uploadPort)/"
                XCTAssertTrue(r.uploadURL.hasPrefix(prefix), r.uploadURL)
                let secret = r.uploadURL.dropFirst(prefix.count)
                XCTAssertEqual(secret.count, min(22, limit - prefix.utf8.count), "\(host) \(limit)")
                XCTAssertEqual(r.uploadURL.utf8.count, min(limit, prefix.utf8.count + 22), "\(host) \(limit)")
                XCTAssertNil(r.cloudTokenLimit)
                XCTAssertEqual(h.sim.snapshot.cloudToken, r.uploadURL)
                client.close()
            }
        }
    }

    /// The lengths and bits of the closing note's table: UploadURLBudget alone, at the issue's own addresses.
    func testUploadURLBudgetAtTheIssuesAddressesAndLimits() {
        let expected: [(String, UInt16, Int, Int?)] = [
            ("127.0.0.1", 7777, 40, 18), ("127.0.0.1", 7777, 48, 22), ("127.0.0.1", 7777, 64, 22),
            ("192.168.100.123", 7777, 40, 12), ("192.168.100.123", 7777, 48, 20), ("192.168.100.123", 7777, 64, 22),
            ("192.168.100.123", 45678, 40, nil), ("127.0.0.1", 7777, 33, nil), ("::1", 7777, 32, 14),
        ]
        for (host, port, limit, secret) in expected {
            let b = UploadURLBudget(host: host, port: port, limit: limit)
            XCTAssertEqual(b.secretCharacters, secret, "\(host):\(port) at \(limit)")
        }
        XCTAssertEqual(UploadURLBudget(host: "::1", port: 7777, limit: 40).prefix, "http://[::1]:7777/")
        XCTAssertEqual(UploadURLBudget.bits(characters: 12), 72)
        XCTAssertEqual(UploadURLBudget.bits(characters: 22), 132)
        XCTAssertEqual(UploadURLBudget(host: "192.168.100.123", port: 45678, limit: 40).shorterAdvice(host: "192.168.100.123", port: 45678),
                       "an --upload-port of at most 4 digits (7777, for example) or an --upload-host of at most 14 characters would fit")
        XCTAssertEqual(UploadURLBudget(host: "127.0.0.1", port: 7777, limit: 30).shorterAdvice(host: "127.0.0.1", port: 7777),
                       "no --upload-host or --upload-port alone makes it fit: the mirror's limit 30 leaves no room for http://HOST:PORT/ and a 72-bit secret")
        XCTAssertEqual(UploadURLBudget(host: "127.0.0.1", port: 7777, limit: 40).shorterAdvice(host: "127.0.0.1", port: 7777), "")
    }

    /// Only when even the 12-character secret does not fit is the scan refused, before any write, naming the bytes,
    /// the limit and what would fit.
    func testURLOverTheProfileLimitOrTheMTUBudgetIsRefusedBeforeSending() async throws {
        let h = try SimHarness()
        defer { h.stop() }
        let client = try await h.connect()
        var o = h.scanOptions()
        o.uploadHost = "192.168.100.100"
        o.bindHost = "127.0.0.1"
        o.uploadPort = 0
        let log = EventLog()
        let r = try await MirrorScan.run(client: client, options: o, emit: log.emit)
        XCTAssertEqual(r.outcome, .writeFailed)
        XCTAssertEqual(r.rejectedBy, "local")
        // http://192.168.100.100:PORT/ (5-digit ephemeral port) is 29 bytes: with the 12-character secret 41, over 40.
        XCTAssertTrue(r.failure?.contains("not sent: the upload URL needs at least 41 bytes (http://192.168.100.100:") ?? false, r.failure ?? "")
        XCTAssertTrue(r.failure?.contains("/ is 29 bytes, and the shortest secret 12 characters, 72 bits), over the profile's cloudTokenMaxLength 40; an --upload-port of at most 4 digits (7777, for example) or an --upload-host of at most 14 characters would fit") ?? false, r.failure ?? "")
        XCTAssertNil(log.index { if case .write = $0.kind { return true }; return false }, "nothing is written")
        client.close()

        // At the default MTU 23 (no Exchange MTU), the 35-byte shortest URL breaks the 20-byte Write Request budget.
        let small = try await h.connect(exchangeMTU: false)
        let r2 = try await MirrorScan.run(client: small, options: h.scanOptions(), emit: { _ in })
        XCTAssertEqual(r2.outcome, .writeFailed)
        XCTAssertTrue(r2.failure?.contains("needs at least 35 bytes") ?? false, r2.failure ?? "")
        XCTAssertTrue(r2.failure?.contains("the 20-byte Write Request budget of MTU 23") ?? false, r2.failure ?? "")
        XCTAssertFalse(r2.failure?.contains("cloudTokenMaxLength") ?? true)
    }

    /// Issue 23: a body that is not the result ZIP (42 bytes of text, or a ZIP without measurements.json) fails the
    /// scan as badUpload, naming why; it used to end "complete".
    func testAnUploadThatIsNotTheExpectedZIPFailsTheScan() async throws {
        for (kind, problem) in [(SimResult.junk, "not a readable ZIP archive: no end-of-central-directory record"),
                                (.partial, "not a readable ZIP archive: missing the expected entry measurements.json")] {
            let h = try SimHarness { $0.result = kind }
            defer { h.stop() }
            let client = try await h.connect()
            let r = try await MirrorScan.run(client: client, options: h.scanOptions(), emit: { _ in })
            XCTAssertEqual(r.outcome, .badUpload, "\(kind): \(r.failure ?? "")")
            XCTAssertTrue(r.failure?.contains("is not the expected result ZIP: \(problem)") ?? false, r.failure ?? "")
            XCTAssertEqual(r.upload?.bytes, kind == .junk ? 42 : r.upload?.bytes)
            client.close()
        }
    }

    /// Issue 23: a host name gives no address to bind; the receiver used to listen on 0.0.0.0 then.
    func testAHostNameWithoutABindAddressIsRefusedRatherThanBindingEveryAddress() async throws {
        let h = try SimHarness()
        defer { h.stop() }
        let client = try await h.connect()
        var o = h.scanOptions()
        o.uploadHost = "localhost"
        let log = EventLog()
        do {
            _ = try await MirrorScan.run(client: client, options: o, emit: log.emit)
            XCTFail("the scan started: \(log.all.compactMap(\.detail))")
        } catch let e as UploadReceiverError {
            XCTAssertTrue(e.description.contains("give --upload-bind ADDR"), e.description)
        }
        XCTAssertNil(log.index { $0.kind == .uploadListening })
        // A scan ID whose file exists already is refused before anything is sent (the file is never overwritten).
        o.bindHost = "127.0.0.1"
        o.scanID = "e00001"
        XCTAssertTrue(FileManager.default.createFile(atPath: h.directory + "/scan-e00001.zip", contents: Data("mine".utf8)))
        do {
            _ = try await MirrorScan.run(client: client, options: o, emit: log.emit)
            XCTFail("the scan started over an existing scan-e00001.zip")
        } catch let e as UploadReceiverError {
            XCTAssertEqual(e.description, "upload receiver: \(h.directory)/scan-e00001.zip exists already and is never overwritten: give another --scan-id or --upload-dir")
        }
        XCTAssertEqual(try String(contentsOfFile: h.directory + "/scan-e00001.zip", encoding: .utf8), "mine")
        o.scanID = nil
        // Asked for, it binds what it is told, and the URL still names the host.
        o.bindHost = "127.0.0.1"
        let r = try await MirrorScan.run(client: client, options: o, emit: log.emit)
        XCTAssertTrue(r.uploadURL.hasPrefix("http://localhost:"), r.uploadURL)
        let listening = try XCTUnwrap(log.all.first { $0.kind == .uploadListening })
        XCTAssertTrue(listening.detail?.hasPrefix("listening on 127.0.0.1:") ?? false, listening.detail ?? "")
        client.close()
    }

    /// A 0x31 write has a timer; the next writes land before it fires. The stale timer must
    /// not resolve the initDeviceForScan write (in flight when it fires) with a fake timeout.
    func testStaleTimerOfTheWiFiScanWriteDoesNotTouchTheScansWrite() async throws {
        // Transaction timeout 1 s. The Wi-Fi list writes 0x31 at t0: its timer would fire at t0+1 s.
        // The scan's cloudToken answer is 250 ms late, and initDeviceForScan's 900 ms late: that write is in
        // flight from about t0+0.3 s to t0+1.2 s, across t0+1 s, and within its own 1 s limit.
        let faults = [try SimFault(parsing: "delay:cloudToken:250"), try SimFault(parsing: "delay:scannerAction:900@2")]
        let h = try SimHarness { $0.faults = faults }
        defer { h.stop() }
        let client = try await h.connect(timeout: .seconds(1))
        let t0 = ContinuousClock.now
        let ssids = try await MirrorWiFi.list(client: client, profile: .bundled)
        XCTAssertEqual(ssids, ["mirror-lab", "HomeNet-5G", "Guest"])
        let log = EventLog()
        let r = try await MirrorScan.run(client: client, options: h.scanOptions(), emit: log.emit)
        XCTAssertEqual(r.outcome, .complete, r.failure ?? "")
        let write = try XCTUnwrap(log.all.first { if case .write = $0.kind { return $0.purpose == "initDeviceForScan" }; return false })
        let answer = try XCTUnwrap(log.all.first { if case .writeResult = $0.kind { return $0.purpose == "initDeviceForScan" }; return false })
        XCTAssertEqual(answer.kind, .writeResult(handle: h.sim.valueHandle("scannerAction")!, error: nil))
        // The write really was in flight when the Wi-Fi list write's timer would have fired.
        let scanStart = (ContinuousClock.now - t0) - .seconds(r.seconds)
        let sent = scanStart + .seconds(write.time), answered = scanStart + .seconds(answer.time)
        XCTAssertLessThan(sent, .seconds(1), "the initDeviceForScan write went out before t0+1 s")
        XCTAssertGreaterThan(answered, .seconds(1), "and was answered after it")
    }

    func testTimeoutIsNamedAndTheFinalReadStillHappens() async throws {
        let h = try SimHarness { $0.timings.scanStepMilliseconds = 10_000 }
        defer { h.stop() }
        let client = try await h.connect()
        let r = try await MirrorScan.run(client: client, options: h.scanOptions(timeout: .milliseconds(300)), emit: { _ in })
        XCTAssertEqual(r.outcome, .timeout)
        XCTAssertTrue(r.failure?.hasPrefix("timed out after") ?? false, r.failure ?? "")
        XCTAssertTrue(r.failure?.contains("waiting for scanState complete and the upload of scan \(r.scanID), or error") ?? false, r.failure ?? "")
        XCTAssertTrue(r.finalRead)
        XCTAssertEqual(r.scanState, "invalid")
        XCTAssertEqual(r.scanError, "noError")
    }

    func testAFinalReadThatGetsNoAnswerEndsAtTheATTTimeoutAndTheScanStillReports() async throws {
        // The scan times out; then its final read of scanState (the fourth request on it) is never answered.
        let h = try SimHarness { $0.faults = [try! SimFault(parsing: "drop:scanState@4")]; $0.timings.scanStepMilliseconds = 10_000 }
        defer { h.stop() }
        let client = try await h.connect(timeout: .milliseconds(400))
        let details = Lock<[String]>([])
        let r = try await MirrorScan.run(client: client, options: h.scanOptions(timeout: .milliseconds(300)), emit: { e in
            if let d = e.detail { details.withLock { $0.append(d) } }
        })
        XCTAssertEqual(r.outcome, .timeout)
        XCTAssertFalse(r.finalRead)
        XCTAssertTrue(details.current.contains { $0.hasPrefix("final read failed: timed out after 400 ms waiting for Read Response") }, "\(details.current)")
    }

    func testAnInterruptedScanWhoseCancelScanIsNeverAnsweredEndsAtItsLimit() async throws {
        // The second scannerAction write (the interrupt's cancelScan, after initDeviceForScan) is never answered.
        let h = try SimHarness { $0.faults = [try! SimFault(parsing: "drop:scannerAction@2")]; $0.timings.scanStepMilliseconds = 10_000 }
        defer { h.stop() }
        let client = try await h.connect(timeout: .seconds(1))
        var options = h.scanOptions(timeout: .seconds(30))
        options.cancelScanLimit = .milliseconds(200)
        let waiting = OnceBox<Void>()
        let details = Lock<[String]>([])
        let task = Task {
            try await MirrorScan.run(client: client, options: options, emit: { e in
                if let d = e.detail { details.withLock { $0.append(d) } }
                if case .step = e.kind, e.detail?.hasPrefix("waiting up to") == true { waiting.finish(.success(())) }
            })
        }
        try await waiting.value()
        task.cancel()
        let r = try await task.value
        XCTAssertEqual(r.outcome, .interrupted)
        XCTAssertEqual(r.cancelScanSent, false)
        XCTAssertTrue(details.current.contains { $0.contains("timed out after 200 ms waiting for the Write Response to cancelScan") }, "\(details.current)")
    }

    func testDroppedResponseAndDisconnectDuringTheActionWriteAreWriteFailures() async throws {
        let drop = try SimFault(parsing: "drop:scannerAction")
        let h = try SimHarness { $0.faults = [drop] }
        defer { h.stop() }
        let client = try await h.connect(timeout: .milliseconds(400))
        let r = try await MirrorScan.run(client: client, options: h.scanOptions(), emit: { _ in })
        XCTAssertEqual(r.outcome, .writeFailed)
        XCTAssertTrue(r.failure?.contains("timed out after") ?? false, r.failure ?? "")
        XCTAssertFalse(r.finalRead, "an ATT timeout ends the bearer: no final read")

        let cut = try SimFault(parsing: "disconnect:scannerAction")
        let h2 = try SimHarness { $0.faults = [cut] }
        defer { h2.stop() }
        let client2 = try await h2.connect()
        let r2 = try await MirrorScan.run(client: client2, options: h2.scanOptions(), emit: { _ in })
        XCTAssertEqual(r2.outcome, .writeFailed)
        XCTAssertTrue(r2.failure?.contains("disconnected") ?? false, r2.failure ?? "")
    }

    func testRebootDropsTheConnectionAndTheMirrorComesBackClean() async throws {
        let h = try SimHarness { $0.initialScanState = 9; $0.initialScanError = 5 }
        defer { h.stop() }
        let client = try await h.connect()
        let action = h.sim.valueHandle("scannerAction")!
        try await client.write(handle: action, value: [0x33])
        do {
            _ = try await client.read(handle: h.sim.valueHandle("scanState")!)
            // The read may beat the reboot's disconnect (20 ms after the write); the next one, once it came, cannot.
            for _ in 0..<500 where !client.isClosed { try await Task.sleep(for: .milliseconds(10)) }
            _ = try await client.read(handle: h.sim.valueHandle("scanState")!)
            XCTFail("the connection should have dropped")
        } catch let e as GATTError {
            guard case .disconnected = e else { return XCTFail("\(e)") }
        }
        let again = try await h.connect()
        let v1 = try await again.read(handle: h.sim.valueHandle("scanState")!)
        XCTAssertEqual(v1, [0])
        let v2 = try await again.read(handle: h.sim.valueHandle("scanError")!)
        XCTAssertEqual(v2, [0])
    }

    func testWiFiListJoinAndStatus() async throws {
        let h = try SimHarness { $0.wifiConnected = false; $0.networks = ["alpha", "beta-5G", "gamma"] }
        defer { h.stop() }
        let client = try await h.connect()
        let v3 = try await MirrorWiFi.status(client: client, profile: .bundled)
        XCTAssertEqual(v3.status, "notConnected")
        let v4 = try await MirrorWiFi.list(client: client, profile: .bundled)
        XCTAssertEqual(v4, ["alpha", "beta-5G", "gamma"])
        let log = EventLog()
        let joined = try await MirrorWiFi.join(client: client, profile: .bundled, ssid: "beta-5G", emit: log.emit)
        XCTAssertEqual(joined.status, "connected")
        let seen = log.all.filter { if case .notification = $0.kind { return true }; return false }.compactMap(\.decoded)
        XCTAssertEqual(seen, ["connecting", "connected"])
        let status = try await MirrorWiFi.status(client: client, profile: .bundled)
        XCTAssertEqual(status.status, "connected")
        XCTAssertEqual(status.ssid, "beta-5G")
        let v5 = try await MirrorWiFi.join(client: client, profile: .bundled, ssid: "nowhere")
        XCTAssertEqual(v5.status, "failed")
        // Once online, a scan completes.
        let v6 = try await MirrorWiFi.join(client: client, profile: .bundled, ssid: "alpha")
        XCTAssertEqual(v6.status, "connected")
        let r = try await MirrorScan.run(client: client, options: h.scanOptions(), emit: { _ in })
        XCTAssertEqual(r.outcome, .complete, r.failure ?? "")
    }

    func testAMissingCharacteristicIsNamed() async throws {
        var profile = MirrorProfile.bundled
        profile.characteristics["scanError"] = BluetoothUUID(string: "6d697272-6f72-7369-6d00-0000000000ff")!
        let h = try SimHarness()
        defer { h.stop() }
        let client = try await h.connect()
        var o = h.scanOptions()
        o.profile = profile
        do {
            _ = try await MirrorScan.run(client: client, options: o, emit: { _ in })
            XCTFail("expected an error")
        } catch {
            XCTAssertTrue("\(error)".contains("has no scanError characteristic"), "\(error)")
        }
    }
}

final class ScanTrackerTests: XCTestCase {
    /// A scanError left from before the scan (read after the writes, unchanged) is old news; a notification
    /// after arming, or a changed value, is this scan's error; scanState error read after the writes is an error.
    func testOnlyNewsAfterArmingDecides() async throws {
        let t = ScanTracker(profile: .bundled)
        t.read("scanError", [5])
        t.arm()
        t.readAfterArming("scanError", [5])
        t.readAfterArming("scanState", [1])
        XCTAssertEqual(t.snapshot.errorSeen, nil)
        t.readAfterArming("scanError", [11])
        XCTAssertEqual(t.snapshot.errorSeen, "scanError scaleAlignment (0xb)")
        let verdict = try await t.waitForVerdict()
        XCTAssertEqual(verdict, .mirrorError("scanError scaleAlignment (0xb)"))

        let u = ScanTracker(profile: .bundled)
        u.notified("scanState", [9])           // before arming: the pre-flight's business, not a verdict
        u.arm()
        XCTAssertNil(u.snapshot.errorSeen)
        XCTAssertFalse(u.snapshot.sawScanStateAfterArming)
        u.notified("scanState", [8])
        XCTAssertTrue(u.snapshot.sawComplete)
        u.uploaded(.received(ReceivedUpload(scanID: "other", path: "/x", bytes: 1, sha256: "", entries: nil, zipProblem: nil, framing: "chunked")), scanID: "abc")
        XCTAssertNil(u.snapshot.upload, "an upload for another scan ID does not count")
        u.uploaded(.received(ReceivedUpload(scanID: "abc", path: "/x", bytes: 1, sha256: "", entries: nil, zipProblem: nil, framing: "chunked")), scanID: "abc")
        let done = try await u.waitForVerdict()
        XCTAssertEqual(done, .complete)
    }
}

/// A TCP port of four digits that nothing listens on now, so that an upload URL's length is known in advance
/// (the ephemeral ports are five digits).
func freeFourDigitPort() throws -> UInt16 {
    for _ in 0..<200 {
        let port = UInt16.random(in: 2000...9999)
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { continue }
        defer { close(fd) }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = port.bigEndian
        addr.sin_addr.s_addr = 0
        let bound = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        if bound == 0 { return port }
    }
    throw POSIXError(.EADDRINUSE)

    /// The upload's addresses: the host given, else 127.0.0.1 over unix:, else this machine's; the receiver binds
    /// the bind address given, else the host, and either must be numeric.
    func testTheUploadAddressesAndWhatTheReceiverBinds() {
        func addresses(_ host: String?, _ bind: String?, unix: Bool = false, local: String? = "192.168.1.23") -> Result<(host: String, bind: String?), MirrorScan.UploadAddressProblem> {
            MirrorScan.uploadAddresses(host: host, bind: bind, overUnixSocket: unix, defaultHost: { local })
        }
        XCTAssertEqual(try addresses(nil, nil, unix: true).get().host, "127.0.0.1")
        XCTAssertEqual(try addresses(nil, nil).get().host, "192.168.1.23")
        XCTAssertEqual(try addresses("10.0.0.2", nil).get().host, "10.0.0.2")
        XCTAssertEqual(try addresses("mirror-host.local", "0.0.0.0").get().bind, "0.0.0.0")
        XCTAssertThrowsError(try addresses(nil, nil, local: nil).get()) { XCTAssertEqual($0 as? MirrorScan.UploadAddressProblem, .noHost) }
        XCTAssertThrowsError(try addresses("mirror-host.local", nil).get()) {
            XCTAssertEqual($0 as? MirrorScan.UploadAddressProblem, .hostNotNumeric("mirror-host.local"))
        }
        XCTAssertThrowsError(try addresses("10.0.0.2", "localhost").get()) {
            XCTAssertEqual($0 as? MirrorScan.UploadAddressProblem, .bindNotNumeric("localhost"))
        }
    }
}
