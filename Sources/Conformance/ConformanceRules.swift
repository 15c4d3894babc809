// The rules `mirror check` holds a GATT server to, stated once: each rule's id (also the name of the mirror-sim
// fault that breaks it), its level, the Core Specification 5.4 section it cites, the rule, and what to change.

/// How strongly the Core Specification says it (a SHALL broken fails the check; a SHOULD and a note do not).
public enum ConformanceLevel: String, Sendable, CaseIterable, Comparable {
    case shall = "SHALL"
    case should = "SHOULD"
    case note = "note"

    public static func < (a: Self, b: Self) -> Bool {
        allCases.firstIndex(of: a)! < allCases.firstIndex(of: b)!
    }

    /// The heading of a group of findings: "SHALL broken", "SHOULD not followed", "notes".
    public var heading: String {
        switch self {
        case .shall: return "SHALL broken"
        case .should: return "SHOULD not followed"
        case .note: return "notes"
        }
    }
}

/// One rule of the catalogue.
public struct ConformanceRule: Sendable, Hashable {
    /// "invalid-handle-zero": the finding's id and the name of the fault that breaks it (`mirror-sim --fault ID`).
    public let id: String
    public let level: ConformanceLevel
    /// "Core 5.4 Vol 3 Part F §3.4.4.3".
    public let citation: String
    /// The rule in one line, as the server must behave.
    public let rule: String
    /// What a firmware engineer should change when it is broken.
    public let advice: String

    init(_ id: String, _ level: ConformanceLevel, _ citation: String, _ rule: String, advice: String) {
        self.id = id
        self.level = level
        self.citation = "Core 5.4 " + citation
        self.rule = rule
        self.advice = advice
    }

    /// The rule with this id, if the catalogue has it.
    public static func named(_ id: String) -> ConformanceRule? { catalogue.first { $0.id == id } }

    public static let invalidHandleZero = ConformanceRule(
        "invalid-handle-zero", .shall, "Vol 3 Part F §3.2.2, §3.4.4.3",
        "a Read Request to handle 0x0000 (reserved) is answered with Error Response 0x01 Invalid Handle",
        advice: "reject handle 0x0000 before looking it up: answer Error Response, code 0x01 Invalid Handle, request opcode 0x0A, handle 0x0000")
    public static let invalidHandlePastEnd = ConformanceRule(
        "invalid-handle-past-end", .shall, "Vol 3 Part F §3.4.4.3",
        "a Read Request to the handle after the last attribute is answered with Error Response 0x01 Invalid Handle",
        advice: "a handle no attribute has is Invalid Handle (0x01), not Attribute Not Found (0x0A, which is for the range requests of §3.4.3 and §3.4.4.1)")
    public static let errorEcho = ConformanceRule(
        "error-echo", .shall, "Vol 3 Part F §3.4.1.1",
        "every Error Response names the opcode of the request it answers and the handle in error (0x0000 when there is none)",
        advice: "fill Request Opcode In Error with the request's own opcode and Attribute Handle In Error with the handle the request named (a range request's Starting Handle when nothing was found)")
    public static let requestNotSupported = ConformanceRule(
        "request-not-supported", .shall, "Vol 3 Part F §3.4.1.1, §3.4.8",
        "a request with an opcode the server does not support (0x3E, unassigned) is answered with Error Response 0x06 Request Not Supported",
        advice: "answer every unknown opcode whose Command Flag (bit 6) is 0 with Error Response 0x06, handle 0x0000: a client waits 30 s for an answer and then may send nothing more on the bearer")
    public static let commandIgnored = ConformanceRule(
        "command-ignored", .shall, "Vol 3 Part F §3.3.1, §3.4.1.1",
        "a command the server does not support (Command Flag set: 0x7E, unassigned) gets no answer at all",
        advice: "drop an unknown opcode with bit 6 (the Command Flag) set without answering: the client is not waiting, so any PDU sent looks like an answer to its next request")
    public static let mtuExchange = ConformanceRule(
        "mtu-exchange", .shall, "Vol 3 Part F §3.2.8, §3.4.2.2",
        "the Exchange MTU Response's Server Rx MTU is at least 23 (the default LE ATT_MTU)",
        advice: "answer Exchange MTU with the real receive size of the server, never below 23")
    public static let mtuAnsweredOnce = ConformanceRule(
        "mtu-answered-once", .shall, "Vol 3 Part F §3.3.2, §3.4.2.2",
        "one Exchange MTU Request gets exactly one Exchange MTU Response",
        advice: "send the Exchange MTU Response once, from one place (a stack and an application that both answer make two)")
    public static let noUnsolicitedResponse = ConformanceRule(
        "no-unsolicited-response", .shall, "Vol 3 Part F §3.3.2",
        "the server sends a response only to an outstanding request, once: no response without a request, no duplicate",
        advice: "send exactly one response per request and none otherwise; a repeated response is taken by the client as the answer to its next request")
    public static let responseWellFormed = ConformanceRule(
        "response-well-formed", .shall, "Vol 3 Part F §3.2.8, §3.3, §3.4",
        "every response is a whole PDU of its opcode (each parameter §3.4 defines, no octet missing or left over) and no longer than ATT_MTU",
        advice: "build each response from its opcode's parameter table and send exactly those octets; cut a value to fit ATT_MTU rather than send a longer PDU (the client drops a PDU it cannot parse and may end the bearer)")
    public static let responseWithinTimeout = ConformanceRule(
        "response-within-timeout", .shall, "Vol 3 Part F §3.3.3",
        "every request is answered within the ATT transaction timeout (30 s; `--timeout` here)",
        advice: "answer each request at once, or with an Error Response; after 30 s the client must treat the bearer as dead and send nothing more on it")
    public static let cccdPresent = ConformanceRule(
        "cccd-present", .shall, "Vol 3 Part G §3.3.1.1, §3.3.3.3",
        "a characteristic whose properties have Notify or Indicate has a Client Characteristic Configuration descriptor (0x2902)",
        advice: "add a CCCD (0x2902, readable and writable) to every characteristic that notifies or indicates, or clear those property bits")
    public static let gapDeviceName = ConformanceRule(
        "gap-device-name", .shall, "Vol 3 Part C §12.1",
        "the GAP service (0x1800) has a readable Device Name characteristic (0x2A00)",
        advice: "put a Device Name characteristic (0x2A00, Read property) in the GAP service 0x1800")
    public static let databaseHash = ConformanceRule(
        "database-hash", .shall, "Vol 3 Part G §7.3",
        "the Database Hash (0x2B2A) read equals AES-CMAC over the database as discovered, least significant octet first like every ATT field",
        advice: "compute the hash over the declarations and descriptors of §7.3.1 in handle order, recompute it whenever the database changes, and serve the CMAC's output reversed (least significant octet first)")
    public static let readBlobOffset = ConformanceRule(
        "read-blob-offset", .shall, "Vol 3 Part F §3.4.4.5, §3.4.4.6",
        "a Read Blob Request at an offset inside the value returns the value from that offset",
        advice: "start the Read Blob Response's part at the Value Offset of the request, not at 0")
    public static let readBlobPastEnd = ConformanceRule(
        "read-blob-past-end", .shall, "Vol 3 Part F §3.4.4.5",
        "a Read Blob Request at an offset past the end of the value is answered with Error Response 0x07 Invalid Offset",
        advice: "compare the Value Offset with the value's length first: greater is Invalid Offset (0x07); equal is an empty part")

    public static let readBlobAtEnd = ConformanceRule(
        "read-blob-at-end", .shall, "Vol 3 Part F §3.4.4.5, §3.4.4.6",
        "a Read Blob Request at an offset equal to the value's length is answered with an empty part, not an error",
        advice: "only an offset greater than the length is Invalid Offset; at the length answer a Read Blob Response with no value (a client's long read of a value of exactly MTU-1 octets ends so)")
    public static let readMultiple = ConformanceRule(
        "read-multiple", .shall, "Vol 3 Part F §3.4.4.7, §3.4.4.8",
        "a Read Multiple Request for values Read gives is answered with those values in the order of the handles asked, concatenated and cut at ATT_MTU - 1 octets (or 0x06 Request Not Supported where the server has no Read Multiple)",
        advice: "read the handles in the order the request lists them, append each value, and stop at ATT_MTU - 1 octets: never sort the handles, drop a value that does not fit whole, or cut each value on its own")
    public static let discoveryServicesAgree = ConformanceRule(
        "discovery-services-agree", .shall, "Vol 3 Part G §4.4.1, §4.4.2",
        "Discover All Primary Services (Read By Group Type) and Discover Primary Service by UUID (Find By Type Value) find the same services",
        advice: "answer Find By Type Value for type 0x2800 from the same service table as Read By Group Type, with each service's handle and End Group Handle")
    public static let discoveryCharacteristicsAgree = ConformanceRule(
        "discovery-characteristics-agree", .shall, "Vol 3 Part G §4.6.1, §4.7.1",
        "every characteristic declaration Read By Type (0x2803) finds is in Find Information with type 0x2803, and no other",
        advice: "serve Find Information and Read By Type from the one attribute table, with every declaration in both")
    public static let characteristicValueHandle = ConformanceRule(
        "characteristic-value-handle", .shall, "Vol 3 Part G §3.3.1, §3.3.2",
        "a characteristic declaration's Characteristic Value Handle is the handle right after the declaration",
        advice: "put the value attribute immediately after its declaration and name that handle in the declaration")
    public static let handlesAscending = ConformanceRule(
        "handles-ascending", .shall, "Vol 3 Part F §3.4.3.2, §3.4.3.4, §3.4.4.2, §3.4.4.10",
        "the handles in each discovery response are in ascending order and inside the range asked for",
        advice: "walk the attribute table in handle order from the Starting Handle and stop at the Ending Handle")
    public static let readByTypeConsistent = ConformanceRule(
        "read-by-type-consistent", .shall, "Vol 3 Part F §3.4.4.2",
        "a Read By Type Response's Length field is the length of each handle-value pair, and each value is the one Read gives",
        advice: "set Length to 2 + the value length of every pair in the response (pairs of one length only), and serve the same value as for a Read")
    public static let extendedPropertiesPresent = ConformanceRule(
        "extended-properties-present", .shall, "Vol 3 Part G §3.3.1.1, §3.3.3.1",
        "a characteristic whose properties have Extended Properties (bit 7) has a Characteristic Extended Properties descriptor (0x2900)",
        advice: "add the 0x2900 descriptor with the extended properties, or clear bit 7 of the declaration's properties")
    public static let serviceChanged = ConformanceRule(
        "service-changed", .should, "Vol 3 Part G §7.1",
        "the GATT service (0x1801) has Service Changed (0x2A05) with Indicate and a CCCD, so that a client learns when the database changes",
        advice: "declare Service Changed with the Indicate property and a CCCD in the GATT service (it must exist wherever the database can change)")
    public static let supportedFeatures = ConformanceRule(
        "supported-features", .shall, "Vol 3 Part G §2.5.2.1, §7.2, §7.4",
        "a server with a Database Hash has Client Supported Features (0x2B29), and Server Supported Features (0x2B3A) has no reserved bit set",
        advice: "serve Client Supported Features beside the Database Hash (robust caching needs both); keep Server Supported Features' reserved bits 0")

    public static let writeNotPermitted = ConformanceRule(
        "write-not-permitted", .shall, "Vol 3 Part F §3.2.5, §3.4.5.1",
        "a Write Request to a named characteristic without the Write property is refused with Error Response 0x03 Write Not Permitted",
        advice: "check the attribute's write permission before anything else and answer 0x03 Write Not Permitted; never a Write Response for a value not written")
    public static let writeTooLong = ConformanceRule(
        "write-too-long", .shall, "Vol 3 Part F §3.2.9, §3.4.5.1",
        "a Write Request with a value longer than the attribute takes (513 octets: no attribute holds more than 512) is refused with 0x0D Invalid Attribute Value Length",
        advice: "compare the value's length with the attribute's maximum (at most 512) and answer 0x0D Invalid Attribute Value Length; never cut a value to fit")
    public static let prepareWriteEcho = ConformanceRule(
        "prepare-write-echo", .shall, "Vol 3 Part F §3.4.6.2",
        "a Prepare Write Response echoes the request's handle, offset and value octet for octet",
        advice: "copy the handle, the offset and the part's value from the request into the response (a reliable write compares them)")
    public static let executeWrite = ConformanceRule(
        "execute-write", .shall, "Vol 3 Part F §3.4.6.3",
        "after Prepare Writes and Execute Write (flags 0x01) the value read back is the one written; after flags 0x00 it is unchanged",
        advice: "on Execute Write 0x01 write every queued part at its offset, then answer; on 0x00 drop the queue and write nothing")
    public static let writeInvalidOffset = ConformanceRule(
        "write-invalid-offset", .shall, "Vol 3 Part F §3.4.6.1, §3.4.6.3",
        "a prepared write at an offset past the value's end is refused with 0x07 Invalid Offset, at Prepare Write or at Execute Write",
        advice: "check each queued part's offset against the value's length (at Prepare Write or Execute Write) and answer 0x07 Invalid Offset past the end")

    /// Every rule `mirror check` holds, in the order it checks them.
    public static let catalogue: [ConformanceRule] = [
        mtuExchange, mtuAnsweredOnce, noUnsolicitedResponse, responseWithinTimeout, responseWellFormed, errorEcho,
        invalidHandleZero, invalidHandlePastEnd, requestNotSupported, commandIgnored,
        readBlobOffset, readBlobPastEnd, cccdPresent, gapDeviceName, databaseHash,
        readBlobAtEnd, readMultiple, discoveryServicesAgree, discoveryCharacteristicsAgree, characteristicValueHandle, handlesAscending,
        readByTypeConsistent, extendedPropertiesPresent, serviceChanged, supportedFeatures,
        writeNotPermitted, writeTooLong, prepareWriteEcho, executeWrite, writeInvalidOffset,
    ]

    /// The rules that need a write (`--writes`): nothing is written unless the user names it.
    public static let writeRules: [ConformanceRule] = [writeNotPermitted, writeTooLong, prepareWriteEcho, executeWrite, writeInvalidOffset]
}
