// The GATT cache as a user meets it: the built `mirror` against the built `mirror-sim --caching yes` (which serves
// a Database Hash, Core Spec 5.4 Vol 3 Part G §7.3), each run's ATT requests counted from --trace. Cold then warm,
// --no-cache, a corrupted, foreign-version or tampered file ignored with a warning, a peer without a hash never
// cached, `mirror cache list|clear`, `mirror gatt --diff`; and the diff and the file format directly.
import ATTStack
import Foundation
import GATTClient
@testable import GATTPeer
import GATTServer
import JSON
import Mirror
@testable import MirrorCommandLine
import TestSupport
import XCTest
import GATTVocabulary

final class CacheCommandTests: XCTestCase {
    var home = ""
    var cacheDirectory: String { home + "/mirror" }

    override func setUpWithError() throws {
        home = NSTemporaryDirectory() + "mirror-cache-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: home, withIntermediateDirectories: true)
    }
    override func tearDown() { try? FileManager.default.removeItem(atPath: home) }

    /// `mirror` with the cache under this test's directory.
    func mirror(_ arguments: [String]) throws -> ToolRun {
        try ToolProcess.run("mirror", arguments, environment: ["XDG_CACHE_HOME": home], timeout: 60)
    }

    /// The ATT requests a run sent, from --trace ("12:00:00.000000 > Read By Type Request ...").
    func requests(_ run: ToolRun) -> [String] {
        run.stderr.split(separator: "\n").map(String.init).filter { $0.contains(" > ") }
    }

    func cacheFile(_ sim: SimulatorProcess) -> String {
        cacheDirectory + "/" + FileDatabaseStore.fileName(target: sim.target, adapter: nil)
    }

    func testColdThenWarmUsesTheCacheAfterOneReadOfTheHash() throws {
        let sim = try SimulatorProcess(["--caching", "yes"])
        defer { sim.stop() }
        let cold = try mirror(["gatt", sim.target, "--trace"])
        XCTAssertEqual(cold.status, 0, cold.stderr)
        XCTAssertTrue(FileManager.default.fileExists(atPath: cacheFile(sim)), "stored after the cold run")
        // The simulator serves the hash least significant octet first, as PTS-qualified stacks do: simply a match.
        XCTAssertFalse(cold.stderr.contains("note:") || cold.stderr.contains("finding:"), cold.stderr)
        let warm = try mirror(["gatt", sim.target, "--trace"])
        XCTAssertEqual(warm.status, 0, warm.stderr)
        XCTAssertEqual(warm.stdout, cold.stdout, "the same database, from the cache")
        let w = requests(warm)
        XCTAssertEqual(w.count, 2, w.joined(separator: "\n"))
        XCTAssertTrue(w[0].contains("Exchange MTU Request"), w[0])
        XCTAssertTrue(w[1].contains("Read By Type Request 0x0001-0xFFFF type 2b2a"), w[1])
        XCTAssertGreaterThan(requests(cold).count, 10, "discovery of the whole database")
        // A read by name: the same two, the cached declaration of cloudToken read back (verify on use), then its
        // own Read Request of the value; no discovery, and the file is kept.
        let read = try mirror(["read", sim.target, "cloudToken", "--trace"])
        XCTAssertEqual(read.status, 0, read.stderr)
        let r = requests(read)
        guard r.count == 4 else { return XCTFail("\(r.count) requests, 4 expected: \(r.joined(separator: "\n"))") }
        let token = try XCTUnwrap(try GATTCachedDatabase(json: parseJSON(bytes: Array(try Data(contentsOf: URL(fileURLWithPath: cacheFile(sim))))))
            .services.flatMap(\.characteristics).first { $0.uuid == MirrorProfile.bundled.cloudToken })
        XCTAssertTrue(r[2].hasSuffix("> Read Request handle \(ATTHex.handle(token.declarationHandle))"), r[2])
        XCTAssertTrue(r[3].hasSuffix("> Read Request handle \(ATTHex.handle(token.valueHandle))"), r[3])
        XCTAssertFalse(read.stderr.contains("finding"), read.stderr)
        XCTAssertTrue(FileManager.default.fileExists(atPath: cacheFile(sim)))
    }

    // MARK: - a cache that a forged Database Hash cannot poison (verify on use, Part G §3.3.1)

    /// GAP, GATT with a Database Hash, and the mirror's service with cloudToken ("token") and scannerAction
    /// ("action") in that order, or swapped (each at the other's handles). Its hash is `hash`, else its own.
    func mirrorDatabase(swapped: Bool, hash: [UInt8]? = nil) -> AttributeDatabase {
        let profile = MirrorProfile.bundled
        var db = AttributeDatabase { db in
            db.service(.genericAccess)
            db.characteristic(.deviceName, [.read], value: Array("mirror".utf8))
            db.service(.genericAttribute)
            db.characteristic(.databaseHash, [.read], name: "hash")
            db.service(profile.service)
            let pair = [(profile.cloudToken, "token"), (profile.scannerAction, "action")]
            for (uuid, name) in swapped ? pair.reversed() : pair {
                db.characteristic(uuid, [.read, .write], value: [0], name: name)
            }
        }
        db.setValue(hash ?? (try! db.databaseHash()), at: db.handle("hash")!)
        return db
    }

    /// One TARGET path: a look-alike with cloudToken and scannerAction swapped, cached by a listing; then the real
    /// database at the same path, serving the same Database Hash (what a forged hash gives: the hash the client
    /// holds, over a different database). Returns the real peer, the hash and the cache file.
    func poisonedCache() throws -> (real: GATTPeer, forged: [UInt8], file: String) {
        let lookAlike = try GATTPeer(database: mirrorDatabase(swapped: true))
        let forged = try lookAlike.host.database.databaseHash()
        let cold = try mirror(["gatt", lookAlike.target])
        XCTAssertTrue(lookAlike.closeAndRelease(), "the look-alike's socket released within 10 s")
        XCTAssertEqual(cold.status, 0, cold.stderr)
        let file = cacheDirectory + "/" + FileDatabaseStore.fileName(target: lookAlike.target, adapter: nil)
        XCTAssertTrue(FileManager.default.fileExists(atPath: file), "the look-alike's database is cached")
        let real = try GATTPeer(database: mirrorDatabase(swapped: false, hash: forged), path: lookAlike.path)
        XCTAssertEqual(real.target, lookAlike.target)
        return (real, forged, file)
    }

    func testAScanChecksTheCachedMirrorCharacteristicsBeforeUsingThem() throws {
        let (real, _, file) = try poisonedCache()
        defer { real.close() }
        let uploads = home + "/uploads"
        try FileManager.default.createDirectory(atPath: uploads, withIntermediateDirectories: true)
        let scan = try mirror(["scan", real.target, "--upload-dir", uploads, "--upload-port", "0", "--settle", "0.05"])
        XCTAssertTrue(scan.stderr.contains("mirror: finding: the GATT cache of \(real.target) says the characteristic declared at "), scan.stderr)
        XCTAssertFalse(FileManager.default.fileExists(atPath: file), "the poisoned copy is removed")
        XCTAssertEqual(real.value("token"), [0], "nothing written to the mirror's characteristics from the poisoned copy")
        XCTAssertEqual(real.value("action"), [0])
        // The scan goes on with the database discovered now, which lacks the rest of the mirror's profile.
        XCTAssertTrue(scan.stderr.contains("has no scanState characteristic"), scan.stderr)
    }

    func testACachedDatabaseUnderAForgedHashIsCaughtBeforeAWriteByName() throws {
        let (real, forged, file) = try poisonedCache()
        defer { real.close() }
        let write = try mirror(["write", real.target, "cloudToken", "32", "--trace"])
        XCTAssertEqual(write.status, 0, write.stderr)
        XCTAssertEqual(real.value("token"), [0x32], "the Write Request landed on cloudToken's value handle: \(write.stderr)")
        XCTAssertEqual(real.value("action"), [0], "scannerAction untouched")
        XCTAssertTrue(write.stderr.contains("> Write Request handle \(real.hexHandle("token"))"), write.stderr)
        XCTAssertTrue(write.stderr.contains("mirror: finding: the GATT cache of \(real.target) says the characteristic declared at "
                                            + "\(ATTHex.handle(real.handle("action") - 1)) has value handle \(real.hexHandle("action")), "
                                            + "UUID \(MirrorProfile.bundled.cloudToken)"), write.stderr)
        XCTAssertTrue(write.stderr.contains("UUID \(MirrorProfile.bundled.scannerAction), properties 0x0a"), write.stderr)
        XCTAssertTrue(write.stderr.contains("is discarded and the database discovered again"), write.stderr)
        // The real database does not hash to the forged value: said, and nothing cached under it.
        XCTAssertTrue(write.stderr.contains("mirror: finding: \(real.target) serves the Database Hash \(ATTHex.string(forged))"), write.stderr)
        XCTAssertFalse(FileManager.default.fileExists(atPath: file), "the poisoned copy is removed")
    }

    func testVerificationIsOncePerCharacteristicAndConnectionAndARawHandleIsSentAsGiven() throws {
        let peer = try GATTPeer(database: mirrorDatabase(swapped: false))
        defer { peer.close() }
        XCTAssertEqual(try mirror(["gatt", peer.target]).status, 0)
        // One connection: two writes by name, one by a raw handle; the declaration is read once, before the first.
        let run = try ToolProcess.run("mirror", ["shell", peer.target, "--trace"],
                                      input: "write cloudToken 31\nwrite cloudToken 32\nwrite \(peer.hexHandle("action")) 33\n",
                                      environment: ["XDG_CACHE_HOME": home], timeout: 60)
        XCTAssertEqual(run.status, 0, run.stderr)
        let sent = requests(run).map { String($0.split(separator: ">").last ?? "") }
        XCTAssertEqual(sent.filter { $0.contains("Read Request") }, [" Read Request handle \(ATTHex.handle(peer.handle("token") - 1))"], run.stderr)
        XCTAssertFalse(sent.contains { $0.contains("type 2803") || $0.contains("type 2800") }, "no discovery: \(sent)")
        XCTAssertEqual(peer.value("token"), [0x32])
        XCTAssertEqual(peer.value("action"), [0x33])
    }

    func testNoCacheDiscoversAsBeforeAndLeavesTheFileAlone() throws {
        let sim = try SimulatorProcess(["--caching", "yes"])
        defer { sim.stop() }
        XCTAssertEqual(try mirror(["gatt", sim.target]).status, 0)
        let before = try Data(contentsOf: URL(fileURLWithPath: cacheFile(sim)))
        try FileManager.default.setAttributes([.modificationDate: Date(timeIntervalSince1970: 1000)], ofItemAtPath: cacheFile(sim))
        let run = try mirror(["gatt", sim.target, "--trace", "--no-cache"])
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertFalse(run.stderr.contains("type 2b2a"), "no hash read without the cache")
        XCTAssertGreaterThan(requests(run).count, 10)
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: cacheFile(sim))), before)
        let date = try FileManager.default.attributesOfItem(atPath: cacheFile(sim))[.modificationDate] as? Date
        XCTAssertEqual(date, Date(timeIntervalSince1970: 1000))
    }

    func testACorruptedForeignOrTamperedFileIsIgnoredWithAWarningAndReplaced() throws {
        let sim = try SimulatorProcess(["--caching", "yes"])
        defer { sim.stop() }
        XCTAssertEqual(try mirror(["gatt", sim.target]).status, 0)
        let good = try String(contentsOfFile: cacheFile(sim), encoding: .utf8)
        let cases: [(String, String)] = [
            (String(good.prefix(good.count / 2)), "not valid JSON"),
            (good.replacingOccurrences(of: "\"format\": 1,", with: "\"format\": 99,"), "format 99, this mirror reads format 1"),
            // A characteristic's properties changed by hand: the services no longer hash to the stored hash.
            (good.replacingOccurrences(of: "\"properties\": 18,", with: "\"properties\": 2,"), "do not hash to its databaseHash"),
        ]
        for (text, warning) in cases {
            XCTAssertNotEqual(text, good, warning)
            try text.write(toFile: cacheFile(sim), atomically: true, encoding: .utf8)
            let run = try mirror(["gatt", sim.target, "--trace"])
            XCTAssertEqual(run.status, 0, run.stderr)
            XCTAssertTrue(run.stderr.contains("mirror: ignoring the GATT cache \(cacheFile(sim)): "), run.stderr)
            XCTAssertTrue(run.stderr.contains(warning), run.stderr)
            XCTAssertGreaterThan(requests(run).count, 10, "never trusted: discovered again")
            XCTAssertEqual(try String(contentsOfFile: cacheFile(sim), encoding: .utf8), good, "replaced by a sound copy")
        }
    }

    func testAHashInBlueZsOctetOrderIsCachedAndNamedAsBlueZs() throws {
        let sim = try SimulatorProcess(["--caching", "yes", "--hash-order", "bluez"])
        defer { sim.stop() }
        let cold = try mirror(["gatt", sim.target])
        XCTAssertEqual(cold.status, 0, cold.stderr)
        XCTAssertTrue(cold.stderr.contains("in bluetoothd's octet order (AES-CMAC's output as it comes, src/shared/gatt-db.c)"), cold.stderr)
        XCTAssertFalse(cold.stderr.contains("finding:"), cold.stderr)
        XCTAssertTrue(FileManager.default.fileExists(atPath: cacheFile(sim)), "cached under the served hash")
        let warm = try mirror(["gatt", sim.target, "--trace"])
        XCTAssertEqual(requests(warm).count, 2, "warm from the cache")
    }

    func testAPeerWithoutADatabaseHashIsNeverCached() throws {
        let sim = try SimulatorProcess()
        defer { sim.stop() }
        for _ in 0..<2 {
            let run = try mirror(["gatt", sim.target, "--trace"])
            XCTAssertEqual(run.status, 0, run.stderr)
            XCTAssertGreaterThan(requests(run).count, 10)
            // Said, so a user knows why the second gatt is no faster.
            XCTAssertTrue(run.stderr.contains("note: \(sim.target) serves no Database Hash (0x2B2A, Core Spec Vol 3 Part G §7.3): its database is discovered on every connection and not cached\n"), run.stderr)
        }
        XCTAssertFalse(FileManager.default.fileExists(atPath: cacheFile(sim)))
        // Not said where the cache is off, nor by a command that only uses it.
        XCTAssertFalse(try mirror(["gatt", sim.target, "--no-cache"]).stderr.contains("serves no Database Hash"))
        XCTAssertFalse(try mirror(["read", sim.target, "scanState"]).stderr.contains("serves no Database Hash"))
        let diff = try mirror(["gatt", sim.target, "--diff"])
        XCTAssertEqual(diff.stdout, "no cached copy of \(sim.target) to compare with (it serves no Database Hash, so none is kept)\n")
    }

    func testACacheThatCannotBeWrittenIsSaidPlainlyAndTheCommandGoesOn() throws {
        let sim = try SimulatorProcess(["--caching", "yes"])
        defer { sim.stop() }
        let run = try ToolProcess.run("mirror", ["gatt", sim.target], environment: ["XDG_CACHE_HOME": "/proc/mirror-no-such-dir"], timeout: 60)
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertTrue(run.stdout.contains("Generic Access"), run.stdout)
        XCTAssertTrue(run.stderr.contains("could not write the GATT cache /proc/mirror-no-such-dir/mirror/"), run.stderr)
        XCTAssertTrue(run.stderr.contains(": ENOENT (No such file or directory) (the database is used for this connection only"), run.stderr)
        XCTAssertFalse(run.stderr.contains("CocoaError"), run.stderr)
    }

    func testCacheListAndClear() throws {
        let sim = try SimulatorProcess(["--caching", "yes"])
        defer { sim.stop() }
        XCTAssertEqual(try mirror(["cache", "list"]).stdout, "no cached databases in \(cacheDirectory)\n")
        XCTAssertEqual(try mirror(["gatt", sim.target]).status, 0)
        let list = try mirror(["cache", "list", "--json"])
        XCTAssertEqual(list.status, 0, list.stderr)
        let entries = try XCTUnwrap(try list.json()["entries"]?.items)
        XCTAssertEqual(entries.count, 1)
        XCTAssertEqual(entries[0]["target"], .string(sim.target))
        XCTAssertEqual(entries[0]["services"], 3)
        XCTAssertEqual(entries[0]["databaseHash"]?.string?.count, 32)
        try "{}".write(toFile: cacheDirectory + "/gatt-default-broken.json", atomically: true, encoding: .utf8)
        let text = try mirror(["cache", "list"]).stdout
        XCTAssertTrue(text.contains("ignored (no \"format\")  \(cacheDirectory)/gatt-default-broken.json"), text)
        XCTAssertEqual(try mirror(["cache", "clear", sim.target]).stdout, "removed \(cacheFile(sim))\n")
        XCTAssertFalse(FileManager.default.fileExists(atPath: cacheFile(sim)))
        XCTAssertEqual(try mirror(["cache", "clear", sim.target]).stdout, "no cached database of \(sim.target) in \(cacheDirectory)\n")
        XCTAssertEqual(try mirror(["cache", "clear"]).stdout, "removed \(cacheDirectory)/gatt-default-broken.json\n")
        let bad = try mirror(["cache", "purge"])
        XCTAssertEqual(bad.status, 2, bad.stderr)
    }

    /// 100,000 `[` in a cache file used to overflow the parser's stack (SIGSEGV, exit 139) in gatt, cache list and
    /// cache clear; now the file is ignored with a warning naming it and the nesting limit, as any unparsable one.
    func testADeeplyNestedCacheFileIsIgnoredWithAWarningNotACrash() throws {
        let sim = try SimulatorProcess(["--caching", "yes"])
        defer { sim.stop() }
        try FileManager.default.createDirectory(atPath: cacheDirectory, withIntermediateDirectories: true)
        let deep = String(repeating: "[", count: 100_000)
        try deep.write(toFile: cacheFile(sim), atomically: true, encoding: .utf8)
        let limit = "invalid JSON at byte 512: arrays and objects nested deeper than the limit of 512 levels"
        let list = try mirror(["cache", "list"])
        XCTAssertEqual(list.status, 0, list.stderr)
        XCTAssertEqual(list.stdout, "ignored (not valid JSON (\(limit)))  \(cacheFile(sim))\n")
        let gatt = try mirror(["gatt", sim.target])
        XCTAssertEqual(gatt.status, 0, gatt.stderr)
        XCTAssertTrue(gatt.stderr.contains("ignoring the GATT cache \(cacheFile(sim)): not valid JSON (\(limit))"), gatt.stderr)
        XCTAssertTrue(gatt.stdout.contains("Generic Access"), gatt.stdout)
        try deep.write(toFile: cacheDirectory + "/gatt-default-deep.json", atomically: true, encoding: .utf8)
        let clear = try mirror(["cache", "clear"])
        XCTAssertEqual(clear.status, 0, clear.stderr)
        XCTAssertEqual(clear.stdout, "removed \(cacheDirectory)/gatt-default-deep.json\nremoved \(cacheFile(sim))\n")
    }

    /// The same nesting in a --profile file is a usage error naming the file and the limit, not a crash.
    func testADeeplyNestedProfileIsAnErrorNamingTheFileAndTheLimit() throws {
        let profile = home + "/deep-profile.json"
        try String(repeating: "[", count: 100_000).write(toFile: profile, atomically: true, encoding: .utf8)
        let run = try mirror(["read", "unix:" + home + "/no-peer.sock", "3", "--profile", profile])
        XCTAssertEqual(run.status, 2, run.stderr)
        XCTAssertEqual(run.stderr, "mirror: profile \(profile): not valid JSON (invalid JSON at byte 512: arrays and objects nested deeper than the limit of 512 levels)\n")
    }

    /// A cache directory that already exists with looser modes is tightened to 0700, its files written 0600.
    func testALooserCacheDirectoryIsTightenedAndItsFilesArePrivate() throws {
        let sim = try SimulatorProcess(["--caching", "yes"])
        defer { sim.stop() }
        try FileManager.default.createDirectory(atPath: cacheDirectory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o755])
        let run = try mirror(["gatt", sim.target])
        XCTAssertEqual(run.status, 0, run.stderr)
        func mode(_ path: String) throws -> Int? { (try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? NSNumber)?.intValue }
        XCTAssertEqual(try mode(cacheDirectory), 0o700)
        XCTAssertEqual(try mode(cacheFile(sim)), 0o600)
    }

    /// Another user's cache directory is refused (nothing written there), said plainly; the command goes on.
    func testAnotherUsersCacheDirectoryIsRefused() throws {
        let sim = try SimulatorProcess(["--caching", "yes"])
        defer { sim.stop() }
        try FileManager.default.createDirectory(atPath: cacheDirectory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o777])
        let other: UInt32 = getuid() == 65534 ? 65533 : 65534
        guard chown(cacheDirectory, other, getgid()) == 0 else {
            XCTAssertEqual(errno, EPERM, "only root may give a directory away")
            return
        }
        let run = try mirror(["gatt", sim.target])
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertTrue(run.stderr.contains("could not write the GATT cache \(cacheFile(sim)): refusing to use \(cacheDirectory): it is owned by uid \(other)"), run.stderr)
        XCTAssertFalse(FileManager.default.fileExists(atPath: cacheFile(sim)))
    }

    func testGATTDiffPrintsWhatMovedAndWhatWasAddedOrRemoved() throws {
        let sim = try SimulatorProcess(["--caching", "yes"])
        XCTAssertEqual(try mirror(["gatt", sim.target]).status, 0)
        let path = sim.target
        sim.stop()
        // The same socket path, now a mirror without the caching characteristics: they are gone, the mirror service
        // moves down by 4.
        let plain = try SimulatorProcess(path: String(path.dropFirst("unix:".count)))
        defer { plain.stop() }
        let run = try mirror(["gatt", path, "--diff"])
        XCTAssertEqual(run.status, 0, run.stderr)
        let lines = run.stdout.split(separator: "\n").map(String.init)
        XCTAssertTrue(lines.contains("moved service 6d697272-6f72-7369-6d00-000000000000 from 0x000E to 0x000A"), run.stdout)
        XCTAssertTrue(lines.contains("moved characteristic 6d697272-6f72-7369-6d00-000000000001 from 0x0010 to 0x000C in service 6d697272-6f72-7369-6d00-000000000000"), run.stdout)
        XCTAssertTrue(lines.contains("removed characteristic 2b2a from 0x000D in service 1801"), run.stdout)
        XCTAssertTrue(lines.contains("removed characteristic 2b29 from 0x000B in service 1801"), run.stdout)
        XCTAssertFalse(run.stdout.contains("added"), run.stdout)
        let json = try mirror(["gatt", path, "--diff", "--json"]).json()
        XCTAssertEqual(json["cached"], true, "the peer has no hash now: the old copy stays")
        XCTAssertEqual(json["databaseHash"], .null)
        let removed = json["changes"]?.items?.first { $0["uuid"] == "2b29" }
        XCTAssertEqual(removed?.compact, #"{"change":"removed","kind":"characteristic","uuid":"2b29","handle":11,"parent":"service 1801"}"#)
    }

    /// The diff itself is GATTPeer's, tested in-process (MirrorTests/GATTProceduresTests).
    func testTheFileRoundTrips() throws {
        let a = GATTService(uuid: .genericAttribute, startHandle: 1, endHandle: 4, characteristics: [
            GATTCharacteristic(uuid: .serviceChanged, declarationHandle: 2, valueHandle: 3, properties: [.indicate], endHandle: 4,
                               descriptors: [GATTDescriptor(handle: 4, uuid: .clientCharacteristicConfiguration)]),
        ])
        let b = GATTService(uuid: .batteryService, startHandle: 5, endHandle: 7, characteristics: [
            GATTCharacteristic(uuid: .batteryLevel, declarationHandle: 6, valueHandle: 7, properties: [.read], endHandle: 7),
        ])
        // The file's JSON reads back as the same database; its hash is checked against its services.
        let services = [a, b]
        let hash = try XCTUnwrap(try GATTDatabaseHash.compute(services: services))
        let db = GATTCachedDatabase(target: "unix:/tmp/x", adapter: nil, databaseHash: hash, services: services)
        XCTAssertEqual(try GATTCachedDatabase(json: try parseJSON(db.json.pretty)), db)
        XCTAssertEqual(try FileDatabaseStore.read(Data(db.json.pretty.utf8)).get(), db)
        XCTAssertEqual(FileDatabaseStore.fileName(target: "unix:/tmp/a%b/x.sock", adapter: nil), "gatt-default-unix:%2Ftmp%2Fa%25b%2Fx.sock.json")
        XCTAssertEqual(FileDatabaseStore.fileName(target: "C0:11:22:33:44:55", adapter: "hci1"), "gatt-hci1-C0:11:22:33:44:55.json")
    }

    // MARK: - robust caching against the simulator's change-database (Vol 3 Part G §2.5.2.1, §7.1)

    /// The handles of the Read Requests a run sent, from --trace.
    func readRequestHandles(_ run: ToolRun) -> [String] {
        requests(run).filter { $0.contains("> Read Request") }.compactMap { $0.split(separator: " ").last.map(String.init) }
    }

    func testAReadByNameRecoversFromDatabaseOutOfSyncAtTheMovedHandle() throws {
        let sim = try SimulatorProcess(["--caching", "yes", "--client-features", "1", "--fault", "change-database:cloudToken"])
        defer { sim.stop() }
        let before = try XCTUnwrap(try mirror(["gatt", sim.target, "--json"]).json()["services"]?.items)
        let run = try mirror(["read", sim.target, "cloudToken", "--trace"])
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertTrue(run.stderr.contains("0x12 Database Out Of Sync"), run.stderr)
        // The cached declaration read back (verify on use: it still agrees), the value, and after 0x12 the value
        // at its new handle (discovered, so not verified again).
        let reads = readRequestHandles(run)
        guard reads.count == 3 else { return XCTFail("\(reads.count) Read Requests, 3 expected: \(run.stderr)") }
        XCTAssertEqual(Int(reads[0].dropFirst(2), radix: 16).map { $0 + 1 }, Int(reads[1].dropFirst(2), radix: 16), "its declaration first")
        XCTAssertEqual(Int(reads[2].dropFirst(2), radix: 16), Int(reads[1].dropFirst(2), radix: 16).map { $0 + 2 }, "resolved again")
        XCTAssertTrue(run.stdout.hasPrefix(reads[2] + " cloudToken:"), run.stdout)
        // The cache holds the changed database, under its new hash: simAdded is in it.
        let cached = try String(contentsOfFile: cacheFile(sim), encoding: .utf8)
        XCTAssertTrue(cached.contains("6d697272-6f72-7369-6d00-0000000000ad"), cached)
        XCTAssertNotEqual(try XCTUnwrap(try mirror(["gatt", sim.target, "--json"]).json()["services"]?.items), before)
    }

    func testARawHandleIsNotRemappedAfterDatabaseOutOfSync() throws {
        let sim = try SimulatorProcess(["--caching", "yes", "--client-features", "1", "--fault", "change-database:cloudToken"])
        defer { sim.stop() }
        // The handle from a listing (which reads no value, so the fault waits for the read below).
        let uuid = try XCTUnwrap(MirrorProfile.bundled.characteristics["cloudToken"]).description
        let services = try XCTUnwrap(try mirror(["gatt", sim.target, "--json"]).json()["services"]?.items)
        let value = try XCTUnwrap(services.flatMap { $0["characteristics"]?.items ?? [] }.first { $0["uuid"] == .string(uuid) }?["valueHandle"]?.integer)
        let handle = ATTHex.handle(UInt16(value))
        let run = try mirror(["read", sim.target, handle, "--trace"])
        XCTAssertNotEqual(run.status, 0, run.stdout)
        XCTAssertTrue(run.stderr.contains("ATT error 0x12 Database Out Of Sync from the peer"), run.stderr)
        XCTAssertTrue(run.stderr.contains("\(handle) was given as a raw handle and is not remapped"), run.stderr)
        XCTAssertEqual(readRequestHandles(run), [handle], "no retry at another handle")
    }

    func testServiceChangedDuringListenForgetsTheCacheAndTheNextCommandSeesTheNewDatabase() throws {
        let sim = try SimulatorProcess(["--caching", "yes", "--change-database-after", "500"])
        defer { sim.stop() }
        let listen = try mirror(["listen", sim.target, "2a05", "--count", "1", "--json"])
        XCTAssertEqual(listen.status, 0, listen.stderr)
        let event = try XCTUnwrap(try listen.jsonLines().first { $0["event"]?.string == nil })
        XCTAssertEqual(event["kind"], "indication")
        XCTAssertEqual(event["value"], "0e00ffff", "Service Changed for the mirror service to the end")
        XCTAssertTrue(listen.stderr.contains("mirror: Service Changed 0x000E-0xFFFF from \(sim.target): the database known here and its cached copy are forgotten"), listen.stderr)
        XCTAssertFalse(FileManager.default.fileExists(atPath: cacheFile(sim)))
        let gatt = try mirror(["gatt", sim.target])
        XCTAssertEqual(gatt.status, 0, gatt.stderr)
        XCTAssertTrue(gatt.stdout.contains("6d697272-6f72-7369-6d00-0000000000ad"), gatt.stdout)
        XCTAssertTrue(FileManager.default.fileExists(atPath: cacheFile(sim)), "stored again under the new hash")
    }

    // MARK: - the hash computed here against the peer's

    /// GAP and a GATT service with a Database Hash of `hash` (nil: the right one).
    func peerDatabase(hash: [UInt8]?) -> AttributeDatabase {
        var db = AttributeDatabase { db in
            db.service(.genericAccess)
            db.characteristic(.deviceName, [.read], value: Array("hash peer".utf8))
            db.service(.genericAttribute)
            db.characteristic(.databaseHash, [.read], name: "hash")
            db.characteristic(.bit16(0x2A19), [.read, .notify, .extendedProperties], value: [50])
            db.descriptor(.characteristicExtendedProperties, value: [0x00, 0x00])
        }
        db.setValue(hash ?? (try! db.databaseHash()), at: db.handle("hash")!)
        return db
    }

    func testAPeerWhoseHashIsNotItsDatabasesIsAFindingAndIsNotCached() throws {
        let wrong = [UInt8](repeating: 0xAA, count: 16)
        let peer = try GATTPeer(database: peerDatabase(hash: wrong))
        defer { peer.close() }
        let computed = try peerDatabase(hash: nil).databaseHash()
        let run = try mirror(["gatt", peer.target])
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertTrue(run.stderr.contains("mirror: finding: \(peer.target) serves the Database Hash \(ATTHex.string(wrong)), but the database "
                                          + "discovered there hashes to \(ATTHex.string(computed))"), run.stderr)
        XCTAssertFalse(FileManager.default.fileExists(atPath: cacheDirectory + "/" + FileDatabaseStore.fileName(target: peer.target, adapter: nil)))
    }

    func testAPeerWithTheRightHashIsCachedWithItsExtendedPropertiesRead() throws {
        let peer = try GATTPeer(database: peerDatabase(hash: nil))
        defer { peer.close() }
        let run = try mirror(["gatt", peer.target, "--trace"])
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertFalse(run.stderr.contains("finding"), run.stderr)
        XCTAssertTrue(run.stderr.contains("> Read Request handle 0x000A"), "the Extended Properties read for the hash: \(run.stderr)")
        let file = cacheDirectory + "/" + FileDatabaseStore.fileName(target: peer.target, adapter: nil)
        XCTAssertTrue(try String(contentsOfFile: file, encoding: .utf8).contains("\"value\": \"0000\""))
    }

    func testAfterServiceChangedTheNextUseOnTheConnectionRediscoversOnlyTheRangeAndChecksItByTheHash() throws {
        let sim = try SimulatorProcess(["--caching", "yes", "--change-database-after", "500"])
        defer { sim.stop() }
        // One connection (the shell): listen until the Service Changed indication, then the database again.
        let run = try ToolProcess.run("mirror", ["shell", sim.target, "--trace"], input: "listen 2a05 --count 1\ngatt\n",
                                      environment: ["XDG_CACHE_HOME": home], timeout: 60)
        XCTAssertEqual(run.status, 0, run.stderr)
        let lines = run.stderr.split(separator: "\n").map(String.init)
        let indication = try XCTUnwrap(lines.firstIndex { $0.contains("< Handle Value Indication handle 0x0008 value [0e 00 ff ff]") }, run.stderr)
        let after = lines[indication...].filter { $0.contains(" > ") }
        XCTAssertTrue(after.contains { $0.contains("> Read By Group Type Request 0x000E-0xFFFF type 2800") }, after.joined(separator: "\n"))
        XCTAssertFalse(after.contains { $0.contains("> Read By Group Type Request 0x0001-0xFFFF type 2800") }, "GAP and GATT kept: \(after)")
        XCTAssertFalse(after.contains { $0.contains("Find Information Request 0x0009") }, "the GATT service's descriptors kept")
        XCTAssertTrue(run.stdout.contains("6d697272-6f72-7369-6d00-0000000000ad"), run.stdout)
        // Checked by the new hash and stored under it.
        let cached = try String(contentsOfFile: cacheFile(sim), encoding: .utf8)
        XCTAssertTrue(cached.contains("6d697272-6f72-7369-6d00-0000000000ad"), cached)
        let warm = try mirror(["gatt", sim.target, "--trace"])
        XCTAssertEqual(requests(warm).count, 2, warm.stderr)
        XCTAssertEqual(warm.stdout, run.stdout.split(separator: "\n", omittingEmptySubsequences: false).drop { !$0.hasPrefix("MTU") }
            .joined(separator: "\n"), "the same database from the cache")
    }
}
