# -*- coding: utf-8 -*-
# Copyright: llmops.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The collection's own CA for the gateway -> engine hop, kept in a folder on the controller.

ensure_ca()   the CA's key and self-signed certificate (P-256), made once.
ensure_leaf() a server certificate for one engine host, signed by that CA, kept beside it
              (issued/<name>.crt|.key) and made again only when it is missing, expires within
              renew_days, names other DNS names or addresses, or was signed by another CA.
Uses the `cryptography` package, which ansible-core itself requires on the controller.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import datetime
import ipaddress
import os

try:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
    HAS_CRYPTOGRAPHY = True
except ImportError:  # pragma: no cover - ansible-core depends on it
    HAS_CRYPTOGRAPHY = False

CA_DAYS = 3650


class CAError(Exception):
    pass


def _now():
    return datetime.datetime.now(datetime.timezone.utc)


def _write(path, data, mode, check_mode):
    if check_mode:
        return
    tmp = path + ".tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
    os.chmod(tmp, mode)
    os.rename(tmp, path)


def _key_pem(key):
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _cert_pem(cert):
    return cert.public_bytes(serialization.Encoding.PEM)


def _load(path):
    with open(path, "rb") as handle:
        return handle.read()


def _not_after(cert):
    end = getattr(cert, "not_valid_after_utc", None)
    return end if end is not None else cert.not_valid_after.replace(tzinfo=datetime.timezone.utc)


def ensure_ca(ca_dir, common_name="llmops.serving internal CA", check_mode=False):
    """(CA key, CA certificate, changed)."""
    key_path, cert_path = os.path.join(ca_dir, "ca.key"), os.path.join(ca_dir, "ca.crt")
    if os.path.exists(key_path) and os.path.exists(cert_path):
        key = serialization.load_pem_private_key(_load(key_path), None)
        cert = x509.load_pem_x509_certificate(_load(cert_path))
        if cert.public_key().public_numbers() != key.public_key().public_numbers():
            raise CAError("%s does not belong to %s: restore the pair, or move both away to make a new CA "
                          "(every engine certificate is then issued again)" % (cert_path, key_path))
        if _not_after(cert) > _now() + datetime.timedelta(days=30):
            return key, cert, False
    if not check_mode and not os.path.isdir(ca_dir):
        os.makedirs(ca_dir, 0o700)
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    now = _now()
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=CA_DAYS))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True, content_commitment=False,
                                         key_encipherment=False, data_encipherment=False, key_agreement=False,
                                         encipher_only=False, decipher_only=False), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .sign(key, hashes.SHA256()))
    _write(key_path, _key_pem(key), 0o600, check_mode)
    _write(cert_path, _cert_pem(cert), 0o644, check_mode)
    return key, cert, True


def _names(cert):
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return set(), set()
    return (set(san.get_values_for_type(x509.DNSName)),
            set(str(a) for a in san.get_values_for_type(x509.IPAddress)))


def ensure_leaf(ca_dir, name, dns_names, ip_addresses, days, renew_days, ca_key, ca_cert, check_mode=False):
    """(certificate PEM, key PEM, changed, reason) for one host."""
    issued = os.path.join(ca_dir, "issued")
    key_path, cert_path = os.path.join(issued, name + ".key"), os.path.join(issued, name + ".crt")
    dns_names = sorted(set(dns_names))
    ip_addresses = sorted(set(str(ipaddress.ip_address(a)) for a in ip_addresses))
    reason = None
    if not (os.path.exists(key_path) and os.path.exists(cert_path)):
        reason = "none issued yet"
    else:
        cert = x509.load_pem_x509_certificate(_load(cert_path))
        if cert.issuer != ca_cert.subject or cert.extensions.get_extension_for_class(
                x509.AuthorityKeyIdentifier).value.key_identifier != x509.SubjectKeyIdentifier.from_public_key(
                ca_cert.public_key()).digest:
            reason = "signed by another CA"
        elif _not_after(cert) <= _now() + datetime.timedelta(days=renew_days):
            reason = "expires within %d days" % renew_days
        elif _names(cert) != (set(dns_names), set(ip_addresses)):
            reason = "its names changed"
        else:
            return _load(cert_path).decode(), _load(key_path).decode(), False, None
    key = ec.generate_private_key(ec.SECP256R1())
    now = _now()
    san = [x509.DNSName(n) for n in dns_names] + [x509.IPAddress(ipaddress.ip_address(a)) for a in ip_addresses]
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
            .issuer_name(ca_cert.subject).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=days))
            .add_extension(x509.SubjectAlternativeName(san), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_cert.public_key()), critical=False)
            .sign(ca_key, hashes.SHA256()))
    if not check_mode and not os.path.isdir(issued):
        os.makedirs(issued, 0o700)
    _write(key_path, _key_pem(key), 0o600, check_mode)
    _write(cert_path, _cert_pem(cert), 0o644, check_mode)
    return _cert_pem(cert).decode(), _key_pem(key).decode(), True, reason


def issue(ca_dir, hosts, days, renew_days, check_mode=False):
    """hosts: [{name, dns_names, ip_addresses}] -> result dict for the module."""
    if not HAS_CRYPTOGRAPHY:
        raise CAError("the controller's Python lacks the cryptography package (ansible-core needs it)")
    if renew_days >= days:
        raise CAError("renew_days (%d) must be below days (%d)" % (renew_days, days))
    ca_key, ca_cert, ca_changed = ensure_ca(ca_dir, check_mode=check_mode)
    out, changed = {}, ca_changed
    for host in hosts:
        cert, key, leaf_changed, reason = ensure_leaf(ca_dir, host["name"], host.get("dns_names", []),
                                                      host.get("ip_addresses", []), days, renew_days,
                                                      ca_key, ca_cert, check_mode=check_mode)
        out[host["name"]] = {"certificate": cert, "private_key": key, "changed": leaf_changed, "reason": reason}
        changed = changed or leaf_changed
    return {"changed": changed, "ca_changed": ca_changed, "ca_certificate": _cert_pem(ca_cert).decode(),
            "hosts": out}
