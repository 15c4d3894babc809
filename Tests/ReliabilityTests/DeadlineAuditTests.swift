// The named-deadline audit: every place the code waits (a continuation, an async stream, a task's value, a poll, a
// sleep) is in a known list that says what bounds it, and the test named for each limit runs into it: it watches
// the limit's WaitLimit identifier and asserts it fired. A new wait fails the audit until it is listed here.
import TestSupport
import ATTStack
import LinuxBluetooth
import LinkCore
import Foundation
import GATTClient
import GATTServer
import HostilePeer
import Mirror
import MirrorSimulator
import XCTest

/// One known wait: where it is (a file and a snippet of its line), what bounds it, and the test that triggers the bound.
struct KnownWait {
    var file: String
    var snippet: String
    var bound: String
    /// "TestClass.testName": a test that runs into the bound and checks the message.
    var trigger: String
    /// The WaitLimit identifier recorded when the bound gives up; the trigger test asserts it fired. Nil for a wait
    /// with no limit of its own (a sleep, a helper, a wait ended by close or cancellation): its bound says what ends it.
    var fires: String? = nil
}

let knownWaits: [KnownWait] = [
    KnownWait(file: "Sources/Conformance/ATTProbe.swift", snippet: "await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in",
              bound: "mirror check's wait for the server's next PDU (ATTProbe.awaitInbound): its deadline on the monotonic clock (the ATT transaction timeout, --timeout, for a request: \"no answer to ... in N s\", the check stops; a quiet period's end), or the transport's close",
              trigger: "CheckCommandTests.testALateResponseStopsTheCheckAtTheTransactionTimeout", fires: "check.response"),
    KnownWait(file: "Sources/LineEditor/LineEditor.swift", snippet: "cbz_poll_two(0, CBZ_POLLIN, wake, CBZ_POLLIN, millisecondsLeft(deadline), &rIn, &rWake)",
              bound: "LineEditor.readEvent at a terminal: the user's line, unbounded by default but stop() (its eventfd) ends it, or readEvent(timeout:), then \"timed out after N waiting for a line at the prompt\"",
              trigger: "LineEditorTests.testTheWaitAtATerminalPromptTimesOutNamingWhatItWaitedFor", fires: "lineEditor.prompt"),
    KnownWait(file: "Sources/LineEditor/LineEditor.swift", snippet: "cbz_poll_two(0, CBZ_POLLIN, wake, CBZ_POLLIN, millisecondsLeft(deadline), &rInput, &rWake)",
              bound: "LineEditor.readEvent off a terminal: the next line of input, unbounded by default but stop() (its eventfd) ends it, or readEvent(timeout:), then \"timed out after N waiting for a line of input\"",
              trigger: "LineEditorTests.testTheWaitForPlainInputTimesOutNamingWhatItWaitedFor", fires: "lineEditor.input"),
    KnownWait(file: "Sources/GATTClient/Engine/RequestSlot.swift", snippet: "try await _unsafeInheritExecutor_withUnsafeThrowingContinuation { u in",
              bound: "the ATT transaction timeout (Configuration.transactionTimeout, 30 s by default): every request, so MTU, each procedure, the subscription's CCCD write and first read",
              trigger: "DeadlineAuditTests.testEveryRequestOfEveryProcedureTimesOutNamingItsResponse", fires: "att.transaction"),
    KnownWait(file: "Sources/GATTClient/Engine/WriteWithoutResponse.swift", snippet: "withEngineContinuation { (c: EngineContinuation<Void>)",
              bound: "a permit for write without response: its `timeout`, by default the transaction timeout",
              trigger: "DeadlineAuditTests.testAPermitWaitTimesOutNamingThePermitWithAndWithoutALimit", fires: "att.permit"),
    KnownWait(file: "Sources/GATTClient/Once.swift", snippet: "withEngineContinuation { (c: EngineContinuation<T>)",
              bound: "OnceBox: resumed by whichever comes first of its callback, its deadline (withDeadline, sleep) or cancellation",
              trigger: "ClockAndOnceTests.testNamedDeadlineForACallbackThatNeverComesAndOneThatComesLate", fires: "withDeadline"),
    KnownWait(file: "Sources/GATTClient/Once.swift", snippet: "try await once.value()",
              bound: "withDeadline(limit, waitingFor:): the named limit",
              trigger: "DeadlineAuditTests.testWithDeadlineNamesWhatItWaitedFor", fires: "withDeadline"),
    KnownWait(file: "Sources/GATTClient/Once.swift", snippet: "try await once.value()",
              bound: "clock.sleep(until:): the wake-up at its own deadline (the wait is the deadline)",
              trigger: "ClockAndOnceTests.testSleepOnManualClockEndsWhenTimeIsAdvanced"),
    KnownWait(file: "Sources/TestSupport/ManualClock.swift", snippet: "try? await once.value()",
              bound: "ManualClock.waitForPendingWakeups: a test clock's helper; the test's own limit bounds it",
              trigger: "ClockAndOnceTests.testManualClockWakesSleepersInDeadlineOrderWhenAdvanced"),
    KnownWait(file: "Sources/Mirror/ScanProcedure.swift", snippet: "for try await n in notifications {",
              bound: "the scan's notification logger: a background task cancelled when the scan returns (defer listener.cancel())",
              trigger: "MirrorScanTests.testTimeoutIsNamedAndTheFinalReadStillHappens"),
    KnownWait(file: "Sources/Mirror/ScanProcedure.swift", snippet: "for await _ in pokes",
              bound: "the scan's verdict (COMPLETE and the upload, or ERROR): withDeadline(options.timeout, waitingFor: \"scanState complete and the upload ...\")",
              trigger: "MirrorScanTests.testTimeoutIsNamedAndTheFinalReadStillHappens", fires: "scan.verdict"),
    KnownWait(file: "Sources/Mirror/ScanProcedure.swift", snippet: "try await MonotonicClock().sleep(for: options.settle)",
              bound: "a fixed settle pause (options.settle): the wait is its own limit",
              trigger: "MirrorScanTests.testTimeoutIsNamedAndTheFinalReadStillHappens"),
    KnownWait(file: "Sources/Mirror/WiFiProcedures.swift", snippet: "for try await n in stream",
              bound: "the Wi-Fi join: withDeadline(timeout, waitingFor: \"wifiConnectionStatus connected or failed after joining SSID\")",
              trigger: "DeadlineAuditTests.testWiFiWaitsTimeOutNamingWhatTheyWaitedFor", fires: "wifi.join"),
    KnownWait(file: "Sources/MirrorCommandLine/Session/Session.swift", snippet: "for try await n in stream",
              bound: "mirror listen: by design until --count, Ctrl-C (cancellation) or the link ends (the stream then throws the disconnect)",
              trigger: "HostileScenarioTests.testANotificationStreamEndsWhenThePeerClosesMidListen"),
    KnownWait(file: "Sources/MirrorCommandLine/Commands/ShellCommand.swift", snippet: "for try await n in stream {",
              bound: "a mirror shell background subscription: by design until unsubscribe, disconnect, the shell's end (its task cancelled) or the link ends (the stream then throws the disconnect)",
              trigger: "ShellTests.testSeveralSubscriptionsAtOnce"),
    KnownWait(file: "Sources/MirrorCommandLine/Commands/ShellCommand.swift", snippet: "await withCheckedContinuation { (continuation: CheckedContinuation<T, Never>) in",
              bound: "BlockingThread.run: the shell's LineEditor.readEvent on the shell's one blocking thread, bounded as that read is (the user's line or the input's end; stop() ends it)",
              trigger: "ShellTests.testATerminalSessionReadsCancelsAListenAndQuits"),
    KnownWait(file: "Sources/MirrorCommandLine/Commands/ShellCommand.swift", snippet: "let job = jobs.wait(until: { s -> (@Sendable () -> Void)? in s.queue.isEmpty ? nil : s.queue.removeFirst() })",
              bound: "BlockingThread.serve: the shell's blocking thread waits for its next call by design, for the process's life (it only serves)",
              trigger: "ShellTests.testATerminalSessionReadsCancelsAListenAndQuits"),
    KnownWait(file: "Sources/MirrorCommandLine/Interrupts.swift", snippet: "return try await task.value",
              bound: "an interruptible command's task (mirror listen, scan): ends with the command; SIGINT/SIGTERM cancel it",
              trigger: "HostileCLITests.testListenDuringANotificationFloodStopsAtItsCount"),
    KnownWait(file: "Sources/MirrorCommandLine/Runner.swift", snippet: "try? await MonotonicClock().sleep(for: .milliseconds(Int64((limit * 1000).rounded())))",
              bound: "a mirror shell line's --timeout S: the limit itself; the command is cancelled and the line fails with \"timed out after S waiting for COMMAND to finish (the line's --timeout)\"",
              trigger: "ScriptDrivingTests.testALinesTimeoutBoundsThatCommandOnly", fires: "shell.lineTimeout"),
    KnownWait(file: "Sources/MirrorCommandLine/Session/Session.swift", snippet: "try? await MonotonicClock().sleep(for: limit)",
              bound: "mirror listen --duration S: the duration itself, then the stream is finished and listen ends with its summary",
              trigger: "ScriptDrivingTests.testListenDurationEndsWithTheSummaryAndSaysWhenItIsArmed", fires: "listen.duration"),
    KnownWait(file: "Sources/MirrorCommandLine/Commands/ShellCommand.swift", snippet: "do { try await MonotonicClock().sleep(",
              bound: "the shell's sleep S: S itself; Ctrl-C cancels it (\"cancelled: sleep S\")",
              trigger: "ScriptDrivingTests.testShellWaitCountsTheValueAWriteTriggeredAndTimesOutWhenNoneComes"),
    KnownWait(file: "Sources/MirrorCommandLine/Commands/ShellCommand.swift", snippet: "try? await MonotonicClock().sleep(for: .milliseconds(Int64((seconds * 1000).rounded())))",
              bound: "the shell's wait: --timeout S (default the connection's, 30 s), then \"timed out after S waiting for N values of the background subscriptions (M came)\"",
              trigger: "ScriptDrivingTests.testShellWaitCountsTheValueAWriteTriggeredAndTimesOutWhenNoneComes", fires: "shell.wait"),
    KnownWait(file: "Sources/MirrorCommandLine/Commands/ShellCommand.swift", snippet: "await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in",
              bound: "the shell's wait for values printed: raced against the wait's --timeout in a task group, which cancels it (its cancellation handler resumes it)",
              trigger: "ScriptDrivingTests.testShellWaitCountsTheValueAWriteTriggeredAndTimesOutWhenNoneComes", fires: "shell.wait"),
    KnownWait(file: "Sources/LinuxBluetooth/ATTBearerConnect.swift", snippet: "cbz_poll_one(fd, CBZ_POLLOUT, ms, &revents)",
              bound: "the LE connect (ATTBearer.waitForConnection): `timeout` seconds, then TransportError.connectTimedOut (\"connecting to PEER got no answer in N s\")",
              trigger: "ConnectWaitTests.testTheConnectWaitTimesOutNamingThePeerAndTheLimitWhenPOLLOUTNeverComes", fires: "bearer.connect"),
    KnownWait(file: "Sources/LinuxBluetooth/ATTBearerConnect.swift", snippet: "cbz_poll_two(fd, CBZ_POLLIN, wakefd, CBZ_POLLIN, ms, &r1, &r2)",
              bound: "ATTBearerListener.accept(timeout:): the timeout, then connectTimedOut naming the listener; close() wakes it",
              trigger: "BearerTests.testAcceptTimesOutAndCloseWakesAccept", fires: "bearer.accept"),
    KnownWait(file: "Sources/LinuxBluetooth/EnhancedBearer.swift", snippet: "cbz_poll_one(fd, CBZ_POLLIN, ms, &revents)",
              bound: "a unix: Enhanced ATT bearer's handshake message: the client's `timeout` for the answer, the listener's `requestTimeout` (EnhancedBearerHandshake.messageLimit, 5 s) for the request; then TransportError.handshakeTimedOut (\"WHAT did not come from PEER in N s\")",
              trigger: "EnhancedUnixBearerTests.testAPeerThatNeverAnswersTheHandshakeTimesOutNamingTheAnswer", fires: "bearer.handshake"),
    KnownWait(file: "Sources/LinkCore/EventLoop.swift", snippet: "let n = cbz_epoll_wait(epfd, events.baseAddress, Int32(events.count), -1)",
              bound: "the link's event loop on every socket (L2CAP, AF_UNIX), not an operation: close() shuts a socket down (it polls readable, recvmsg returns 0), a socket's end (a dropped link's errno) ends its bearer, posted work signals the eventfd, a deadline fires the timerfd, and releasing the loop posts its stop; every operation above it has its own deadline",
              trigger: "BearerReaderTests.testCloseWakesTheLoopAtOnce"),
    KnownWait(file: "Sources/LinkCore/EventLoop.swift", snippet: "thread = started.wait(until: { $0 })",
              bound: "a new event loop's thread publishing its ID: the thread's first step, before it waits for anything",
              trigger: "EventLoopTests.testPostedWorkRunsInOrderOnTheLoopsThreadFromManyThreads"),
    KnownWait(file: "Sources/LinkCore/EventLoop.swift", snippet: "return box.wait(until: { $0 })",
              bound: "EventLoop.sync off the loop: the loop runs posted work after the event it is in (each bounded); never called from code the loop waits on, and on the loop it runs at once",
              trigger: "EventLoopTests.testSyncRunsOnTheLoopAndReturnsItsResult"),
    KnownWait(file: "Sources/LinkCore/EventLoop.swift", snippet: "counts.wait(until: { $0.stopping == 0 ? true : nil }, timeoutNanoseconds: Int(seconds * 1e9)) != nil",
              bound: "EventLoop.waitForStoppingLoops: its `seconds`, then false",
              trigger: "EventLoopTests.testAReleasedLoopsThreadEndsAndClosesItsFDs", fires: "eventLoop.stopping"),
    KnownWait(file: "Sources/LinkCore/EventLoop.swift", snippet: "counts.wait(until: { $0.live <= count ? true : nil }, timeoutNanoseconds: Int(seconds * 1e9)) != nil",
              bound: "EventLoop.waitForLiveLoops: its `seconds`, then false",
              trigger: "EventLoopTests.testAReleasedLoopsThreadEndsAndClosesItsFDs", fires: "eventLoop.live"),
    KnownWait(file: "Sources/LinkCore/Lock.swift", snippet: "if pthread_cond_timedwait(condition, mutex, &deadline) == ETIMEDOUT { return body(&value.pointee) }",
              bound: "Lock.wait(until:timeoutNanoseconds:): its timeout",
              trigger: "HCILinkMonitorTests.testAwaitingTheDisconnectReasonIsBounded", fires: "linkMonitor.disconnectReason"),
    KnownWait(file: "Sources/LinkCore/Lock.swift", snippet: "pthread_cond_wait(condition, mutex)",
              bound: "Lock.wait(until:): a helper, not a wait of its own; each caller is listed above",
              trigger: "BearerTests.testWhenWritableWaiterWakesOnClose"),
    KnownWait(file: "Sources/Mirror/ScanProcedure.swift", snippet: "try await cancel.value",
              bound: "an interrupted scan's cancelScan: withDeadline(options.cancelScanLimit, 5 s) \"the Write Response to cancelScan\", then the ATT transaction timeout under it",
              trigger: "MirrorScanTests.testAnInterruptedScanWhoseCancelScanIsNeverAnsweredEndsAtItsLimit", fires: "scan.cancelScan"),
    KnownWait(file: "Sources/LinuxBluetooth/Privilege.swift", snippet: "let handed: Int?? = state.wait(until: { s -> Int?? in",
              bound: "CapabilityKeeper.perform handing a call over: the keeper's answerLimit (5 s), then the call runs on its caller, unprivileged",
              trigger: "CapabilityKeeperTests.testACallTheKeeperDoesNotTakeInTimeRunsOnTheCaller", fires: "keeper.answer"),
    KnownWait(file: "Sources/LinuxBluetooth/Privilege.swift", snippet: "state.wait(until: { $0.finished >= ticket ? () : nil })",
              bound: "CapabilityKeeper.perform, a call the keeper took: the keeper runs only short syscalls on sockets (socket, bind, setsockopt, write of an HCI command, ioctl), so it finishes each",
              trigger: "CapabilityKeeperTests.testCallsRunOnTheKeeperUntilItEndsThenOnTheCaller"),
    KnownWait(file: "Sources/LinuxBluetooth/Privilege.swift", snippet: "if state.wait(until: { $0.alive ? nil : () }, timeoutNanoseconds: limitNanoseconds) == nil",
              bound: "CapabilityKeeper.end: the keeper's answerLimit (5 s) for it to run its drop and exit",
              trigger: "CapabilityKeeperTests.testAnEndTheKeeperDoesNotFinishInTimeReturnsAtItsLimit", fires: "keeper.end"),
    KnownWait(file: "Sources/LinuxBluetooth/Privilege.swift", snippet: "let next = state.wait(until: { s -> (@Sendable () -> Void)?? in",
              bound: "the keeper thread waiting for its next call, not an operation: end() ends it (Privilege.dropAll after the connect or the scan)",
              trigger: "CapabilityKeeperTests.testCallsRunOnTheKeeperUntilItEndsThenOnTheCaller"),
    KnownWait(file: "Sources/LinuxBluetooth/HCISocket.swift", snippet: "cbz_poll_one(fd, CBZ_POLLIN, ms, &revents)",
              bound: "nextDatagram, under an HCI command's answer (HCISocket.run, nextEvent: its timeout, then hciCommandFailed naming the command and \"no answer (Command Complete or Command Status) within N s\") and a management command's (ManagementSocket.run: managementCommandFailed, \"no Command Complete or Command Status from the kernel within N s\", ManagementTests.testASilentKernelIsATimeoutThatSaysWhatWasAwaited)",
              trigger: "HCICommandWaitTests.testACommandNobodyAnswersFailsNamingTheCommandAndNoAnswerAfterItsTimeout", fires: "hci.command"),
    KnownWait(file: "Sources/LinuxBluetooth/HCISocket.swift", snippet: "let n = cbz_poll_two(fd, Int16(CBZ_POLLIN), wake, Int16(CBZ_POLLIN), -1, &r1, &r2)",
              bound: "readDatagrams, the reader thread of the link monitor, of the pairing agent (PairingAgent.startServing) and of the SMP failure watch (SMPFailureWatch), not an operation: it ends when the owner's close(), PairingService.stop or SMPFailureWatch.close signals its eventfd or the socket ends; every request above it has its own named limits, and each pairing the kernel's SMP timeout (30 s)",
              trigger: "HCILinkMonitorTests.testAnUnboundMonitorRefusesRequestsAndCloseEndsTheReaderAtOnce"),
    KnownWait(file: "Sources/LinuxBluetooth/HCILinkMonitor.swift", snippet: "let found: T?? = state.wait(until: { s -> T?? in",
              bound: "HCILinkMonitor.awaitEvent, under awaitDisconnectReason(limit:) and awaitEncryptionFailure(limit:): the caller's limit (LinkSession.disconnectReasonWait, 500 ms), or the reader's end",
              trigger: "HCILinkMonitorTests.testAwaitingTheDisconnectReasonIsBounded", fires: "linkMonitor.disconnectReason"),
    KnownWait(file: "Sources/LinuxBluetooth/HCILinkMonitor.swift", snippet: "if state.wait(until: { $0.readerDone ? () : nil }, timeoutNanoseconds: ns) == nil",
              bound: "HCILinkMonitor.close(limit:): the reader leaves its poll when the eventfd is signalled; close waits for it at most `limit` (2 s)",
              trigger: "HCILinkMonitorTests.testACloseWhoseReaderIsBusyReturnsAtItsLimit", fires: "linkMonitor.close"),
    KnownWait(file: "Sources/LinuxBluetooth/HCILinkMonitor.swift", snippet: "let found: Result<T, LinkError>? = state.wait(until: { s -> Result<T, LinkError>? in",
              bound: "a link request's waits (LinkRequestLimits: commandAnswer 2 s, completion 10 s, dataLengthChange 2 s), then .timedOut(LinkWaitTimeout): \"no LE Connection Update Complete for handle 0x0040 within 10 s\"; a Disconnection Complete of the link or the reader's end ends it at once",
              trigger: "HCILinkMonitorTests.testAnUpdateWithNoCompletionTimesOutNamingTheEventTheHandleAndTheLimit", fires: "linkMonitor.request"),
    KnownWait(file: "Sources/LinuxBluetooth/SMP.swift", snippet: "let found: SMPPairingFailed?? = state.wait(until: { s -> SMPPairingFailed?? in",
              bound: "SMPFailureWatch.pairingFailed: after a failed Pair Device, its limit (300 ms) for the Pairing Failed PDU on the peer's link, then nil (the error goes without the SMP reason); the reader's end ends it at once",
              trigger: "SMPTests.testTheWatchFindsThePeersPairingFailedAndItsDisconnectionWithinItsLimit", fires: "smp.pairingFailed"),
    KnownWait(file: "Sources/LinuxBluetooth/PairingAgent.swift", snippet: "if state.wait(until: { $0 ? () : nil }, timeoutNanoseconds: ns) == nil { WaitLimit.fired(\"pairing.stop\") }",
              bound: "PairingService.stop: its limit (2 s) for the agent's thread to end, then it returns and says so",
              trigger: "PairingAgentTests.testTheServingAgentAnswersUntilStoppedAndAStopWaitsForAnAnswerOnlyToItsLimit", fires: "pairing.stop"),
    KnownWait(file: "Sources/LinuxBluetooth/PairingAgent.swift", snippet: "if served.wait(until: { $0.longTermKeys > 0 ? () : nil }, timeoutNanoseconds: Int(limit.nanosecondsClamped)) == nil {",
              bound: "PairingService.takeServed(awaitingKeysFor:): after the shell's pair raised the link with no request answered, its limit (Shell.pairKeysWait, 1 s) for a New Long Term Key, then what was served without one (the kernel's held key)",
              trigger: "PairingAgentTests.testTheWaitForKeysAfterARaiseEndsAtItsLimit", fires: "pairing.keys"),
    KnownWait(file: "Sources/MirrorCommandLine/Commands/ShellPairing.swift", snippet: "_ = state.wait(until: { s -> Bool? in",
              bound: "EditorQuestions.readLine: the shell's loop waits while the pairing agent reads an answer, which its own limit bounds (EditorQuestions.answerLimit, 25 s, LineEditor's readEvent(timeout:))",
              trigger: "ShellPairingTests.testAQuestionAtThePromptIsAnsweredByTheLoopsNextLineWithOneReaderAtATime"),
    KnownWait(file: "Sources/MirrorCommandLine/Commands/ShellPairing.swift", snippet: "let answer: Result<String, ShellQuestionError>? = state.wait(until: { s -> Result<String, ShellQuestionError>? in",
              bound: "EditorQuestions.ask with the question posted to the loop at the prompt: its limit (answerLimit, 25 s, under SMP's 30 s), then the question is withdrawn and .timedOut: \"no answer within 25 s to ...\"; the loop's line (or Ctrl-C, the end) ends it at once",
              trigger: "ShellPairingTests.testAQuestionUnansweredWithinItsLimitIsDeclinedOnBothPaths", fires: "shell.pairQuestion"),
    KnownWait(file: "Sources/BareATT/BareLoop.swift", snippet: "cbz_poll_one(fd, CBZ_POLLOUT, timeoutMilliseconds, &revents)",
              bound: "the bare loop's send on a full socket: its timeout (mirror bench: --timeout), then BareATTError.timeout(.socketWritable): \"the bare loop's socket to take more data\"",
              trigger: "HostileCLITests.testTheBenchsBareLoopTimesOutNamingTheSocketThatTookNoMoreData", fires: "bare.socketWritable"),
    KnownWait(file: "Sources/BareATT/BareLoop.swift", snippet: "cbz_poll_one(fd, CBZ_POLLIN, timeoutMilliseconds, &revents)",
              bound: "the bare loop's wait for an answer: its timeout (mirror bench: --timeout), then BareATTError.timeout(.response): \"a response in the bare loop\"",
              trigger: "HostileCLITests.testTheBenchsBareLoopTimesOutNamingTheResponseItWaitedFor", fires: "bare.response"),
    KnownWait(file: "Sources/BareATT/PlainPeer.swift", snippet: "let counted: Void? = reached.wait(until: { _ in writeCommands >= total ? () : nil },",
              bound: "PlainPeer.waitUntil(writeCommands:timeout:): its timeout, then BareATTError.timeout(.writeCommandsCounted(N)): \"the plain peer to count N Write Commands\"",
              trigger: "BareATTTests.testWaitingForCommandsThePeerNeverGetsTimesOutNamingTheCountAndTheLimit", fires: "plainPeer.writeCommands"),
    KnownWait(file: "Sources/GATTClient/GATTClient+Security.swift", snippet: "try await once.value()",
              bound: "the security retry's wait for POLLOUT while pairing runs (a send refused with ENOTCONN right after a raise): withDeadline(the transaction timeout), then \"the link to take data again after raising security to LEVEL (pairing)\"; at most GATTClient.pairingSendRetries waits",
              trigger: "PairingRetryTests.testPairingThatNeverEndsTimesOutNamingTheLinkAndTheLevel", fires: "security.link"),
    KnownWait(file: "Sources/MirrorCommandLine/Session/Bench.swift", snippet: "for try await part in group { all.append(part) }",
              bound: "bench --bearers N: the writers of one round, each ending at its share of --count or at the --duration deadline, each write bounded by the transaction timeout (--timeout), whose error ends the round",
              trigger: "BenchBearersTests.testAWriterWhoseBearerNeverAnswersTimesOutNamingIt", fires: "att.transaction"),
    KnownWait(file: "Sources/MirrorCommandLine/Session/Bench.swift", snippet: "return try await withCheckedThrowingContinuation { (c: CheckedContinuation<T, any Error>) in",
              bound: "a bare-loop turn on the socket the bearer lends (ATTBearer.lend): the turn's own polls, each under --timeout; a connection error at once when the bearer has ended",
              trigger: "BenchCommandTests.testABareLoopTurnThatGetsNoAnswerTimesOutNamingIt", fires: "bare.response"),
    KnownWait(file: "Sources/GATTClient/Continuation.swift", snippet: "try await withCheckedThrowingContinuation(body)",
              bound: "withEngineContinuation (debug builds): a wrapper, not a wait of its own; each caller is listed above",
              trigger: "DeadlineAuditTests.testEveryRequestOfEveryProcedureTimesOutNamingItsResponse", fires: "att.transaction"),
    KnownWait(file: "Sources/GATTClient/Continuation.swift", snippet: "try await withUnsafeThrowingContinuation(body)",
              bound: "withEngineContinuation (release builds): a wrapper, not a wait of its own; each caller is listed above",
              trigger: "DeadlineAuditTests.testEveryRequestOfEveryProcedureTimesOutNamingItsResponse", fires: "att.transaction"),
    KnownWait(file: "Sources/Mirror/ScanProcedure.swift", snippet: "let (s, e) = try await finalRead.value",
              bound: "the scan's final read of scanState and scanError: two reads, each under the ATT transaction timeout",
              trigger: "MirrorScanTests.testAFinalReadThatGetsNoAnswerEndsAtTheATTTimeoutAndTheScanStillReports", fires: "att.transaction"),
    KnownWait(file: "Sources/MirrorCommandLine/Commands/ScanCommand.swift", snippet: "try? await MonotonicClock().sleep(for: .seconds(1))",
              bound: "the status line's once-a-second redraw: a one-second sleep in a task cancelled when the scan ends",
              trigger: "ScanCommandTests.testTheStatusLineRedrawsEverySecondOnATerminalAndStopsWithTheScan"),
    KnownWait(file: "Sources/MirrorCommandLine/Interrupts.swift", snippet: "guard cbz_poll_one(fd, CBZ_POLLIN, -1, &revents) > 0 else { continue }",
              bound: "the signal thread: waits for SIGINT/SIGTERM for the life of the process by design; no operation waits on it",
              trigger: "untriggered: by design (a process-lifetime signal thread)"),
    KnownWait(file: "Sources/LinuxBluetooth/StopSignals.swift", snippet: "while sigwait(&set, &received) != 0 {}",
              bound: "mirror-sim and hostile-peer run until SIGINT or SIGTERM by design (blocked from their first line, so none is lost); no operation waits on it",
              trigger: "HostileCLITests.testASIGTERMRightAfterTheListeningLineEndsThePeerEveryTime"),
    KnownWait(file: "Sources/TestSupport/ToolProcess.swift", snippet: "if done.wait(timeout: .now() + timeout) == .timedOut {",
              bound: "ToolProcess.run: the run's timeout (60 s unless given); then the tool is terminated and the run throws, naming it",
              trigger: "GATTCommandTests.testARunThatDoesNotEndInTimeIsTerminatedAndNamed", fires: "toolProcess.run"),
    KnownWait(file: "Sources/TestSupport/ToolProcess.swift", snippet: "if done.wait(timeout: .now() + 5) == .timedOut {",
              bound: "ToolProcess.run: 5 s for a terminated tool to exit",
              trigger: "GATTCommandTests.testARunThatIgnoresTheTerminationIsWaitedForAtMostFiveSecondsMore", fires: "toolProcess.terminate"),
    KnownWait(file: "Sources/TestSupport/ToolProcess.swift", snippet: "group.wait()",
              bound: "ToolProcess.run: its output pipes reach end of file when the tool has exited (bounded by the two waits above)",
              trigger: "GATTCommandTests.testARunThatDoesNotEndInTimeIsTerminatedAndNamed"),
    KnownWait(file: "Sources/TestSupport/ScriptedPeer.swift", snippet: "await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in queue.async { c.resume() } }",
              bound: "ScriptedPeer.flush: the peer's serial reader queue runs what was queued before it; nothing else is waited for",
              trigger: "EngineTests.testStaleTimerOfAnEarlierWriteNeverResolvesALaterWrite"),
    KnownWait(file: "Sources/TestSupport/ScriptedPeer.swift", snippet: "if !done { try? await once.value() }",
              bound: "ScriptedPeer.waitForSent: a test helper; the test's own `within` limit bounds it",
              trigger: "EngineTests.testStaleTimerOfAnEarlierWriteNeverResolvesALaterWrite"),
    KnownWait(file: "Sources/TestSupport/ScriptedPeer.swift", snippet: "if arrived.wait(timeout: deadline) == .timedOut {",
              bound: "ScriptedPeer.next(timeout:): its timeout, then nil (the test asserts on it)",
              trigger: "SimulatorServerTests.testFaultsDropDelayDisconnectAndNotifyFirst", fires: "scriptedPeer.next"),
    KnownWait(file: "Sources/HostilePeer/HostilePeer.swift", snippet: "state.wait(until: { s in predicate(s) ? true : nil }, timeoutNanoseconds:",
              bound: "HostilePeer.wait(timeout:until:) and close(): the caller's timeout (close: 10 s for the accept thread, 10 s for the connections), then it answers whether the state got there",
              trigger: "HostileScenarioTests.testAHostilePeerWaitForCountersThatNeverComeEndsAtItsTimeout", fires: "hostilePeer.wait"),
    KnownWait(file: "Sources/BareATT/PlainPeer.swift", snippet: "cbz_poll_two(listener, CBZ_POLLIN, wake, CBZ_POLLIN, -1, &revents, &wakeEvents)",
              bound: "the plain peer's accept thread (mirror bench --loopback, gatt-bench; a server thread, not an operation): close() signals its eventfd",
              trigger: "BenchCommandTests.testLoopbackNeedsNoTarget"),
    KnownWait(file: "Sources/BareATT/PlainPeer.swift", snippet: "_ = cbz_poll_one(fd, CBZ_POLLOUT, -1, &revents)",
              bound: "the plain peer's send: ends when the client reads or closes (then send fails)",
              trigger: "BenchCommandTests.testLoopbackNeedsNoTarget"),
    KnownWait(file: "Sources/BareATT/PlainPeer.swift", snippet: "_ = cbz_poll_one(fd, CBZ_POLLIN, -1, &revents)",
              bound: "the plain peer's receive: ends when the client sends or closes (recv returns 0)",
              trigger: "BenchCommandTests.testLoopbackNeedsNoTarget"),
]

/// A limit recorded at a wait listed under another limit or none of its own (the same poll, a withDeadline around
/// requests that each have the ATT timeout): what it bounds and the test that watches it fire.
struct OtherLimit {
    var id: String
    var bound: String
    var trigger: String
}

let otherLimits: [OtherLimit] = [
    OtherLimit(id: "check.quiet",
               bound: "mirror check's quiet period after the first request of each kind (ATTProbe.quiet on awaitInbound's wait): 100 ms or four Exchange MTU round trips, then the responses that came are judged",
               trigger: "CheckCommandTests.testTheFaultFreeSimulatorGivesNoFindingInTextAndJSON"),
    OtherLimit(id: "management.command",
               bound: "ManagementSocket.run on HCISocket's nextDatagram poll: \"no Command Complete or Command Status from the kernel within N s\"",
               trigger: "ManagementTests.testASilentKernelIsATimeoutThatSaysWhatWasAwaited"),
    OtherLimit(id: "linkMonitor.encryptionFailure",
               bound: "HCILinkMonitor.awaitEncryptionFailure on awaitEvent's wait: the caller's limit (500 ms after a connect refused with EACCES), then nil",
               trigger: "HCILinkMonitorTests.testAFailedEncryptionChangeIsFoundWithinItsLimit"),
    OtherLimit(id: "management.pair",
               bound: "PairingAgent.pair on HCISocket's nextDatagram poll: its limit (pairLimit, 60 s), then Cancel Pair Device and \"timed out after N s waiting for the SMP pairing with ADDR to end\"",
               trigger: "PairingAgentTests.testASilentKernelTimesOutNamingTheStepAndCancels"),
    OtherLimit(id: "wifi.list",
               bound: "MirrorWiFi.list: withDeadline(timeout, waitingFor: \"the Wi-Fi network list (wifiScan, wifiNumNetworks, wifiNetworkSSIDEnum)\") around its requests",
               trigger: "DeadlineAuditTests.testWiFiWaitsTimeOutNamingWhatTheyWaitedFor"),
    OtherLimit(id: "wifi.status",
               bound: "MirrorWiFi.status: withDeadline(timeout, waitingFor: \"wifiConnectionStatus\") around its read",
               trigger: "DeadlineAuditTests.testWiFiStatusTimesOutNamingWhatItWaitedFor"),
]

/// The limit identifiers the sources record: `WaitLimit.fired("ID")`, `limitID: "ID"` and withDeadline's default.
func scanForLimitIDs() throws -> Set<String> {
    let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    let pattern = try NSRegularExpression(pattern: #"(?:WaitLimit\.fired\(|limitID: (?:String = )?)"([\w.]+)""#)
    var ids: Set<String> = []
    guard let walker = FileManager.default.enumerator(at: root.appendingPathComponent("Sources"), includingPropertiesForKeys: nil) else { return [] }
    for case let url as URL in walker where url.pathExtension == "swift" {
        let text = try String(contentsOf: url, encoding: .utf8)
        for m in pattern.matches(in: text, range: NSRange(text.startIndex..., in: text)) {
            ids.insert((text as NSString).substring(with: m.range(at: 1)))
        }
    }
    return ids
}

/// The waits in the sources: (file relative to the package, trimmed line).
func scanForWaits() throws -> [(file: String, line: String)] {
    let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    let patterns = [
        #"with(Checked|Unsafe)(Throwing)?Continuation\b"#,
        #"\bwithEngineContinuation\s*\{"#,
        #"\bfor\s+(try\s+)?await\b"#,
        #"await\s+[\w.]+\.value(\(\))?\s*$"#,
        #"await\s+[\w.]+\.value\(\)"#,
        #"\bTask\.sleep\b"#,
        #"\.sleep\((for|until):"#,
        #"\bcbz_(e)?poll(_one|_two|_wait)?\("#,
        #"\.wait\((timeout:)?"#,
        #"\bcbz_recv_datagram_wait\("#,
        #"\bsigwait\("#,
        #"\bpthread_cond_(timed)?wait\("#,
    ].map { try! NSRegularExpression(pattern: $0) }
    var hits: [(String, String)] = []
    let sources = root.appendingPathComponent("Sources")
    guard let walker = FileManager.default.enumerator(at: sources, includingPropertiesForKeys: nil) else { return [] }
    for case let url as URL in walker where url.pathExtension == "swift" {
        let relative = String(url.path.dropFirst(root.path.count + 1))
        let text = try String(contentsOf: url, encoding: .utf8)
        for raw in text.split(separator: "\n", omittingEmptySubsequences: false) {
            let line = raw.trimmingCharacters(in: .whitespaces)
            if line.hasPrefix("//") || line.hasPrefix("///") { continue }
            let range = NSRange(line.startIndex..., in: line)
            if patterns.contains(where: { $0.firstMatch(in: line, range: range) != nil }) {
                // A declaration of a wait helper is not a wait.
                if line.hasPrefix("public func") || line.hasPrefix("func") { continue }
                hits.append((relative, line))
            }
        }
    }
    return hits
}

/// Every XCTestCase class under Tests/, by name, with the text of its body (from its declaration to the next
/// top-level declaration of a type, extension or function).
func testClassBodies() throws -> [String: String] {
    let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    let declaration = try NSRegularExpression(pattern: #"^(?:final )?class (\w+)\s*:\s*XCTestCase\b"#, options: .anchorsMatchLines)
    let nextTopLevel = try NSRegularExpression(
        pattern: #"^(?:(?:public|private|fileprivate|internal|package|final) )*(?:class|struct|enum|extension|protocol|actor|func) "#,
        options: .anchorsMatchLines)
    var bodies: [String: String] = [:]
    for dir in try FileManager.default.contentsOfDirectory(atPath: root.path) {
        let d = root.appendingPathComponent(dir)
        for f in (try? FileManager.default.contentsOfDirectory(atPath: d.path)) ?? [] where f.hasSuffix(".swift") {
            let text = try String(contentsOf: d.appendingPathComponent(f), encoding: .utf8) as NSString
            for m in declaration.matches(in: text as String, range: NSRange(location: 0, length: text.length)) {
                let start = m.range.location + m.range.length
                let rest = NSRange(location: start, length: text.length - start)
                let end = nextTopLevel.firstMatch(in: text as String, range: rest)?.range.location ?? text.length
                bodies[text.substring(with: m.range(at: 1))] = text.substring(with: NSRange(location: start, length: end - start))
            }
        }
    }
    return bodies
}

/// The body of test method `name` in a class body: from its declaration to the next method declaration.
func testMethodBody(_ name: String, in classBody: String) -> String? {
    guard let start = classBody.range(of: "\n    func \(name)() ") else { return nil }
    let rest = classBody[start.upperBound...]
    let end = rest.range(of: "\n    func ")?.lowerBound ?? rest.endIndex
    return String(rest[..<end])
}

/// A scripted peer that answers as the one server (over the hostile peer's database) except for the requests it
/// keeps silent on; `silentSent` is finished when the first of those has been sent.
func selectivePeer(silentOn: Set<UInt8>, capacity: Int? = nil) -> (peer: ScriptedPeer, silentSent: OnceBox<Void>) {
    let silentSent = OnceBox<Void>()
    let server = Lock((ATTServer(database: HostilePeer.database), ATTSession()))
    let peer = ScriptedPeer(label: "selective", capacity: capacity) { bytes in
        if silentOn.contains(bytes[0]) {
            silentSent.finish(.success(()))
            return []
        }
        return server.withLock { s in
            guard case .now(let answer) = s.0.answer(bytes: bytes, session: &s.1) else { return [] }
            return [.server(answer.bytes)]
        }
    }
    return (peer, silentSent)
}

final class DeadlineAuditTests: XCTestCase {
    func testEveryWaitInTheSourcesIsKnownBoundedAndTriggeredByATest() throws {
        let hits = try scanForWaits()
        XCTAssertGreaterThan(hits.count, 10, "the scan found too little: is it reading the sources?")
        for hit in hits {
            let known = knownWaits.contains { hit.file == $0.file && hit.line.contains($0.snippet) }
            XCTAssertTrue(known, "an unlisted wait: \(hit.file): \(hit.line). Add it to knownWaits with its bound and a test that triggers it.")
        }
        let classes = try testClassBodies()
        XCTAssertGreaterThan(classes.count, 10, "the scan found too few test classes: is it reading Tests/?")
        // A class's body ends where the next top-level declaration starts (here: EventCollector after this class;
        // its line is spelled in two parts so that this body does not contain it).
        XCTAssertEqual(classes["DeadlineAuditTests"]?.contains("func testWithDeadlineNamesWhatItWaitedFor() "), true)
        XCTAssertEqual(classes["DeadlineAuditTests"]?.contains("if let d = e.detail { _details" + ".append(d) }"), false)
        var untriggered: [String] = []
        var watched: Set<String> = []
        for w in knownWaits {
            XCTAssertTrue(hits.contains { $0.file == w.file && $0.line.contains(w.snippet) }, "a stale entry (no such wait any more): \(w.file): \(w.snippet)")
            XCTAssertFalse(w.bound.isEmpty)
            if w.trigger.hasPrefix("untriggered: ") {
                untriggered.append("\(w.file): \(w.snippet) (\(w.trigger))")
                continue
            }
            checkTrigger(w.trigger, watches: w.fires, of: "\(w.file): \(w.snippet)", in: classes)
            if let id = w.fires { watched.insert(id) }
        }
        // Every limit the sources record is a known wait's or listed below, and its trigger watches it fire.
        let recorded = try scanForLimitIDs()
        XCTAssertGreaterThan(recorded.count, 10, "the scan found too few limits: is it reading the sources?")
        for l in otherLimits {
            XCTAssertFalse(l.bound.isEmpty)
            checkTrigger(l.trigger, watches: l.id, of: "the limit \(l.id)", in: classes)
            watched.insert(l.id)
        }
        for id in recorded {
            XCTAssertTrue(watched.contains(id), "an unlisted limit: \(id). Name it as a known wait's `fires` or in otherLimits, with a test that watches it fire.")
        }
        for id in watched {
            XCTAssertTrue(recorded.contains(id), "a stale limit (nothing records it any more): \(id)")
        }
        print("deadline audit: \(hits.count) waits in the sources, \(knownWaits.count) known, \(watched.count) limits watched firing by their triggers, \(untriggered.count) not triggered by a test here:")
        for u in untriggered { print("  " + u) }
        // Only the signal thread (a wait for the life of the process, by design) lacks a trigger here.
        XCTAssertLessThanOrEqual(untriggered.count, 1)
    }

    /// `trigger` ("Class.testName") is a test method of that XCTestCase class; with `id`, it watches that limit and
    /// asserts it fired while it ran (`WaitLimit.watch(id)`, then `XCTAssertGreaterThan(limit.fired, 0, ...)`).
    func checkTrigger(_ trigger: String, watches id: String?, of what: String, in classes: [String: String],
                      file: StaticString = #filePath, line: UInt = #line) {
        let parts = trigger.split(separator: ".").map(String.init)
        guard parts.count == 2, parts[1].hasPrefix("test") else {
            return XCTFail("the trigger of \(what) is not Class.testName: \(trigger)", file: file, line: line)
        }
        guard let body = classes[parts[0]] else {
            return XCTFail("no XCTestCase class \(parts[0]) in Tests/ for \(what)", file: file, line: line)
        }
        guard let test = testMethodBody(parts[1], in: body) else {
            return XCTFail("no test \(parts[1]) in class \(parts[0]) for \(what)", file: file, line: line)
        }
        if let id {
            XCTAssertTrue(test.contains("WaitLimit.watch(\"\(id)\")") && test.contains(".fired, 0"),
                          "\(trigger) does not watch the limit \(id) of \(what)", file: file, line: line)
        }
    }

    /// Runs `procedure` on a client whose peer answers everything but `silentOn`; the ATT timeout must fire and say
    /// `expected`.
    func timeout(silentOn: Set<UInt8>, mtu: Int = 23, _ expected: String, file: StaticString = #filePath, line: UInt = #line,
                 _ procedure: @escaping @Sendable (GATTClient) async throws -> Void) async throws {
        let clock = ManualClock()
        var configuration = GATTClient.Configuration()
        configuration.clock = clock
        configuration.clientRxMTU = mtu
        let (transport, silentSent) = selectivePeer(silentOn: silentOn)
        let c = try await GATTClient.connect(transport: transport, configuration: configuration)
        if mtu != 23 { _ = try await c.exchangeMTU() }
        let task = Task { try await procedure(c) }
        // Time moves only once the silent request is out (its deadline is armed before it is sent): the answered
        // requests before it resolve without time passing.
        try await silentSent.value()
        await clock.waitForPendingWakeups(atLeast: 1)
        clock.advance(by: .seconds(30))
        do {
            try await task.value
            XCTFail("succeeded; expected: \(expected)", file: file, line: line)
        } catch {
            XCTAssertEqual("\(error)", expected, file: file, line: line)
        }
        XCTAssertTrue(c.isClosed, file: file, line: line)
    }

    func testEveryRequestOfEveryProcedureTimesOutNamingItsResponse() async throws {
        let limit = WaitLimit.watch("att.transaction")
        let t = "timed out after 30 s waiting for "
        try await timeout(silentOn: [0x02], t + "Exchange MTU Response") { c in _ = try await c.exchangeMTU() }
        try await timeout(silentOn: [0x10], t + "Read By Group Type Response on handle 0x0001") { c in _ = try await c.discoverAllPrimaryServices() }
        try await timeout(silentOn: [0x06], t + "Find By Type Value Response on handle 0x0001") { c in _ = try await c.discoverPrimaryServices(uuid: .bit16(0xFFF0)) }
        try await timeout(silentOn: [0x08], t + "Read By Type Response on handle 0x0001") { c in _ = try await c.discoverCharacteristics(in: .all) }
        try await timeout(silentOn: [0x04], t + "Find Information Response on handle 0x0009") { c in _ = try await c.discoverDescriptors(in: ATTHandleRange(start: 9, end: 11)) }
        try await timeout(silentOn: [0x0A], t + "Read Response on handle 0x0003") { c in _ = try await c.read(handle: 3) }
        try await timeout(silentOn: [0x0C], t + "Read Blob Response on handle 0x0008") { c in _ = try await c.readLong(handle: 8) }
        try await timeout(silentOn: [0x0E], t + "Read Multiple Response on handle 0x0003") { c in _ = try await c.readMultiple(handles: [3, 5]) }
        try await timeout(silentOn: [0x20], t + "Read Multiple Variable Length Response on handle 0x0003") { c in _ = try await c.readMultipleVariable(handles: [3, 5]) }
        try await timeout(silentOn: [0x12], t + "Write Response on handle 0x000B") { c in try await c.write(handle: 11, value: [1]) }
        try await timeout(silentOn: [0x16], t + "Prepare Write Response on handle 0x0008") { c in try await c.writeLong(handle: 8, value: Array(repeating: 1, count: 40)) }
        try await timeout(silentOn: [0x18], t + "Execute Write Response on handle 0x0008") { c in try await c.writeLong(handle: 8, value: Array(repeating: 1, count: 40)) }
        // The subscription's two waits: the CCCD write, then the first read of the value.
        try await timeout(silentOn: [0x12], t + "Write Response on handle 0x0009") { c in _ = try await c.subscribe(valueHandle: 8, cccdHandle: 9) }
        try await timeout(silentOn: [0x0A], t + "Read Response on handle 0x0008") { c in _ = try await c.subscribe(valueHandle: 8, cccdHandle: 9) }
        // With a name given to the handle, the message carries it.
        try await timeout(silentOn: [0x12], t + "Write Response on handle 0x000B (shortValue)") { c in
            c.setName("shortValue", for: 11)
            try await c.write(handle: 11, value: [1])
        }
        XCTAssertGreaterThan(limit.fired, 0, "the limit att.transaction fired")
    }

    func testAPermitWaitTimesOutNamingThePermitWithAndWithoutALimit() async throws {
        let limit = WaitLimit.watch("att.permit")
        for (limit, spoken) in [(Duration?.some(.seconds(2)), "2 s"), (nil, "30 s")] {
            let clock = ManualClock()
            var configuration = GATTClient.Configuration()
            configuration.clock = clock
            let c = try await GATTClient.connect(transport: selectivePeer(silentOn: [], capacity: 0).peer, configuration: configuration)
            let task = Task { try await c.writeWithoutResponse(handle: 11, value: [1, 2], timeout: limit) }
            await clock.waitForPendingWakeups(atLeast: 1)
            clock.advance(by: limit ?? .seconds(30))
            do {
                try await task.value
                XCTFail("the write went out through a socket that takes nothing")
            } catch {
                XCTAssertEqual("\(error)", "timed out after \(spoken) waiting for a send permit for Write Command on handle 0x000B")
            }
            XCTAssertFalse(c.isClosed, "a permit timeout fails the one write, not the bearer")
            c.close()
        }
        XCTAssertGreaterThan(limit.fired, 0, "the limit att.permit fired")
    }

    func testWithDeadlineNamesWhatItWaitedFor() async throws {
        let limit = WaitLimit.watch("withDeadline")
        let clock = ManualClock()
        let task = Task {
            try await withDeadline(.seconds(5), waitingFor: "the mirror to finish", clock: clock) { () async throws -> Int in
                try await clock.sleep(for: .seconds(3600))
                return 1
            }
        }
        await clock.waitForPendingWakeups(atLeast: 2)
        clock.advance(by: .seconds(5))
        do { _ = try await task.value; XCTFail("no timeout") } catch {
            XCTAssertEqual("\(error)", "timed out after 5 s waiting for the mirror to finish")
        }
        XCTAssertGreaterThan(limit.fired, 0, "the limit withDeadline fired")
    }

    /// A client (5 s transaction timeout, MTU exchanged) of a simulated mirror with `options` over a unix: bearer;
    /// `end` closes the client, the listener and the mirror's connections.
    func simulatedMirrorClient(_ options: SimOptions) async throws -> (client: GATTClient, end: () -> Void) {
        let sim = SimulatedMirror(options: options)
        let path = freshSocketPath("wifi")
        let listener = try ATTBearerListener.unix(path: path)
        Thread { while let b = try? listener.accept() { sim.attach(b) } }.start()
        let ending = { listener.close(); sim.disconnectAll(reason: "test over") }
        do {
            let bearer = try ATTBearer.connect(unixPath: path)
            var configuration = GATTClient.Configuration()
            configuration.transactionTimeout = .seconds(5)
            let c = try await GATTClient.connect(transport: bearer, configuration: configuration)
            do { _ = try await c.exchangeMTU() } catch { c.close(); throw error }
            return (c, { c.close(); ending() })
        } catch {
            ending()
            throw error
        }
    }

    func testWiFiWaitsTimeOutNamingWhatTheyWaitedFor() async throws {
        let limit = WaitLimit.watch("wifi.join"), listLimit = WaitLimit.watch("wifi.list")
        var options = SimOptions()
        options.timings = .realistic
        options.wifiConnected = false
        let (c, end) = try await simulatedMirrorClient(options)
        defer { end() }
        // The list waits for the mirror's scan (1.2 s when realistic).
        do {
            _ = try await MirrorWiFi.list(client: c, profile: .bundled, timeout: .milliseconds(200))
            XCTFail("the list came within 200 ms")
        } catch {
            XCTAssertTrue("\(error)".hasPrefix("timed out after 200 ms waiting for the Wi-Fi network list"), "\(error)")
        }
        XCTAssertGreaterThan(listLimit.fired, 0, "the limit wifi.list fired")
        // The join waits for connected or failed (3 s when realistic): the timeout is reported as an event, then
        // the final read says where it got to.
        let events = EventCollector()
        let status = try await MirrorWiFi.join(client: c, profile: .bundled, ssid: "alpha", timeout: .milliseconds(200), emit: events.emit)
        XCTAssertNotEqual(status.status, "connected")
        XCTAssertTrue(events.details.contains { $0.contains("timed out after 200 ms waiting for wifiConnectionStatus connected or failed after joining alpha") },
                      "\(events.details)")
        XCTAssertGreaterThan(limit.fired, 0, "the limit wifi.join fired")
    }

    func testWiFiStatusTimesOutNamingWhatItWaitedFor() async throws {
        let limit = WaitLimit.watch("wifi.status")
        var options = SimOptions()
        options.faults = [try SimFault(parsing: "drop:wifiConnectionStatus")]
        let (c, end) = try await simulatedMirrorClient(options)
        defer { end() }
        do {
            _ = try await MirrorWiFi.status(client: c, profile: .bundled, timeout: .milliseconds(200))
            XCTFail("the dropped status read came back")
        } catch {
            XCTAssertEqual("\(error)", "timed out after 200 ms waiting for wifiConnectionStatus")
        }
        XCTAssertGreaterThan(limit.fired, 0, "the limit wifi.status fired")
    }
}

/// Collects the details of procedure events.
final class EventCollector: @unchecked Sendable {
    // @unchecked: `lock` guards `details`.
    let lock = NSLock()
    private var _details: [String] = []
    var details: [String] { lock.lock(); defer { lock.unlock() }; return _details }
    var emit: @Sendable (MirrorEvent) -> Void {
        { [self] e in
            lock.lock()
            if let d = e.detail { _details.append(d) }
            lock.unlock()
        }
    }
}
