#!/usr/bin/env python3
# A test peer only (the bumble VM scenario): Google Bumble's own host stack (pip's bumble, in the venv
# tools/vm/bumble-venv.sh makes) over the HCI user channel of a controller the kernel leaves alone, serving a GATT
# database and pairing through Bumble's SMP. Nothing in mirror's build or a user's path runs it.
# Usage: bumble_peer.py [--transport hci-socket:1] [--io none|display|keyboard] [--passkey N] [--keystore FILE]
#        [--control FILE] [--privacy IRK]
# Logs one line per event on stdout ("bumble-peer: ..."): the value handle of each characteristic, then "advertising",
# then connections, writes, subscriptions, refusals of the authenticated value, pairing (the delegate's questions,
# result, keys) and encryption changes.
import argparse
import asyncio
import logging
import os
import signal
import sys

from bumble import data_types, hci
from bumble.att import ATT_INSUFFICIENT_AUTHENTICATION_ERROR, ATT_INSUFFICIENT_ENCRYPTION_ERROR, ATT_Error
from bumble.core import AdvertisingData
from bumble.device import Device, DeviceConfiguration
from bumble.gatt import (GATT_DEVICE_NAME_CHARACTERISTIC, Characteristic, CharacteristicValue, Descriptor,
                         Service)
from bumble.keys import JsonKeyStore
from bumble.pairing import PairingConfig, PairingDelegate
from bumble.transport import open_transport

SERVICE_UUID = "6E400000-B5A3-F393-E0A9-E50E24DC4179"
SHORT_VALUE = b"hello from bumble"
# 286 bytes: more than an ATT_MTU of 23 carries, so the client needs Read Blob (Part F §3.4.4.5); within the 512-byte
# maximum of an attribute value (Part F §3.2.9: Bumble 0.0.236 serves a longer one, which mirror rejects, exit 8).
LONG_VALUE = b"".join(b"%03d:bumble-long-value;" % i for i in range(13))
ENCRYPTED_VALUE = b"secret: encrypted link"
AUTHENTICATED_VALUE = b"secret: authenticated link"


def addr(address) -> str:
    """An address as mirror prints it: 00:AA:01:01:00:01 (Bumble's str() adds /P for a public one)."""
    return address.to_string(with_type_qualifier=False)


def log(message: str) -> None:
    print(f"bumble-peer: {message}", flush=True)


def user_description(text: str) -> Descriptor:
    # Characteristic User Description (0x2901, Part G §3.3.3.2): the name mirror shows beside the handle.
    return Descriptor("2901", Descriptor.READABLE, text.encode())


class Delegate(PairingDelegate):
    """Answers SMP's questions without a person: Just Works accepted, a fixed passkey displayed or typed."""

    def __init__(self, io: str, passkey: int):
        capability = {
            "none": PairingDelegate.NO_OUTPUT_NO_INPUT,
            "display": PairingDelegate.DISPLAY_OUTPUT_ONLY,
            "keyboard": PairingDelegate.KEYBOARD_INPUT_ONLY,
        }[io]
        # Distribute (and accept) the encryption and identity keys, and the signing key.
        keys = (PairingDelegate.KeyDistribution.DISTRIBUTE_ENCRYPTION_KEY
                | PairingDelegate.KeyDistribution.DISTRIBUTE_IDENTITY_KEY
                | PairingDelegate.KeyDistribution.DISTRIBUTE_SIGNING_KEY)
        super().__init__(io_capability=capability, local_initiator_key_distribution=keys,
                         local_responder_key_distribution=keys)
        self.passkey = passkey

    async def accept(self) -> bool:
        log("pairing request accepted")
        return True

    async def confirm(self, auto: bool = False) -> bool:
        log(f"pairing confirmation answered yes (auto={auto})")
        return True

    async def compare_numbers(self, number: int, digits: int) -> bool:
        log(f"numeric comparison {number:0{digits}} answered yes")
        return True

    async def generate_passkey(self) -> int:
        return self.passkey

    async def display_number(self, number: int, digits: int) -> None:
        log(f"passkey displayed: {number:0{digits}}")

    async def get_number(self) -> int:
        log(f"passkey typed: {self.passkey:06d}")
        return self.passkey


def main() -> int:
    parser = argparse.ArgumentParser(description="Bumble as a GATT and SMP test peer over the HCI user channel")
    parser.add_argument("--transport", default="hci-socket:1")
    parser.add_argument("--io", choices=["none", "display", "keyboard"], default="none")
    parser.add_argument("--passkey", type=int, default=123456)
    parser.add_argument("--keystore", default=os.path.join(os.getcwd(), "bumble-keys.json"))
    parser.add_argument("--name", default="Bumble peer")
    parser.add_argument("--control", help="a file whose 'IO PASSKEY' replaces --io and --passkey at each pairing")
    parser.add_argument("--privacy", metavar="IRK",
                        help="LE privacy: advertise from a resolvable private address made with this IRK (32 hex digits)")
    args = parser.parse_args()
    if os.environ.get("BUMBLE_PEER_DEBUG"):
        logging.basicConfig(level=logging.DEBUG)
    return asyncio.run(serve(args))


async def serve(args) -> int:
    async with await open_transport(args.transport) as (source, sink):
        config = DeviceConfiguration()
        config.load_from_dict({"name": args.name} | ({"irk": args.privacy} if args.privacy else {}))
        # Bumble makes a fresh RPA from its IRK at power-on (device.py: le_privacy_enabled, Vol 6 Part B §1.3.2.2).
        config.le_privacy_enabled = bool(args.privacy)
        device = Device.from_config_with_hci(config, source, sink)

        writable_value = bytearray(b"initial")
        notify = Characteristic("6E400004-B5A3-F393-E0A9-E50E24DC4179",
                                Characteristic.Properties.READ | Characteristic.Properties.NOTIFY,
                                Characteristic.READABLE, b"not yet written",
                                descriptors=[user_description("bumble notify")])

        def read_written(connection):
            return bytes(writable_value)

        async def read_authenticated(connection):
            # Bumble 0.0.236 marks every encrypted LE link authenticated (device.py, on_connection_encryption_change),
            # so READ_REQUIRES_AUTHENTICATION passes after Just Works: the key's own MITM flag decides here instead.
            if not connection.is_encrypted:
                raise ATT_Error(ATT_INSUFFICIENT_ENCRYPTION_ERROR)
            keys = await device.keystore.get(str(connection.peer_address))
            ltks = [k for k in (keys.ltk, keys.ltk_central, keys.ltk_peripheral) if k is not None] if keys else []
            if not any(k.authenticated for k in ltks):
                log("authenticated value refused: the link's key is unauthenticated (Just Works)")
                raise ATT_Error(ATT_INSUFFICIENT_AUTHENTICATION_ERROR)
            return AUTHENTICATED_VALUE

        async def on_write(connection, value: bytes):
            writable_value[:] = value
            log(f"write from {addr(connection.peer_address)}: {value.hex()}; notifying it on 0x{notify.handle:04X}")
            notify.value = bytes(value)
            await device.notify_subscribers(notify, bytes(value))

        characteristics = [
            Characteristic("6E400001-B5A3-F393-E0A9-E50E24DC4179", Characteristic.Properties.READ,
                           Characteristic.READABLE, SHORT_VALUE, descriptors=[user_description("bumble short")]),
            Characteristic("6E400002-B5A3-F393-E0A9-E50E24DC4179", Characteristic.Properties.READ,
                           Characteristic.READABLE, LONG_VALUE, descriptors=[user_description("bumble long")]),
            Characteristic("6E400003-B5A3-F393-E0A9-E50E24DC4179",
                           Characteristic.Properties.READ | Characteristic.Properties.WRITE
                           | Characteristic.Properties.WRITE_WITHOUT_RESPONSE,
                           Characteristic.READABLE | Characteristic.WRITEABLE,
                           CharacteristicValue(read=read_written, write=on_write),
                           descriptors=[user_description("bumble write")]),
            notify,
            Characteristic("6E400005-B5A3-F393-E0A9-E50E24DC4179", Characteristic.Properties.READ,
                           Characteristic.READ_REQUIRES_ENCRYPTION, ENCRYPTED_VALUE,
                           descriptors=[user_description("bumble encrypted")]),
            Characteristic("6E400006-B5A3-F393-E0A9-E50E24DC4179", Characteristic.Properties.READ,
                           Characteristic.READABLE, CharacteristicValue(read=read_authenticated),
                           descriptors=[user_description("bumble authenticated")]),
        ]
        device.add_service(Service(SERVICE_UUID, characteristics))

        def on_subscription(connection, notify_enabled, indicate_enabled):
            log(f"subscription on 0x{notify.handle:04X}: notify={notify_enabled} indicate={indicate_enabled}")
            if notify_enabled:
                # The CCCD write is the write this notification follows (mirror listen alone holds the link).
                asyncio.get_running_loop().create_task(device.notify_subscribers(notify, b"subscribed"))
        notify.on(notify.EVENT_SUBSCRIPTION, on_subscription)

        await device.power_on()
        device.keystore = JsonKeyStore.from_device(device, filename=args.keystore)
        # Distribute the controller's public address as the identity (Part H §3.6.5), the one mirror connects to.
        def pairing_config(connection):
            # --control FILE ("IO PASSKEY", read at each pairing) changes them without a restart (Python's start
            # costs some 18 s under the VM's TCG).
            io, passkey = args.io, args.passkey
            if args.control and os.path.exists(args.control):
                words = open(args.control, encoding="utf-8").read().split()
                io, passkey = words[0], int(words[1]) if len(words) > 1 else passkey
            log(f"pairing as io {io}")
            return PairingConfig(sc=True, mitm=io != "none", bonding=True, delegate=Delegate(io, passkey),
                                 identity_address_type=PairingConfig.AddressType.PUBLIC)
        device.pairing_config_factory = pairing_config

        for c in characteristics:
            log(f"characteristic '{c.descriptors[0].value.decode()}' {c.uuid} value handle 0x{c.handle:04X}")
        for attribute in device.gatt_server.attributes:
            if isinstance(attribute, Characteristic) and attribute.uuid == GATT_DEVICE_NAME_CHARACTERISTIC:
                log(f"device name value handle 0x{attribute.handle:04X}: {args.name}")

        def on_connection(connection):
            log(f"connection from {addr(connection.peer_address)} handle 0x{connection.handle:04X}")
            connection.on(connection.EVENT_DISCONNECTION,
                          lambda reason: log(f"disconnection from {addr(connection.peer_address)}: reason 0x{reason:02X}"))
            connection.on(connection.EVENT_PAIRING_START, lambda: log("pairing started"))
            connection.on(connection.EVENT_PAIRING, lambda keys: log(
                f"paired with {addr(connection.peer_address)}: key authenticated={any(k.authenticated for k in (keys.ltk, keys.ltk_central, keys.ltk_peripheral) if k)} "
                f"keys: {', '.join(k for k in ('ltk', 'ltk_central', 'ltk_peripheral', 'irk', 'csrk') if getattr(keys, k) is not None)}; "
                f"stored in {args.keystore}"))
            connection.on(connection.EVENT_PAIRING_FAILURE, lambda reason: log(
                f"pairing failed: {getattr(reason, 'name', reason)}"))
            connection.on(connection.EVENT_CONNECTION_ENCRYPTION_CHANGE, lambda: log(
                f"encryption {'on' if connection.is_encrypted else 'off'}"))
            connection.on(connection.EVENT_CONNECTION_ENCRYPTION_FAILURE, lambda error: log(
                f"encryption failed: {error}"))
        device.on(device.EVENT_CONNECTION, on_connection)

        device.advertising_data = bytes(AdvertisingData([
            data_types.Flags(AdvertisingData.Flags.LE_GENERAL_DISCOVERABLE_MODE
                             | AdvertisingData.Flags.BR_EDR_NOT_SUPPORTED),
            data_types.CompleteLocalName(args.name),
        ]))
        if args.privacy:
            # The RPA as the random address; pairing still gives the public address as the identity (with the IRK).
            await device.start_advertising(auto_restart=True, own_address_type=hci.OwnAddressType.RANDOM)
            log(f"advertising as {addr(device.random_address)} (random, resolvable), identity {addr(device.public_address)}, "
                f"io {args.io}, keys in {args.keystore}")
        else:
            # Public: the controller's own address (hci1 00:AA:01:01:00:01), as mirror-sim and bluetoothd advertise.
            await device.start_advertising(auto_restart=True, own_address_type=hci.OwnAddressType.PUBLIC)
            log(f"advertising as {addr(device.public_address)} (public), io {args.io}, keys in {args.keystore}")

        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()
        log("stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
