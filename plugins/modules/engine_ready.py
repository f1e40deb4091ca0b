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
  progress_file:
    description:
      - Path of a JSON file where the module writes what the wait is at after every attempt, for
        M(llmops.serving.job_progress) to print while the module runs in the background (C(async)).
      - Its C(status) and C(detail) say what it waits for (the health route or a real generation), the
        unit's state when I(unit) is given, the last answer that was not good enough and the journal's
        last line; C(phase), C(last), C(elapsed_s), C(attempts), C(unit) and C(journal) are the same
        facts as data. The last record has C(state) C(ready) or C(failed).
      - The folder is created. A file that cannot be written costs a warning, not the wait.
      - Not written in check mode.
    type: path
  ca_path:
    description: The CA file an https engine's certificate is checked against (the collection's own CA).
    type: path
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

- name: Wait in the background, printing what the wait is at every 15 s
  llmops.serving.engine_ready:
    url: "{{ serving_spec_engine_url }}"
    model: qwen3-32b
    api_key: "{{ serving_api_key }}"
    timeout: 900
    unit: "{{ serving_spec_unit }}"
    progress_file: /var/lib/llmops/.progress/llmops-vllm-ready.json
  async: 1200
  poll: 0
  register: waiting

- name: Follow the wait
  llmops.serving.job_progress:
    jid: "{{ waiting.ansible_job_id }}"
    label: qwen3-32b readiness
    timeout: 1200
    interval: 15
    progress_file: /var/lib/llmops/.progress/llmops-vllm-ready.json
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
# The progress file's journal line: read from this many last lines, at most once per so many seconds of the wait.
PROGRESS_JOURNAL_LINES = 20
PROGRESS_JOURNAL_EVERY_S = 10.0


def journal_tail(module, unit, lines=JOURNAL_READ_LINES):
    dummy, out, dummy2 = module.run_command(["journalctl", "-u", unit, "-n", str(lines), "--no-pager", "-o", "cat"])
    return out


class WaitProgress(object):
    """The progress file of one wait: readiness.progress_record after each attempt, a last record at the end."""

    def __init__(self, module, path, unit, health_path, restarts_at_start):
        self.module, self.path, self.unit, self.health_path = module, path, unit, health_path
        self.restarts_at_start = restarts_at_start
        self.unit_state = None
        self.journal_line = None
        self.journal_read_at = None
        self.warned = False
        self.elapsed_s = 0.0

    def write(self, record):
        if not self.path:
            return
        try:
            readiness.write_progress(self.path, record)
        except OSError as e:
            if not self.warned:
                self.warned = True
                self.module.warn("cannot write the progress file %s: %s" % (self.path, e))

    def saw_unit(self, state):
        self.unit_state = state

    def report(self, wait):
        if not self.path:
            return
        self.elapsed_s = wait.get("elapsed_s") or 0.0
        if self.unit and (self.journal_read_at is None or self.elapsed_s - self.journal_read_at >= PROGRESS_JOURNAL_EVERY_S):
            self.journal_read_at = self.elapsed_s
            self.journal_line = readiness.last_journal_line(journal_tail(self.module, self.unit, PROGRESS_JOURNAL_LINES))
        restarts = int((self.unit_state or {}).get("NRestarts") or 0) - self.restarts_at_start
        self.write(readiness.progress_record(wait, self.health_path, self.unit_state, max(restarts, 0), self.journal_line))

    def start(self):
        if self.path:
            self.write(readiness.progress_record({"phase": "health", "elapsed_s": 0.0, "attempts": 0},
                                                 self.health_path, self.unit_state))

    def finish(self, state, status, elapsed_s=None):
        if self.path:
            self.write(readiness.final_record(state, status, self.elapsed_s if elapsed_s is None else elapsed_s))


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
            progress_file=dict(type="path"),
            ca_path=dict(type="path"),
        ),
        supports_check_mode=True,
    )
    p = module.params
    if p["interval"] is None or p["interval"] <= 0:
        module.fail_json(msg="interval must be > 0, got %s" % p["interval"])
    base = p["url"].rstrip("/")
    unit = p["unit"]

    first_state = unit_state(module, unit) if unit else {}
    restarts_at_start = int(first_state.get("NRestarts") or 0)
    # Check mode changes nothing on the host, a progress file included.
    progress = WaitProgress(module, None if module.check_mode else p["progress_file"], unit, p["health_path"],
                            restarts_at_start)
    progress.saw_unit(first_state or None)
    progress.start()

    def alive():
        if unit:
            state = unit_state(module, unit)
            progress.saw_unit(state)
            if crashed(state, restarts_at_start):
                raise StopWaiting()

    timeout = 5 if module.check_mode else p["timeout"]
    try:
        facts = readiness.wait_ready(base, p["health_path"], p["api_key"], p["model"], p["prompt"],
                                     p["max_tokens"], timeout, p["interval"], alive=alive, report=progress.report,
                                     ca_path=p["ca_path"])
    except StopWaiting:
        cause, tail = readiness.journal_summary(journal_tail(module, unit))
        if module.check_mode:
            # Check mode reports and never fails: on a new host the unit has not been started yet.
            module.exit_json(changed=False, ready=False, msg="%s is not running%s" % (unit, (": " + cause) if cause else ""),
                             journal=tail, cause=cause)
        progress.finish("failed", "%s exited while starting%s" % (unit, (": " + cause) if cause else ""))
        module.fail_json(msg="%s exited while starting%s; its journal ends with:\n%s"
                         % (unit, (": " + cause) if cause else "", "\n".join(tail)), journal=tail, cause=cause)
    except readiness.NotReady as e:
        if module.check_mode:
            module.exit_json(changed=False, ready=False, msg=str(e))
        dummy, tail = readiness.journal_summary(journal_tail(module, unit)) if unit else (None, [])
        progress.finish("failed", str(e), elapsed_s=float(timeout))
        module.fail_json(msg="%s at %s: %s" % (p["model"], base, e), journal=tail)
    progress.finish("ready", "ready after %ss: both probe generations answered" % facts["ready_after_s"],
                    elapsed_s=facts["ready_after_s"])
    if unit:
        started = int(unit_state(module, unit).get("ExecMainStartTimestampMonotonic") or 0)
        if started:
            facts["time_to_ready_s"] = round(time.monotonic() - started / 1e6, 3)
    module.exit_json(changed=False, ready=True, **facts)


if __name__ == "__main__":
    main()
