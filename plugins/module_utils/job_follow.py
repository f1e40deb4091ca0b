# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Following a background (async) job: one progress line per interval until it ends.

A plain loop, so a step may take as long as its timeout allows (downloads of a day, builds of
hours); a task file that includes itself once per interval would hit Python's recursion limit
after a few hundred rounds. The action plugin llmops.serving.job_progress drives follow() with
callables that run modules on the host; the unit tests drive it with a fake clock.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.llmops.serving.plugins.module_utils.weights import describe_progress as describe_bytes
from ansible_collections.llmops.serving.plugins.module_utils.weights import human_bytes


class JobTimeout(Exception):
    """The job was still running when the follower's time ran out."""

    def __init__(self, rounds, elapsed):
        super(JobTimeout, self).__init__("still running after %s" % elapsed_text(elapsed))
        self.rounds = rounds
        self.elapsed = elapsed


class FollowerOrphaned(Exception):
    """The run that asked for the job is gone (its ansible-playbook was killed)."""

    def __init__(self, rounds, elapsed):
        super(FollowerOrphaned, self).__init__("its ansible-playbook is gone after %s" % elapsed_text(elapsed))
        self.rounds = rounds
        self.elapsed = elapsed


def follow(check, wait, describe, emit, interval, timeout, clock, alive=None):
    """Wait, check and report until check() says finished; return (status, rounds).

    check() -> the job's status dict ('finished' true once it ended);
    wait(seconds) -> returns early when the job may have ended (or after seconds);
    describe(elapsed) -> the progress text of a running job; emit(text) prints it;
    clock() -> seconds (monotonic); alive() -> whether the run that follows is still there.
    Raises JobTimeout once timeout seconds have passed, FollowerOrphaned once alive() is false:
    Ansible's workers live in sessions of their own, so a killed ansible-playbook leaves them
    running, and a follower of hours would poll the host for hours for nobody.
    """
    if interval <= 0 or timeout <= 0:
        raise ValueError("interval and timeout must be whole seconds above 0 (got %s and %s)" % (interval, timeout))
    start = clock()
    rounds = 0
    while True:
        if alive is not None and not alive():
            raise FollowerOrphaned(rounds, clock() - start)
        left = timeout - (clock() - start)
        if left <= 0:
            raise JobTimeout(rounds, clock() - start)
        wait(min(interval, left))
        status = check()
        if status.get("finished"):
            return status, rounds
        rounds += 1
        emit(describe(clock() - start))


def elapsed_text(seconds):
    """'42s', '12m05s', '3h07m40s'."""
    s = int(seconds)
    if s < 60:
        return "%ds" % s
    if s < 3600:
        return "%dm%02ds" % (s // 60, s % 60)
    return "%dh%02dm%02ds" % (s // 3600, s % 3600 // 60, s % 60)


# Longest progress text of a status record: one line of the play's output, not a log.
STATUS_CHARS = 400


def one_line(text, limit):
    """`text` with its whitespace folded to single spaces, cut to `limit` characters ('...' at the cut)."""
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


def describe_progress(p):
    """The progress text of a job's JSON progress file.

    A record with a 'status' text (what the job waits for: engine_ready's) is that text, then its
    'detail' after '; ', then its 'state' in brackets unless it is 'running'; whitespace is folded
    to one line and the whole cut to STATUS_CHARS. Any other record is a byte count (model_fetch,
    weights_convert: phase, done, total, rate, eta_s, state), weights.describe_progress's line.
    """
    if not isinstance(p, dict) or not p:
        return describe_bytes({})
    if p.get("status") is None:
        return describe_bytes(p)
    text = str(p["status"])
    if p.get("detail"):
        text += "; %s" % p["detail"]
    if p.get("state") not in (None, "running"):
        text += " [%s]" % p["state"]
    return one_line(text, STATUS_CHARS)


def size_line(du_output, path):
    """'2.1 GiB in /opt/llmops/venvs/x' from `du -sb` output, or 'nothing in <path> yet'."""
    first = (du_output or "").split()
    if not first or not first[0].isdigit():
        return "nothing in %s yet" % path
    return "%s in %s" % (human_bytes(int(first[0])), path)


_STEP = re.compile(r"\[(\d+)/(\d+)\]")


def build_steps(log_tail):
    """'37/112 objects compiled' from the last ninja/CMake step counter of a build log's tail."""
    steps = _STEP.findall(log_tail or "")
    if not steps:
        return "configuring"
    done, total = steps[-1]
    return "%s/%s objects compiled" % (done, total)
