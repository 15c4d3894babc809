// Attribute security (Core Spec 5.4 Vol 3 Part F §3.2.5, §3.4.1.1; Part C §10.3): each request on an attribute that
// asks for encryption, authentication or a key size, answered byte for byte on each link, and over AF_UNIX with the
// level the host plays, to the GATT client's typed error and its one retry after a raise.
import ATTStack
import GATTVocabulary
import LinuxBluetooth
import LinkCore
import GATTClient
import GATTServer
import TestSupport
import XCTest

final class AttributeSecurityTests: XCTestCase {
    /// 0x0001 service 0xFFF0; 0x0003 "enc" (read, write, write command, notify; encrypted; its CCCD 0x0004),
    /// 0x0006 "auth" (read, write; authenticated), 0x0008 "key16" (read, write; a 16-octet key),
    /// 0x000A "open" (read, write), 0x000C "writeEnc" (read open, write encrypted).
    let database = AttributeDatabase { db in
        db.service(.bit16(0xFFF0))
        db.characteristic(.bit16(0xFFF1), [.read, .write, .writeWithoutResponse, .notify], value: [1], name: "enc",
                          readSecurity: .encrypted, writeSecurity: .encrypted)
        db.characteristic(.bit16(0xFFF2), [.read, .write], value: [2], name: "auth",
                          readSecurity: .authenticated, writeSecurity: .authenticated)
        let key16 = GATTSecurityRequirement(level: .medium, minimumKeySize: 16)
        db.characteristic(.bit16(0xFFF3), [.read, .write], value: [3], name: "key16", readSecurity: key16, writeSecurity: key16)
        db.characteristic(.bit16(0xFFF4), [.read, .write], value: [4], name: "open")
        db.characteristic(.bit16(0xFFF5), [.read, .write], value: [5], name: "writeEnc", writeSecurity: .encrypted)
    }

    func answer(_ server: inout ATTServer, _ link: BTSecurity, _ request: String) -> String {
        var session = ATTSession()
        switch server.answer(bytes: hex(request), session: &session, link: { link }) {
        case .none: return "none"
        case .now(let pdu): return show(pdu.bytes)
        case .later(let ms, let pdu): return "\(ms) ms: " + show(pdu.bytes)
        }
    }

    func testTheRefusalForEachRequirementOnEachLink() {
        let key16 = GATTSecurityRequirement(level: .medium, minimumKeySize: 16)
        let keyOnly = GATTSecurityRequirement(minimumKeySize: 7)
        let links: [BTSecurity] = [.unencrypted, .encrypted(keySize: 7), .encrypted(), .authenticated(keySize: 7), .authenticated()]
        func row(_ r: GATTSecurityRequirement) -> [String] { links.map { r.refusal(on: $0).map { ATTHex.byte($0.rawValue) } ?? "ok" } }
        XCTAssertEqual(row(.noSecurity), ["ok", "ok", "ok", "ok", "ok"])
        XCTAssertEqual(row(.encrypted), ["0x0F", "ok", "ok", "ok", "ok"])
        // BlueZ's answer: authentication asked of an unencrypted link is Insufficient Authentication, not Encryption.
        XCTAssertEqual(row(.authenticated), ["0x05", "0x05", "0x05", "ok", "ok"])
        XCTAssertEqual(row(key16), ["0x0F", "0x0C", "ok", "0x0C", "ok"])
        XCTAssertEqual(row(keyOnly), ["0x0F", "ok", "ok", "ok", "ok"], "a key size asks for encryption")
        XCTAssertEqual(row(GATTSecurityRequirement(level: .high, minimumKeySize: 16)), ["0x05", "0x05", "0x05", "0x0C", "ok"])
        XCTAssertEqual(GATTSecurityRequirement.encrypted.description, "encrypted")
        XCTAssertEqual(key16.description, "encrypted (a key of 16 octets or more)")
        // The socket's level 0 (SDP), what an LE link with no security may report, is refused as low is.
        let sdp = BTSecurity(level: .sdp, keySize: 0)
        XCTAssertEqual(GATTSecurityRequirement.encrypted.refusal(on: sdp), .insufficientEncryption)
        XCTAssertEqual(GATTSecurityRequirement.authenticated.refusal(on: sdp), .insufficientAuthentication)
        XCTAssertNil(GATTSecurityRequirement.noSecurity.refusal(on: sdp))
    }

    func testReadsAreRefusedWithTheCodeOfWhatTheLinkLacks() {
        var server = ATTServer(database: database)
        let none = BTSecurity.unencrypted, short = BTSecurity.encrypted(keySize: 7)
        // Read, Read Blob, Read Multiple, Read Multiple Variable, Read By Type on each secured value.
        XCTAssertEqual(answer(&server, none, "0a 03 00"), "01 0a 03 00 0f")
        XCTAssertEqual(answer(&server, none, "0c 03 00 00 00"), "01 0c 03 00 0f")
        XCTAssertEqual(answer(&server, none, "0e 0a 00 03 00"), "01 0e 03 00 0f", "any refused handle fails the whole request")
        XCTAssertEqual(answer(&server, none, "20 0a 00 03 00"), "01 20 03 00 0f")
        XCTAssertEqual(answer(&server, none, "08 01 00 ff ff f1 ff"), "01 08 03 00 0f")
        XCTAssertEqual(answer(&server, none, "0a 06 00"), "01 0a 06 00 05")
        XCTAssertEqual(answer(&server, short, "0a 06 00"), "01 0a 06 00 05")
        XCTAssertEqual(answer(&server, none, "0a 08 00"), "01 0a 08 00 0f")
        XCTAssertEqual(answer(&server, short, "0a 08 00"), "01 0a 08 00 0c")
        XCTAssertEqual(answer(&server, short, "0c 08 00 00 00"), "01 0c 08 00 0c")
        XCTAssertEqual(answer(&server, short, "08 01 00 ff ff f3 ff"), "01 08 08 00 0c")
        // Once the link suffices, each is served.
        XCTAssertEqual(answer(&server, short, "0a 03 00"), "0b 01")
        XCTAssertEqual(answer(&server, .encrypted(), "0a 08 00"), "0b 03")
        XCTAssertEqual(answer(&server, .authenticated(), "0e 03 00 06 00 08 00"), "0f 01 02 03")
        XCTAssertEqual(answer(&server, .authenticated(keySize: 7), "0c 06 00 00 00"), "0d 02")
        // Unsecured attributes are untouched; a read the attribute forbids is still Read Not Permitted first.
        XCTAssertEqual(answer(&server, none, "0a 0a 00"), "0b 04")
        XCTAssertEqual(answer(&server, none, "0a 0c 00"), "0b 05", "only its writes need encryption")
        XCTAssertEqual(answer(&server, none, "0a 02 00"), "0b 1e 03 00 f1 ff", "declarations are open")
        // Read By Type of declarations lists them all; Find By Type Value does not compare a value the link may not read.
        XCTAssertEqual(answer(&server, none, "08 09 00 ff ff 03 28"), "09 07 09 00 0a 0a 00 f4 ff 0b 00 0a 0c 00 f5 ff")
        XCTAssertEqual(answer(&server, none, "06 01 00 ff ff f1 ff 01"), "01 06 01 00 0a")
        XCTAssertEqual(answer(&server, short, "06 01 00 ff ff f1 ff 01"), "07 03 00 03 00")
    }

    func testWritesAreRefusedAndAWriteCommandIsDroppedSilently() {
        var server = ATTServer(database: database)
        let none = BTSecurity.unencrypted, short = BTSecurity.encrypted(keySize: 7)
        XCTAssertEqual(answer(&server, none, "12 03 00 aa"), "01 12 03 00 0f")
        XCTAssertEqual(answer(&server, short, "12 06 00 aa"), "01 12 06 00 05")
        XCTAssertEqual(answer(&server, short, "12 08 00 aa"), "01 12 08 00 0c")
        XCTAssertEqual(answer(&server, none, "12 0c 00 aa"), "01 12 0c 00 0f")
        XCTAssertEqual(answer(&server, none, "52 03 00 aa"), "none", "a Write Command gets no answer (§3.4.5.3)")
        XCTAssertEqual(server.database.attribute(0x0003)?.value, [1], "and is not applied")
        // Prepare Write is checked as it is queued (§3.4.6.1); the CCCD of an encrypted value needs encryption too.
        XCTAssertEqual(answer(&server, none, "16 03 00 00 00 aa"), "01 16 03 00 0f")
        XCTAssertEqual(answer(&server, short, "16 08 00 00 00 aa"), "01 16 08 00 0c")
        XCTAssertEqual(answer(&server, none, "12 04 00 01 00"), "01 12 04 00 0f")
        XCTAssertEqual(answer(&server, none, "0a 04 00"), "0b 00 00", "the CCCD's read is open")
        // Once the link suffices, each is applied.
        XCTAssertEqual(answer(&server, short, "52 03 00 bb"), "none")
        XCTAssertEqual(server.database.attribute(0x0003)?.value, [0xBB])
        XCTAssertEqual(answer(&server, .authenticated(), "12 06 00 cc"), "13")
        XCTAssertEqual(server.database.attribute(0x0006)?.value, [0xCC])
        XCTAssertEqual(answer(&server, .encrypted(), "12 04 00 01 00"), "13")
        var session = ATTSession()
        let link = BTSecurity.encrypted()
        XCTAssertEqual(server.answer(bytes: hex("16 08 00 00 00 dd"), session: &session, link: { link }), .now(.prepareWriteResponse(handle: 8, offset: 0, value: [0xDD])))
        // The link weakened before the Execute Write (a test's play; a real link does not): its write is refused then.
        XCTAssertEqual(server.answer(bytes: hex("18 01"), session: &session, link: { .encrypted(keySize: 7) }),
                       .now(.errorResponse(requestOpcode: .executeWriteRequest, handle: 8, error: .encryptionKeySizeTooShort)))
    }

    func testTheLinkIsAskedOnlyForAnAttributeWithARequirement() {
        var server = ATTServer(database: database)
        var session = ATTSession()
        var asked = 0
        let link: () -> BTSecurity = { asked += 1; return .unencrypted }
        _ = server.answer(bytes: hex("0a 0a 00"), session: &session, link: link)
        _ = server.answer(bytes: hex("12 0a 00 01"), session: &session, link: link)
        _ = server.answer(bytes: hex("10 01 00 ff ff 00 28"), session: &session, link: link)
        XCTAssertEqual(asked, 0, "no getsockopt for an open attribute")
        _ = server.answer(bytes: hex("0a 03 00"), session: &session, link: link)
        XCTAssertEqual(asked, 1)
    }

    // MARK: - over AF_UNIX, the host playing the link's security

    /// A host on a fresh unix: path, and a client connected to it; the server's side of that client.
    func serve(_ host: GATTServerHost, tag: String, configure: (inout GATTClient.Configuration) -> Void = { _ in })
        async throws -> (GATTClient, ATTServerConnection, ATTBearerListener) {
        let path = temporarySocketPath(tag)
        let listener = try ATTBearerListener.unix(path: path)
        host.acceptConnections(on: listener)
        var configuration = GATTClient.Configuration()
        configure(&configuration)
        let client = try await GATTClient.connect(transport: ATTBearer.connect(unixPath: path), configuration: configuration)
        _ = try await client.read(handle: 0x000A)
        let connection = try XCTUnwrap(host.withContext { $0.clients.first })
        return (client, connection, listener)
    }

    func refusal<T>(_ body: () async throws -> T) async -> ATTErrorCode? {
        do {
            _ = try await body()
            return nil
        } catch {
            guard let a = (error as? GATTError)?.attributeError, a.rejectedBy == .peer else {
                XCTFail("not the peer's ATT error: \(error)")
                return nil
            }
            return a.code
        }
    }

    func testOverUnixTheClientSeesEachCodeUntilTheLinkThatTheHostPlaysSuffices() async throws {
        let host = GATTServerHost(database: database)
        let (client, connection, listener) = try await serve(host, tag: "sec-levels")
        defer { client.close(); listener.close() }
        XCTAssertEqual(connection.linkSecurity, .unencrypted, "unix: has no link: the host's default")

        let readEnc = await refusal { try await client.read(handle: 0x0003) }
        XCTAssertEqual(readEnc, .insufficientEncryption)
        let writeEnc = await refusal { try await client.write(handle: 0x0003, value: [9]) }
        XCTAssertEqual(writeEnc, .insufficientEncryption)
        let readAuth = await refusal { try await client.read(handle: 0x0006) }
        XCTAssertEqual(readAuth, .insufficientAuthentication)
        let writeAuth = await refusal { try await client.write(handle: 0x0006, value: [9]) }
        XCTAssertEqual(writeAuth, .insufficientAuthentication)
        try await client.writeWithoutResponse(handle: 0x0003, value: [9])
        // The command went unanswered and unapplied: the next request's answer comes, and the value is unchanged.
        let open = try await client.read(handle: 0x000A)
        XCTAssertEqual(open, [4])
        XCTAssertEqual(host.database.attribute(0x0003)?.value, [1])

        connection.setLinkSecurity(.encrypted(keySize: 7))
        XCTAssertEqual(connection.linkSecurity, .encrypted(keySize: 7))
        let enc = try await client.read(handle: 0x0003)
        XCTAssertEqual(enc, [1])
        let readKey = await refusal { try await client.read(handle: 0x0008) }
        XCTAssertEqual(readKey, .encryptionKeySizeTooShort)
        let writeKey = await refusal { try await client.write(handle: 0x0008, value: [9]) }
        XCTAssertEqual(writeKey, .encryptionKeySizeTooShort)
        let stillAuth = await refusal { try await client.read(handle: 0x0006) }
        XCTAssertEqual(stillAuth, .insufficientAuthentication)
        try await client.writeWithoutResponse(handle: 0x0003, value: [7])
        try await client.write(handle: 0x0003, value: [8])
        XCTAssertEqual(host.database.attribute(0x0003)?.value, [8])

        connection.setLinkSecurity(.authenticated())
        let auth = try await client.read(handle: 0x0006), key = try await client.read(handle: 0x0008)
        XCTAssertEqual(auth + key, [2, 3])
        connection.setLinkSecurity(nil)
        XCTAssertEqual(connection.linkSecurity, .unencrypted, "back to the host's default")
    }

    func testAHostPlayingAnAuthenticatedLinkServesEverything() async throws {
        let host = GATTServerHost(database: database, securityWithoutLink: .authenticated())
        let (client, _, listener) = try await serve(host, tag: "sec-auth")
        defer { client.close(); listener.close() }
        let values = try await client.readMultiple(handles: [0x0003, 0x0006, 0x0008])
        XCTAssertEqual(values, [1, 2, 3])
        try await client.write(handle: 0x0006, value: [6])
    }

    /// The client's one retry after raising the level (GATTClient's, unchanged): its raise is the test's pairing,
    /// which makes the host play that level for this client.
    func testTheClientsRetryAfterRaisingTheLevelIsServed() async throws {
        let host = GATTServerHost(database: database)
        let server = Lock<ATTServerConnection?>(nil)
        let raised = Lock<[BTSecurityLevel]>([])
        let (client, connection, listener) = try await serve(host, tag: "sec-retry") { c in
            c.retryAfterRaisingSecurity = true
            c.setSecurityLevel = { level in
                raised.withLock { $0.append(level) }
                server.withLock { $0 }?.setLinkSecurity(BTSecurity(level: level, keySize: 16))
            }
        }
        defer { client.close(); listener.close() }
        server.withLock { $0 = connection }
        let enc = try await client.read(handle: 0x0003)
        XCTAssertEqual(enc, [1])
        XCTAssertEqual(raised.withLock { $0 }, [.medium], "Insufficient Encryption: raised to medium, retried once")
        let auth = try await client.read(handle: 0x0006)
        XCTAssertEqual(auth, [2])
        XCTAssertEqual(raised.withLock { $0 }, [.medium, .high], "Insufficient Authentication on an encrypted link: high")
        XCTAssertEqual(client.securityLevel, .high)
    }
}
