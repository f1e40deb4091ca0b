# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmops.serving maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What read-only probes printed in an engine venv, kept so that re-runs need not ask again.

The engine's flag parser and the tokenizer check start the venv's Python and import the engine or
transformers: 10-20 s per probe on a small host, on every run of a playbook, though nothing they
read has changed. A venv of this collection is not modified after it is built (its folder name
carries engine, version and lock digest; a new lock builds a new folder), so the answer of a probe
for one venv and one exact input (argv, standard input, environment, and the bytes of the files it
names in `inputs`) stays true while that venv exists.

The key names the venv by its real folder and the inode and modification time of its pyvenv.cfg,
so a venv removed and built again under the same name is asked afresh. Only runs that exit 0 are
kept; each in a file of its own, written whole (rename), mode 0600 in a folder of mode 0700.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json
import os
import tempfile

KEY_VERSION = 1


def venv_identity(python):
    """(real venv folder, inode, mtime_ns of pyvenv.cfg) of an interpreter `<venv>/bin/python`, or
    None when it is not the interpreter of a venv."""
    venv = os.path.realpath(os.path.dirname(os.path.dirname(os.path.abspath(python))))
    try:
        st = os.stat(os.path.join(venv, "pyvenv.cfg"))
    except OSError:
        return None
    return [venv, st.st_ino, st.st_mtime_ns]


def file_digest(path):
    """sha256 of a file's bytes, or None when it cannot be read (the probe then reports it)."""
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
    except (IOError, OSError):
        return None
    return digest.hexdigest()


def probe_key(identity, argv, data, env, inputs):
    """The cache key: every input the probe's answer depends on."""
    material = {
        "version": KEY_VERSION, "venv": identity, "argv": list(argv), "data": data,
        "env": sorted((env or {}).items()),
        "inputs": [[os.path.realpath(p), file_digest(p)] for p in sorted(inputs or [])],
    }
    return hashlib.sha256(json.dumps(material, sort_keys=True).encode("utf-8")).hexdigest()


def _load(path):
    try:
        with open(path) as f:
            kept = json.load(f)
        return 0, kept["stdout"], kept["stderr"]
    except (IOError, OSError, ValueError, KeyError, TypeError):
        return None


def _store(cache_dir, path, out, err):
    try:
        if not os.path.isdir(cache_dir):
            os.makedirs(cache_dir, 0o700)
        fd, tmp = tempfile.mkstemp(dir=cache_dir, prefix=".tmp-")
        with os.fdopen(fd, "w") as f:
            json.dump({"stdout": out, "stderr": err}, f)
        os.replace(tmp, path)
    except (IOError, OSError):
        # A cache that cannot be written costs the next run a probe, nothing else.
        pass


def memoized(runner, cache_dir, python, inputs=(), store=True):
    """A runner like `runner` (argv, data, env) -> (rc, stdout, stderr) whose successful answers for
    the venv of `python` are kept in `cache_dir` (read only with store=False, as in check mode).
    With no cache_dir, or when `python` is not a venv's interpreter, it runs `runner` every time.
    The wrapper's `.hits` lists the keys answered from the cache."""
    identity = venv_identity(python) if cache_dir else None
    if identity is None:
        def plain(argv, data=None, env=None):
            return runner(argv, data, env)
        plain.hits = []
        return plain

    def run(argv, data=None, env=None):
        path = os.path.join(cache_dir, probe_key(identity, argv, data, env, inputs) + ".json")
        kept = _load(path)
        if kept is not None:
            run.hits.append(os.path.basename(path))
            return kept
        rc, out, err = runner(argv, data, env)
        if rc == 0 and store:
            _store(cache_dir, path, out, err)
        return rc, out, err
    run.hits = []
    return run
