// A device file (`mirror clone`) served as a GATT server: the database at the handles the device had (gaps kept),
// each value as it was read, each refusal as the device answered it (Core Spec 5.4 Vol 3 Part F §3.4.1.1), writes
// stored. What the file never saw (a value not read) is answered with an empty value, and said in the log as a guess.
import ATTStack
import GATTPeer
import GATTServer
import GATTVocabulary

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

    /// The read hook: a value the device refused is refused with its code; a readable value the file never saw is
    /// served empty and logged as a guess, once per handle.
    public static func hooks(_ clone: DeviceClone, log: @escaping @Sendable (String) -> Void) -> GATTServerHost.Hooks {
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
        return hooks
    }
}
