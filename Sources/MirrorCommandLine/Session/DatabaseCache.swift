// What the GATT cache did, in the CLI's words (`Session.cacheText`), and the mirror procedures' use of it; the files
// themselves are GATTPeer's FileDatabaseStore, the logic GATTClient's GATTDatabaseCache.
import ATTStack
import GATTClient
import GATTPeer
import GATTVocabulary

extension Session {
    /// What a failed cache write adds after its reason: the database stays for this connection, and how to avoid it.
    static let cacheWriteAdvice = "the database is used for this connection only; set XDG_CACHE_HOME to a writable directory, or give --no-cache"

    /// What the GATT client's cache did, as stderr says it (`warn`): notes, warnings and findings.
    static func cacheText(_ event: GATTDatabaseCacheEvent, target: String) -> String {
        switch event {
        case .unusable(let e), .notStored(let e):
            return e.description
        case .notHashable(let e):
            return "the database of \(target) is not cached: \(e)"
        case .hashMismatch(let served, let computed):
            return "finding: \(target) serves the Database Hash \(ATTHex.string(served)), but the database discovered there "
                + "hashes to \(ATTHex.string(computed)) (Core Spec Vol 3 Part G §7.3): the peer's database or its hash is wrong; "
                + "the database is used for this connection only"
        case .hashInBlueZOrder(let served, let computed):
            return "note: \(target) serves the Database Hash \(ATTHex.string(served)) in bluetoothd's octet order (AES-CMAC's output "
                + "as it comes, src/shared/gatt-db.c); PTS-qualified servers send it least significant octet first "
                + "(\(ATTHex.string(GATTHashOrder.pts.served(computed)))); the database discovered is the peer's and is cached under its hash"
        case .hashByBlueZRule(let served, let computed, let versions):
            return "note: \(target) serves the Database Hash \(ATTHex.string(served)) as bluetoothd computes it (\(versions): "
                + "src/shared/gatt-db.c leaves out descriptors that Core Spec Vol 3 Part G §7.3 hashes, which gives \(ATTHex.string(computed))); "
                + "the database discovered is the peer's and is cached under its hash"
        case .declarationMismatch(let c, let finding, let peerHash, let removed):
            let found = switch finding {
            case .declaration(let d):
                "value handle \(ATTHex.handle(d.valueHandle)), UUID \(d.uuid), properties 0x\(ATTHex.string([d.properties]))"
            case .notADeclaration(let value): "[\(ATTHex.string(value))], not a characteristic declaration"
            case .attributeError(let code): "ATT error 0x\(ATTHex.string([code.rawValue]))"
            }
            return "finding: the GATT cache of \(target) says the characteristic declared at \(ATTHex.handle(c.declarationHandle)) has value handle "
                + "\(ATTHex.handle(c.valueHandle)), UUID \(c.uuid), properties 0x\(ATTHex.string([c.properties.rawValue])); the peer's declaration there gives "
                + TerminalText.escaped(found) + " (Core Spec Vol 3 Part G §3.3.1), though it serves the cached Database Hash \(ATTHex.string(peerHash)): "
                + "the cached copy" + (removed.isEmpty ? "" : " (\(removed.joined(separator: ", ")))") + " is discarded and the database discovered again"
        case .serviceChanged(let range, let removed):
            return "Service Changed \(ATTHex.handle(range.start))-\(ATTHex.handle(range.end)) from \(target): the database known here"
                + (removed.isEmpty ? "" : " and its cached copy") + " are forgotten; that range is discovered again and names resolved again on their next use"
        }
    }

    /// For the mirror's procedures (scan, wifi), which otherwise discover only the mirror service: the database
    /// known on this connection or by the cache, its profile characteristics verified first as a name is
    /// (GATTPeer's `knownOrStored(verifying:inService:)`); nil when neither has it.
    func cachedDatabase() async throws(GATTError) -> [GATTService]? {
        try await peer.database.knownOrStored(verifying: Set(profile.characteristics.values), inService: profile.service)
    }

    /// The note `gatt` prints when the cache is on and the peer serves no Database Hash; nil otherwise.
    var noHashNote: String? {
        guard peer.database.store != nil, peer.database.servesNoDatabaseHash else { return nil }
        return "note: \(peer.database.target) serves no Database Hash (0x2B2A, Core Spec Vol 3 Part G §7.3): its database is discovered "
            + "on every connection and not cached"
    }

    /// `body` on the value handle `reference` names, retried once after Database Out Of Sync (0x12) with a UUID
    /// or name resolved again (GATTPeer's `CharacteristicLookup.retryingOutOfSync`; a raw handle is not remapped).
    func retryingOutOfSync<T>(_ reference: CharacteristicReference, command: String?,
                              _ body: (UInt16) async throws -> T) async throws -> T {
        try await peer.lookup.retryingOutOfSync(reference, locate: { try await self.resolve($0, command: command) }, body)
    }
}
