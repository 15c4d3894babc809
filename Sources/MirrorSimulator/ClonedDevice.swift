// A device file (`mirror clone`) served as a GATT server: the database at the handles the device had (gaps kept),
// each value as it was read, each refusal as the device answered it (Core Spec 5.4 Vol 3 Part F §3.4.1.1), writes
// stored. What the file never saw (a value not read) is answered with an empty value, and said in the log as a guess.
import ATTStack
import Dispatch
import GATTPeer
import GATTServer
import GATTVocabulary
import FoundationEssentials
import Mirror

/// How mirror-sim serves a `DeviceClone`.
public enum ClonedDevice {
    /// The attributes of `clone`, at its handles (Part G §3.1-§3.3): declarations rebuilt from discovery, values and
    /// descriptors from its readings (a redacted value as zeros of its length).
    public static func database(_ clone: DeviceClone) -> AttributeDatabase {
        func stored(_ handle: UInt16) -> [UInt8] {
            switch clone.readings[handle] {
            case .value(let v)?: v
            case .redacted(let length)?: [UInt8](repeating: 0, count: length)
            case .refused?, nil: []
            }
        }
        return AttributeDatabase { b in
            for s in clone.services {
                b.place(s.isPrimary ? .primaryService : .secondaryService, role: .service(end: s.endHandle),
                        value: s.uuid.attWireBytes, permissions: [.read], at: s.startHandle)
                for i in s.includedServices {
                    b.place(.include, role: .include,
                            value: le16(i.startHandle) + le16(i.endHandle) + (i.uuid.uuid16.map(le16) ?? []),
                            permissions: [.read], at: i.declarationHandle)
                }
                for c in s.characteristics {
                    b.place(.characteristic, role: .declaration(valueHandle: c.valueHandle),
                            value: [c.properties.rawValue] + le16(c.valueHandle) + c.uuid.attWireBytes,
                            permissions: [.read], at: c.declarationHandle)
                    var permissions: AttributePermissions = []
                    if c.properties.contains(.read) { permissions.insert(.read) }
                    if !c.properties.isDisjoint(with: [.write, .writeWithoutResponse]) { permissions.insert(.write) }
                    b.place(c.uuid, role: .value, value: stored(c.valueHandle), permissions: permissions, at: c.valueHandle,
                            name: clone.names[c.valueHandle])
                    for d in c.descriptors {
                        let cccd = d.uuid == .clientCharacteristicConfiguration
                        b.place(d.uuid, role: cccd ? .cccd(valueHandle: c.valueHandle) : .descriptor,
                                value: cccd ? [0, 0] : (d.value ?? stored(d.handle)),
                                permissions: cccd ? [.read, .write] : [.read], at: d.handle)
                    }
                }
            }
        }
    }

    /// How the replay paces what followed a write: at the delays the capture recorded, or at once.
    public enum Pace: String, Sendable, CaseIterable { case recorded, fast }

    /// The hooks: a value the device refused is refused with its code; a readable value the file never saw is served
    /// empty and logged as a guess, once per handle. A write the capture shows is answered as the device answered it
    /// (the same Error Response, or accepted), then what followed it is sent (a notification or indication to a client
    /// that enabled it, Part G §3.3.3.3), paced by `pace`; the same write again takes the capture's next occurrence,
    /// then the last. A write the capture never showed is stored and accepted, and logged as a guess. `host` is the
    /// host these hooks serve, given once it exists.
    ///
    /// A mirror's upload is not ATT, so no capture shows it: when the replay sends scanState `complete` (the profile's
    /// name and byte), the clone posts the result ZIP to the URL in cloudToken as the mirror's protocol says a mirror
    /// does (seed 000), and logs it as a guess.
    public static func hooks(_ clone: DeviceClone, pace: Pace = .recorded, host: Lock<GATTServerHost?>, profile: MirrorProfile = .bundled,
                             log: @escaping @Sendable (String) -> Void) -> GATTServerHost.Hooks {
        var hooks = GATTServerHost.Hooks()
        let unread = Set(clone.unread)
        let guessed = Lock<Set<UInt16>>([])
        hooks.read = { read, _ in
            let h = read.attribute.handle
            if case .refused(let code)? = clone.readings[h] { return .error(code) }
            if unread.contains(h), guessed.withLock({ $0.insert(h).inserted }) {
                log("guess: \(ATTHex.handle(h)) was never read in \(clone.source): served as empty")
            }
            return .stored
        }
        struct Key: Hashable { var handle: UInt16; var value: [UInt8] }
        let occurrences = Dictionary(grouping: clone.behaviours) { Key(handle: $0.handle, value: $0.value) }
        let used = Lock<[Key: Int]>([:])
        // The behaviour the next such write takes (written: taken, so a refused write's answer and its followers agree).
        let next = Lock<[Key: DeviceClone.WriteBehaviour]>([:])
        hooks.write = { write, _ in
            let key = Key(handle: write.attribute.handle, value: write.value)
            guard let list = occurrences[key] else {
                log("guess: a write of [\(ATTHex.bytes(write.value))] to \(ATTHex.handle(key.handle)) never appears in \(clone.source): stored and accepted")
                return .store
            }
            let i = used.withLock { u -> Int in
                defer { u[key] = (u[key] ?? 0) + 1 }
                return min(u[key] ?? 0, list.count - 1)
            }
            let b = list[i]
            next.withLock { $0[key] = b }
            if let refusal = b.refusal { return .rejected(refusal) }
            return .store
        }
        hooks.answered = { pdu, c in
            let key: Key
            switch pdu {
            case .writeRequest(let h, let v), .writeCommand(let h, let v): key = Key(handle: h, value: Array(v))
            default: return
            }
            guard let b = next.withLock({ $0.removeValue(forKey: key) }), !b.then.isEmpty, let server = host.current else { return }
            let start = DispatchTime.now()
            let scanState = clone.names.first { $0.value == "scanState" }?.key
            let cloudToken = clone.names.first { $0.value == "cloudToken" }?.key
            let complete = profile.scanStateByte("complete")
            for f in b.then {
                let send: @Sendable () -> Void = {
                    server.withContext { ctx in
                        ctx.database.setValue(f.value, at: f.handle)
                        guard ctx.session(of: c).subscribed(f.handle) else { return }
                        if f.indication { ctx.indicate(handle: f.handle, value: f.value, to: c) } else { ctx.notify(handle: f.handle, value: f.value, to: c) }
                    }
                    guard f.handle == scanState, f.value == complete.map({ [$0] }), let cloudToken else { return }
                    let token = String(decoding: server.database.attribute(cloudToken)?.value ?? [], as: UTF8.self)
                    guard let url = URL(string: token), url.scheme == "http" else {
                        log("guess: scanState complete, but cloudToken holds no http URL (\(token)): nothing posted")
                        return
                    }
                    let body = ResultArchive.body(.zip, scanID: url.lastPathComponent)
                    log("guess: the capture cannot show the upload (HTTP, not ATT): posting the result ZIP (\(body.count) bytes) to \(token)")
                    Task {
                        let outcome = await HTTPPoster.post(body, to: url)
                        log("upload to \(token): \(outcome)")
                    }
                }
                if pace == .fast { send() } else {
                    DispatchQueue.global().asyncAfter(deadline: start + .microseconds(Int(f.after)), execute: send)
                }
            }
        }
        return hooks
    }
}
