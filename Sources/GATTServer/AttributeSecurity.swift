// The one decision on an attribute's security (Core Spec 5.4 Vol 3 Part F §3.2.5 permissions, §3.4.1.1 the error
// codes; Part C §10.3.1): which Error Response a request gets on a link that does not offer what the attribute asks.
import ATTStack
import GATTVocabulary
import LinkCore

extension GATTSecurityRequirement {
    /// The error a request gets on a link with `link`'s security, or nil when it may be served. As BlueZ's server
    /// answers: authentication asked of any weaker link, unencrypted too, is Insufficient Authentication (0x05);
    /// encryption alone on an unencrypted link, Insufficient Encryption (0x0F); a short key, Key Size Too Short (0x0C).
    public func refusal(on link: BTSecurity) -> ATTErrorCode? {
        if level >= .high, link.level < level { return .insufficientAuthentication }
        if level >= .medium || minimumKeySize != nil, link.level < .medium { return .insufficientEncryption }
        if let minimumKeySize, link.keySize < minimumKeySize { return .encryptionKeySizeTooShort }
        return nil
    }
}
