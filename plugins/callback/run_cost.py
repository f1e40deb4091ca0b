# -*- coding: utf-8 -*-
# Copyright: llmops.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What one ansible-playbook run cost the controller: tasks, results, wall and CPU seconds."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = """
    name: run_cost
    type: aggregate
    short_description: Reports what a playbook run cost the controller (tasks, wall and CPU seconds)
    description:
        - At the end of a run, prints one line with the tasks run, the results per status, the wall
          time and the controller's CPU time (this process and the workers and connection commands it
          started; over a connection that runs modules as the controller's own processes, such as
          C(local) or the test hosts' entry into their namespaces, their CPU too), and appends the
          same figures as one JSON object to a file when one is named.
        - Tasks are counted per host as Ansible ran them (a task that several hosts run counts once
          per host), also when a condition skipped them, since a skipped task still costs the
          controller a worker; C(remote) counts the results of tasks whose action ran on a host.
        - Enable it with C(callbacks_enabled = llmops.serving.run_cost) in C(ansible.cfg) or
          C(ANSIBLE_CALLBACKS_ENABLED).
    requirements:
      - enable in configuration
    options:
      output_file:
        description:
          - A file to append the run's figures to, one JSON object a line. Empty writes none.
        default: ''
        env:
          - name: LLMOPS_RUN_COST_FILE
        ini:
          - section: callback_run_cost
            key: output_file
      label:
        description:
          - A label written with the figures, to tell runs apart in the file. Empty takes the pytest test
            that started the run (C(PYTEST_CURRENT_TEST)) or the Molecule scenario (C(MOLECULE_SCENARIO_NAME)).
        default: ''
        env:
          - name: LLMOPS_RUN_COST_LABEL
        ini:
          - section: callback_run_cost
            key: label
      by_role:
        description:
          - Also count the tasks run per role (and C(play) for tasks outside roles).
        type: bool
        default: true
        env:
          - name: LLMOPS_RUN_COST_BY_ROLE
        ini:
          - section: callback_run_cost
            key: by_role
"""

import json
import os
import sys
import time

from ansible.plugins.callback import CallbackBase

# Actions that run on the controller only: their results cost no remote call.
LOCAL_ACTIONS = frozenset(
    "ansible.builtin." + name if "." not in name else name
    for name in (
        "set_fact", "debug", "assert", "fail", "meta", "include_tasks", "import_tasks", "include_role",
        "import_role", "include_vars", "add_host", "group_by", "set_stats", "pause", "validate_argument_spec",
        "noop", "llmops.serving.input_checks",
    )
)


def short_action(action):
    """ansible.builtin.X and the bare name X are one action."""
    return action if "." in (action or "") else "ansible.builtin.%s" % action


def default_label(environ):
    """The pytest test (without its phase) or the Molecule scenario that started the run."""
    test = environ.get("PYTEST_CURRENT_TEST", "")
    return test.rsplit(" (", 1)[0] if test else environ.get("MOLECULE_SCENARIO_NAME", "")


class CallbackModule(CallbackBase):
    """Counts tasks and results and reads the process's CPU times at the end."""

    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "llmops.serving.run_cost"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self):
        super(CallbackModule, self).__init__()
        self._start = time.time()
        self._times0 = os.times()
        self._results = {"ok": 0, "changed": 0, "skipped": 0, "failed": 0, "unreachable": 0}
        self._tasks = 0
        self._remote = 0
        self._by_role = {}
        self._hosts = set()
        self._playbook = ""

    def v2_playbook_on_start(self, playbook):
        self._playbook = os.path.basename(getattr(playbook, "_file_name", "") or "")

    def _count(self, result, status):
        self._tasks += 1
        self._results[status] += 1
        task = result._task
        self._hosts.add(result._host.get_name())
        if status != "skipped" and short_action(task.action) not in LOCAL_ACTIONS:
            self._remote += 1
        if self.get_option("by_role"):
            role = task._role.get_name() if getattr(task, "_role", None) else "play"
            self._by_role[role] = self._by_role.get(role, 0) + 1

    def v2_runner_on_ok(self, result):
        self._count(result, "changed" if result._result.get("changed") else "ok")

    def v2_runner_on_failed(self, result, ignore_errors=False):
        self._count(result, "failed")

    def v2_runner_on_skipped(self, result):
        self._count(result, "skipped")

    def v2_runner_on_unreachable(self, result):
        self._count(result, "unreachable")

    def figures(self):
        """The run's figures as one dict."""
        now = os.times()
        user = (now.user - self._times0.user) + (now.children_user - self._times0.children_user)
        system = (now.system - self._times0.system) + (now.children_system - self._times0.children_system)
        figures = {
            "label": self.get_option("label") or default_label(os.environ),
            "scenario": os.environ.get("MOLECULE_SCENARIO_NAME", ""),
            "playbook": self._playbook,
            "argv": sys.argv[1:],
            "hosts": len(self._hosts),
            "tasks": self._tasks,
            "remote": self._remote,
            "results": dict(self._results),
            "wall_s": round(time.time() - self._start, 2),
            "cpu_user_s": round(user, 2),
            "cpu_sys_s": round(system, 2),
            "cpu_s": round(user + system, 2),
        }
        if self.get_option("by_role"):
            figures["by_role"] = dict(sorted(self._by_role.items()))
        return figures

    def v2_playbook_on_stats(self, stats):
        figures = self.figures()
        self._display.display(
            "RUN COST %(playbook)s: %(tasks)d tasks on %(hosts)d host(s) (%(remote)d remote), "
            "wall %(wall_s).1f s, controller CPU %(cpu_s).1f s (user %(cpu_user_s).1f, sys %(cpu_sys_s).1f)" % figures)
        path = self.get_option("output_file")
        if path:
            with open(path, "a") as handle:
                handle.write(json.dumps(figures, sort_keys=True) + "\n")
