#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: llmops.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: converged_state
short_description: Tell whether a role's part of a host is as its last full run left it, or record that run
version_added: "0.1.0"
description:
  - With O(state=check) (read-only), compares the role's stamp on the host with the digest of the
    role's inputs given in O(digest) and with the current checksums of O(files); checks that each of
    O(services) is active and that no certificate in O(certificates) ends within its renewal window.
    Returns RV(converged) true only when all of that holds, and otherwise the reasons.
  - With O(state=record), writes the stamp - O(digest) and the checksum of each file in O(files) as
    it is now - through a temporary file and a rename (mode 0600, folder 0700). A role records only
    after its changing steps and handlers ran to their end.
  - One remote call in place of the role's chain of installs, templates and service checks on a
    converged host; a hand-edited managed file, a stopped service, an expiring certificate or new
    inputs make the role run in full.
author:
  - llmops.serving maintainers (@llmops)
options:
  name:
    description: The role's name; the stamp is O(stamp_dir)/NAME.json.
    type: str
    required: true
  stamp_dir:
    description: The folder of the stamps.
    type: path
    default: /var/lib/llmops/converged
  state:
    description: C(check) reads and compares; C(record) writes the stamp.
    type: str
    choices: [check, record]
    default: check
  digest:
    description: The digest of the role's inputs, worked out on the controller.
    type: str
    required: true
  files:
    description: The files the role manages (absent ones are recorded as absent).
    type: list
    elements: path
    default: []
  services:
    description: Units that must be active for the role to count as converged (O(state=check)).
    type: list
    elements: str
    default: []
  certificates:
    description:
      - Certificates the role renews (O(state=check)) - C(path) and C(renew_seconds) - checked with
        C(openssl x509 -checkend); one that ends within its window, or is missing, makes the role run.
    type: list
    elements: dict
    default: []
notes:
  - The stamp holds checksums and a digest only, never file contents or secrets.
attributes:
  check_mode:
    description: O(state=check) only reads; O(state=record) reports whether it would write.
    support: full
  diff_mode:
    description: Not supported.
    support: none
"""

EXAMPLES = r"""
- name: Find whether the gateway is as its last full run left it
  llmops.serving.converged_state:
    name: gateway
    digest: "{{ __gateway_converge_digest }}"
    files: [/etc/nginx/conf.d/llmops-gateway.conf]
    services: [nginx.service]
    certificates:
      - {path: /etc/nginx/llmops/gateway.crt, renew_seconds: 2592000}
  register: gateway_converged

- name: Record the gateway's full run
  llmops.serving.converged_state:
    name: gateway
    state: record
    digest: "{{ __gateway_converge_digest }}"
    files: [/etc/nginx/conf.d/llmops-gateway.conf]
"""

RETURN = r"""
converged:
  description: Whether the role may skip its changing steps (O(state=check)).
  returned: always
  type: bool
  sample: true
reasons:
  description: Why the role must run in full; empty when RV(converged) is true.
  returned: always
  type: list
  elements: str
  sample: ["/etc/nginx/llmops/proxy.conf was changed", "nginx.service is inactive"]
stamp:
  description: The stamp's path.
  returned: always
  type: str
  sample: /var/lib/llmops/converged/gateway.json
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.llmops.serving.plugins.module_utils import converged as C


def service_problems(module, services):
    problems = []
    if not services:
        return problems
    systemctl = module.get_bin_path("systemctl")
    if not systemctl:
        return ["systemctl is missing"]
    rc, out, dummy = module.run_command([systemctl, "is-active"] + list(services))
    for unit, state in zip(services, out.split()):
        if state != "active":
            problems.append("%s is %s" % (unit, state))
    if rc != 0 and not problems:
        problems.append("systemctl is-active failed for %s" % ", ".join(services))
    return problems


def certificate_problems(module, certificates):
    problems = []
    openssl = module.get_bin_path("openssl") if certificates else None
    for cert in certificates:
        path, seconds = cert.get("path"), int(cert.get("renew_seconds") or 0)
        if not path or not os.path.isfile(path):
            problems.append("certificate %s is missing" % path)
        elif not openssl:
            problems.append("openssl is missing to check %s" % path)
        else:
            rc, dummy, dummy2 = module.run_command([openssl, "x509", "-noout", "-checkend", str(seconds), "-in", path])
            if rc != 0:
                problems.append("certificate %s ends within %d days" % (path, seconds // 86400))
    return problems


def main():
    module = AnsibleModule(
        argument_spec=dict(
            name=dict(type="str", required=True),
            stamp_dir=dict(type="path", default="/var/lib/llmops/converged"),
            state=dict(type="str", choices=["check", "record"], default="check"),
            digest=dict(type="str", required=True),
            files=dict(type="list", elements="path", default=[]),
            services=dict(type="list", elements="str", default=[]),
            certificates=dict(type="list", elements="dict", default=[]),
        ),
        supports_check_mode=True,
    )
    p = module.params
    stamp = os.path.join(p["stamp_dir"], "%s.json" % p["name"])
    files_now = C.file_digests(p["files"])
    if p["state"] == "record":
        document = C.stamp_document(p["digest"], files_now)
        if module.check_mode:
            changed = C.read_stamp(stamp) != document
        else:
            changed = C.write_stamp(stamp, document)
        module.exit_json(changed=changed, converged=True, reasons=[], stamp=stamp)
    reasons = C.differences(C.read_stamp(stamp), p["digest"], files_now)
    reasons += service_problems(module, p["services"])
    reasons += certificate_problems(module, p["certificates"])
    module.exit_json(changed=False, converged=not reasons, reasons=reasons, stamp=stamp)


if __name__ == "__main__":
    main()
