#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: llmops.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: rollout_state
short_description: Read what an engine host serves, and record what a rollout changed
version_added: "0.1.0"
description:
  - Reads in one pass what the rollout role needs to decide whether a host must restart - the
    host's state file (what it served at its last restart and before, and whether a rollout left it
    drained), the venv the current link points at, the build the served model link points at, the
    digest of the chat template the engine is given, and which engine unit is active.
  - With O(update), merges those keys into the state file, written through a temporary file and a
    rename (mode 0600, folder 0700). A drain that begins records C(drained_since); an undrain removes it.
  - With O(metrics_file), whose folder exists (node_exporter's textfile collector folder), writes
    C(llmops_host_drained), C(llmops_host_cordoned) and, while drained,
    C(llmops_host_drained_since_timestamp_seconds) there, for the alert on a host left drained and
    the one that keeps a drained restart or a cordoned host's maintenance from paging.
author:
  - llmops.serving maintainers (@llmops)
options:
  path:
    description: The state file.
    type: path
    required: true
  current_link:
    description: The engine's current venv link (C(serving_spec_current_link)).
    type: path
    required: true
  model_path:
    description: The served model link (C(serving_spec_model_path)).
    type: path
    required: true
  chat_template:
    description: The chat template file the engine is given (C(serving_spec_chat_template_path)).
    type: path
    required: true
  units:
    description: The systemd unit of each engine, by engine name; the first active one is the running engine.
    type: dict
    required: true
  update:
    description: Keys to write into the state file (C(serving), C(previous), C(drained)).
    type: dict
  metrics_file:
    description:
      - Prometheus text file of the host's drain state, written when its folder exists (nothing
        otherwise). It is telemetry, not configuration, so writing it never reports a change.
    type: path
  cordoned:
    description: Whether the host is cordoned for maintenance (C(serving_cordoned)), for O(metrics_file).
    type: bool
    default: false
  health_address:
    description:
      - HOST:PORT a client on the host reaches the engine at (as C(serving_spec_engine_url) has it). When given and an
        engine unit is active, the running engine's health path (O(health_paths)) is asked too (RV(healthy)), since an
        active unit still loading or wedged serves nothing.
      - https is asked first where O(ca_path) exists (checked against it), then http.
    type: str
  health_paths:
    description: The health path of each engine, by engine name (the engine registry's C(health_path)).
    type: dict
    default: {}
  ca_path:
    description: The CA an https engine's certificate is checked against (C(serving_spec_engine_ca)).
    type: path
  health_timeout:
    description: Seconds the health answer may take (a wedged engine never answers).
    type: float
    default: 5.0
notes:
  - In check mode an O(update) is predicted, not written, and no metrics file is written.
attributes:
  check_mode:
    description: Reads; an update is reported as it would be written.
    support: full
  diff_mode:
    description: Not supported.
    support: none
"""

EXAMPLES = r"""
- name: Read what the host serves
  llmops.serving.rollout_state:
    path: /var/lib/llmops/rollout/state.json
    current_link: "{{ serving_spec_current_link }}"
    model_path: "{{ serving_spec_model_path }}"
    chat_template: "{{ serving_spec_chat_template_path }}"
    units: {vllm: llmops-vllm.service, sglang: llmops-sglang.service}
  register: observed

- name: Read whether a pool member serves now, its engine answering its health path
  llmops.serving.rollout_state:
    path: /var/lib/llmops/rollout/state.json
    current_link: "{{ serving_spec_current_link }}"
    model_path: "{{ serving_spec_model_path }}"
    chat_template: "{{ serving_spec_chat_template_path }}"
    # the engine registry's units and health paths, by engine name (llmops.serving.engine_info)
    units: "{{ engine_units }}"
    health_address: 127.0.0.1:8000
    health_paths: "{{ engine_health_paths }}"
    ca_path: /etc/llmops/tls/ca.crt
    health_timeout: 10
  delegate_to: "{{ member }}"
  register: member_seen

- name: Mark the host drained
  llmops.serving.rollout_state:
    path: /var/lib/llmops/rollout/state.json
    current_link: "{{ serving_spec_current_link }}"
    model_path: "{{ serving_spec_model_path }}"
    chat_template: "{{ serving_spec_chat_template_path }}"
    units: {vllm: llmops-vllm.service}
    update: {drained: true}
    metrics_file: /var/lib/prometheus/node-exporter/llmops-rollout.prom
    cordoned: "{{ serving_cordoned | bool }}"
"""

RETURN = r"""
state:
  description: The state file's content (after the update, when one was given).
  returned: always
  type: dict
  sample: {"drained": false, "serving": {"venv": "/opt/llmops/venvs/vllm-0.32.0-37ea9d68ebb9", "version": "0.32.0"}, "previous": {}}
current:
  description: The venv the current link points at (empty when there is no link).
  returned: always
  type: str
model_build:
  description: The build the served model link points at (empty when missing).
  returned: always
  type: str
chat_template_sha256:
  description: sha256 of the chat template file (empty when missing).
  returned: always
  type: str
running_engine:
  description: The engine whose unit is active (empty when none is).
  returned: always
  type: str
healthy:
  description:
    - Whether the running engine answered its health path with 200 within O(health_timeout). Null when O(health_address)
      was not given; false when no engine unit is active.
  returned: always
  type: bool
health_error:
  description: Why the engine does not count as healthy (empty when it does, or when O(health_address) was not given).
  returned: always
  type: str
metrics_written:
  description: Whether O(metrics_file) was written now (false when it held the same, or its folder is missing).
  returned: always
  type: bool
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.llmops.serving.plugins.module_utils import readiness, rollout


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path", required=True),
            current_link=dict(type="path", required=True),
            model_path=dict(type="path", required=True),
            chat_template=dict(type="path", required=True),
            units=dict(type="dict", required=True),
            update=dict(type="dict"),
            metrics_file=dict(type="path"),
            cordoned=dict(type="bool", default=False),
            health_address=dict(type="str"),
            health_paths=dict(type="dict", default={}),
            ca_path=dict(type="path"),
            health_timeout=dict(type="float", default=5.0),
        ),
        supports_check_mode=True,
    )
    p = module.params
    systemctl = module.get_bin_path("systemctl")

    def is_active(unit):
        if not systemctl:
            return False
        rc, dummy, dummy2 = module.run_command([systemctl, "is-active", "--quiet", unit])
        return rc == 0

    try:
        seen = rollout.observe(p["path"], p["current_link"], p["model_path"], p["chat_template"],
                               p["units"], is_active)
    except ValueError as e:
        module.fail_json(msg=str(e))
    healthy, health_error = None, ""
    engine = seen["running_engine"]
    if p["health_address"] and not engine:
        healthy, health_error = False, "no engine unit is active"
    elif p["health_address"] and engine not in p["health_paths"]:
        healthy, health_error = False, "no health path is given for %s" % engine
    elif p["health_address"]:
        def fetch(url, timeout):
            return readiness.http("GET", url, timeout=timeout,
                                  ca_path=p["ca_path"] if url.startswith("https://") else None)[0]
        tls = bool(p["ca_path"]) and os.path.isfile(p["ca_path"])
        healthy, health_error = rollout.engine_health(
            rollout.health_urls(p["health_address"], p["health_paths"][engine], tls), fetch, p["health_timeout"])
    seen.update(healthy=healthy, health_error=health_error)
    changed = False
    if p["update"] is not None:
        new = rollout.merge(seen["state"], p["update"])
        changed = new != seen["state"]
        if changed and not module.check_mode:
            rollout.write_state(p["path"], new)
        seen["state"] = new
    written = False
    metrics = p["metrics_file"]
    if metrics and os.path.isdir(os.path.dirname(metrics)) and not module.check_mode:
        written = rollout.write_text(metrics, rollout.drain_metrics(seen["state"], p["cordoned"]))
    module.exit_json(changed=changed, metrics_written=written, **seen)


if __name__ == "__main__":
    main()
