# -*- coding: utf-8 -*-
# Copyright: llmops.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which of an engine's venvs to remove after an upgrade (stdlib only).

Venvs live side by side as ``<root>/<engine>-<version>-<lock digest>``, each with its copied locks
in ``<root>/.locks/<name>.txt`` and ``<name>.ray.txt``. The newest ``keep`` venvs besides the spared
ones stay for an instant rollback; older ones go. Besides those: the venv the current link points
at and the spec's. Spared whatever their age, and counted among the kept: the rollback slot's venv
and the venvs a running engine started on (running.in_use).
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import shutil

LOCKS = ".locks"
LOCK_SUFFIXES = (".txt", ".ray.txt")


def engine_venvs(root, engine):
    """The engine's venv folders under root (links, such as <engine>-current, are not venvs)."""
    if not os.path.isdir(root):
        return []
    prefix = engine + "-"
    return sorted(os.path.join(root, n) for n in os.listdir(root)
                  if n.startswith(prefix) and not os.path.islink(os.path.join(root, n))
                  and os.path.isdir(os.path.join(root, n)))


def _real(paths):
    return set(os.path.realpath(p) for p in paths if p)


def choose(venvs, keep, serving, spared):
    """The venvs to remove: those older than the `keep` newest besides the serving ones (the current
    link's, the spec's), except the spared ones (which count among the kept)."""
    serving, spared = _real(serving), _real(spared)
    others = [v for v in venvs if os.path.realpath(v) not in serving]
    others.sort(key=lambda v: os.lstat(v).st_mtime, reverse=True)
    return sorted(v for v in others[max(0, int(keep)):] if os.path.realpath(v) not in spared)


def lock_files(root, venv):
    name = os.path.basename(venv)
    return [os.path.join(root, LOCKS, name + suffix) for suffix in LOCK_SUFFIXES]


def remove(root, venvs):
    """Remove each venv and its copied locks."""
    for venv in venvs:
        shutil.rmtree(venv)
        for lock in lock_files(root, venv):
            if os.path.lexists(lock):
                os.unlink(lock)
