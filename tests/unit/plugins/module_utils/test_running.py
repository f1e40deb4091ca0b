# -*- coding: utf-8 -*-
"""running: the builds a running engine started on, read from real processes' /proc entries (only
the engine units' cgroups, which need systemd, are written by hand), and the prunes that spare them."""
import os
import subprocess
import sys
import time

import pytest

from ansible_collections.llmops.serving.plugins.module_utils import builds, running, venvs

OLD, OLDER, OLDEST = time.time() - 3600, time.time() - 7200, time.time() - 10800


def folder(parent, name, mtime, files=("lib.so",)):
    d = parent / name
    d.mkdir(parents=True)
    for f in files:
        (d / f).write_bytes(b"\0" * 4096)
    os.utime(str(d), (mtime, mtime))
    return str(d)


@pytest.fixture
def engine():
    """A real process standing in for an engine: it maps a file of the folder it is given (as a
    venv's extension modules are mapped) and closes it, then sleeps."""
    procs = []

    def start(path):
        code = ("import mmap, sys, time\n"
                "f = open(sys.argv[1], 'r+b'); m = mmap.mmap(f.fileno(), 0); f.close()\n"
                "print('mapped', flush=True); time.sleep(60)\n")
        proc = subprocess.Popen([sys.executable, "-c", code, path], stdout=subprocess.PIPE, text=True)
        assert proc.stdout.readline().strip() == "mapped"
        procs.append(proc)
        return proc.pid

    yield start
    for proc in procs:
        proc.kill()
        proc.wait()


def test_a_build_mapped_by_an_engine_is_in_use_and_so_is_the_newest_published_before_it_started(tmp_path, engine):
    mapped = folder(tmp_path, "b-oldest", OLDEST)
    before_start = folder(tmp_path, "b-older", OLDER)
    folder(tmp_path, "b-oldest-unused", OLDEST - 60)
    pid = engine(os.path.join(mapped, "lib.so"))
    after_start = folder(tmp_path, "b-new", time.time() + 60)
    candidates = [str(p) for p in tmp_path.iterdir()]
    assert running.in_use(candidates, pids=[pid]) == sorted([mapped, before_start])
    assert after_start not in running.in_use(candidates, pids=[pid])
    assert running.in_use(candidates, pids=[]) == []
    # venvs: only what the process maps
    assert running.in_use(candidates, pids=[pid], by_start=False) == [mapped]


def test_a_process_that_ended_uses_nothing(tmp_path, engine):
    build = folder(tmp_path, "b", OLD)
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    assert running.in_use([build], pids=[proc.pid]) == []


def test_start_time_is_the_process_start(engine, tmp_path):
    began = time.time()
    pid = engine(folder(tmp_path, "b", OLD) + "/lib.so")
    assert began - 2 <= running.start_time(pid) <= time.time() + 1


@pytest.mark.parametrize("lines, ours", [
    # cgroup v2: one line
    ("0::/system.slice/llmops-vllm.service\n", True),
    # a host with several instances: the replica's unit
    ("0::/system.slice/llmops-vllm-r1.service\n", True),
    # cgroup v1 / hybrid: several hierarchies, the unit named in some
    ("12:pids:/system.slice/llmops-sglang.service\n1:name=systemd:/system.slice/llmops-sglang.service\n0::/\n", True),
    # seen from a container host: the unit inside a container's scope
    ("0::/machine.slice/libpod-0a1b.scope/container/system.slice/llmops-vllm.service\n", True),
    ("0::/system.slice/nginx.service\n", False),
    ("0::/system.slice/llmops-vllm.service.d/x.scope\n", False),
    ("0::/user.slice/user-0.slice/session-1.scope\n", False),
])
def test_engine_pids_are_the_processes_of_the_collections_units(tmp_path, lines, ours):
    (tmp_path / "412").mkdir()
    (tmp_path / "412" / "cgroup").write_text(lines)
    (tmp_path / "413").mkdir()  # ended while listed: no cgroup file
    (tmp_path / "self").mkdir()
    assert running.engine_pids(str(tmp_path)) == ([412] if ours else [])


def test_a_weights_prune_spares_the_build_an_engine_started_on(tmp_path, engine):
    served = str(tmp_path / "qwen")
    one = builds.publish(folder(tmp_path, ".qwen.build-a", OLD, ["model.safetensors"]), served, "b1")["build"]
    os.utime(one, (OLDER, OLDER))
    pid = engine(os.path.join(one, "model.safetensors"))
    builds.publish(folder(tmp_path, ".qwen.build-b", OLD, ["model.safetensors"]), served, "b2")
    in_use = running.in_use(builds.all_builds(served), pids=[pid])
    assert in_use == [one]
    third = builds.publish(folder(tmp_path, ".qwen.build-c", OLD, ["model.safetensors"]), served, "b3", keep=1,
                           in_use=in_use)
    # b1 (the engine's) and b2 (the one served before) stay; without the engine b1 would go
    assert third["pruned"] == [] and os.path.isdir(one)
    fourth = builds.publish(folder(tmp_path, ".qwen.build-d", OLD, ["model.safetensors"]), served, "b4", keep=1)
    assert sorted(os.path.basename(p) for p in fourth["pruned"]) == ["b1", "b2"]


def test_venv_prune_keeps_the_newest_besides_the_serving_and_spares_the_protected(tmp_path):
    root = tmp_path / "venvs"
    stale = folder(root, "vllm-0.29.0-000000000000", OLDEST)
    a = folder(root, "vllm-0.30.0-aaaaaaaaaaaa", OLDER)
    b = folder(root, "vllm-0.31.0-bbbbbbbbbbbb", OLD)
    c = folder(root, "vllm-0.32.0-cccccccccccc", time.time())
    folder(root, "sglang-0.5.23-dddddddddddd", OLDEST)
    os.symlink(c, str(root / "vllm-current"))
    found = venvs.engine_venvs(str(root), "vllm")
    assert found == [stale, a, b, c]
    # keep 1 besides the current: b stays, a and the stale one go
    assert venvs.choose(found, 1, [c], []) == [stale, a]
    # the rollback slot's venv (a) is spared and takes no extra place
    assert venvs.choose(found, 1, [c], [a]) == [stale]
    assert venvs.choose(found, 0, [c], []) == [stale, a, b]


def test_venv_remove_takes_the_copied_locks_along(tmp_path):
    root = tmp_path / "venvs"
    old = folder(root, "vllm-0.30.0-aaaaaaaaaaaa", OLD)
    keep = folder(root, "vllm-0.31.0-bbbbbbbbbbbb", OLD)
    (root / ".locks").mkdir()
    for name in ("vllm-0.30.0-aaaaaaaaaaaa.txt", "vllm-0.30.0-aaaaaaaaaaaa.ray.txt", "vllm-0.31.0-bbbbbbbbbbbb.txt"):
        (root / ".locks" / name).write_text("x")
    venvs.remove(str(root), [old])
    assert not os.path.exists(old) and os.path.isdir(keep)
    assert sorted(os.listdir(str(root / ".locks"))) == ["vllm-0.31.0-bbbbbbbbbbbb.txt"]
