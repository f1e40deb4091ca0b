# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action for llmops.serving.job_progress: follow an async job, one progress line per interval."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64
import json
import os
import shlex
import time

from ansible.plugins.action import ActionBase
from ansible.utils.display import Display
from ansible_collections.llmops.serving.plugins.module_utils import job_follow

display = Display()

# Enough of a build log to hold its last step counter, without reading a verbose log whole.
LOG_TAIL_BYTES = 65536


class ActionModule(ActionBase):

    TRANSFERS_FILES = False
    _requires_connection = True

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        dummy, args = self.validate_argument_spec(
            argument_spec=dict(
                jid=dict(type="str", required=True),
                label=dict(type="str", required=True),
                timeout=dict(type="int", required=True),
                interval=dict(type="int", default=15),
                progress_file=dict(type="path"),
                log_file=dict(type="path"),
                size_of=dict(type="path"),
            ),
            mutually_exclusive=[("progress_file", "log_file", "size_of")],
        )
        async_dir = self._remote_expand_user(self.get_shell_option("async_dir", default="~/.ansible_async"))
        results_file = self._connection._shell.join_path(async_dir, args["jid"])
        host = task_vars.get("inventory_hostname", "?")

        def run_module(name, module_args):
            return self._execute_module(module_name=name, module_args=module_args, task_vars=task_vars)

        def check():
            return run_module("ansible.legacy.async_status", {"jid": args["jid"], "_async_dir": async_dir})

        def wait(seconds):
            # Returns as soon as the job has written its result (a running job's file has no invocation).
            run_module("ansible.legacy.wait_for", {"path": results_file, "search_regex": '"invocation"',
                                                   "timeout": max(1, int(seconds)), "sleep": 1})

        def describe(elapsed):
            return "%s: %s (%s elapsed)" % (args["label"], progress(), job_follow.elapsed_text(elapsed))

        def progress():
            if args["progress_file"]:
                res = run_module("ansible.legacy.slurp", {"src": args["progress_file"]})
                if res.get("failed") or "content" not in res:
                    return job_follow.describe_progress({})
                try:
                    return job_follow.describe_progress(json.loads(base64.b64decode(res["content"])))
                except ValueError:
                    return job_follow.describe_progress({})
            if args["log_file"]:
                res = self._low_level_execute_command(
                    "tail -c %d %s" % (LOG_TAIL_BYTES, shlex.quote(args["log_file"])), sudoable=False)
                return job_follow.build_steps(res.get("stdout", ""))
            if args["size_of"]:
                res = self._low_level_execute_command("du -sb %s" % shlex.quote(args["size_of"]), sudoable=False)
                return job_follow.size_line(res.get("stdout", ""), args["size_of"])
            return "running"

        def emit(line):
            display.display("[%s] %s" % (host, line))

        started = time.monotonic()
        # This runs in a worker process of ansible-playbook; a new parent means the run was killed.
        parent = os.getppid()
        try:
            status, rounds = job_follow.follow(check, wait, describe, emit, args["interval"], args["timeout"],
                                               time.monotonic, alive=lambda: os.getppid() == parent)
        except ValueError as e:
            result.update(failed=True, msg=str(e))
            return result
        except job_follow.FollowerOrphaned as e:
            result.update(failed=True, finished=False, rounds=e.rounds, followed_s=round(e.elapsed, 1),
                          msg="%s: stopped following the job %s: %s; the job keeps running on the host until "
                              "its own async limit" % (args["label"], args["jid"], e))
            return result
        except job_follow.JobTimeout as e:
            result.update(failed=True, finished=False, rounds=e.rounds, followed_s=round(e.elapsed, 1),
                          msg="%s: the job %s is %s (timeout %d s); it keeps running on the host until its "
                              "own async limit" % (args["label"], args["jid"], e, args["timeout"]))
            return result
        result.update(status)
        for flag in ("started", "finished"):
            result[flag] = bool(result.get(flag))
        result.update(rounds=rounds, followed_s=round(time.monotonic() - started, 1))
        return result
