# -*- coding: utf-8 -*-
# Copyright: llmops.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the running engines use: the builds (served model folders, venvs) they started on (stdlib only).

A running engine keeps using the build it started on after a newer one is published: the links
(``<models root>/<name>``, ``<venvs root>/<engine>-current``) move at once, the engine only at its
next restart, which a rollout may hold back. So a build is in use when a process of one of the
collection's engine units (its cgroup names an ``llmops-*.service``):

- maps or holds open a file in it (a venv's extension modules stay mapped while the engine runs);
- or, for served model folders, is the newest build that was published (its folder's mtime) before
  that process started (an engine reads its weights at start and may have closed them since).

The second rule may keep a build that a process does not use (it may serve another model): it keeps
one build too many, never one too few.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re

PROC = "/proc"
# a line of /proc/<pid>/cgroup: hierarchy-ID:controllers:path; on cgroup v1 and hybrid hosts a
# process has several lines, and any of them may name its unit
UNIT_CGROUP = re.compile(r"/llmops-[^/]*\.service(/|$)")


def _read(path):
    with open(path) as handle:
        return handle.read()


def engine_pids(proc=PROC):
    """The processes of the collection's engine units, as pids."""
    pids = []
    for name in os.listdir(proc):
        if not name.isdigit():
            continue
        try:
            text = _read(os.path.join(proc, name, "cgroup"))
        except (IOError, OSError):
            continue
        if any(UNIT_CGROUP.search(line.split(":", 2)[-1]) for line in text.splitlines()):
            pids.append(int(name))
    return sorted(pids)


def boot_time(proc=PROC):
    for line in _read(os.path.join(proc, "stat")).splitlines():
        if line.startswith("btime "):
            return int(line.split()[1])
    raise OSError("no btime in %s/stat" % proc)


def start_time(pid, proc=PROC, btime=None):
    """Epoch seconds at which pid started (field 22 of /proc/<pid>/stat, in clock ticks after boot)."""
    stat = _read(os.path.join(proc, str(pid), "stat"))
    # the command name (field 2) is in parentheses and may hold spaces or parentheses itself
    fields = stat[stat.rindex(")") + 2:].split()
    ticks = int(fields[19])
    return (boot_time(proc) if btime is None else btime) + ticks / float(os.sysconf("SC_CLK_TCK"))


def open_paths(pid, proc=PROC):
    """The files pid maps (its shared libraries, mmapped weights) and holds open."""
    paths = set()
    for line in _read(os.path.join(proc, str(pid), "maps")).splitlines():
        parts = line.split(None, 5)
        if len(parts) == 6 and parts[5].startswith("/"):
            paths.add(parts[5].replace(" (deleted)", ""))
    fd_dir = os.path.join(proc, str(pid), "fd")
    for name in os.listdir(fd_dir):
        try:
            target = os.readlink(os.path.join(fd_dir, name))
        except OSError:
            continue
        if target.startswith("/"):
            paths.add(target)
    return paths


def in_use(candidates, pids=None, proc=PROC, by_start=True):
    """The candidates (build folders) that a running engine process uses: sorted real paths.

    pids: the processes to look at (default: those of the collection's engine units).
    by_start: also the newest candidate published before a process started (weights, which an
    engine may have closed); without it, only what the processes map or hold open (venvs, whose
    extension modules an engine maps as long as it runs)."""
    pids = engine_pids(proc) if pids is None else pids
    folders = sorted(set(os.path.realpath(c) for c in candidates if os.path.isdir(c)))
    if not pids or not folders:
        return []
    published = sorted((os.lstat(f).st_mtime, f) for f in folders)
    btime = boot_time(proc)
    used = set()
    for pid in pids:
        try:
            paths, started = open_paths(pid, proc), start_time(pid, proc, btime)
        except (IOError, OSError, ValueError, IndexError):
            continue  # it ended while we looked
        used.update(f for f in folders if any(p == f or p.startswith(f + "/") for p in paths))
        before = [f for mtime, f in published if mtime <= started] if by_start else []
        if before:
            used.add(before[-1])
    return sorted(used)
