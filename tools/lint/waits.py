#!/usr/bin/python3
"""The list of waits: every place in Sources/ that waits (a continuation, an async stream, a task's value, a poll,
a sleep, a condition wait) is listed here with what bounds it and a test that runs into that bound.

Fails (exit 1) on a wait in the sources that is not listed, on a listed wait that is no longer in the sources, and on
a trigger test that does not exist under Tests/. Run by tools/test.sh; `--root DIR` lints another checkout.
"""
import argparse
import re
import sys
from pathlib import Path
from typing import NamedTuple


class Wait(NamedTuple):
    file: str      # relative to the package root
    snippet: str   # part of the wait's line (trimmed); the line must contain it
    bound: str     # what ends the wait, and what the caller sees then
    trigger: str   # "TestClass.testName": a test that runs into the bound; "untriggered: WHY" for none


class Limit(NamedTuple):
    bound: str     # a limit at a wait listed above under another bound (the same poll, a withDeadline)
    trigger: str


# Lines that wait. A comment or the declaration of a wait helper is not a wait.
PATTERNS = [re.compile(p) for p in [
    r"with(Checked|Unsafe)(Throwing)?Continuation\b",
    r"\bwithEngineContinuation\s*\{",
    r"\bfor\s+(try\s+)?await\b",
    r"await\s+[\w.]+\.value(\(\))?\s*$",
    r"await\s+[\w.]+\.value\(\)",
    r"\bTask\.sleep\b",
    r"\.sleep\((for|until):",
    r"\bcbz_(e)?poll(_one|_two|_wait)?\(",
    r"\.wait\((timeout:)?",
    r"\bcbz_recv_datagram_wait\(",
    r"\bBlockingWait\.poll\(",
    r"\bsigwait\(",
    r"\bpthread_cond_(timed)?wait\(",
]]

WAITS = [
    Wait("Sources/Conformance/ATTProbe.swift",
         "await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in",
         bound="mirror check's wait for the server's next PDU (ATTProbe.awaitInbound): its deadline on the monotonic clock (the ATT transaction timeout, --timeout, for a request: \"no answer to ... in N s\", the check stops; a quiet period's end), or the transport's close",
         trigger="CheckCommandTests.testALateResponseStopsTheCheckAtTheTransactionTimeout"),
    Wait("Sources/LineEditor/LineEditor.swift",
         "cbz_poll_two(0, CBZ_POLLIN, wake, CBZ_POLLIN, millisecondsLeft(deadline), &rIn, &rWake)",
         bound="LineEditor.readEvent at a terminal: the user's line, unbounded by default but stop() (its eventfd) ends it, or readEvent(timeout:), then \"timed out after N waiting for a line at the prompt\"",
         trigger="LineEditorTests.testTheWaitAtATerminalPromptTimesOutNamingWhatItWaitedFor"),
    Wait("Sources/LineEditor/LineEditor.swift",
         "cbz_poll_two(0, CBZ_POLLIN, wake, CBZ_POLLIN, millisecondsLeft(deadline), &rInput, &rWake)",
         bound="LineEditor.readEvent off a terminal: the next line of input, unbounded by default but stop() (its eventfd) ends it, or readEvent(timeout:), then \"timed out after N waiting for a line of input\"",
         trigger="LineEditorTests.testTheWaitForPlainInputTimesOutNamingWhatItWaitedFor"),
    Wait("Sources/GATTClient/Engine/RequestSlot.swift",
         "try await withEngineContinuation { (u: EngineContinuation<ATTPDU>) in",
         bound="the ATT transaction timeout (Configuration.transactionTimeout, 30 s by default): every request, so MTU, each procedure, the subscription's CCCD write and first read",
         trigger="DeadlineAuditTests.testEveryRequestOfEveryProcedureTimesOutNamingItsResponse"),
    Wait("Sources/GATTClient/Engine/WriteWithoutResponse.swift",
         "withEngineContinuation { (c: EngineContinuation<Void>)",
         bound="a permit for write without response: its `timeout`, by default the transaction timeout",
         trigger="DeadlineAuditTests.testAPermitWaitTimesOutNamingThePermitWithAndWithoutALimit"),
    Wait("Sources/GATTClient/Once.swift",
         "withEngineContinuation { (c: EngineContinuation<T>)",
         bound="OnceBox: resumed by whichever comes first of its callback, its deadline (withDeadline, sleep) or cancellation",
         trigger="ClockAndOnceTests.testNamedDeadlineForACallbackThatNeverComesAndOneThatComesLate"),
    Wait("Sources/GATTClient/Once.swift",
         "try await once.value()",
         bound="withDeadline(limit, waitingFor:): the named limit",
         trigger="DeadlineAuditTests.testWithDeadlineNamesWhatItWaitedFor"),
    Wait("Sources/GATTClient/Once.swift",
         "try await once.value()",
         bound="clock.sleep(until:): the wake-up at its own deadline (the wait is the deadline)",
         trigger="ClockAndOnceTests.testSleepOnManualClockEndsWhenTimeIsAdvanced"),
    Wait("Sources/TestSupport/ManualClock.swift",
         "try? await once.value()",
         bound="ManualClock.waitForPendingWakeups: a test clock's helper; the test's own limit bounds it",
         trigger="ClockAndOnceTests.testManualClockWakesSleepersInDeadlineOrderWhenAdvanced"),
    Wait("Sources/Mirror/ScanProcedure.swift",
         "for try await n in notifications {",
         bound="the scan's notification logger: a background task cancelled when the scan returns (defer listener.cancel())",
         trigger="MirrorScanTests.testTimeoutIsNamedAndTheFinalReadStillHappens"),
    Wait("Sources/Mirror/ScanProcedure.swift",
         "for await _ in pokes",
         bound="the scan's verdict (COMPLETE and the upload, or ERROR): withDeadline(options.timeout, waitingFor: \"scanState complete and the upload ...\")",
         trigger="MirrorScanTests.testTimeoutIsNamedAndTheFinalReadStillHappens"),
    Wait("Sources/Mirror/ScanProcedure.swift",
         "try await MonotonicClock().sleep(for: options.settle)",
         bound="a fixed settle pause (options.settle): the wait is its own limit",
         trigger="MirrorScanTests.testTimeoutIsNamedAndTheFinalReadStillHappens"),
    Wait("Sources/Mirror/WiFiProcedures.swift",
         "for try await n in stream",
         bound="the Wi-Fi join: withDeadline(timeout, waitingFor: \"wifiConnectionStatus connected or failed after joining SSID\")",
         trigger="DeadlineAuditTests.testWiFiWaitsTimeOutNamingWhatTheyWaitedFor"),
    Wait("Sources/GATTPeer/Listening.swift",
         "for try await n in stream",
         bound="GATTPeer's listen (mirror listen): by design until --count, Ctrl-C (cancellation) or the link ends (the stream then throws the disconnect)",
         trigger="HostileScenarioTests.testANotificationStreamEndsWhenThePeerClosesMidListen"),
    Wait("Sources/GATTPeer/SharedNotifications.swift",
         "for await n in routed {",
         bound="a mirror shell background subscription's printer (GATTPeer's SharedNotifications: its NotificationRouter route): by design until the route ends, which the subscription's end ends (unsubscribe, disconnect, the shell's end or the link's: the wait below)",
         trigger="ShellTests.testSeveralSubscriptionsAtOnce"),
    Wait("Sources/MirrorCommandLine/Session/Session.swift",
         "await task.value",
         bound="a read's wait for the shell's background discovery (at a terminal): bounded as that discovery's requests are (each by the ATT transaction timeout, --timeout), or the link's end",
         trigger="ShellTests.testANotificationOverAHalfTypedLineLeavesTheLineIntact"),
    Wait("Sources/GATTPeer/SharedNotifications.swift",
         "await sub.task.value",
         bound="SharedNotifications.unsubscribe (the shell's unsubscribe): the subscription's printer handing on the values received before the CCCD write's answer; it ends once its route does, which the client's stream ends (finished by that write); each value is a print",
         trigger="SharedNotificationsTests.testUnsubscribeReturnsOnceEveryValueReceivedBeforeItWasHandedOn"),
    Wait("Sources/GATTPeer/SharedNotifications.swift",
         "do { for try await _ in stream {} } catch {}",
         bound="a mirror shell background subscription's end: the GATT client's stream of its handle, by design until unsubscribe finishes it or the link ends (the stream then throws the disconnect)",
         trigger="ShellOnceTests.testAfterTheListenTheSubscriptionPrintsTheNextValueOnce"),
    Wait("Sources/LinkCore/BlockingThread.swift",
         "await withCheckedContinuation { (continuation: CheckedContinuation<T, Never>) in",
         bound="BlockingThread.run: the shell's LineEditor.readEvent on the shell's one kept thread, bounded as that read is (the user's line or the input's end; stop() ends it)",
         trigger="ShellTests.testATerminalSessionReadsCancelsAListenAndQuits"),
    Wait("Sources/LinkCore/BlockingThread.swift",
         "let job = jobs.wait(until: { s -> (@Sendable () -> Void)? in s.queue.isEmpty ? nil : s.queue.removeFirst() })",
         bound="BlockingThread.serve: the shell's kept thread waits for its next call by design, for the process's life (it only serves; the shell's end is the process's)",
         trigger="ShellTests.testATerminalSessionReadsCancelsAListenAndQuits"),
    Wait("Sources/LinuxBluetooth/InterruptSignals.swift",
         "return try await task.value",
         bound="an interruptible command's task (mirror listen, scan): ends with the command; SIGINT/SIGTERM cancel it",
         trigger="HostileCLITests.testListenDuringANotificationFloodStopsAtItsCount"),
    Wait("Sources/MirrorCommandLine/Runner.swift",
         "try? await MonotonicClock().sleep(for: .milliseconds(Int64((limit * 1000).rounded())))",
         bound="a mirror shell line's --timeout S: the limit itself; the command is cancelled and the line fails with \"timed out after S waiting for COMMAND to finish (the line's --timeout)\"",
         trigger="ScriptDrivingTests.testALinesTimeoutBoundsThatCommandOnly"),
    Wait("Sources/GATTPeer/Listening.swift",
         "try? await MonotonicClock().sleep(for: limit)",
         bound="GATTPeer's listen duration (mirror listen --duration S): the duration itself, then the stream is finished and the listen ends (the CLI with its summary)",
         trigger="PeerListenTests.testDurationEndsAQuietListen"),
    Wait("Sources/MirrorCommandLine/Commands/ShellCommand.swift",
         "do { try await MonotonicClock().sleep(",
         bound="the shell's sleep S: S itself; Ctrl-C cancels it (\"cancelled: sleep S\")",
         trigger="ScriptDrivingTests.testShellWaitCountsTheValueAWriteTriggeredAndTimesOutWhenNoneComes"),
    Wait("Sources/GATTPeer/SharedNotifications.swift",
         "await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in",
         bound="the shell's wait for values printed (DeliveryTally.taken): under withDeadline(the wait's --timeout), which cancels it at the limit (its cancellation handler resumes it)",
         trigger="ScriptDrivingTests.testShellWaitCountsTheValueAWriteTriggeredAndTimesOutWhenNoneComes"),
    Wait("Sources/LinuxBluetooth/ATTBearerConnect.swift",
         "let ready = BlockingWait.poll(fd: fd, events: Int16(CBZ_POLLOUT), timeoutMilliseconds: ms)",
         bound="the LE connect (ATTBearer.waitForConnection): `timeout` seconds, then TransportError.connectTimedOut (\"connecting to PEER got no answer in N s\")",
         trigger="ConnectWaitTests.testTheConnectWaitTimesOutNamingThePeerAndTheLimitWhenPOLLOUTNeverComes"),
    Wait("Sources/LinuxBluetooth/ATTBearerConnect.swift",
         "await withCheckedContinuation { (c: CheckedContinuation<Result<Void, TransportError>, Never>) in",
         bound="the LE connect on the link's loop (ATTBearer.waitForConnection(on:), ConnectWait): POLLOUT or a loop timer at `timeout` seconds, then TransportError.connectTimedOut (\"connecting to PEER got no answer in N s\")",
         trigger="LoopConnectWaitTests.testTheLoopsConnectWaitTimesOutNamingThePeerAndTheLimitWhileTheLoopRunsOtherWork"),
    Wait("Sources/LinuxBluetooth/ATTBearerConnect.swift",
         "cbz_poll_two(fd, CBZ_POLLIN, wakefd, CBZ_POLLIN, ms, &r1, &r2)",
         bound="ATTBearerListener.accept(timeout:): the timeout, then connectTimedOut naming the listener; close() wakes it",
         trigger="BearerTests.testAcceptTimesOutAndCloseWakesAccept"),
    Wait("Sources/LinuxBluetooth/EnhancedBearer.swift",
         "cbz_poll_one(fd, CBZ_POLLIN, ms, &revents)",
         bound="a unix: Enhanced ATT bearer's handshake message: the client's `timeout` for the answer, the listener's `requestTimeout` (EnhancedBearerHandshake.messageLimit, 5 s) for the request; then TransportError.handshakeTimedOut (\"WHAT did not come from PEER in N s\")",
         trigger="EnhancedUnixBearerTests.testAPeerThatNeverAnswersTheHandshakeTimesOutNamingTheAnswer"),
    Wait("Sources/LinkCore/EventLoop.swift",
         "let n = cbz_epoll_wait(epfd, events.baseAddress, Int32(events.count), -1)",
         bound="the link's event loop on every socket (L2CAP, AF_UNIX), not an operation: close() shuts a socket down (it polls readable, recvmsg returns 0), a socket's end (a dropped link's errno) ends its bearer, posted work signals the eventfd, a deadline fires the timerfd, and releasing the loop posts its stop; every operation above it has its own deadline",
         trigger="BearerReaderTests.testCloseWakesTheLoopAtOnce"),
    Wait("Sources/LinkCore/EventLoop.swift",
         "thread = started.wait(until: { $0 })",
         bound="a new event loop's thread publishing its ID: the thread's first step, before it waits for anything",
         trigger="EventLoopTests.testPostedWorkRunsInOrderOnTheLoopsThreadFromManyThreads"),
    Wait("Sources/LinkCore/EventLoop.swift",
         "return box.wait(until: { $0 })",
         bound="EventLoop.sync off the loop: the loop runs posted work after the event it is in (each bounded); never called from code the loop waits on, and on the loop it runs at once",
         trigger="EventLoopTests.testSyncRunsOnTheLoopAndReturnsItsResult"),
    Wait("Sources/LinkCore/EventLoop.swift",
         "counts.wait(until: { $0.stopping == 0 ? true : nil }, timeoutNanoseconds: Int(seconds * 1e9)) != nil",
         bound="EventLoop.waitForStoppingLoops: its `seconds`, then false",
         trigger="EventLoopTests.testAReleasedLoopsThreadEndsAndClosesItsFDs"),
    Wait("Sources/LinkCore/EventLoop.swift",
         "counts.wait(until: { $0.live <= count ? true : nil }, timeoutNanoseconds: Int(seconds * 1e9)) != nil",
         bound="EventLoop.waitForLiveLoops: its `seconds`, then false",
         trigger="EventLoopTests.testAReleasedLoopsThreadEndsAndClosesItsFDs"),
    Wait("Sources/LinkCore/Lock.swift",
         "if pthread_cond_timedwait(condition, mutex, &deadline) == ETIMEDOUT { return body(&value.pointee) }",
         bound="Lock.wait(until:timeoutNanoseconds:): its timeout",
         trigger="HCILinkMonitorTests.testAwaitingTheDisconnectReasonIsBounded"),
    Wait("Sources/LinkCore/Lock.swift",
         "pthread_cond_wait(condition, mutex)",
         bound="Lock.wait(until:): a helper, not a wait of its own; each caller is listed above",
         trigger="BearerTests.testWhenWritableWaiterWakesOnClose"),
    Wait("Sources/Mirror/ScanProcedure.swift",
         "try await cancel.value",
         bound="an interrupted scan's cancelScan: withDeadline(options.cancelScanLimit, 5 s) \"the Write Response to cancelScan\", then the ATT transaction timeout under it",
         trigger="MirrorScanTests.testAnInterruptedScanWhoseCancelScanIsNeverAnsweredEndsAtItsLimit"),
    Wait("Sources/LinuxBluetooth/Privilege.swift",
         "let handed: Int?? = state.wait(until: { s -> Int?? in",
         bound="CapabilityKeeper.perform handing a call over: the keeper's answerLimit (5 s), then the call runs on its caller, unprivileged",
         trigger="CapabilityKeeperTests.testACallTheKeeperDoesNotTakeInTimeRunsOnTheCaller"),
    Wait("Sources/LinuxBluetooth/Privilege.swift",
         "state.wait(until: { $0.finished >= ticket ? () : nil })",
         bound="CapabilityKeeper.perform, a call the keeper took: the keeper runs only short syscalls on sockets (socket, bind, setsockopt, write of an HCI command, ioctl), so it finishes each",
         trigger="CapabilityKeeperTests.testCallsRunOnTheKeeperUntilItEndsThenOnTheCaller"),
    Wait("Sources/LinuxBluetooth/Privilege.swift",
         "_ = state.wait(until: { $0.alive ? nil : () }, timeoutNanoseconds: limitNanoseconds)",
         bound="CapabilityKeeper.end: the keeper's answerLimit (5 s) for it to run its drop and exit",
         trigger="CapabilityKeeperTests.testAnEndTheKeeperDoesNotFinishInTimeReturnsAtItsLimit"),
    Wait("Sources/LinuxBluetooth/Privilege.swift",
         "let next = state.wait(until: { s -> (@Sendable () -> Void)?? in",
         bound="the keeper thread waiting for its next call, not an operation: end() ends it (Privilege.dropAll after the connect or the scan)",
         trigger="CapabilityKeeperTests.testCallsRunOnTheKeeperUntilItEndsThenOnTheCaller"),
    Wait("Sources/LinuxBluetooth/HCISocket.swift",
         "let n = BlockingWait.poll(fd: fd, events: Int16(CBZ_POLLIN), timeoutMilliseconds: ms)",
         bound="nextDatagram, under an HCI command's answer (HCISocket.run, nextEvent: its timeout, then hciCommandFailed naming the command and \"no answer (Command Complete or Command Status) within N s\") and a management command's (ManagementSocket.run: managementCommandFailed, \"no Command Complete or Command Status from the kernel within N s\", ManagementTests.testASilentKernelIsATimeoutThatSaysWhatWasAwaited)",
         trigger="HCICommandWaitTests.testACommandNobodyAnswersFailsNamingTheCommandAndNoAnswerAfterItsTimeout"),
    Wait("Sources/LinuxBluetooth/HCISocket.swift",
         "let n = cbz_poll_two(fd, Int16(CBZ_POLLIN), wake, Int16(CBZ_POLLIN), -1, &r1, &r2)",
         bound="readDatagrams, the reader thread (for a caller without a loop; on a loop each is a source of it) of the link monitor, of the pairing agent (PairingAgent.startServing) and of the SMP failure watch (SMPFailureWatch), not an operation: it ends when the owner's close(), PairingService.stop or SMPFailureWatch.close signals its eventfd or the socket ends; every request above it has its own named limits, and each pairing the kernel's SMP timeout (30 s)",
         trigger="HCILinkMonitorTests.testAnUnboundMonitorRefusesRequestsAndCloseEndsTheReaderAtOnce"),
    Wait("Sources/LinuxBluetooth/HCILinkMonitor.swift",
         "_ = state.wait(until: { $0.readerDone ? () : nil }, timeoutNanoseconds: ns)",
         bound="HCILinkMonitor.close(limit:): the reader leaves its poll when the eventfd is signalled; close waits for it at most `limit` (2 s)",
         trigger="HCILinkMonitorTests.testACloseWhoseReaderIsBusyReturnsAtItsLimit"),
    Wait("Sources/LinuxBluetooth/HCILinkMonitor.swift",
         "guard let loop, loop.inEventLoop else { return state.wait(until: pick, timeoutNanoseconds: ns) }",
         bound="HCILinkMonitor.waitForState off the loop's thread (every wait of the monitor goes through it): the caller's limit (the two above), or the reader's end",
         trigger="HCILinkMonitorTests.testAwaitingTheDisconnectReasonIsBounded"),
    Wait("Sources/LinuxBluetooth/HCILinkMonitor.swift",
         "let ready = BlockingWait.poll(fd: socket.fd, events: Int16(CBZ_POLLIN), timeoutMilliseconds: ms)",
         bound="HCILinkMonitor.waitForState on the loop's thread (a link request from the link's code: the source cannot run, so the wait reads the socket): the same limits, then .timedOut naming the event; signals are taken meanwhile",
         trigger="LoopSourceTests.testARequestOnTheLoopsThreadTimesOutAtItsLimit"),
    Wait("Sources/LinuxBluetooth/SMP.swift",
         "let ready = BlockingWait.poll(fd: fd, events: Int16(CBZ_POLLIN),",
         bound="SMPFailureWatch.pairingFailed on the loop's thread (the agent's source reporting a failure): the same limit (300 ms), the wait reading the watch's socket itself, then nil",
         trigger="LoopSourceTests.testTheSMPWatchOnALoopFindsAFailureFromEitherThreadAndLeavesAtClose"),
    Wait("Sources/LinkCore/BlockingWait.swift",
         "let n = source.map { cbz_poll_two(fd, events, $0.fd, Int16(CBZ_POLLIN), left, &r1, &r2) }",
         bound="BlockingWait.poll with the interrupt fd set (mirror's signalfd): the caller's timeoutMilliseconds (each caller's limit above; none passes -1 now), the interrupt fd taken meanwhile without ending the wait",
         trigger="LoopSourceTests.testAWaitThatHoldsItsThreadTakesTheInterruptSourceMeanwhile"),
    Wait("Sources/LinkCore/BlockingWait.swift",
         "?? cbz_poll_one(fd, events, left, &r1)",
         bound="BlockingWait.poll with no interrupt fd (tests, the tools): the caller's timeoutMilliseconds",
         trigger="HCICommandWaitTests.testACommandNobodyAnswersFailsNamingTheCommandAndNoAnswerAfterItsTimeout"),
    Wait("Sources/LineEditor/EditorQuestions.swift",
         "let ready = BlockingWait.poll(fd: fd, events: Int16(POLLIN), timeoutMilliseconds: ms)",
         bound="mirror pair's and --pair's terminal questions (a passkey, a comparison, Just Works left to this host) wait for the person's line at most TerminalAnswers.limit (EditorQuestions.answerLimit, 25 s, under SMP's 30 s), then the question is declined: \"no answer within 25 s to ...: declined\"; asked only when stdin and stderr are terminals; SIGINT/SIGTERM are taken (BlockingWait) and end the command at once",
         trigger="PairPolicyTests.testATerminalQuestionUnansweredWithinItsLimitIsDeclinedNamingTheQuestion"),
    Wait("Sources/LinuxBluetooth/SMP.swift",
         "guard let loop, loop.inEventLoop else { return state.wait(until: pick, timeoutNanoseconds: ns) ?? nil }",
         bound="SMPFailureWatch.pairingFailed: after a failed Pair Device, its limit (300 ms) for the Pairing Failed PDU on the peer's link, then nil (the error goes without the SMP reason); the reader's end ends it at once",
         trigger="SMPTests.testTheWatchFindsThePeersPairingFailedAndItsDisconnectionWithinItsLimit"),
    Wait("Sources/LinuxBluetooth/PairingAgent.swift",
         "_ = state.wait(until: { $0 ? () : nil }, timeoutNanoseconds: ns)",
         bound="PairingService.stop: its limit (2 s) for the agent's thread to end, then it returns and says so",
         trigger="PairingAgentTests.testTheServingAgentAnswersUntilStoppedAndAStopWaitsForAnAnswerOnlyToItsLimit"),
    Wait("Sources/LinuxBluetooth/PairingAgent.swift",
         "_ = served.wait(until: { $0.longTermKeys > 0 ? () : nil }, timeoutNanoseconds: Int(limit.nanosecondsClamped))",
         bound="PairingService.takeServed(awaitingKeysFor:): after the shell's pair raised the link with no request answered, its limit (Peer.keysAfterRaiseWait, 1 s) for a New Long Term Key, then what was served without one (the kernel's held key)",
         trigger="PairingAgentTests.testTheWaitForKeysAfterARaiseEndsAtItsLimit"),
    Wait("Sources/LineEditor/EditorQuestions.swift",
         "_ = state.wait(until: { s -> Bool? in",
         bound="EditorQuestions.readLine: the shell's loop waits while the pairing agent reads an answer, which its own limit bounds (EditorQuestions.answerLimit, 25 s, LineEditor's readEvent(timeout:))",
         trigger="ShellPairingTests.testAQuestionAtThePromptIsAnsweredByTheLoopsNextLineWithOneReaderAtATime"),
    Wait("Sources/LineEditor/EditorQuestions.swift",
         "let answer: Result<String, ShellQuestionError>? = state.wait(until: { s -> Result<String, ShellQuestionError>? in",
         bound="EditorQuestions.ask with the question posted to the loop at the prompt: its limit (answerLimit, 25 s, under SMP's 30 s), then the question is withdrawn and .timedOut: \"no answer within 25 s to ...\"; the loop's line (or Ctrl-C, the end) ends it at once",
         trigger="ShellPairingTests.testAQuestionUnansweredWithinItsLimitIsDeclinedOnBothPaths"),
    Wait("Sources/BareATT/BareLoop.swift",
         "cbz_poll_one(fd, CBZ_POLLOUT, timeoutMilliseconds, &revents)",
         bound="the bare loop's send on a full socket: its timeout (mirror bench: --timeout), then BareATTError.timeout(.socketWritable): \"the bare loop's socket to take more data\"",
         trigger="HostileCLITests.testTheBenchsBareLoopTimesOutNamingTheSocketThatTookNoMoreData"),
    Wait("Sources/BareATT/BareLoop.swift",
         "cbz_poll_one(fd, CBZ_POLLIN, timeoutMilliseconds, &revents)",
         bound="the bare loop's wait for an answer: its timeout (mirror bench: --timeout), then BareATTError.timeout(.response): \"a response in the bare loop\"",
         trigger="HostileCLITests.testTheBenchsBareLoopTimesOutNamingTheResponseItWaitedFor"),
    Wait("Sources/BareATT/PlainPeer.swift",
         "let counted: Void? = reached.wait(until: { _ in writeCommands >= total ? () : nil },",
         bound="PlainPeer.waitUntil(writeCommands:timeout:): its timeout, then BareATTError.timeout(.writeCommandsCounted(N)): \"the plain peer to count N Write Commands\"",
         trigger="BareATTTests.testWaitingForCommandsThePeerNeverGetsTimesOutNamingTheCountAndTheLimit"),
    Wait("Sources/GATTClient/GATTClient+Security.swift",
         "try await once.value()",
         bound="the security retry's wait for POLLOUT while pairing runs (a send refused with ENOTCONN right after a raise): withDeadline(the transaction timeout), then \"the link to take data again after raising security to LEVEL (pairing)\"; at most GATTClient.pairingSendRetries waits",
         trigger="PairingRetryTests.testPairingThatNeverEndsTimesOutNamingTheLinkAndTheLevel"),
    Wait("Sources/BenchMeasurement/BenchRun.swift",
         "for try await part in group { all.append(part) }",
         bound="bench --bearers N: the writers of one round, each ending at its share of --count or at the --duration deadline, each write bounded by the transaction timeout (--timeout), whose error ends the round",
         trigger="BenchBearersTests.testAWriterWhoseBearerNeverAnswersTimesOutNamingIt"),
    Wait("Sources/BenchMeasurement/BareTurns.swift",
         "return try await withCheckedThrowingContinuation { (c: CheckedContinuation<T, any Error>) in",
         bound="a bare-loop turn on the socket the bearer lends (ATTBearer.lend): the turn's own polls, each under --timeout; a connection error at once when the bearer has ended",
         trigger="BenchCommandTests.testABareLoopTurnThatGetsNoAnswerTimesOutNamingIt"),
    Wait("Sources/GATTClient/Continuation.swift",
         "try await withCheckedThrowingContinuation(body)",
         bound="withEngineContinuation (every build): a wrapper, not a wait of its own; each caller is listed above",
         trigger="DeadlineAuditTests.testEveryRequestOfEveryProcedureTimesOutNamingItsResponse"),
    Wait("Sources/Mirror/ScanProcedure.swift",
         "let (s, e) = try await finalRead.value",
         bound="the scan's final read of scanState and scanError: two reads, each under the ATT transaction timeout",
         trigger="MirrorScanTests.testAFinalReadThatGetsNoAnswerEndsAtTheATTTimeoutAndTheScanStillReports"),
    Wait("Sources/MirrorCommandLine/Commands/ScanCommand.swift",
         "try? await MonotonicClock().sleep(for: .seconds(1))",
         bound="the status line's once-a-second redraw: a one-second sleep in a task cancelled when the scan ends",
         trigger="ScanCommandTests.testTheStatusLineRedrawsEverySecondOnATerminalAndStopsWithTheScan"),
    Wait("Sources/LinuxBluetooth/InterruptSignals.swift",
         "guard cbz_poll_one(fd, CBZ_POLLIN, -1, &revents) > 0 else { continue }",
         bound="the signalfd's thread of a command without a loop (discover, pair, bonds; a connecting command reads the signalfd as a source of its loop instead): waits for SIGINT/SIGTERM for the life of the process by design; no operation waits on it",
         trigger="untriggered: by design (a process-lifetime signal thread)"),
    Wait("Sources/LinuxBluetooth/StopSignals.swift",
         "while sigwait(&set, &received) != 0 {}",
         bound="mirror-sim and hostile-peer run until SIGINT or SIGTERM by design (blocked from their first line, so none is lost); no operation waits on it",
         trigger="HostileCLITests.testASIGTERMRightAfterTheListeningLineEndsThePeerEveryTime"),
    Wait("Sources/TestSupport/ToolProcess.swift",
         "if done.wait(timeout: .now() + timeout) == .timedOut {",
         bound="ToolProcess.run: the run's timeout (60 s unless given); then the tool is terminated and the run throws, naming it",
         trigger="GATTCommandTests.testARunThatDoesNotEndInTimeIsTerminatedAndNamed"),
    Wait("Sources/TestSupport/ToolProcess.swift",
         "_ = done.wait(timeout: .now() + 5)",
         bound="ToolProcess.run: 5 s for a terminated tool to exit",
         trigger="GATTCommandTests.testARunThatIgnoresTheTerminationIsWaitedForAtMostFiveSecondsMore"),
    Wait("Sources/TestSupport/ToolProcess.swift",
         "group.wait()",
         bound="ToolProcess.run: its output pipes reach end of file when the tool has exited (bounded by the two waits above)",
         trigger="GATTCommandTests.testARunThatDoesNotEndInTimeIsTerminatedAndNamed"),
    Wait("Sources/TestSupport/ScriptedPeer.swift",
         "await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in queue.async { c.resume() } }",
         bound="ScriptedPeer.flush: the peer's serial reader queue runs what was queued before it; nothing else is waited for",
         trigger="EngineTests.testStaleTimerOfAnEarlierWriteNeverResolvesALaterWrite"),
    Wait("Sources/TestSupport/ScriptedPeer.swift",
         "if !done { try? await once.value() }",
         bound="ScriptedPeer.waitForSent: a test helper; the test's own `within` limit bounds it",
         trigger="EngineTests.testStaleTimerOfAnEarlierWriteNeverResolvesALaterWrite"),
    Wait("Sources/TestSupport/ScriptedPeer.swift",
         "if arrived.wait(timeout: deadline) == .timedOut {",
         bound="ScriptedPeer.next(timeout:): its timeout, then nil (the test asserts on it)",
         trigger="SimulatorServerTests.testFaultsDropDelayDisconnectAndNotifyFirst"),
    Wait("Sources/HostilePeer/HostilePeer.swift",
         "state.wait(until: { s in predicate(s) ? true : nil }, timeoutNanoseconds:",
         bound="HostilePeer.wait(timeout:until:) and close(): the caller's timeout (close: 10 s for the accept thread, 10 s for the connections), then it answers whether the state got there",
         trigger="HostileScenarioTests.testAHostilePeerWaitForCountersThatNeverComeEndsAtItsTimeout"),
    Wait("Sources/BareATT/PlainPeer.swift",
         "cbz_poll_two(listener, CBZ_POLLIN, wake, CBZ_POLLIN, -1, &revents, &wakeEvents)",
         bound="the plain peer's accept thread (mirror bench --loopback, gatt-bench; a server thread, not an operation): close() signals its eventfd",
         trigger="BenchCommandTests.testLoopbackNeedsNoTarget"),
    Wait("Sources/BareATT/PlainPeer.swift",
         "_ = cbz_poll_one(fd, CBZ_POLLOUT, -1, &revents)",
         bound="the plain peer's send: ends when the client reads or closes (then send fails)",
         trigger="BenchCommandTests.testLoopbackNeedsNoTarget"),
    Wait("Sources/BareATT/PlainPeer.swift",
         "_ = cbz_poll_one(fd, CBZ_POLLIN, -1, &revents)",
         bound="the plain peer's receive: ends when the client sends or closes (recv returns 0)",
         trigger="BenchCommandTests.testLoopbackNeedsNoTarget"),
]

OTHER_LIMITS = [
    Limit(bound="mirror check's quiet period after the first request of each kind (ATTProbe.quiet on awaitInbound's wait): 100 ms or four Exchange MTU round trips, then the responses that came are judged",
          trigger="CheckCommandTests.testTheFaultFreeSimulatorGivesNoFindingInTextAndJSON"),
    Limit(bound="ManagementSocket.run on HCISocket's nextDatagram poll: \"no Command Complete or Command Status from the kernel within N s\"",
          trigger="ManagementTests.testASilentKernelIsATimeoutThatSaysWhatWasAwaited"),
    Limit(bound="HCILinkMonitor.awaitEncryptionFailure on awaitEvent's wait: the caller's limit (500 ms after a connect refused with EACCES), then nil",
          trigger="HCILinkMonitorTests.testAFailedEncryptionChangeIsFoundWithinItsLimit"),
    Limit(bound="PairingAgent.pair on HCISocket's nextDatagram poll: its limit (pairLimit, 60 s), then Cancel Pair Device and \"timed out after N s waiting for the SMP pairing with ADDR to end\"",
          trigger="PairingAgentTests.testASilentKernelTimesOutNamingTheStepAndCancels"),
    Limit(bound="the shell's wait (GATTPeer's DeliveryTally.awaitValues): withDeadline(--timeout S, default the connection's 30 s), then \"timed out after S waiting for N values of the background subscriptions (M came)\"",
          trigger="SharedNotificationsTests.testAWaitEndsWhenItsClockPassesTheLimitAndLeavesLateValuesUncounted"),
    Limit(bound="MirrorWiFi.list: withDeadline(timeout, waitingFor: \"the Wi-Fi network list (wifiScan, wifiNumNetworks, wifiNetworkSSIDEnum)\") around its requests",
          trigger="DeadlineAuditTests.testWiFiWaitsTimeOutNamingWhatTheyWaitedFor"),
    Limit(bound="MirrorWiFi.status: withDeadline(timeout, waitingFor: \"wifiConnectionStatus\") around its read",
          trigger="DeadlineAuditTests.testWiFiStatusTimesOutNamingWhatItWaitedFor"),
    Limit(bound="HCILinkMonitor.awaitEvent, under awaitDisconnectReason(limit:) and awaitEncryptionFailure(limit:): the caller's limit (LinkSession.disconnectReasonWait, 500 ms), or the reader's end (at HCILinkMonitor.waitForState's waits, on the loop's thread or off it)",
          trigger="HCILinkMonitorTests.testAwaitingTheDisconnectReasonIsBounded"),
    Limit(bound="a link request's waits (LinkRequestLimits: commandAnswer 2 s, completion 10 s, dataLengthChange 2 s), then .timedOut(LinkWaitTimeout): \"no LE Connection Update Complete for handle 0x0040 within 10 s\"; a Disconnection Complete of the link or the reader's end ends it at once (at HCILinkMonitor.waitForState's waits, on the loop's thread or off it)",
          trigger="HCILinkMonitorTests.testAnUpdateWithNoCompletionTimesOutNamingTheEventTheHandleAndTheLimit"),
]

# Only the signal thread (a wait for the life of the process, by design) has no trigger test.
MAX_UNTRIGGERED = 1


def waits_in(root):
    """(file, trimmed line) of each wait in root/Sources."""
    hits = []
    for path in sorted((root / "Sources").rglob("*.swift")):
        relative = path.relative_to(root).as_posix()
        for raw in path.read_text(encoding="utf-8").split("\n"):
            line = raw.strip()
            if line.startswith("//") or line.startswith("public func") or line.startswith("func"):
                continue
            if any(p.search(line) for p in PATTERNS):
                hits.append((relative, line))
    return hits


def test_methods(root):
    """{"TestClass": {"testName", ...}} for each XCTestCase class under root/Tests (a class's tests are the
    `func test...()` of the files that declare or extend it)."""
    declaration = re.compile(r"^(?:final )?class (\w+)\s*:\s*XCTestCase\b", re.M)
    extension = re.compile(r"^extension (\w+)\b", re.M)
    method = re.compile(r"^    (?:@\w+ )*func (test\w+)\(\)", re.M)
    classes = {}
    for path in (root / "Tests").rglob("*.swift"):
        text = path.read_text(encoding="utf-8")
        # A class's body runs to the next top-level declaration.
        tops = sorted([(m.start(), m.group(1), True) for m in declaration.finditer(text)]
                      + [(m.start(), m.group(1), False) for m in extension.finditer(text)])
        boundary = re.compile(r"^(?:(?:public|private|fileprivate|internal|package|final) )*"
                              r"(?:class|struct|enum|extension|protocol|actor|func) ", re.M)
        for start, name, is_class in tops:
            end = next((m.start() for m in boundary.finditer(text, start + 1)), len(text))
            if is_class or name in classes:
                classes.setdefault(name, set()).update(method.findall(text[start:end]))
    return classes


def check_trigger(trigger, what, classes, problems):
    parts = trigger.split(".")
    if len(parts) != 2 or not parts[1].startswith("test"):
        problems.append(f"the trigger of {what} is not TestClass.testName: {trigger}")
    elif parts[0] not in classes:
        problems.append(f"no XCTestCase class {parts[0]} under Tests/ for {what}")
    elif parts[1] not in classes[parts[0]]:
        problems.append(f"no test {parts[1]} in class {parts[0]} for {what}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[2])
    root = parser.parse_args().root
    hits = waits_in(root)
    classes = test_methods(root)
    problems = []
    if len(hits) < 10 or len(classes) < 10:
        problems.append(f"found {len(hits)} waits and {len(classes)} test classes: is {root} the package?")
    for file, line in hits:
        if not any(file == w.file and w.snippet in line for w in WAITS):
            problems.append(f"an unlisted wait: {file}: {line}\n  add it to WAITS in {Path(__file__).name} "
                            "with its bound and a test that runs into it")
    untriggered = []
    for w in WAITS:
        what = f"{w.file}: {w.snippet}"
        if not any(file == w.file and w.snippet in line for file, line in hits):
            problems.append(f"a stale entry (no such wait any more): {what}")
        if not w.bound.strip():
            problems.append(f"no bound for {what}")
        if w.trigger.startswith("untriggered: "):
            untriggered.append(what)
        else:
            check_trigger(w.trigger, what, classes, problems)
    for limit in OTHER_LIMITS:
        check_trigger(limit.trigger, limit.bound, classes, problems)
    if len(untriggered) > MAX_UNTRIGGERED:
        problems.append(f"{len(untriggered)} waits without a trigger test (at most {MAX_UNTRIGGERED}): {untriggered}")
    for p in problems:
        print("waits: " + p)
    print(f"waits: {len(hits)} waits in the sources, {len(WAITS)} listed, {len(untriggered)} without a trigger test; "
          + ("ok" if not problems else f"{len(problems)} problems"))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
