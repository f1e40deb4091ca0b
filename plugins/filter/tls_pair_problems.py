# -*- coding: utf-8 -*-
# Copyright: llmops.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: tls_pair_problems
short_description: What is wrong with a TLS certificate and its private key, without printing them
version_added: 0.1.0
author: llmops.serving maintainers (@llmops)
description:
  - Reads a PEM certificate and a PEM private key on the controller (python cryptography, which
    ansible-core depends on) and returns one sentence when the certificate cannot be read, the key
    cannot be read or needs a passphrase, the two are not a pair, or the certificate has expired.
  - Both empty is fine (the gateway then makes its own certificate). Run it under C(no_log) and
    print its result.
positional: _input
options:
  _input:
    description: The certificate, PEM text.
    type: str
    required: true
  key:
    description: The private key, PEM text.
    type: str
    required: true
"""

EXAMPLES = r"""
problems: "{{ gateway_tls_certificate | llmops.serving.tls_pair_problems(gateway_tls_private_key) }}"
"""

RETURN = r"""
_value:
  description: At most one sentence (empty list when the pair is fine or both are empty).
  type: list
  elements: str
  sample: ["gateway_tls_certificate has expired: renew it, or empty both variables for a self-signed certificate the role renews"]
"""

from ansible_collections.llmops.serving.plugins.module_utils.tls_pair import problems


def tls_pair_problems(certificate, key):
    return problems(certificate or "", key or "")


class FilterModule(object):
    def filters(self):
        return {"tls_pair_problems": tls_pair_problems}
