#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: llmops.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: engine_ready
short_description: Wait until an engine serves a real chat completion
description:
  - Polls the engine's health route, then sends a real chat completion with the API key and
    requires HTTP 200 with generated tokens. C(/health) alone is not readiness, since engines answer
    it before the model can generate, and after a broken model load some still do.
  - When I(unit) is given, stops early if the systemd unit fails, and returns the journal's tail.
  - Reports how long the engine took from process start to ready, and the completion's latency.
version_added: 0.1.0
author: llmops.serving maintainers (@llmops)
options:
  url:
    description: Base URL of the engine, for example C(http://127.0.0.1:8000).
    type: str
    required: true
  model:
    description: Served model name to request.
    type: str
    required: true
  api_key:
    description: API key sent as a bearer token.
    type: str
  health_path:
    description: Route polled before the generation (the engine registry's health route for the engine).
    type: str
    default: /health
  prompt:
    description: Prompt of the probe generation.
    type: str
    default: Reply with one word.
  max_tokens:
    description: Tokens to generate in the probe.
    type: int
    default: 8
  timeout:
    description: Seconds to wait in all.
    type: int
    default: 600
  interval:
    description: Seconds between attempts; must be greater than 0.
    type: float
    default: 2.0
  unit:
    description: systemd unit running the engine; its failure ends the wait.
    type: str
notes:
  - Check mode only reports whether the engine answers now, and never fails on it.
"""

EXAMPLES = r"""
- name: Wait for the engine the serving spec names
  llmops.serving.engine_ready:
    url: "{{ serving_spec_engine_url }}"
    model: qwen3-32b
    api_key: "{{ serving_api_key }}"
    health_path: "{{ serving_spec_health_path }}"
    unit: "{{ serving_spec_unit }}"
  no_log: true
"""

RETURN = r"""
ready:
  description:
    - Whether the engine served the probe generation. Always true outside check mode (the module
      fails otherwise); in check mode, the answer of the check.
  returned: success
  type: bool
  sample: true
ready_after_s:
  description: Seconds this module waited until both probe generations (greedy and sampled) succeeded.
  returned: when ready
  type: float
  sample: 84.312
health_after_s:
  description: Seconds this module waited until the health route (I(health_path)) first answered HTTP 200.
  returned: when ready
  type: float
  sample: 82.07
time_to_ready_s:
  description: Seconds from the unit's process start to ready.
  returned: when ready and I(unit) is given (and systemd reports the unit's start time)
  type: float
  sample: 312.508
latency_s:
  description: Wall time of the last probe chat completion (the sampled one).
  returned: when ready
  type: float
  sample: 0.25
usage:
  description: Token usage the engine reported for the last probe chat completion.
  returned: when ready
  type: dict
  sample: {"prompt_tokens": 12, "completion_tokens": 8, "total_tokens": 20}
finish_reason:
  description: The finish reason of the last probe completion's first choice, as the engine reported it (null when it reported none).
  returned: when ready
  type: str
  sample: length
model:
  description: The model name the engine's completion answer carried (null when it carried none).
  returned: when ready
  type: str
  sample: qwen3-32b
msg:
  description:
    - Why the engine is not ready; on failure, with the engine's journal tail when the unit exited.
    - "In check mode, C(<unit> is not running[: <cause>]) or C(not ready after 5s; last: <last answer>)."
  returned: failure, or in check mode when the engine is not ready
  type: str
  sample: "qwen3-32b at http://127.0.0.1:8000: not ready after 600s; last: /health answered HTTP 503"
journal:
  description:
    - The last 40 lines of the unit's journal, without exit noise (nanobind's leak report).
    - An empty list when I(unit) is not given.
  returned: failure; in check mode when I(unit) is given and is not running
  type: list
  elements: str
  sample: ["INFO 12-01 07:45:01 [loader.py:80] Loading weights took 310.21 seconds"]
cause:
  description: The last exception line of the unit's journal (a Python traceback's last line), or null.
  returned: failure, when the unit exited while starting; in check mode when I(unit) is given and is not running
  type: str
  sample: "RuntimeError: ('Could not load logging config. File does not exist: %s', '/nonexistent/logging.json')"
"""

import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.llmops.serving.plugins.module_utils import readiness


class StopWaiting(Exception):
    pass


def unit_state(module, unit):
    props = ["ActiveState", "SubState", "NRestarts", "ExecMainStartTimestampMonotonic"]
    dummy, out, dummy2 = module.run_command(["systemctl", "show"] + ["--property=%s" % p for p in props] + [unit])
    return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)


def crashed(state, restarts_at_start):
    """A unit that failed, stopped, or exited and is waiting for Restart= has crashed."""
    return (state.get("ActiveState") in ("failed", "inactive") or state.get("SubState") == "auto-restart"
            or int(state.get("NRestarts") or 0) > restarts_at_start)


# Read far enough back that the traceback is found behind the exit noise (readiness.journal_summary).
JOURNAL_READ_LINES = 400


def journal_tail(module, unit):
    dummy, out, dummy2 = module.run_command(["journalctl", "-u", unit, "-n", str(JOURNAL_READ_LINES), "--no-pager", "-o", "cat"])
    return out


def main():
    module = AnsibleModule(
        argument_spec=dict(
            url=dict(type="str", required=True),
            model=dict(type="str", required=True),
            api_key=dict(type="str", no_log=True),
            health_path=dict(type="str", default="/health"),
            prompt=dict(type="str", default="Reply with one word."),
            max_tokens=dict(type="int", default=8, no_log=False),
            timeout=dict(type="int", default=600),
            interval=dict(type="float", default=2.0),
            unit=dict(type="str"),
        ),
        supports_check_mode=True,
    )
    p = module.params
    if p["interval"] is None or p["interval"] <= 0:
        module.fail_json(msg="interval must be > 0, got %s" % p["interval"])
    base = p["url"].rstrip("/")
    unit = p["unit"]

    restarts_at_start = int(unit_state(module, unit).get("NRestarts") or 0) if unit else 0

    def alive():
        if unit and crashed(unit_state(module, unit), restarts_at_start):
            raise StopWaiting()

    timeout = 5 if module.check_mode else p["timeout"]
    try:
        facts = readiness.wait_ready(base, p["health_path"], p["api_key"], p["model"], p["prompt"],
                                     p["max_tokens"], timeout, p["interval"], alive=alive)
    except StopWaiting:
        cause, tail = readiness.journal_summary(journal_tail(module, unit))
        if module.check_mode:
            # Check mode reports and never fails: on a new host the unit has not been started yet.
            module.exit_json(changed=False, ready=False, msg="%s is not running%s" % (unit, (": " + cause) if cause else ""),
                             journal=tail, cause=cause)
        module.fail_json(msg="%s exited while starting%s; its journal ends with:\n%s"
                         % (unit, (": " + cause) if cause else "", "\n".join(tail)), journal=tail, cause=cause)
    except readiness.NotReady as e:
        if module.check_mode:
            module.exit_json(changed=False, ready=False, msg=str(e))
        dummy, tail = readiness.journal_summary(journal_tail(module, unit)) if unit else (None, [])
        module.fail_json(msg="%s at %s: %s" % (p["model"], base, e), journal=tail)
    if unit:
        started = int(unit_state(module, unit).get("ExecMainStartTimestampMonotonic") or 0)
        if started:
            facts["time_to_ready_s"] = round(time.monotonic() - started / 1e6, 3)
    module.exit_json(changed=False, ready=True, **facts)


if __name__ == "__main__":
    main()
