"""The Database Hash (Core Spec 5.4 Vol 3 Part G §7.3) of a `mirror gatt --read --json` database, computed apart
from mirror's own code: the AES-CMAC (zero key) comes from Python's `cryptography` (OpenSSL), the message is built
here from the JSON. Three rules:
  spec      every attribute §7.3.1 lists: service, include and characteristic declarations with their values; the
            Extended Properties descriptor with its value; User Description, Client and Server Characteristic
            Configuration, Presentation Format and Aggregate Format as handle and type.
  bluez     what bluetoothd 5.79 and earlier hash (src/shared/gatt-db.c, gen_hash_m): the same without Extended
            Properties (Debian 12 ships 5.66).
  bluez580  what bluetoothd 5.80 and later hash: only attributes whose value its database stores (commit 4465c5777),
            which for a D-Bus application's characteristics leaves the declarations.
Usage: gatt_hash.py FILE (mirror gatt --json output, or a GATT cache file)  ->  prints "spec HEX" and "bluez HEX" ("unknown" for the spec's rule when an
Extended Properties value was not read: `mirror gatt --read` reads them, and the GATT cache file keeps them)."""
import json
import sys

from cryptography.hazmat.primitives import cmac
from cryptography.hazmat.primitives.ciphers import algorithms

PROPERTIES = {"broadcast": 0x01, "read": 0x02, "write-without-response": 0x04, "write": 0x08, "notify": 0x10,
              "indicate": 0x20, "authenticated-signed-writes": 0x40, "extended-properties": 0x80}
BASE = "-0000-1000-8000-00805f9b34fb"


def uuid_bytes(u):
    """A UUID as ATT carries it: 16-bit ones as 2 octets, the rest as 16, little-endian (Part F §3.2.1)."""
    if len(u) == 4:
        return int(u, 16).to_bytes(2, "little")
    if u.endswith(BASE) and u.startswith("0000"):
        return int(u[4:8], 16).to_bytes(2, "little")
    return bytes.fromhex(u.replace("-", ""))[::-1]


def le16(v):
    return v.to_bytes(2, "little")


def message(db, rule):
    attrs = []  # (handle, bytes)
    for s in db["services"]:
        attrs.append((s["start"], le16(s["start"]) + le16(0x2800 if s["primary"] else 0x2801) + uuid_bytes(s["uuid"])))
        for inc in s.get("includes", []):
            value = le16(inc["start"]) + le16(inc["end"]) + (uuid_bytes(inc["uuid"]) if inc.get("uuid") and len(uuid_bytes(inc["uuid"])) == 2 else b"")
            attrs.append((inc["handle"], le16(inc["handle"]) + le16(0x2802) + value))
        for c in s["characteristics"]:
            # mirror gatt --json names the properties; the GATT cache file keeps the byte.
            props = c["properties"] if isinstance(c["properties"], int) else sum(PROPERTIES[p] for p in c["properties"])
            attrs.append((c["handle"], le16(c["handle"]) + le16(0x2803) + bytes([props]) + le16(c["valueHandle"]) + uuid_bytes(c["uuid"])))
            for d in c["descriptors"]:
                t = int(d["uuid"], 16) if len(d["uuid"]) == 4 else None
                if rule == "spec" and t == 0x2900:
                    if "value" not in d:
                        return None  # an Extended Properties value not read: the spec's hash is unknown
                    attrs.append((d["handle"], le16(d["handle"]) + le16(t) + bytes.fromhex(d["value"])))
                elif rule in ("spec", "bluez") and t in (0x2901, 0x2902, 0x2903, 0x2904, 0x2905):
                    attrs.append((d["handle"], le16(d["handle"]) + le16(t)))
    return b"".join(a for _, a in sorted(attrs))


def database_hash(msg):
    c = cmac.CMAC(algorithms.AES(bytes(16)))
    c.update(msg)
    return c.finalize().hex()


if __name__ == "__main__":
    text = open(sys.argv[1]).read()
    db = json.JSONDecoder().raw_decode(text[text.index("{"):])[0]
    for rule in ("spec", "bluez", "bluez580"):
        m = message(db, rule)
        print(rule, database_hash(m) if m is not None else "unknown")
