#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: llmops.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: host_preflight
short_description: Check a host's disk, /dev/shm, memlock, kernel and port before serving
version_added: "0.1.0"
description:
  - Free space where the weights go against what this run writes there - the download of a hub
    source and the build, unless the served build was built from this source - plus a floor that
    stays free (the served build never counts as room, a new build is written beside it), the size of C(/dev/shm), the memlock limit, whether C(nouveau) is
    loaded (C(/proc/modules)), Secure Boot (C(mokutil --sb-state) or EFI variables), kernel
    headers for DKMS (C(/lib/modules/$(uname -r)/build)), whether the listen address is free
    (C(/proc/net/tcp), C(/proc/net/tcp6) and a bind test that is closed at once), and whether the
    host is a container (C(systemd-detect-virt -c), C(/run/.containerenv), C(/.dockerenv)).
  - Returns the facts and a list of problems, each naming the variable that governs it and the
    fix; the checks listed in O(fail_on) make the module fail.
  - Secure Boot and kernel headers only matter while the NVIDIA module still has to be built
    (not loaded yet, not a container, O(driver_checks=true)).
  - Changes nothing on the host.
author:
  - llmops.serving maintainers (@llmops)
options:
  weights_dir:
    description:
      - Folder the weights will live in; it may not exist yet (its closest existing parent is
        measured).
    type: path
  required_bytes:
    description:
      - Bytes the build of the served folder writes (the role passes the model's weight bytes,
        twice for a conversion, times a headroom).
    type: int
    default: 0
  download_bytes:
    description:
      - Bytes the download of a hub source writes (into I(hub_dir)), before the build.
    type: int
    default: 0
  floor_bytes:
    description:
      - Bytes that must stay free once the download and the build are written.
    type: int
    default: 0
  source:
    description:
      - The model's source (C(serving_model.source)) - a local folder or C(hf://<repo>@<revision>).
        When the served build's marker says it was built from it, nothing is counted but the floor.
    type: str
  hub_dir:
    description:
      - Where hub sources are fetched to (C(<serving_models_root>/.hub)).
    type: path
  shm_min_bytes:
    description:
      - Smallest acceptable size of C(/dev/shm).
    type: int
    default: 1073741824
  memlock_min_bytes:
    description:
      - Smallest acceptable memlock limit of the login session (C(-1) style unlimited passes).
    type: int
    default: 0
  listen:
    description:
      - The engine's listen address, C(HOST:PORT) (C([v6]:PORT) for IPv6).
    type: str
  listen_allowed_owners:
    description:
      - A listener whose command line contains one of these words is the collection's own engine
        (a re-run), so the port counts as ours, not taken.
    type: list
    elements: str
    default: [sglang, vllm]
  driver_checks:
    description:
      - Run the NVIDIA-driver related checks (nouveau, Secure Boot, kernel headers). Off for CPU
        stacks.
    type: bool
    default: true
  bind_test:
    description:
      - Try to bind the listen address (closed at once) when no listener is seen in /proc.
    type: bool
    default: true
  checks:
    description:
      - Which checks to run (all when empty).
    type: list
    elements: str
    choices: [disk, shm, memlock, nouveau, secure_boot, kernel_headers, listen_port]
    default: []
  fail_on:
    description:
      - Checks whose problems make the module fail; the others are reported only.
    type: list
    elements: str
    choices: [disk, shm, memlock, nouveau, secure_boot, kernel_headers, listen_port]
    default: [disk, listen_port]
extends_documentation_fragment:
  - llmops.serving.read_only
"""

EXAMPLES = r"""
- name: Check the host
  llmops.serving.host_preflight:
    weights_dir: /var/lib/llmops/models/qwen2.5-32b
    required_bytes: 72080527974
    listen: 127.0.0.1:8000
    fail_on: [disk, listen_port, nouveau]
  register: __host
"""

RETURN = r"""
container:
  description: Whether the host is a container, which kind and how it was told.
  returned: always
  type: dict
  sample: {container: true, kind: podman, source: systemd-detect-virt}
nvidia_module_loaded:
  description: Whether the nvidia kernel module is in /proc/modules.
  returned: always
  type: bool
disk:
  description: Free bytes at the weights folder against the bytes still needed.
  returned: when weights_dir is set
  type: dict
  sample: {path_checked: /var/lib, free_bytes: 1000000000000, served_build_current: false,
           required_bytes: 72080527974, build_bytes: 72080527974, download_bytes: 65527752704, floor_bytes: 1073741824,
           needed_bytes: 138682022502, ok: true}
shm:
  description: Size of /dev/shm.
  returned: when the check runs
  type: dict
memlock:
  description: Soft and hard memlock limits (-1 unlimited).
  returned: when the check runs
  type: dict
nouveau_loaded:
  description: Whether nouveau is loaded.
  returned: when the check runs
  type: bool
secure_boot:
  description: Secure Boot state (enabled, disabled, not-efi, unknown) and its source.
  returned: when the check runs
  type: dict
kernel_headers:
  description: The running kernel, its build folder and whether it exists.
  returned: when the check runs
  type: dict
listen:
  description: The listen address, its state (free, ours, taken, unbindable) and the listeners
    on that port with their process.
  returned: when listen is set
  type: dict
problems:
  description: Each with check, variable, msg, fix and fatal.
  returned: always
  type: list
  elements: dict
summary:
  description: Human-readable lines.
  returned: always
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmops.serving.plugins.module_utils.engines import ENGINES
from ansible_collections.llmops.serving.plugins.module_utils.host import (
    CHECKS,
    host_summary_lines,
    run_host_preflight,
)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            weights_dir=dict(type="path"),
            required_bytes=dict(type="int", default=0),
            download_bytes=dict(type="int", default=0),
            floor_bytes=dict(type="int", default=0),
            source=dict(type="str"),
            hub_dir=dict(type="path"),
            shm_min_bytes=dict(type="int", default=1073741824),
            memlock_min_bytes=dict(type="int", default=0),
            listen=dict(type="str"),
            listen_allowed_owners=dict(type="list", elements="str", default=list(ENGINES)),
            driver_checks=dict(type="bool", default=True),
            bind_test=dict(type="bool", default=True),
            checks=dict(type="list", elements="str", default=[], choices=list(CHECKS)),
            fail_on=dict(type="list", elements="str", default=["disk", "listen_port"],
                         choices=list(CHECKS)),
        ),
        supports_check_mode=True,
    )
    try:
        facts = run_host_preflight(module.params, module.run_command, module.get_bin_path)
    except ValueError as exc:
        module.fail_json(msg=str(exc))
    facts["summary"] = host_summary_lines(facts)
    if facts["fatal"]:
        module.fail_json(
            msg="host preflight failed: " + " | ".join(
                "%s (change %s: %s)" % (p["msg"], p["variable"], p["fix"]) for p in facts["fatal"]),
            **facts)
    module.exit_json(changed=False, **facts)


if __name__ == "__main__":
    main()
