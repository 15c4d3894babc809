// ATT error codes: Core Spec 5.4 Vol 3 Part F §3.4.1.1 (Table 3.4), and the common profile and
// service error codes of the Core Specification Supplement Part B.

/// The error code byte of an ATT Error Response (Core Spec 5.4 Vol 3 Part F §3.4.1.1). Any byte is
/// representable: defined codes have the spec's name and meaning, the others a range name.
public struct ATTErrorCode: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: UInt8

    @inlinable public init(rawValue: UInt8) { self.rawValue = rawValue }
    @inlinable public init(_ rawValue: UInt8) { self.rawValue = rawValue }

    /// Which range of Table 3.4 a code falls in.
    public enum Category: String, Sendable, Hashable, CaseIterable {
        /// A code the Core Spec defines (0x01-0x13).
        case defined
        /// Reserved for future use (0x00, 0x14-0x7F, 0xA0-0xFB).
        case reserved
        /// An application error (0x80-0x9F), defined by a higher layer specification or the application.
        case application
        /// A common profile and service error (0xFC-0xFF, Core Specification Supplement Part B §1.2).
        case commonProfile
    }

    public static let invalidHandle = ATTErrorCode(0x01)
    public static let readNotPermitted = ATTErrorCode(0x02)
    public static let writeNotPermitted = ATTErrorCode(0x03)
    public static let invalidPDU = ATTErrorCode(0x04)
    public static let insufficientAuthentication = ATTErrorCode(0x05)
    public static let requestNotSupported = ATTErrorCode(0x06)
    public static let invalidOffset = ATTErrorCode(0x07)
    public static let insufficientAuthorization = ATTErrorCode(0x08)
    public static let prepareQueueFull = ATTErrorCode(0x09)
    public static let attributeNotFound = ATTErrorCode(0x0A)
    public static let attributeNotLong = ATTErrorCode(0x0B)
    public static let encryptionKeySizeTooShort = ATTErrorCode(0x0C)
    public static let invalidAttributeValueLength = ATTErrorCode(0x0D)
    public static let unlikelyError = ATTErrorCode(0x0E)
    public static let insufficientEncryption = ATTErrorCode(0x0F)
    public static let unsupportedGroupType = ATTErrorCode(0x10)
    public static let insufficientResources = ATTErrorCode(0x11)
    public static let databaseOutOfSync = ATTErrorCode(0x12)
    public static let valueNotAllowed = ATTErrorCode(0x13)
    // Common profile and service error codes (Core Specification Supplement Part B §1.2).
    public static let writeRequestRejected = ATTErrorCode(0xFC)
    public static let cccdImproperlyConfigured = ATTErrorCode(0xFD)
    public static let procedureAlreadyInProgress = ATTErrorCode(0xFE)
    public static let outOfRange = ATTErrorCode(0xFF)

    /// Every code with its own name: 0x01-0x13 and 0xFC-0xFF.
    public static let allNamed: [ATTErrorCode] =
        (0x01...0x13).map { ATTErrorCode(UInt8($0)) } + (0xFC...0xFF).map { ATTErrorCode(UInt8($0)) }

    public var category: Category {
        switch rawValue {
        case 0x01...0x13: return .defined
        case 0x80...0x9F: return .application
        case 0xFC...0xFF: return .commonProfile
        default: return .reserved
        }
    }

    /// The spec's name ("Invalid Attribute Value Length"); a range name for application and reserved codes.
    public var name: String {
        if let entry = Self.table(rawValue) { return entry.name }
        switch category {
        case .application: return "Application Error"
        default: return "Reserved"
        }
    }

    /// One line saying what the code means.
    public var meaning: String {
        if let entry = Self.table(rawValue) { return entry.meaning }
        switch category {
        case .application:
            return "An application error code defined by a higher layer specification or by the application."
        default:
            return "A code reserved for future use by the Bluetooth SIG."
        }
    }

    /// `0x0D Invalid Attribute Value Length`.
    public var description: String { "\(ATTHex.byte(rawValue)) \(name)" }

    static func table(_ raw: UInt8) -> (name: String, meaning: String)? {
        switch raw {
        case 0x01: return ("Invalid Handle", "The attribute handle given was not valid on this server.")
        case 0x02: return ("Read Not Permitted", "The attribute cannot be read.")
        case 0x03: return ("Write Not Permitted", "The attribute cannot be written.")
        case 0x04: return ("Invalid PDU", "The attribute PDU was invalid.")
        case 0x05: return ("Insufficient Authentication",
                           "The attribute requires authentication before it can be read or written.")
        case 0x06: return ("Request Not Supported",
                           "The ATT server does not support the request received from the client.")
        case 0x07: return ("Invalid Offset", "The offset specified was past the end of the attribute.")
        case 0x08: return ("Insufficient Authorization",
                           "The attribute requires authorization before it can be read or written.")
        case 0x09: return ("Prepare Queue Full", "Too many prepare writes have been queued.")
        case 0x0A: return ("Attribute Not Found", "No attribute found within the given attribute handle range.")
        case 0x0B: return ("Attribute Not Long", "The attribute cannot be read using the Read Blob Request.")
        case 0x0C: return ("Encryption Key Size Too Short",
                           "The Encryption Key Size used for encrypting this link is too short.")
        case 0x0D: return ("Invalid Attribute Value Length",
                           "The attribute value length is invalid for the operation.")
        case 0x0E: return ("Unlikely Error",
                           "The attribute request encountered an unlikely error and could not be completed.")
        case 0x0F: return ("Insufficient Encryption",
                           "The attribute requires encryption before it can be read or written.")
        case 0x10: return ("Unsupported Group Type",
                           "The attribute type is not a supported grouping attribute as defined by a higher layer.")
        case 0x11: return ("Insufficient Resources", "Insufficient resources to complete the request.")
        case 0x12: return ("Database Out Of Sync", "The server requests the client to rediscover the database.")
        case 0x13: return ("Value Not Allowed", "The attribute parameter value was not allowed.")
        case 0xFC: return ("Write Request Rejected",
                           "A write request could not be fulfilled for a reason other than permissions.")
        case 0xFD: return ("Client Characteristic Configuration Descriptor Improperly Configured",
                           "A Client Characteristic Configuration descriptor is not configured as the procedure needs.")
        case 0xFE: return ("Procedure Already In Progress",
                           "A request cannot be serviced because an operation previously triggered is still in progress.")
        case 0xFF: return ("Out Of Range", "An attribute value is out of range as defined by a profile or service.")
        default: return nil
        }
    }
}
