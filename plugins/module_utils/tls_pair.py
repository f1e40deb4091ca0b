# -*- coding: utf-8 -*-
# Copyright: llmops.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A user's TLS certificate and private key, checked on the controller: readable, a pair, not expired."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import datetime


def _not_after(cert):
    # cryptography 42 added the timezone-aware property; older ones have the naive UTC one
    value = getattr(cert, "not_valid_after_utc", None)
    if value is None:
        value = cert.not_valid_after.replace(tzinfo=datetime.timezone.utc)
    return value


def problems(certificate_pem, key_pem, now=None):
    """Sentences naming what is wrong with the pair (gateway_tls_certificate, gateway_tls_private_key),
    never their content; empty when both are empty or both are fine."""
    if not certificate_pem and not key_pem:
        return []
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization

    try:
        cert = x509.load_pem_x509_certificate(certificate_pem.encode())
    except (ValueError, TypeError):
        return ["gateway_tls_certificate is not a PEM certificate that can be read"]
    try:
        key = serialization.load_pem_private_key(key_pem.encode(), password=None)
    except TypeError:
        return ["gateway_tls_private_key is protected by a passphrase, which is not supported"]
    except ValueError:
        return ["gateway_tls_private_key is not a PEM private key that can be read"]
    spki = serialization.PublicFormat.SubjectPublicKeyInfo
    pem = serialization.Encoding.PEM
    if cert.public_key().public_bytes(pem, spki) != key.public_key().public_bytes(pem, spki):
        return ["gateway_tls_certificate does not belong to gateway_tls_private_key (their public keys differ): "
                "give the key the certificate was issued for"]
    now = now or datetime.datetime.now(datetime.timezone.utc)
    if _not_after(cert) <= now:
        return ["gateway_tls_certificate has expired: renew it, or empty both variables for a self-signed "
                "certificate the role renews"]
    return []
