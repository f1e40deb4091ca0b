#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: llmops.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: venv_prune
short_description: Remove an engine's old venvs, never one that serves or may serve again
version_added: "0.1.0"
description:
  - Lists the engine's venvs (C(<root>/<engine>-*) folders), keeps the O(keep) newest besides the
    one O(current_link) points at and those in O(serving), and removes the older ones with their
    copied locks (C(<root>/.locks/<name>.txt) and C(<name>.ray.txt)).
  - Spared whatever their age, and counted among the kept - the venvs in O(protect) and the venvs a
    running engine started on - a process of an C(llmops-*.service) unit maps a file in it (its
    extension modules stay mapped as long as it runs). A rollout that held a restart back leaves an
    engine on a venv the current link no longer names.
author:
  - llmops.serving maintainers (@llmops)
options:
  root:
    description: Where the venvs are (C(serving_venvs_root)).
    type: path
    required: true
  engine:
    description: The engine whose venvs are pruned; its venvs are named C(<engine>-*).
    type: str
    required: true
  current_link:
    description: The engine's current venv link (C(serving_spec_current_link)); its target is spared.
    type: path
    required: true
  keep:
    description: Venvs kept besides the current and O(serving) ones, newest first by build time.
    type: int
    default: 2
  serving:
    description: More venvs kept besides the O(keep) ones (the serving spec's venv).
    type: list
    elements: path
    default: []
  protect:
    description: Venvs never removed, counted among the O(keep) ones (the rollback slot's).
    type: list
    elements: path
    default: []
notes:
  - In check mode the venvs that would be removed are reported and nothing is removed.
attributes:
  check_mode:
    description: Reports what would be removed.
    support: full
  diff_mode:
    description: Not supported.
    support: none
"""

EXAMPLES = r"""
- name: Remove venvs older than the two kept ones
  llmops.serving.venv_prune:
    root: /opt/llmops/venvs
    engine: vllm
    current_link: /opt/llmops/venvs/vllm-current
    keep: 2
    serving: [/opt/llmops/venvs/vllm-0.32.0-37ea9d68ebb9]
    protect: [/opt/llmops/venvs/vllm-0.31.0-5b0e8c1f2a77]
"""

RETURN = r"""
removed:
  description: The venvs removed (in check mode, those that would be).
  returned: always
  type: list
  elements: str
  sample: ["/opt/llmops/venvs/vllm-0.31.0-0f3c52d1a9e4"]
in_use:
  description: The venvs a running engine started on.
  returned: always
  type: list
  elements: str
  sample: ["/opt/llmops/venvs/vllm-0.32.0-37ea9d68ebb9"]
kept:
  description: The engine's venvs that stay.
  returned: always
  type: list
  elements: str
  sample: ["/opt/llmops/venvs/vllm-0.32.0-37ea9d68ebb9", "/opt/llmops/venvs/vllm-0.31.0-5b0e8c1f2a77"]
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.llmops.serving.plugins.module_utils import running, venvs


def main():
    module = AnsibleModule(
        argument_spec=dict(
            root=dict(type="path", required=True),
            engine=dict(type="str", required=True),
            current_link=dict(type="path", required=True),
            keep=dict(type="int", default=2),
            serving=dict(type="list", elements="path", default=[]),
            protect=dict(type="list", elements="path", default=[]),
        ),
        supports_check_mode=True,
    )
    p = module.params
    if p["keep"] < 0:
        module.fail_json(msg="keep (python_env_keep_previous) is %d; give 0 or more venvs to keep" % p["keep"])
    found = venvs.engine_venvs(p["root"], p["engine"])
    in_use = running.in_use(found, by_start=False)
    current = [os.path.realpath(p["current_link"])] if os.path.islink(p["current_link"]) else []
    removed = venvs.choose(found, p["keep"], current + p["serving"], p["protect"] + in_use)
    if removed and not module.check_mode:
        try:
            venvs.remove(p["root"], removed)
        except OSError as e:
            module.fail_json(msg="removing %s failed: %s" % (e.filename, e.strerror), removed=removed)
    module.exit_json(changed=bool(removed), removed=removed, in_use=in_use,
                     kept=[v for v in found if v not in removed])


if __name__ == "__main__":
    main()
