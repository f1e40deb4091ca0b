#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: llmops.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: internal_ca
short_description: The collection's CA for the gateway to engine hop, and a certificate per engine host
version_added: 0.1.0
author: llmops.serving maintainers (@llmops)
description:
  - "Runs on the controller (C(delegate_to: localhost), C(run_once)). Keeps a CA (P-256 key and
    self-signed certificate, ten years) in O(ca_dir), made once, and a server certificate per host
    of O(hosts) signed by it in O(ca_dir)C(/issued/), made again only when it is missing, expires
    within O(renew_days), names other DNS names or addresses than asked, or was signed by another CA."
  - Returns the PEM texts to install on the hosts. The private keys are in the result, so the task
    must be C(no_log).
  - Needs the C(cryptography) package in the controller's Python (ansible-core requires it).
options:
  ca_dir:
    description: Folder on the controller holding C(ca.key), C(ca.crt) and C(issued/); created with mode 0700.
    type: path
    required: true
  hosts:
    description: The hosts to issue for.
    type: list
    elements: dict
    required: true
    suboptions:
      name:
        description: The certificate's name (the inventory host name); also its file name.
        type: str
        required: true
      dns_names:
        description: DNS subjectAltNames.
        type: list
        elements: str
        default: []
      ip_addresses:
        description: IP subjectAltNames.
        type: list
        elements: str
        default: []
  days:
    description: Validity of a host certificate.
    type: int
    default: 397
  renew_days:
    description: A host certificate is issued again when it expires within this many days.
    type: int
    default: 30
attributes:
  check_mode:
    description: Reports what it would make (a CA, certificates) and writes nothing.
    support: full
  diff_mode:
    description: Nothing to compare.
    support: none
"""

EXAMPLES = r"""
- name: Issue the engines' certificates
  llmops.serving.internal_ca:
    ca_dir: "{{ serving_ca_dir }}"
    hosts:
      - name: gpu-01
        dns_names: [gpu-01, llmops-engine, localhost]
        ip_addresses: [127.0.0.1, 10.0.0.11]
  delegate_to: localhost
  run_once: true
  no_log: true
  register: engine_certificates
"""

RETURN = r"""
ca_certificate:
  description: The CA's certificate (PEM), to install where the engines' certificates are checked.
  returned: always
  type: str
ca_changed:
  description: Whether the CA was made in this run.
  returned: always
  type: bool
hosts:
  description: Per host name, its C(certificate) and C(private_key) (PEM), whether it was C(changed) and the C(reason).
  returned: always
  type: dict
  sample: {"gpu-01": {"certificate": "-----BEGIN CERTIFICATE-----...", "private_key": "-----BEGIN PRIVATE KEY-----...",
                      "changed": true, "reason": "none issued yet"}}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmops.serving.plugins.module_utils.internal_ca import CAError, issue


def main():
    module = AnsibleModule(
        argument_spec=dict(
            ca_dir=dict(type="path", required=True),
            hosts=dict(type="list", elements="dict", required=True, options=dict(
                name=dict(type="str", required=True),
                dns_names=dict(type="list", elements="str", default=[]),
                ip_addresses=dict(type="list", elements="str", default=[]),
            )),
            days=dict(type="int", default=397),
            renew_days=dict(type="int", default=30),
        ),
        supports_check_mode=True,
    )
    p = module.params
    try:
        result = issue(p["ca_dir"], p["hosts"], p["days"], p["renew_days"], check_mode=module.check_mode)
    except (CAError, ValueError, OSError) as err:
        module.fail_json(msg="internal_ca: %s" % err)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
