// The library errors' rows in the error table: transport, socket and target errors (ATTStack), and the
// GATT client's errors. Kept next to ErrorTable.swift's `ErrorReport.init(_:)`.

import ATTStack
import Bonding
import LinuxBluetooth
import LinkCore
import GATTClient
import GATTPeer
import JSON
import Mirror

#if canImport(Glibc)
import Glibc
#endif

extension ErrorReport {
    /// The report for an error thrown by a library; nil for errors this table does not know.
    static func libraryReport(_ error: any Error) -> ErrorReport? {
        switch error {
        case let e as TransportError:
            return transportReport(e)
        case let e as SocketError:
            return socketReport(e)
        case let e as GATTError:
            return gattReport(e)
        case let e as GATTAttributeError:
            return ErrorReport(cliError: .att(ATTErrorFacts(e)))
        case let e as AttributeTypeNotFound:
            // The server answered Read By Type with Attribute Not Found over the whole range.
            return ErrorReport(cliError: .att(ATTErrorFacts(code: .attributeNotFound, request: .readByTypeRequest, handle: 0x0001,
                                                            handleLabel: e.description, rejectedBy: .peer)))
        case let e as GATTTimeoutError:
            return gattReport(.timeout(e))
        case let e as GATTDisconnectedError:
            return gattReport(.disconnected(e))
        case let e as GATTProtocolViolation:
            return gattReport(.protocolViolation(e))
        case let e as MirrorProfileError:
            return ErrorReport(status: .usage, message: e.description,
                               fields: [("file", .string(e.source)), ("problem", .string(e.problem))])
        case let e as MirrorProcedureError:
            // The server is not the mirror the procedure needs (no mirror service, a characteristic missing).
            return ErrorReport(status: .failure, message: e.description, fields: [("problem", .string(e.problem))])
        case let e as UploadReceiverError:
            return ErrorReport(status: .failure, message: e.description, fields: [
                ("host", .string(e.host)), ("port", .int(Int(e.port))), ("errno", .int(Int(e.errno.rawValue))),
                ("errnoName", .string(e.errno.name)),
                ("problem", .string(e.problem)),
            ])
        case let e as PairingError:
            return pairingReport(e)
        case let e as PairingUnavailableError:
            // No CAP_NET_ADMIN for the agent's management socket (GATTPeer's Pairing.openAgent).
            return ErrorReport(status: .unsupported, message: e.description)
        case let e as PairingWithoutMITMError:
            // --require-mitm and an unauthenticated key (Just Works): this host's refusal, as a declined value is (4).
            return ErrorReport(status: .localRefusal, message: e.description, fields: [
                ("peer", .string(e.peer)), ("adapter", .string(e.adapter)), ("method", .string(e.method.rawValue)),
                ("authenticated", .bool(false)), ("keysRemoved", .bool(e.removalProblem == nil)),
            ])
        case let e as BondOverwriteError:
            // A pairing's bond naming a bonded identity its IRK does not back: refused here, the stored bond kept (4).
            return ErrorReport(status: .localRefusal, message: e.description, fields: [
                ("identity", .string(e.identity.description)), ("pairedThrough", .string(e.pairedThrough.description)),
                ("file", .string(e.file)), ("storedHasIRK", .bool(e.storedHasIRK)),
            ])
        case let e as EncryptionFailedError:
            return ErrorReport(status: .connection, message: e.description, fields: [
                ("peer", .string(e.peer)), ("adapter", .string(e.adapter)), ("hciStatus", .int(Int(e.status))),
                ("hciStatusName", HCIStatus.name(e.status).map { .string($0) } ?? .null), ("lostBond", .bool(e.isLostBond)),
            ])
        case let e as BondStoreError:
            // A bond file or its directory (Bonding): what is wrong, naming the file and the syscall.
            var fields: [(String, JSONValue)] = [("problem", .string(e.description))]
            if case .corrupt(let path, _) = e { fields.append(("file", .string(path))) }
            return ErrorReport(status: e == .noDirectory ? .unsupported : .failure, message: e.description, fields: fields)
        case let e as BondKeysError:
            // More keys than one Load Long Term Keys takes: the way out is the CLI's `bonds remove`.
            return ErrorReport(status: .failure, message: "\(e): `mirror bonds remove` some")
        case let e as BearerTargetError:
            return ErrorReport(status: .usage, message: e.description, fields: [("token", .string(e.input))])
        default:
            return nil
        }
    }

    /// A pairing that ended without keys: a timeout (5), a refusal of this side's (4), no connection (6), no
    /// CAP_NET_ADMIN (7), else the peer's or the kernel's refusal (1).
    static func pairingReport(_ e: PairingError) -> ErrorReport {
        let status: ExitStatus
        if e.waitedFor != nil { status = .timeout }
        else if e.refusedHere != nil { status = .localRefusal }
        else if e.status == 0x04 { status = .connection }
        else if e.status == 0x14 { status = .unsupported }
        else { status = .failure }
        func byte(_ b: UInt8?) -> JSONValue { b.map { .int(Int($0)) } ?? .null }
        return ErrorReport(status: status, message: e.description, fields: [
            ("address", .string(e.address.description)), ("adapter", .string(e.adapter)),
            ("managementStatus", byte(e.status)), ("managementStatusName", e.status.map { .string(managementStatusName($0)) } ?? .null),
            ("method", e.method.map { .string($0.rawValue) } ?? .null),
            ("authenticationStatus", byte(e.authenticationStatus)), ("disconnectReason", byte(e.disconnectReason)),
            ("refusedHere", e.refusedHere.map { .string($0) } ?? .null),
            ("smpReason", byte(e.smpFailure?.reason)),
            ("smpReasonName", e.smpFailure.flatMap { SMP.reasonName($0.reason) }.map { .string($0) } ?? .null),
            ("smpSentBy", e.smpFailure.map { .string($0.sentBy == .peer ? "peer" : "thisHost") } ?? .null),
            ("linkLossReason", byte(e.linkLossReason)),
            ("linkLossReasonName", e.linkLossReason.flatMap { HCIStatus.name($0) }.map { .string($0) } ?? .null),
            ("waitingFor", e.waitedFor.map { .string($0) } ?? .null), ("seconds", e.seconds.map { .double($0) } ?? .null),
        ])
    }

    static func gattReport(_ e: GATTError) -> ErrorReport {
        switch e {
        case .attribute(let a):
            return ErrorReport(cliError: .att(ATTErrorFacts(a)))
        case .timeout(let t):
            let seconds = Double(t.after.components.seconds) + Double(t.after.components.attoseconds) / 1e18
            return ErrorReport(status: .timeout, message: t.description, fields: [
                ("waitingFor", .string(t.waitingFor)), ("handle", t.handle.map { .int(Int($0)) } ?? .null),
                ("handleName", t.handleName.map { .string($0) } ?? .null), ("seconds", .double(seconds)),
            ])
        case .disconnected(let d):
            return ErrorReport(status: .connection, message: d.description,
                               fields: [("reason", .string(d.reason)), ("during", .string(d.during))])
        case .protocolViolation(let p):
            return ErrorReport(status: .protocolViolation, message: p.description, fields: [
                ("received", .string(ATTHex.string(p.received))), ("expected", .string(p.expected)),
                ("problem", .string(p.problem)),
            ])
        case .cancelled(let operation):
            return ErrorReport(status: .failure, message: e.description, fields: [("operation", .string(operation))])
        case .transport(let t, let operation):
            var report = transportReport(t)
            report.message = "\(operation): \(report.message)"
            report.fields.insert(("operation", .string(operation)), at: 0)
            return report
        case .unsupported(let s):
            return ErrorReport(status: .failure, message: s)
        }
    }

    static func transportReport(_ e: TransportError) -> ErrorReport {
        switch e {
        case .socket(let s): return socketReport(s)
        case .closedByPeer:
            return ErrorReport(status: .connection, message: "connection lost: the peer closed the connection",
                               fields: [("reason", "closedByPeer")])
        case .closedLocally(let reason):
            return ErrorReport(status: .connection, message: "connection closed by this host: \(reason)",
                               fields: [("reason", "closedLocally")])
        case .truncated(let received, let size):
            return ErrorReport(status: .protocolViolation, message: e.description,
                               fields: [("received", .int(received)), ("bufferSize", .int(size))])
        case .noSuchAdapter(let name, let available):
            return ErrorReport(status: .unsupported, message: e.description,
                               fields: [("adapter", .string(name)), ("available", .array(available.map { .string($0) }))])
        case .adapterDown(let name):
            return ErrorReport(status: .unsupported, message: e.description, fields: [("adapter", .string(name))])
        case .connectTimedOut(let peer, let seconds):
            return ErrorReport(status: .timeout, message: e.description,
                               fields: [("waitingFor", .string("a connection to \(peer)")), ("seconds", .double(seconds))])
        case .invalidTarget(let t):
            return ErrorReport(status: .usage, message: t.description, fields: [("token", .string(t.input))])
        case .hciCommandFailed(let command, let adapter, let status, _):
            return ErrorReport(status: .connection, message: e.description,
                               fields: [("command", .string(command)), ("adapter", .string(adapter)),
                                        ("hciStatus", status.map { .int(Int($0)) } ?? .null)])
        case .managementCommandFailed(let command, let adapter, let status, _):
            return ErrorReport(status: .connection, message: e.description,
                               fields: [("command", .string(command)), ("adapter", .string(adapter)),
                                        ("mgmtStatus", status.map { .int(Int($0)) } ?? .null),
                                        ("mgmtStatusName", status.map { .string(managementStatusName($0)) } ?? .null)])
        case .enhancedBearerRefused(let peer, let result):
            return ErrorReport(status: .connection, message: e.description,
                               fields: [("peer", .string(peer)), ("l2capResult", .int(Int(result.rawValue))),
                                        ("l2capResultName", .string(result.name))])
        case .handshakeTimedOut(let peer, let waitingFor, let seconds):
            return ErrorReport(status: .timeout, message: e.description,
                               fields: [("waitingFor", .string("\(waitingFor) from \(peer)")), ("seconds", .double(seconds))])
        }
    }

    static func socketReport(_ e: SocketError) -> ErrorReport {
        var fields: [(String, JSONValue)] = [
            ("syscall", .string(e.syscall)), ("errno", .int(Int(e.errno.rawValue))), ("errnoName", .string(e.errno.name)),
            ("context", .string(e.context)),
        ]
        if !e.advice.isEmpty { fields.append(("advice", .string(e.advice))) }
        // A file (the btsnoop capture, a profile): not the connection's fault, whatever errno says.
        if ["open", "write", "read", "fsync", "close", "creat", "rename", "unlink"].contains(e.syscall)
            || e.syscall.hasPrefix("getxattr") {
            return ErrorReport(status: .failure, message: e.description, fields: fields)
        }
        switch e.errno {
        case .addressFamilyNotSupported:
            fields.append(("needs", "a kernel with Bluetooth (AF_BLUETOOTH)"))
            return ErrorReport(status: .unsupported, message: e.description,
                               hint: "without Bluetooth, the GATT commands still work against the simulator on a unix:PATH target",
                               fields: fields)
        case .permissionDenied where e.isAuthenticationFailure:
            // An established link the kernel ended with Authentication Failure (HCI 0x05 as EACCES): the connection
            // was lost, as when the same end arrives while a request waits; no capability changes it.
            return ErrorReport(status: .connection, message: e.description, fields: fields)
        case .notPermitted, .permissionDenied:
            fields.append(("needs", "CAP_NET_RAW and CAP_NET_ADMIN"))
            let message = e.advice.isEmpty ? e.description + ": this needs CAP_NET_RAW and CAP_NET_ADMIN" : e.description
            return ErrorReport(status: .unsupported, message: message, fields: fields)
        case .timedOut:
            return ErrorReport(status: .timeout, message: e.description, fields: fields)
        default:
            return ErrorReport(status: .connection, message: e.description, fields: fields)
        }
    }
}

extension ATTErrorFacts {
    /// The facts of a GATT client's attribute error (Core Spec Vol 3 Part F §3.4.1.1).
    public init(_ e: GATTAttributeError) {
        self.init(code: e.code.rawValue, name: e.code.name, requestOpcode: e.requestOpcode.rawValue,
                  requestName: e.requestOpcode.name, handle: e.handle, handleLabel: e.handleName,
                  rejectedBy: e.rejectedBy == .peer ? .peer : .local, valueLength: e.valueLength,
                  budget: e.budget, mtu: e.mtu)
    }
}
