# -*- coding: utf-8 -*-
# Copyright: llmops.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""roles/nvidia_driver/files/openpgp_fingerprints.py: the fingerprints the role compares with
nvidia_driver_repo_key_fingerprint before apt or dnf trusts a repository key.

The two keys below are throwaway test keys made for these tests with GnuPG 2.2 (public parts only);
each fingerprint is the one `gpg --with-colons --list-keys` printed for it. Key A is ed25519 with a
cv25519 subkey, key B RSA 2048 without one.
"""
import base64
import hashlib
import importlib.util
import json
import os

import pytest
import yaml

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
ROLE = os.path.join(REPO, "roles", "nvidia_driver")
_spec = importlib.util.spec_from_file_location("openpgp_fingerprints", os.path.join(ROLE, "files", "openpgp_fingerprints.py"))
pgp = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(pgp)

KEY_A = """-----BEGIN PGP PUBLIC KEY BLOCK-----

mDMEaw7XNhYJKwYBBAHaRw8BAQdAXjaG+DNCw1pT0/4VL8SBkotX02e8sa25XKfv
RESy0qm0I3VuaXQgdGVzdCBrZXkgQSA8YUBleGFtcGxlLmludmFsaWQ+iJAEExYI
ADgWIQSZ904W9pBtxaRMdGdyEcQotAec1gUCaw7XNgIbAwULCQgHAgYVCgkICwIE
FgIDAQIeAQIXgAAKCRByEcQotAec1mQHAQDRMc4SC0Vfr2gjHMh/+E1vV2xJ5uWZ
yp0sKQzllvXqkgEAlUroge+jbm2sCAa8IW+uQFvs8xJxvYwmpc0CgTjscgq4OARr
DtdBEgorBgEEAZdVAQUBAQdAbwA8Z8kKvQxThDB4LFs8YiTmTwjiItSipt/MnD1y
w0EDAQgHiHgEGBYIACAWIQSZ904W9pBtxaRMdGdyEcQotAec1gUCaw7XQQIbDAAK
CRByEcQotAec1iKoAP4t27+RPt4UAYx/OrTYUVgJWF8lNgZf8iPA+6PuC2BlPAD/
eOJ1+/fEAuFq4jE42Zj1taoZ/UZNH5fSIRBPQwXxwwo=
=S+Dy
-----END PGP PUBLIC KEY BLOCK-----
"""
FPR_A = "99F74E16F6906DC5A44C74677211C428B4079CD6"
SUBKEY_A = "0BB7E8676416C18A6B7FB3D586D7043BE40C6D3E"
KEY_B = """-----BEGIN PGP PUBLIC KEY BLOCK-----

mQENBGsO10YBCADjMd491dErTmLtlID/psjZJ4qu8+UCWID+WimIBgFguZgFwmNM
Riahs9p72Ap2Gr38SuZoPTaPq8+ESemHgQ01sQki5+fxfZVWHDjHrAiRnheZnLfD
xCM3ouVABMCvtzcPHygcV9NL7UkDBDWm+/sFGM/9m7bw3iuATcG2W3bKQ9SC103+
RPqVxM7RSI4kF4xWJoW6/3F0hUbEnFX1InB90Y+R0E6XBeJfs0ckD2Ky4EJ0YWlp
fP6/+kC0IHuG9OWUuFP6wFx7DmZO4Mu1lpyyz8sQWQhsqwh+RABB47RbIWDOFicx
48wzPHoYpUTJXPGeimYPtKCm58y2mN2x7GRNABEBAAG0I3VuaXQgdGVzdCBrZXkg
QiA8YkBleGFtcGxlLmludmFsaWQ+iQFOBBMBCgA4FiEES2UXre2HFSiNl2+RPeEz
GTqgu30FAmsO10YCGwMFCwkIBwIGFQoJCAsCBBYCAwECHgECF4AACgkQPeEzGTqg
u31ZtQgA4Sg4ObDFA4yMGm2YW4xYhMXGMJA1Brme21H4N3sD0sBfRFnFzWA6c2OJ
LzGx2MhtS6MI659ZqsLaVz7A2XA3Hkx7pp4NiWIyvRk0otWUiwytJSF2KDEHkEUW
NaPV6j6sIz1Dpy1jhY0nVw88jYA5cbx/a2sxRtaLxqahRgdVGO9uE8UnULbwT0Eu
oV5gF/Ojip4DwmE3NViVu+bhQQd4n0SnayFPBBqxXqLheSlPHspvXEgAnTOqdLzr
KuljRdt7QyP+cKwTvhnQc8Y8HAmdTlq5xdNnq+s1+CQqL0iXeM1+9aU2e5vXOUcB
d6LQ4it2ZHyjqLEdCDTCdwxbAakABA==
=TPuO
-----END PGP PUBLIC KEY BLOCK-----
"""
FPR_B = "4B6517ADED8715288D976F913DE133193AA0BB7D"


def armor(raw, headers=()):
    body = base64.b64encode(raw).decode()
    crc = base64.b64encode(pgp.crc24(raw).to_bytes(3, "big")).decode()
    lines = ["-----BEGIN PGP PUBLIC KEY BLOCK-----"] + list(headers) + [""]
    lines += [body[i:i + 64] for i in range(0, len(body), 64)] + ["=" + crc, "-----END PGP PUBLIC KEY BLOCK-----", ""]
    return "\n".join(lines)


def new_format(tag, body):
    """A packet with a new-format header (RFC 4880 4.2.2), 5-octet length."""
    return bytes([0xC0 | tag, 255]) + len(body).to_bytes(4, "big") + body


@pytest.mark.parametrize("text, fprs", [(KEY_A, [FPR_A]), (KEY_B, [FPR_B])], ids=["ed25519", "rsa2048"])
def test_known_keys(text, fprs):
    assert pgp.primary_fingerprints(text) == fprs


def test_subkeys_are_not_primary_keys():
    assert SUBKEY_A not in pgp.primary_fingerprints(KEY_A)


def test_every_key_of_a_file_is_listed():
    # two blocks in one file, and two keys in one block: apt and dnf would trust both
    assert pgp.primary_fingerprints(KEY_A + KEY_B) == [FPR_A, FPR_B]
    both = pgp.dearmor(KEY_A) + pgp.dearmor(KEY_B)
    assert pgp.primary_fingerprints(armor(both)) == [FPR_A, FPR_B]


def test_armour_headers_crlf_and_no_checksum_line():
    raw = pgp.dearmor(KEY_B)
    text = armor(raw, headers=["Version: GnuPG v2.0.22 (GNU/Linux)", "Comment: a: b"]).replace("\n", "\r\n")
    assert pgp.primary_fingerprints(text) == [FPR_B]
    no_crc = "\n".join(line for line in KEY_B.splitlines() if not line.startswith("="))
    assert pgp.primary_fingerprints(no_crc) == [FPR_B]


def test_new_format_packets():
    packets = list(pgp.packets(pgp.dearmor(KEY_A)))
    raw = b"".join(new_format(tag, body) for tag, body in packets)
    assert pgp.primary_fingerprints(armor(raw)) == [FPR_A]


def test_v6_key_fingerprint_is_sha256_of_the_packet():
    body = bytes([6]) + bytes(4) + bytes([27]) + (32).to_bytes(4, "big") + bytes(range(32))
    want = hashlib.sha256(b"\x9b" + len(body).to_bytes(4, "big") + body).hexdigest().upper()
    assert pgp.primary_fingerprints(armor(new_format(6, body))) == [want]
    assert len(want) == 64


@pytest.mark.parametrize("text", [
    "",
    "<html>404 Not Found</html>",
    # the same key in a private-key block: not a public key file
    KEY_B.replace("PUBLIC KEY BLOCK", "PRIVATE KEY BLOCK"),
    # one base64 character changed: the armour checksum no longer matches
    KEY_B.replace("mQENBGsO10YBCADjMd49", "mQENBGsO10YBCADjMd48"),
    # the packets cut short
    armor(pgp.dearmor(KEY_B)[:40]),
], ids=["empty", "html", "private-block", "bad-checksum", "truncated"])
def test_no_key_found_in_what_is_not_an_intact_public_key(text):
    assert pgp.primary_fingerprints(text) == []


def test_main_reads_base64_argument_and_prints_json(capsys):
    assert pgp.main(["x", base64.b64encode((KEY_A + KEY_B).encode()).decode()]) == 0
    assert json.loads(capsys.readouterr().out) == [FPR_A, FPR_B]


def test_published_fingerprints_are_full_fingerprints_of_the_named_key_ids():
    with open(os.path.join(ROLE, "vars", "main.yml")) as f:
        keys = yaml.safe_load(f)["__nvidia_driver_repo_keys"]
    assert set(keys) == {"apt", "dnf"}
    for entry in keys.values():
        fpr, key_id = entry["fingerprint"], entry["file"].split(".")[0].upper()
        assert len(fpr) == 40 and all(c in "0123456789ABCDEF" for c in fpr), fpr
        # the key file is named by its short key ID: the fingerprint's last 8 digits
        assert fpr.endswith(key_id), (fpr, key_id)
    assert keys["apt"]["fingerprint"] == "EB693B3035CD5710E231E123A4B469963BF863CC"
    assert keys["dnf"]["fingerprint"] == "610C7B14E068A878070DA4E99CD0A493D42D0685"
