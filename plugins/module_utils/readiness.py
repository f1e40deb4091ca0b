# -*- coding: utf-8 -*-
# Copyright: llmops.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Readiness of an OpenAI-compatible engine, proven by a real generation (stdlib only)."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import re
import time

from ansible.module_utils.six.moves.urllib.error import HTTPError, URLError
from ansible.module_utils.urls import open_url


class NotReady(Exception):
    """The engine is not (yet) answering as it should; message says what was seen."""


def http(method, url, body=None, api_key=None, timeout=30.0, ca_path=None):
    """Returns (status, parsed JSON or text, seconds). HTTP errors are returned, not raised.
    ca_path: the CA an https engine's certificate is checked against (the collection's own)."""
    data = None if body is None else json.dumps(body).encode("utf-8")
    headers = {"Content-Type": "application/json"}
    if api_key:
        headers["Authorization"] = "Bearer %s" % api_key
    start = time.monotonic()
    try:
        resp = open_url(url, data=data, method=method, headers=headers, timeout=timeout, ca_path=ca_path)
        status, raw = resp.getcode(), resp.read()
    except HTTPError as e:
        status, raw = e.code, e.read()
    elapsed = time.monotonic() - start
    text = raw.decode("utf-8", "replace")
    try:
        return status, json.loads(text), elapsed
    except ValueError:
        return status, text, elapsed


# Both decoding paths users hit: greedy, and sampled as Qwen's generation config asks. Engines take
# different code paths for them (vLLM 0.31's CPU sampler compiles a kernel on the first sampled
# request and dies without a C++ compiler), so one greedy request does not prove a sampled one works.
READINESS_SAMPLING = ({"temperature": 0}, {"temperature": 0.7, "top_p": 0.8, "seed": 0})


def check_chat(base_url, api_key, model, prompt, max_tokens, timeout, sampling=None, ca_path=None):
    """One real chat completion; returns facts about it or raises NotReady."""
    body = {"model": model, "messages": [{"role": "user", "content": prompt}],
            "max_tokens": max_tokens}
    body.update(sampling or READINESS_SAMPLING[0])
    status, resp, elapsed = http("POST", base_url + "/v1/chat/completions", body, api_key, timeout, **_tls(ca_path))
    if status != 200:
        raise NotReady("chat completion (%s) answered HTTP %s: %s" % (_params(body), status, str(resp)[:300]))
    try:
        usage = resp["usage"]
        choice = resp["choices"][0]
    except (KeyError, IndexError, TypeError):
        raise NotReady("chat completion answered 200 without choices/usage: %s" % str(resp)[:300])
    if not usage.get("completion_tokens"):
        raise NotReady("chat completion generated no tokens: %s" % str(resp)[:300])
    return {"latency_s": round(elapsed, 3), "usage": usage, "finish_reason": choice.get("finish_reason"),
            "model": resp.get("model")}


def _tls(ca_path):
    """http()'s TLS argument, given only for an https engine."""
    return {"ca_path": ca_path} if ca_path else {}


def _params(body):
    return ", ".join("%s=%s" % (k, body[k]) for k in ("temperature", "top_p") if k in body)


def wait_ready(base_url, health_path, api_key, model, prompt, max_tokens, timeout, interval,
               alive=None, clock=time.monotonic, sleep=time.sleep, report=None, ca_path=None):
    """Poll health until 200, then prove readiness with a generation. `alive()` may raise to stop early.

    `report(state)`, when given, is called after each attempt that did not prove readiness, before
    the sleep, with what the wait is at: {"phase": "health" or "generation", "last": the answer
    that was not good enough, "elapsed_s": seconds since the call, "attempts": attempts so far}.
    Returns a dict with health_after_s, ready_after_s (from the call) and the chat facts.
    """
    start = clock()
    deadline = start + timeout
    last = "no answer yet"
    health_after = None
    attempts = 0
    while clock() < deadline:
        if alive is not None:
            alive()
        try:
            if health_after is None:
                status, dummy, dummy2 = http("GET", base_url + health_path, timeout=10, **_tls(ca_path))
                if status != 200:
                    last = "%s answered HTTP %s" % (health_path, status)
                    raise NotReady(last)
                health_after = clock() - start
            for sampling in READINESS_SAMPLING:
                chat = check_chat(base_url, api_key, model, prompt, max_tokens,
                                  timeout=max(10.0, deadline - clock()), sampling=sampling, ca_path=ca_path)
            chat.update(health_after_s=round(health_after, 3), ready_after_s=round(clock() - start, 3))
            return chat
        except NotReady as e:
            last = str(e)
        except (URLError, OSError, ValueError) as e:
            last = "%s: %s" % (type(e).__name__, e)
        attempts += 1
        if report is not None:
            report({"phase": "health" if health_after is None else "generation", "last": last,
                    "elapsed_s": round(clock() - start, 1), "attempts": attempts})
        sleep(interval)
    raise NotReady("not ready after %ss; last: %s" % (timeout, last))


# Lines a process prints at exit that say nothing about why it stopped: nanobind's leak report,
# printed after an error by C++ extensions the engines load, is dozens of lines long and would
# push the traceback out of a journal's tail.
_EXIT_NOISE = re.compile(r"^\s*(nanobind: .*|- leaked (type|function|instance) .*|- \.\.\. skipped remainder\s*"
                         r"|See https://nanobind\.readthedocs\.io/.*)$")
# The last line of a Python traceback ("RuntimeError: ..."), also behind an engine's log prefix.
_EXCEPTION = re.compile(r"(?:^|[\s\]])([A-Za-z_][\w.]*(?:Error|Exception)(?:: .*)?)$")


def journal_summary(text, lines=40):
    """(cause, tail) of a crashed unit's journal: cause is the last exception line (a traceback's
    last line) or None; tail is the last `lines` lines, exit noise left out."""
    kept = [line for line in text.splitlines() if not _EXIT_NOISE.match(line)]
    cause = None
    for line in reversed(kept):
        found = _EXCEPTION.search(line.rstrip())
        if found:
            cause = found.group(1)
            break
    return cause, kept[-lines:]


# ---------------------------------------------------------------------------- progress of the wait
# Longest answer or journal line a progress record carries: the follower prints it on one line.
PROGRESS_TEXT_CHARS = 160


# This file is also loaded by its path alone, outside the collection (venv_runner), so it imports
# nothing of the collection: job_follow.one_line is this one's twin.
def _short(text, limit=PROGRESS_TEXT_CHARS):
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


def last_journal_line(text):
    """The journal's last line that says something (exit noise and blank lines left out), or None."""
    for line in reversed((text or "").splitlines()):
        if line.strip() and not _EXIT_NOISE.match(line):
            return _short(line)
    return None


def progress_record(wait, health_path, unit_state=None, restarts=0, journal_line=None):
    """What the readiness wait is at, for its progress file.

    `wait` is what wait_ready reports (phase, last, elapsed_s, attempts); `unit_state` the unit's
    `systemctl show` properties when a unit is watched. `status` and `detail` are the text
    llmops.serving.job_progress prints (module_utils/job_follow.describe_progress); the other keys
    are the same facts as data.
    """
    waiting = ("waiting for %s" % health_path if wait.get("phase") == "health"
               else "waiting for a real generation (greedy and sampled)")
    unit = None
    if unit_state:
        unit = "%s (%s)" % (unit_state.get("ActiveState", "?"), unit_state.get("SubState", "?"))
        if restarts:
            unit += ", restarted %d times" % restarts
        waiting = "unit %s, %s" % (unit, waiting)
    detail = "last: %s" % _short(wait.get("last") or "no answer yet")
    if journal_line:
        detail += "; journal: %s" % _short(journal_line)
    return {"status": waiting, "detail": detail, "state": "running", "phase": wait.get("phase"),
            "last": wait.get("last"), "elapsed_s": wait.get("elapsed_s"), "attempts": wait.get("attempts"),
            "unit": unit, "journal": journal_line, "time": time.time()}


def final_record(state, status, elapsed_s=None):
    """The progress file's last record: state 'ready' or 'failed' and why."""
    return {"status": _short(status, 400), "state": state, "elapsed_s": elapsed_s, "time": time.time()}


def write_progress(path, record):
    """Writes `record` as JSON to `path` through a temporary file and a rename, so a reader never
    sees half a record; creates the folder."""
    folder = os.path.dirname(path)
    if folder and not os.path.isdir(folder):
        os.makedirs(folder, 0o755)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(record, f)
    os.rename(tmp, path)
