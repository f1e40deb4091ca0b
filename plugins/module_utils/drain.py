# -*- coding: utf-8 -*-
# Copyright: llmops.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Waiting for a drained engine to finish its work, read from the engine's own metrics (stdlib only).

A drained engine gets no new requests from the gateway, but the ones it already holds (long
generations, open streams) are still running or queued. The engine counts them itself, in two
gauges whose names the engine registry holds per engine and version (``metrics.running`` and
``metrics.waiting``). The wait polls
the Prometheus text until both are zero or the timeout passes, and says how many were left.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re
import time

# name{labels} value [timestamp]; labels may hold spaces and braces inside quoted values.
_SAMPLE = re.compile(r'^([A-Za-z_:][A-Za-z0-9_:]*)(\{(?:[^"}]|"(?:[^"\\]|\\.)*")*\})?\s+(\S+)')


class MetricsMissing(ValueError):
    """The scrape has neither of the metrics asked for: wrong names, or metrics disabled."""


def sums(text, names):
    """Sum of each metric's samples over all its label sets: {name: float or None when absent}."""
    found = dict((n, None) for n in names)
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = _SAMPLE.match(line)
        if not m or m.group(1) not in found:
            continue
        try:
            value = float(m.group(3))
        except ValueError:
            continue
        found[m.group(1)] = (found[m.group(1)] or 0.0) + value
    return found


def in_flight(text, running, waiting):
    """(running, waiting) requests in one scrape; MetricsMissing when both names are absent."""
    counts = sums(text, [running, waiting])
    if counts[running] is None and counts[waiting] is None:
        raise MetricsMissing("the engine's /metrics has neither %s nor %s" % (running, waiting))
    return int(counts[running] or 0), int(counts[waiting] or 0)


def wait_idle(scrape, running, waiting, timeout, interval, clock=time.monotonic, sleep=time.sleep):
    """Poll scrape() (the /metrics text, or None when the engine does not answer) until no request
    is running or waiting, or timeout seconds pass.

    Returns a dict: idle, reachable, running_at_start, waiting_at_start, running_left,
    waiting_left, waited_s, polls. An engine that does not answer has nothing in flight."""
    start = clock()
    result = {"polls": 0, "reachable": True}
    while True:
        text = scrape()
        result["polls"] += 1
        if text is None:
            result.update(reachable=False, running_left=0, waiting_left=0)
            result.setdefault("running_at_start", 0)
            result.setdefault("waiting_at_start", 0)
            break
        run_n, wait_n = in_flight(text, running, waiting)
        result.setdefault("running_at_start", run_n)
        result.setdefault("waiting_at_start", wait_n)
        result.update(running_left=run_n, waiting_left=wait_n)
        if run_n + wait_n == 0 or clock() - start >= timeout:
            break
        sleep(min(interval, max(0.0, timeout - (clock() - start))))
    result["idle"] = result["running_left"] + result["waiting_left"] == 0
    result["waited_s"] = round(clock() - start, 3)
    return result
