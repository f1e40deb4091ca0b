# -*- coding: utf-8 -*-
# Copyright: llmops.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Primary-key fingerprints of an ASCII-armoured OpenPGP public key file (RFC 4880 / RFC 9580).

The nvidia_driver role runs it on the controller (a pipe lookup, with the controller's Python)
over the key its host fetched, before that key is trusted: apt trusts every key of a Signed-By file
and dnf every key of a gpgkey, so the file must hold exactly the one key the inventory names. It
needs no gpg on either machine.

usage: python3 openpgp_fingerprints.py BASE64_OF_THE_ARMOURED_TEXT   (or the text on stdin)
prints a JSON list of the fingerprints (upper-case hex) of the primary keys, in file order; subkeys
are not listed (they are bound to their primary). A block whose checksum is wrong or whose packets
do not parse gives none, so a damaged file never matches.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64
import binascii
import hashlib
import json
import re
import sys

_BLOCK = re.compile(r"-----BEGIN PGP PUBLIC KEY BLOCK-----(.*?)-----END PGP PUBLIC KEY BLOCK-----", re.S)
_BASE64_LINE = re.compile(r"^[A-Za-z0-9+/]+=*$")
_CRC_LINE = re.compile(r"^=([A-Za-z0-9+/]{4})$")
TAG_PUBLIC_KEY = 6


def crc24(data):
    """RFC 4880 6.1: the armour checksum."""
    crc = 0xB704CE
    for byte in bytearray(data):
        crc ^= byte << 16
        for dummy in range(8):
            crc <<= 1
            if crc & 0x1000000:
                crc ^= 0x1864CFB
    return crc & 0xFFFFFF


def dearmor(block):
    """The binary packets of one armoured block, or None when its checksum is wrong."""
    data, crc = [], None
    for line in block.splitlines():
        line = line.strip()
        m = _CRC_LINE.match(line)
        if m:
            crc = m.group(1)
        elif _BASE64_LINE.match(line):
            # armour headers ("Version: ...") hold ':' and spaces, which base64 never does
            data.append(line)
    try:
        raw = base64.b64decode("".join(data))
    except (binascii.Error, ValueError):
        return None
    if crc is not None and int(binascii.hexlify(base64.b64decode(crc)), 16) != crc24(raw):
        return None
    return raw


def packets(raw):
    """(tag, body) of each packet; raises ValueError on a malformed stream."""
    raw = bytearray(raw)
    i = 0
    while i < len(raw):
        head = raw[i]
        if not head & 0x80:
            raise ValueError("not an OpenPGP packet at offset %d" % i)
        if head & 0x40:  # new format
            tag = head & 0x3F
            first = raw[i + 1]
            if first < 192:
                length, i = first, i + 2
            elif first < 224:
                length, i = ((first - 192) << 8) + raw[i + 2] + 192, i + 3
            elif first == 255:
                length, i = int(binascii.hexlify(raw[i + 2:i + 6]), 16), i + 6
            else:
                raise ValueError("partial body length in a key file")
        else:  # old format
            tag = (head >> 2) & 0x0F
            kind = head & 0x03
            if kind == 3:
                length, i = len(raw) - i - 1, i + 1
            else:
                size = 1 << kind
                length, i = int(binascii.hexlify(raw[i + 1:i + 1 + size]), 16), i + 1 + size
        if i + length > len(raw):
            raise ValueError("packet runs past the end of the data")
        yield tag, bytes(raw[i:i + length])
        i += length


def fingerprint(body):
    """Fingerprint of a public-key packet body: v4 SHA-1, v6 SHA-256 (RFC 9580 5.5.4); None otherwise."""
    version = bytearray(body[:1])[0] if body else 0
    if version == 4:
        return hashlib.sha1(b"\x99" + len(body).to_bytes(2, "big") + body).hexdigest().upper()
    if version == 6:
        return hashlib.sha256(b"\x9b" + len(body).to_bytes(4, "big") + body).hexdigest().upper()
    return None


def primary_fingerprints(text):
    found = []
    for block in _BLOCK.findall(text):
        raw = dearmor(block)
        if raw is None:
            continue
        try:
            fprs = [fingerprint(body) for tag, body in packets(raw) if tag == TAG_PUBLIC_KEY]
        except (ValueError, IndexError):
            continue
        found.extend(f if f else "UNSUPPORTED-KEY-VERSION" for f in fprs)
    return list(dict.fromkeys(found))


def main(argv):
    if len(argv) > 1:
        text = base64.b64decode(argv[1]).decode("utf-8", "replace")
    else:
        text = sys.stdin.read()
    print(json.dumps(primary_fingerprints(text)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
