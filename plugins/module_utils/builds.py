# -*- coding: utf-8 -*-
# Copyright: llmops.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Served folders as versioned builds behind a link that is flipped atomically (stdlib only).

``<root>/<name>`` is a symbolic link to ``<root>/.builds/<name>/<build id>``. A new build is made in
a temporary folder beside the served one, renamed to its build folder once complete, and the link
is replaced by renaming a new link over it: at every instant ``<root>/<name>`` is either the old
build or the new one, whole. The build served before stays for rollback (``keep``); older ones,
and the temporary folders of builds that were interrupted, are removed by the next publish or
clean-up. Nothing here writes into a build that a link points at.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import binascii
import errno
import os
import shutil
import time

from ansible_collections.llmops.serving.plugins.module_utils import weights

BUILDS = ".builds"
# Temporary folders beside <root>/<name> left by an interrupted build: .<name>.<tag>-XXXXXX
LEFTOVER_TAGS = ("build", "base", "old", "tmp", "link")


class NoSpace(OSError):
    """The target filesystem cannot hold the new build."""


def builds_dir(path):
    root, name = os.path.split(os.path.abspath(path))
    return os.path.join(root, BUILDS, name)


def served_build(path):
    """The build folder path points at (None when path is missing; path itself when it is a real
    folder, not a link)."""
    if os.path.islink(path):
        return os.path.realpath(path)
    return path if os.path.isdir(path) else None


def leftovers(path):
    """Temporary folders and links of interrupted builds beside path."""
    root, name = os.path.split(os.path.abspath(path))
    if not os.path.isdir(root):
        return []
    prefixes = tuple(".%s.%s-" % (name, tag) for tag in LEFTOVER_TAGS)
    return sorted(os.path.join(root, n) for n in os.listdir(root) if n.startswith(prefixes))


def remove(p):
    if os.path.islink(p) or os.path.isfile(p):
        os.unlink(p)
    else:
        shutil.rmtree(p, ignore_errors=True)


def clean_leftovers(path):
    """Remove what interrupted builds left beside path; returns the paths removed."""
    found = leftovers(path)
    for p in found:
        remove(p)
    return found


def _adopt_legacy_folder(path):
    """A served real folder (not a link) becomes a build, so the link can replace it."""
    legacy = os.path.join(builds_dir(path), "legacy-%d" % int(time.time()))
    os.rename(path, legacy)
    return legacy


def flip(path, target):
    """Point link path at target by renaming a new link over it (atomic on POSIX)."""
    root, name = os.path.split(os.path.abspath(path))
    tmp = os.path.join(root, ".%s.link-%s" % (name, binascii.hexlify(os.urandom(4)).decode()))
    os.symlink(os.path.relpath(target, root), tmp)
    try:
        os.rename(tmp, path)
    except OSError:
        os.unlink(tmp)
        raise


def all_builds(path):
    """The build folders of path, served or not."""
    bdir = builds_dir(path)
    return [os.path.join(bdir, n) for n in sorted(os.listdir(bdir))] if os.path.isdir(bdir) else []


def prune(path, keep=1, in_use=()):
    """Remove builds other than the served one, the `keep` newest before it and those in_use (the
    builds running engines started on: running.in_use); returns them."""
    served = served_build(path)
    spared = set(os.path.realpath(p) for p in in_use) | set([served])
    others = [p for p in all_builds(path) if os.path.realpath(p) not in spared]
    others.sort(key=lambda p: os.lstat(p).st_mtime, reverse=True)
    removed = others[keep:]
    for p in removed:
        remove(p)
    return removed


def publish(tmp, path, build_id, keep=1, in_use=()):
    """Move the finished folder tmp to its build folder and flip path to it; prune(path, keep, in_use).

    Returns dict(build, previous, pruned, cleaned)."""
    bdir = builds_dir(path)
    if not os.path.isdir(bdir):
        os.makedirs(bdir)
    previous = served_build(path)
    if previous == path:
        previous = _adopt_legacy_folder(path)
    build = os.path.join(bdir, build_id)
    if os.path.realpath(build) == previous:
        # The same recipe rebuilt (its folder damaged): a new name, never a rewrite of the served one.
        build = os.path.join(bdir, "%s-%d" % (build_id, int(time.time())))
    elif os.path.lexists(build):
        remove(build)
    os.rename(tmp, build)
    os.utime(build, None)
    flip(path, build)
    return dict(build=build, previous=previous, pruned=prune(path, keep, in_use), cleaned=clean_leftovers(path))


def require_space(folder, need, what):
    """Raise NoSpace, naming the numbers, when folder's filesystem has less than need bytes free."""
    have = weights.free_bytes(folder)
    if have < need:
        raise NoSpace(errno.ENOSPC, "%s needs %.2f GiB on the filesystem of %s, which has %.2f GiB free: "
                      "free space there, or move serving_models_root" % (what, need / 2.0 ** 30, folder, have / 2.0 ** 30))
    return have
