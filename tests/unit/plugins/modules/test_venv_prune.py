# -*- coding: utf-8 -*-
"""venv_prune as Ansible runs it: an engine that a held-back restart left on a venv the current link
no longer names keeps that venv (a real process maps its file; only its unit's cgroup is stood in)."""
import os
import subprocess
import sys
import time

import pytest
import yaml

from ansible_collections.llmops.serving.plugins.module_utils import running
from ansible_collections.llmops.serving.plugins.modules import venv_prune as module

from .module_harness import run_module

RETURNS = yaml.safe_load(module.RETURN)


def venv(root, name, age):
    d = root / name
    (d / "lib").mkdir(parents=True)
    (d / "lib" / "_C.so").write_bytes(b"\0" * 4096)
    mtime = time.time() - age
    os.utime(str(d), (mtime, mtime))
    return str(d)


def never(self, argv, **kwargs):
    raise AssertionError("no command is run: %s" % argv)


@pytest.fixture
def fleet_host(tmp_path, monkeypatch):
    """Three vllm venvs: the engine still runs on the oldest (its restart onto the others was held
    back), the current link names the newest."""
    root = tmp_path / "venvs"
    running_on = venv(root, "vllm-0.30.0-aaaaaaaaaaaa", 30000)
    middle = venv(root, "vllm-0.31.0-bbbbbbbbbbbb", 20000)
    newest = venv(root, "vllm-0.32.0-cccccccccccc", 10)
    os.symlink(newest, str(root / "vllm-current"))
    (root / ".locks").mkdir()
    (root / ".locks" / "vllm-0.30.0-aaaaaaaaaaaa.txt").write_text("lock")
    code = ("import mmap, sys, time\n"
            "f = open(sys.argv[1], 'r+b'); m = mmap.mmap(f.fileno(), 0); f.close()\n"
            "print('mapped', flush=True); time.sleep(60)\n")
    proc = subprocess.Popen([sys.executable, "-c", code, os.path.join(running_on, "lib", "_C.so")],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "mapped"
    # the newest venv was built after the engine started (the upgrade that built it held its restart)
    future = time.time() + 60
    os.utime(newest, (future, future))
    monkeypatch.setattr(running, "engine_pids", lambda proc_root=running.PROC: [proc.pid])
    yield root, running_on, middle, newest
    proc.kill()
    proc.wait()


def args(root, **more):
    return dict(root=str(root), engine="vllm", current_link=str(root / "vllm-current"), keep=0, **more)


def test_the_venv_a_running_engine_started_on_is_never_removed(monkeypatch, fleet_host):
    root, running_on, middle, newest = fleet_host
    kind, result = run_module(monkeypatch, module, args(root), never, failed_key=True)
    assert not result.get("failed"), result
    assert result["removed"] == [middle] and result["in_use"] == [running_on]
    assert os.path.isdir(running_on) and os.path.isdir(newest) and not os.path.exists(middle)
    assert os.path.exists(str(root / ".locks" / "vllm-0.30.0-aaaaaaaaaaaa.txt"))
    assert set(result) >= set(RETURNS)


def test_check_mode_reports_and_removes_nothing(monkeypatch, fleet_host):
    root, running_on, middle, newest = fleet_host
    kind, result = run_module(monkeypatch, module, args(root), never, check_mode=True, failed_key=True)
    assert result["changed"] and result["removed"] == [middle] and os.path.isdir(middle)


def test_a_negative_keep_is_refused_by_name(monkeypatch, fleet_host):
    root = fleet_host[0]
    kind, result = run_module(monkeypatch, module, dict(args(root), keep=-1), never, failed_key=True)
    assert result["failed"] and "python_env_keep_previous" in result["msg"]
