import TestSupport
import ATTStack
import LinuxBluetooth
import LinkCore
import Synchronization
import XCTest
@testable import GATTClient
import GATTVocabulary

/// The GATT procedures of Core Spec 5.4 Vol 3 Part G §4, byte-exact, with their error endings.
final class ProcedureTests: XCTestCase {
    // MARK: MTU

    func testExchangeMTUOnceAndTheNegotiatedMTUIsReadable() async throws {
        let peer = ScriptedPeer(raw("02 05 02", "03 f7 00"))
        let client = try await makeClient(peer)
        XCTAssertEqual(client.mtu, 23)
        XCTAssertNil(client.serverRxMTU)
        let m = try await client.exchangeMTU()
        XCTAssertEqual(m, 247)
        XCTAssertEqual(client.mtu, 247)
        XCTAssertEqual(client.serverRxMTU, 247)
        let again = try await client.exchangeMTU()   // once per connection: nothing sent
        XCTAssertEqual(again, 247)
        peer.assertScriptDone()
    }

    func testExchangeMTUWithConfiguredRxMTUAndServerAboveIt() async throws {
        let peer = ScriptedPeer(raw("02 00 01", "03 05 02"))
        let client = try await makeClient(peer) { $0.clientRxMTU = 256 }
        let m = try await client.exchangeMTU()
        XCTAssertEqual(m, 256)
        XCTAssertEqual(client.serverRxMTU, 517, "the server's own Rx MTU, not the agreed one")
        peer.assertScriptDone()
    }

    func testExchangeMTURequestNotSupportedStaysAt23() async throws {
        let peer = ScriptedPeer(raw("02 05 02", "01 02 00 00 06"))
        let client = try await makeClient(peer)
        let m = try await client.exchangeMTU()
        XCTAssertEqual(m, 23)
        XCTAssertNil(client.serverRxMTU, "the peer refused: no server Rx MTU")
        peer.assertScriptDone()
    }

    func testExchangeMTUOnConnect() async throws {
        let peer = ScriptedPeer(raw("02 05 02", "03 20 00"))
        let client = try await makeClient(peer) { $0.exchangeMTUOnConnect = true }
        XCTAssertEqual(client.mtu, 32)
        peer.assertScriptDone()
    }

    // MARK: Discovery

    func testDiscoverAllPrimaryServicesUntilAttributeNotFound() async throws {
        let peer = ScriptedPeer(
            raw("10 01 00 ff ff 00 28", "11 06 01 00 05 00 00 18 06 00 0b 00 01 18")
            + raw("10 0c 00 ff ff 00 28",
                  "11 14 0c 00 20 00 fb 34 9b 5f 80 00 00 80 00 10 00 00 0d 18 00 00")
            + raw("10 21 00 ff ff 00 28", "01 10 21 00 0a"))
        let client = try await makeClient(peer)
        let services = try await client.discoverAllPrimaryServices()
        XCTAssertEqual(services.map(\.description), ["0x0001-0x0005 1800", "0x0006-0x000B 1801", "0x000C-0x0020 180d"])
        peer.assertScriptDone()
    }

    func testDiscoverAllPrimaryServicesEndsAtHandleFFFF() async throws {
        let peer = ScriptedPeer(raw("10 01 00 ff ff 00 28", "11 06 01 00 ff ff 00 18"))
        let client = try await makeClient(peer)
        let services = try await client.discoverAllPrimaryServices()
        XCTAssertEqual(services.count, 1)
        XCTAssertEqual(services[0].endHandle, 0xFFFF)
        peer.assertScriptDone()
    }

    func testAPeerWhoseHandlesGoBackwardsIsAProtocolViolationNotALoop() async throws {
        let peer = ScriptedPeer(raw("10 01 00 ff ff 00 28", "11 06 01 00 05 00 00 18")
                                + raw("10 06 00 ff ff 00 28", "11 06 01 00 05 00 00 18"))
        let client = try await makeClient(peer)
        do { _ = try await client.discoverAllPrimaryServices(); XCTFail() } catch {
            guard case .protocolViolation(let v) = error else { return XCTFail("\(error)") }
            XCTAssertTrue(v.problem.contains("backwards"), v.problem)
            XCTAssertEqual(v.received, hex("11 06 01 00 05 00 00 18"))
        }
        peer.assertScriptDone()
    }

    func testDiscoverPrimaryServicesByUUID() async throws {
        let peer = ScriptedPeer(raw("06 01 00 ff ff 00 28 0d 18", "07 0c 00 20 00")
                                + raw("06 21 00 ff ff 00 28 0d 18", "01 06 21 00 0a"))
        let client = try await makeClient(peer)
        let s = try await client.discoverPrimaryServices(uuid: .bit16(0x180D))
        XCTAssertEqual(s, [GATTService(uuid: .bit16(0x180D), startHandle: 0x0C, endHandle: 0x20)])
        peer.assertScriptDone()
    }

    func testFindIncludedServicesWith16And128BitUUIDs() async throws {
        let uuid128 = "fb 34 9b 5f 80 00 00 80 00 10 00 00 aa bb cc dd"
        let peer = ScriptedPeer(
            raw("08 01 00 10 00 02 28", "09 08 02 00 20 00 25 00 0f 18")
            + raw("08 03 00 10 00 02 28", "09 06 03 00 30 00 35 00")
            + raw("08 04 00 10 00 02 28", "01 08 04 00 0a")
            + raw("0a 30 00", "0b " + uuid128))
        let client = try await makeClient(peer)
        let inc = try await client.discoverIncludedServices(of: GATTService(uuid: .bit16(0x1800), startHandle: 1, endHandle: 0x10))
        XCTAssertEqual(inc.count, 2)
        XCTAssertEqual(inc[0], GATTIncludedService(declarationHandle: 2, startHandle: 0x20, endHandle: 0x25, uuid: .bit16(0x180F)))
        XCTAssertEqual(inc[1].startHandle, 0x30)
        XCTAssertEqual(inc[1].uuid, BluetoothUUID(littleEndian: hex(uuid128)))
        peer.assertScriptDone()
    }

    func testDiscoverCharacteristicsAndTheirEndHandles() async throws {
        let peer = ScriptedPeer(
            raw("08 0c 00 20 00 03 28", "09 07 0d 00 12 0e 00 37 2a 10 00 0a 11 00 38 2a")
            + raw("08 11 00 20 00 03 28",
                  "09 15 14 00 1a 15 00 fb 34 9b 5f 80 00 00 80 00 10 00 00 39 2a 00 00")
            + raw("08 15 00 20 00 03 28", "01 08 15 00 0a"))
        let client = try await makeClient(peer)
        let service = GATTService(uuid: .bit16(0x180D), startHandle: 0x0C, endHandle: 0x20)
        let chars = try await client.discoverCharacteristics(of: service)
        XCTAssertEqual(chars.count, 3)
        XCTAssertEqual(chars[0].valueHandle, 0x0E)
        XCTAssertEqual(chars[0].properties, [.read, .notify])
        XCTAssertEqual(chars[0].properties.names, ["read", "notify"])
        XCTAssertEqual(chars[0].endHandle, 0x0F)
        XCTAssertEqual(chars[1].endHandle, 0x13)
        XCTAssertEqual(chars[2].uuid, .bit16(0x2A39))
        XCTAssertEqual(chars[2].endHandle, 0x20)
        peer.assertScriptDone()
    }

    func testDiscoverCharacteristicsByUUID() async throws {
        let peer = ScriptedPeer(
            raw("08 0c 00 20 00 03 28", "09 07 0d 00 12 0e 00 37 2a 10 00 0a 11 00 38 2a")
            + raw("08 11 00 20 00 03 28", "01 08 11 00 0a"))
        let client = try await makeClient(peer)
        let service = GATTService(uuid: .bit16(0x180D), startHandle: 0x0C, endHandle: 0x20)
        let chars = try await client.discoverCharacteristics(of: service, uuid: .bit16(0x2A38))
        XCTAssertEqual(chars.map(\.valueHandle), [0x11])
        peer.assertScriptDone()
    }

    func testDiscoverDescriptorsUpToTheCharacteristicsEnd() async throws {
        let peer = ScriptedPeer(
            raw("04 0f 00 12 00", "05 01 0f 00 02 29")
            + raw("04 10 00 12 00", "05 02 10 00 fb 34 9b 5f 80 00 00 80 00 10 00 00 01 29 00 00")
            + raw("04 11 00 12 00", "01 04 11 00 0a"))
        let client = try await makeClient(peer)
        let c = GATTCharacteristic(uuid: .bit16(0x2A37), declarationHandle: 0x0D, valueHandle: 0x0E,
                                   properties: [.notify], endHandle: 0x12)
        let d = try await client.discoverDescriptors(of: c)
        XCTAssertEqual(d.map(\.handle), [0x0F, 0x10])
        XCTAssertTrue(d[0].isCCCD)
        XCTAssertEqual(d[1].uuid, .bit16(0x2901))
        peer.assertScriptDone()
        // A characteristic whose value is its last handle has no descriptors: nothing is sent.
        let none = try await client.discoverDescriptors(of: GATTCharacteristic(
            uuid: .bit16(1), declarationHandle: 1, valueHandle: 2, properties: [.read], endHandle: 2))
        XCTAssertEqual(none, [])
    }

    func testDiscoverAllBuildsTheWholeTree() async throws {
        let peer = ScriptedPeer(
            raw("10 01 00 ff ff 00 28", "11 06 01 00 06 00 0d 18")
            + raw("10 07 00 ff ff 00 28", "01 10 07 00 0a")
            + raw("08 01 00 06 00 02 28", "01 08 01 00 0a")
            + raw("08 01 00 06 00 03 28", "09 07 02 00 12 03 00 37 2a 05 00 08 06 00 39 2a")
            + raw("08 06 00 06 00 03 28", "01 08 06 00 0a")
            + raw("04 04 00 04 00", "05 01 04 00 02 29"))
        let client = try await makeClient(peer)
        let db = try await client.discoverAll()
        XCTAssertEqual(db.count, 1)
        XCTAssertEqual(db[0].characteristics.count, 2)
        XCTAssertEqual(db[0].characteristics[0].cccd?.handle, 4)
        XCTAssertEqual(db[0].characteristics[1].descriptors, [])
        XCTAssertEqual(db[0].characteristics[1].endHandle, 6)
        peer.assertScriptDone()
    }

    // MARK: Reads

    func testReadByHandle() async throws {
        let peer = ScriptedPeer(raw("0a 03 00", "0b 01 02 03"))
        let client = try await makeClient(peer)
        let v = try await client.read(handle: 3)
        XCTAssertEqual(v, [1, 2, 3])
        peer.assertScriptDone()
    }

    func testReadErrorCarriesCodeNameOpcodeHandleAndWhoRejected() async throws {
        let peer = ScriptedPeer(raw("0a 03 00", "01 0a 03 00 02"))
        let client = try await makeClient(peer)
        client.setName("wifiPassword", for: 3)
        do { _ = try await client.read(handle: 3); XCTFail() } catch {
            guard let a = error.attributeError else { return XCTFail("\(error)") }
            XCTAssertEqual(a.code, .readNotPermitted)
            XCTAssertEqual(a.name, "Read Not Permitted")
            XCTAssertEqual(a.requestOpcode, .readRequest)
            XCTAssertEqual(a.handle, 3)
            XCTAssertEqual(a.rejectedBy, .peer)
            XCTAssertEqual(a.description, "ATT error 0x02 Read Not Permitted from the peer, on Read Request of handle 0x0003 (wifiPassword)")
        }
    }

    func testReadLongUntilAShortPart() async throws {
        let part1 = (0..<22).map { String(format: "%02x", $0) }.joined(separator: " ")
        let part2 = (22..<44).map { String(format: "%02x", $0) }.joined(separator: " ")
        let peer = ScriptedPeer(raw("0a 05 00", "0b " + part1) + raw("0c 05 00 16 00", "0d " + part2)
                                + raw("0c 05 00 2c 00", "0d 2c 2d"))
        let client = try await makeClient(peer)
        let v = try await client.readLong(handle: 5)
        XCTAssertEqual(v, (0..<46).map { UInt8($0) })
        peer.assertScriptDone()
    }

    func testReadLongEndsOnAttributeNotLongAtAnExactBoundary() async throws {
        let part1 = (0..<22).map { String(format: "%02x", $0) }.joined(separator: " ")
        let peer = ScriptedPeer(raw("0a 05 00", "0b " + part1) + raw("0c 05 00 16 00", "01 0c 05 00 0b"))
        let client = try await makeClient(peer)
        let v = try await client.readLong(handle: 5)
        XCTAssertEqual(v.count, 22)
        peer.assertScriptDone()
    }

    func testReadLongEndsOnInvalidOffsetAtAnExactBoundary() async throws {
        let part = (0..<22).map { String(format: "%02x", $0) }.joined(separator: " ")
        let peer = ScriptedPeer(raw("0a 05 00", "0b " + part) + raw("0c 05 00 16 00", "0d " + part)
                                + raw("0c 05 00 2c 00", "01 0c 05 00 07"))
        let client = try await makeClient(peer)
        let v = try await client.readLong(handle: 5)
        XCTAssertEqual(v.count, 44)
        peer.assertScriptDone()
    }

    func testReadLongStopsAt512Bytes() async throws {
        // MTU 23: 22-byte parts; 23 parts of 22 make 506, and one more full part would exceed 512.
        let part = (0..<22).map { _ in "aa" }.joined(separator: " ")
        var steps = raw("0a 05 00", "0b " + part)
        var offset = 22
        while offset < 512 {
            steps += raw(String(format: "0c 05 00 %02x %02x", offset & 0xFF, offset >> 8), "0d " + part)
            offset += 22
        }
        let peer = ScriptedPeer(steps)
        let client = try await makeClient(peer)
        // The part at offset 506 takes the value to 528 bytes, past the 512-byte maximum (Vol 3 Part F §3.2.9):
        // a Read Blob that never ends is a protocol violation, not a 528-byte value.
        do {
            let v = try await client.readLong(handle: 5)
            XCTFail("read \(v.count) bytes")
        } catch {
            guard case .protocolViolation(let v) = error else { return XCTFail("\(error)") }
            XCTAssertTrue(v.problem.contains("past the 512-byte maximum"), v.problem)
            XCTAssertTrue(v.problem.contains("offset 506"), v.problem)
        }
        XCTAssertEqual(offset, 528)
        peer.assertScriptDone()
    }

    func testReadLongErrorOtherThanNotLongIsReported() async throws {
        let part = (0..<22).map { _ in "aa" }.joined(separator: " ")
        let peer = ScriptedPeer(raw("0a 05 00", "0b " + part) + raw("0c 05 00 16 00", "01 0c 05 00 0e"))
        let client = try await makeClient(peer)
        do { _ = try await client.readLong(handle: 5); XCTFail() } catch {
            XCTAssertEqual(error.attributeError?.code, .unlikelyError)
            XCTAssertEqual(error.attributeError?.requestOpcode, .readBlobRequest)
        }
    }

    func testReadByUUID() async throws {
        let peer = ScriptedPeer(raw("08 01 00 ff ff 00 2a", "09 04 03 00 41 42")
                                + raw("08 04 00 ff ff 00 2a", "01 08 04 00 0a"))
        let client = try await makeClient(peer)
        let v = try await client.read(uuid: .bit16(0x2A00))
        XCTAssertEqual(v.count, 1)
        XCTAssertEqual(v[0].handle, 3)
        XCTAssertEqual(v[0].value, [0x41, 0x42])
        peer.assertScriptDone()
    }

    func testReadMultipleAndReadMultipleVariable() async throws {
        let peer = ScriptedPeer(raw("0e 03 00 05 00", "0f 01 02 03") + raw("20 03 00 05 00", "21 01 00 09 02 00 07 08"))
        let client = try await makeClient(peer)
        let m = try await client.readMultiple(handles: [3, 5])
        XCTAssertEqual(m, [1, 2, 3])
        let mv = try await client.readMultipleVariable(handles: [3, 5])
        XCTAssertEqual(mv, [[9], [7, 8]])
        peer.assertScriptDone()
    }

    // MARK: Writes

    func testValueOverTheBudgetIsRefusedLocallyAndNothingIsSent() async throws {
        let peer = ScriptedPeer(raw("02 05 02", "03 f7 00"))
        let client = try await makeClient(peer)
        client.setName("cloudToken", for: 0x12)
        try await client.exchangeMTU()
        do { try await client.write(handle: 0x12, value: [UInt8](repeating: 0x41, count: 600)); XCTFail() } catch {
            guard let a = error.attributeError else { return XCTFail("\(error)") }
            XCTAssertEqual(a.rejectedBy, .local)
            XCTAssertEqual(a.code, .invalidAttributeValueLength)
            XCTAssertEqual(a.valueLength, 600)
            XCTAssertEqual(a.budget, 244)
            XCTAssertEqual(a.mtu, 247)
            XCTAssertEqual(a.requestOpcode, .writeRequest)
            XCTAssertEqual(a.handle, 0x12)
            XCTAssertTrue(a.description.hasPrefix("not sent: 600-byte value exceeds the 244-byte budget of MTU 247 (local limit)"), a.description)
        }
        do { try await client.writeWithoutResponse(handle: 0x12, value: [UInt8](repeating: 0, count: 245)); XCTFail() } catch {
            XCTAssertEqual(error.attributeError?.rejectedBy, .local)
            XCTAssertEqual(error.attributeError?.requestOpcode, .writeCommand)
        }
        do { try await client.writeLong(handle: 0x12, value: [UInt8](repeating: 0, count: 513)); XCTFail() } catch {
            XCTAssertEqual(error.attributeError?.budget, 512)
        }
        XCTAssertEqual(peer.sent.count, 1, "a refused value was sent")
        peer.assertScriptDone()
    }

    /// The Write Command fast path writes the PDU's bytes with no ATTPDU built; the codec's handle rule (Part F
    /// §3.2.2: 0x0000 is reserved) still refuses it, in `validate()`'s words, on the loop and off it.
    func testWriteCommandToHandleZeroIsRefusedInTheCodecsWordsAndNothingIsSent() async throws {
        let peer = ScriptedPeer(raw("02 05 02", "03 f7 00"))
        let client = try await makeClient(peer)
        try await client.exchangeMTU()
        let expected = "cannot be sent: \(ATTEncodeError.invalidField(opcode: .writeCommand, field: .attributeHandle, problem: .zeroHandle))"
        do { try await client.writeWithoutResponse(handle: 0, value: [1]); XCTFail() } catch {
            guard case .unsupported(let text) = error else { return XCTFail("\(error)") }
            XCTAssertTrue(text.hasSuffix(expected), text)
        }
        await withTaskExecutorPreference(client.eventLoop) {
            do { try await client.writeWithoutResponse(handle: 0, value: [1]); XCTFail() } catch {
                guard case .unsupported(let text)? = error as? GATTError else { return XCTFail("\(error)") }
                XCTAssertTrue(text.hasSuffix(expected), text)
            }
        }
        XCTAssertEqual(peer.sent.count, 1, "a refused Write Command was sent")
        peer.assertScriptDone()
    }

    func testPeersInvalidAttributeValueLengthWithinTheBudgetIsTheApplicationLayersRejection() async throws {
        let value = [UInt8](repeating: 0x41, count: 41)
        let peer = ScriptedPeer(raw("02 05 02", "03 f7 00")
                                + raw("12 12 00 " + value.map { String(format: "%02x", $0) }.joined(separator: " "),
                                      "01 12 12 00 0d"))
        let client = try await makeClient(peer)
        client.setName("cloudToken", for: 0x12)
        try await client.exchangeMTU()
        do { try await client.write(handle: 0x12, value: value); XCTFail() } catch {
            guard let a = error.attributeError else { return XCTFail("\(error)") }
            XCTAssertEqual(a.rejectedBy, .peer)
            XCTAssertEqual(a.valueLength, 41)
            XCTAssertEqual(a.budget, 244)
            XCTAssertEqual(a.mtu, 247)
            XCTAssertEqual(a.description,
                           "ATT error 0x0D Invalid Attribute Value Length from the peer, on Write Request to handle 0x0012 (cloudToken): "
                           + "41-byte value, within the 244-byte budget of MTU 247, so the peripheral rejected it at the application layer")
        }
        peer.assertScriptDone()
    }

    func testWriteLongInMTUMinus5PartsThenExecute() async throws {
        let value = (0..<40).map { UInt8($0) }
        func h(_ r: Range<Int>) -> String { value[r].map { String(format: "%02x", $0) }.joined(separator: " ") }
        let peer = ScriptedPeer(
            raw("16 12 00 00 00 " + h(0..<18), "17 12 00 00 00 " + h(0..<18))
            + raw("16 12 00 12 00 " + h(18..<36), "17 12 00 12 00 " + h(18..<36))
            + raw("16 12 00 24 00 " + h(36..<40), "17 12 00 24 00 " + h(36..<40))
            + raw("18 01", "19"))
        let client = try await makeClient(peer)
        try await client.writeLong(handle: 0x12, value: value)
        peer.assertScriptDone()
    }

    func testWriteLongErrorCancelsTheQueueAndReportsTheFirstError() async throws {
        let value = (0..<40).map { UInt8($0) }
        func h(_ r: Range<Int>) -> String { value[r].map { String(format: "%02x", $0) }.joined(separator: " ") }
        let peer = ScriptedPeer(
            raw("16 12 00 00 00 " + h(0..<18), "17 12 00 00 00 " + h(0..<18))
            + raw("16 12 00 12 00 " + h(18..<36), "01 16 12 00 09")
            + raw("18 00", "19"))
        let client = try await makeClient(peer)
        do { try await client.writeLong(handle: 0x12, value: value); XCTFail() } catch {
            XCTAssertEqual(error.attributeError?.code, .prepareQueueFull)
            XCTAssertEqual(error.attributeError?.requestOpcode, .prepareWriteRequest)
        }
        peer.assertScriptDone()
    }

    func testReliableWriteComparesEveryEchoAndCancelsOnAMismatch() async throws {
        let peer = ScriptedPeer(
            raw("16 12 00 00 00 01 02", "17 12 00 00 00 01 02")
            + raw("16 14 00 00 00 03", "17 14 00 00 00 04")
            + raw("18 00", "19"))
        let client = try await makeClient(peer)
        do { try await client.writeReliable([(0x12, [1, 2]), (0x14, [3]), (0x16, [5])]); XCTFail() } catch {
            guard case .protocolViolation(let v) = error else { return XCTFail("\(error)") }
            XCTAssertEqual(v.received, hex("17 14 00 00 00 04"))
            XCTAssertTrue(v.problem.contains("echo"), v.problem)
        }
        peer.assertScriptDone()
    }

    func testReliableWriteExecutesWhenEveryEchoMatches() async throws {
        let peer = ScriptedPeer(
            raw("16 12 00 00 00 01 02", "17 12 00 00 00 01 02")
            + raw("16 14 00 00 00 03", "17 14 00 00 00 03")
            + raw("18 01", "19"))
        let client = try await makeClient(peer)
        try await client.writeReliable([(0x12, [1, 2]), (0x14, [3])])
        peer.assertScriptDone()
    }

    func testWriteCommandIsByteExact() async throws {
        let peer = ScriptedPeer([.client(hex("52 12 00 36"))])
        let client = try await makeClient(peer)
        try await client.writeWithoutResponse(handle: 0x12, value: [0x36])
        peer.assertScriptDone()
    }

    // MARK: Subscriptions

    func testSubscribeArmsThenWritesTheCCCDThenReadsTheValue() async throws {
        let peer = ScriptedPeer(raw("12 0f 00 01 00", "13") + raw("0a 0e 00", "0b 09"))
        let client = try await makeClient(peer)
        let c = GATTCharacteristic(uuid: .bit16(0x2A37), declarationHandle: 0x0D, valueHandle: 0x0E,
                                   properties: [.read, .notify], endHandle: 0x0F,
                                   descriptors: [GATTDescriptor(handle: 0x0F, uuid: .clientCharacteristicConfiguration)])
        let (value, stream) = try await client.subscribe(to: c)
        XCTAssertEqual(value, [9], "the latched value was not returned")
        peer.inject(hex("1b 0e 00 0a"))
        var it = stream.makeAsyncIterator()
        let n = try await it.next()
        XCTAssertEqual(n?.value, [10])
        peer.assertScriptDone()
    }

    /// Seed 001: a notification that arrives before the response to the write that caused it reaches the handler
    /// armed for it; a value already latched is returned by the subscription.
    func testNotificationBeforeTheWriteResponseReachesTheArmedSubscription() async throws {
        let peer = ScriptedPeer(
            raw("12 2b 00 01 00", "13") + raw("0a 2a 00", "0b 09")        // subscribe scanState: latched at 9 (error)
            + raw("12 2e 00 01 00", "13") + raw("0a 2d 00", "0b 00")      // subscribe scanError
            + raw("12 12 00 32", "1b 2d 00 0b", "13"))                    // initDeviceForScan: scanError=11 before 0x13
        let client = try await makeClient(peer)
        let scanState = GATTCharacteristic(uuid: .bit16(0xAAA1), declarationHandle: 0x29, valueHandle: 0x2A,
                                           properties: [.read, .notify], endHandle: 0x2B,
                                           descriptors: [GATTDescriptor(handle: 0x2B, uuid: .clientCharacteristicConfiguration)])
        let scanError = GATTCharacteristic(uuid: .bit16(0xAAA2), declarationHandle: 0x2C, valueHandle: 0x2D,
                                           properties: [.read, .notify], endHandle: 0x2E,
                                           descriptors: [GATTDescriptor(handle: 0x2E, uuid: .clientCharacteristicConfiguration)])
        let (state, _) = try await client.subscribe(to: scanState)
        XCTAssertEqual(state, [9])
        let (_, errors) = try await client.subscribe(to: scanError)
        try await client.write(handle: 0x12, value: [0x32])
        var it = errors.makeAsyncIterator()
        let n = try await it.next()
        XCTAssertEqual(n, GATTNotification(handle: 0x2D, value: [11], kind: .notification))
        peer.assertScriptDone()
    }

    func testSubscribeUsesIndicationsWhenTheCharacteristicOnlyIndicatesAndDiscoversTheCCCD() async throws {
        let peer = ScriptedPeer(raw("04 0f 00 10 00", "05 01 0f 00 02 29 10 00 01 29")
                                + raw("12 0f 00 02 00", "13", "1d 0e 00 05") + [.client(hex("1e"))])
        let client = try await makeClient(peer)
        let c = GATTCharacteristic(uuid: .bit16(0x2A05), declarationHandle: 0x0D, valueHandle: 0x0E,
                                   properties: [.indicate], endHandle: 0x10)
        let (value, stream) = try await client.subscribe(to: c)
        XCTAssertNil(value)
        var it = stream.makeAsyncIterator()
        let n = try await it.next()
        XCTAssertEqual(n, GATTNotification(handle: 0x0E, value: [5], kind: .indication))
        await peer.waitForSent(3)
        peer.assertScriptDone()
    }

    func testSubscribeFailureFinishesTheStream() async throws {
        let peer = ScriptedPeer(raw("12 0f 00 01 00", "01 12 0f 00 03"))
        let client = try await makeClient(peer)
        do { _ = try await client.subscribe(valueHandle: 0x0E, cccdHandle: 0x0F); XCTFail() } catch {
            XCTAssertEqual(error.attributeError?.code, .writeNotPermitted)
        }
        XCTAssertEqual(client.engine.subscriberCount(handle: 0x0E), 0)
        peer.assertScriptDone()
    }

    func testCatchAllSeesNotificationsFromTheStartAndMultipleNotificationIsSplit() async throws {
        let peer = ScriptedPeer([.server(hex("1b 21 00 01")), .server(hex("23 21 00 01 00 02 22 00 02 00 03 04"))])
        let client = try await makeClient(peer)
        var it = client.notifications.makeAsyncIterator()
        var got: [GATTNotification] = []
        for _ in 0..<3 { got.append(try await it.next()!) }
        XCTAssertEqual(got, [GATTNotification(handle: 0x21, value: [1], kind: .notification),
                             GATTNotification(handle: 0x21, value: [2], kind: .notification),
                             GATTNotification(handle: 0x22, value: [3, 4], kind: .notification)])
    }

    func testPerHandleStreamsDeliverInArrivalOrderAndOverflowIsCounted() async throws {
        let log = EventLog()
        let peer = ScriptedPeer(raw("12 0f 00 01 00", "13"))
        let client = try await makeClient(peer, log: log) { $0.notificationBufferLimit = 4 }
        let (_, stream) = try await client.subscribe(valueHandle: 0x0E, cccdHandle: 0x0F, readValue: false)
        for i in 0..<10 { peer.inject([0x1B, 0x0E, 0x00, UInt8(i)]) }
        await peer.flush()
        var it = stream.makeAsyncIterator()
        var got: [UInt8] = []
        for _ in 0..<4 { got.append(try await it.next()!.value[0]) }
        XCTAssertEqual(got, [0, 1, 2, 3])
        XCTAssertEqual(stream.droppedCount, 6)
        peer.inject([0x1B, 0x0E, 0x00, 42])
        let next = try await it.next()!
        XCTAssertEqual(next.value, [42])
        XCTAssertEqual(next.droppedBefore, 6, "the overflow was not reported with the next value")
        let stats0 = await client.statistics
        XCTAssertGreaterThanOrEqual(stats0.droppedNotifications, 6)
        XCTAssertTrue(log.all.contains { if case .notificationDropped(0x0E, 0x0E) = $0 { return true }; return false })
    }

    func testUnsubscribeWritesZeroAndEndsTheStream() async throws {
        let peer = ScriptedPeer(raw("12 0f 00 01 00", "13") + raw("12 0f 00 00 00", "13"))
        let client = try await makeClient(peer)
        let (_, stream) = try await client.subscribe(valueHandle: 0x0E, cccdHandle: 0x0F, readValue: false)
        try await client.unsubscribe(valueHandle: 0x0E, cccdHandle: 0x0F)
        var count = 0
        for try await _ in stream { count += 1 }
        XCTAssertEqual(count, 0)
        peer.assertScriptDone()
    }

    // MARK: Security

    func testInsufficientEncryptionRaisesTheLevelOnceAndRetriesOnce() async throws {
        let levels = Lock<[BTSecurityLevel]>([])
        let peer = ScriptedPeer(raw("0a 03 00", "01 0a 03 00 0f") + raw("0a 03 00", "0b 01"))
        let client = try await makeClient(peer) { c in
            c.retryAfterRaisingSecurity = true
            c.setSecurityLevel = { level in levels.withLock { $0.append(level) } }
        }
        let v = try await client.read(handle: 3)
        XCTAssertEqual(v, [1])
        XCTAssertEqual(levels.withLock { $0 }, [.medium])
        XCTAssertEqual(client.securityLevel, .medium)
        peer.assertScriptDone()
    }

    func testSecurityRetryHappensOnlyOnce() async throws {
        let peer = ScriptedPeer(raw("0a 03 00", "01 0a 03 00 05") + raw("0a 03 00", "01 0a 03 00 05"))
        let client = try await makeClient(peer) { c in
            c.retryAfterRaisingSecurity = true
            c.setSecurityLevel = { _ in }
        }
        do { _ = try await client.read(handle: 3); XCTFail() } catch {
            XCTAssertEqual(error.attributeError?.code, .insufficientAuthentication)
        }
        peer.assertScriptDone()
    }

    func testWithoutOptInInsufficientAuthenticationIsReported() async throws {
        let peer = ScriptedPeer(raw("0a 03 00", "01 0a 03 00 05"))
        let client = try await makeClient(peer) { c in c.setSecurityLevel = { _ in XCTFail("raised without opt-in") } }
        do { _ = try await client.read(handle: 3); XCTFail() } catch {
            XCTAssertEqual(error.attributeError?.code, .insufficientAuthentication)
        }
        peer.assertScriptDone()
    }
}
