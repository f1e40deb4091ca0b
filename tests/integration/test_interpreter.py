# -*- coding: utf-8 -*-
# Copyright: llmops.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The serving host is Debian 13, which ships Python 3.13; the cpu profile's locks are for 3.11.
python_env gave it the standalone CPython build from the (stand-in) release mirror the scenario
serves on the host, and the engine runs on it. The install path itself: from the mirror into a new
root (check mode first, then after an interrupted unpack), unchanged on a second run, and refused
when the archive does not match its pinned checksum.
"""
import json
import os
import re
import subprocess
import tempfile

import pytest

pytestmark = [pytest.mark.skipif(os.environ.get("LLMOPS_RERUN") != "1", reason="scenario does not re-run site.yml"),
              pytest.mark.engine_independent]

SERVER = "llmops-default" + os.environ.get("LLMOPS_HOST_SUFFIX", "")
ENGINE = os.environ.get("LLMOPS_ENGINE", "vllm")
with open(os.path.join(os.environ["LLMOPS_CACHE"], "python-mirror", "vars.json")) as _f:
    BUILD = json.load(_f)["python_env_interpreter_builds"]["3.11"]
HOME = "/opt/llmops/python/cpython-%s+%s" % (BUILD["version"], BUILD["release"])
PLAY = """- hosts: %s
  gather_facts: true
  tasks:
    - ansible.builtin.include_role: {name: llmops.serving.python_env, tasks_from: interpreter_facts.yml}
    - ansible.builtin.debug: {msg: "CHOICE {{ python_env_interpreter_choice.summary | default(python_env_interpreter_choice.error) }}"}
    - ansible.builtin.include_role: {name: llmops.serving.python_env, tasks_from: interpreter.yml}
""" % SERVER


def install(*args):
    with tempfile.NamedTemporaryFile("w", suffix=".yml", prefix="interpreter-", delete=False) as f:
        f.write(PLAY)
    try:
        res = subprocess.run(["ansible-playbook", "-i", os.path.dirname(os.environ["MOLECULE_INVENTORY_FILE"]), f.name]
                             + list(args), capture_output=True, text=True, timeout=600, check=False,
                             env=dict(os.environ, ANSIBLE_FORCE_COLOR="0"))
    finally:
        os.unlink(f.name)
    out = res.stdout + res.stderr
    changed = re.findall(r"^%s\s+: ok=\d+\s+changed=(\d+)" % re.escape(SERVER), out, re.M)
    return res.returncode, int(changed[0]) if changed else None, out


def test_the_engine_runs_on_the_standalone_build_debian13_lacks(host):
    assert host.file("/etc/debian_version").content_string.startswith("13")
    assert host.run("command -v python3.11").rc != 0, "Debian 13 has no python3.11: the build is what serves"
    venv = host.check_output("readlink -f /opt/llmops/venvs/%s-current" % ENGINE)
    for python in (venv + "/bin/python", "/opt/llmops/tools/bin/python"):
        assert host.check_output(python + " -c 'import sys; print(sys.base_prefix)'") == HOME
    pid = host.check_output("systemctl show -p MainPID --value llmops-%s.service" % ENGINE)
    # (the exe link needs ptrace rights the test's exec lacks; the command line names the same file)
    argv0 = host.check_output("tr '\\0' '\\n' < /proc/%s/cmdline | head -n1" % pid)
    assert host.check_output("readlink -f %s" % argv0) == HOME + "/bin/python3.11", argv0


def test_the_build_installs_from_the_mirror_predicts_in_check_mode_and_refuses_a_wrong_checksum(host):
    root = "/var/tmp/llmops-test-python"
    home = "%s/cpython-%s+%s" % (root, BUILD["version"], BUILD["release"])
    host.run("rm -rf %s" % root)
    try:
        rc, changed, out = install("--check", "-e", "python_env_interpreter_root=" + root)
        assert rc == 0 and changed and changed > 0, out[-3000:]
        assert not host.file(home).exists, "check mode unpacked the build"
        # the scenario's mirror, not the wheelhouse the rest of the scenario installs from
        assert "CHOICE standalone CPython %s (%s) from http://127.0.0.1:8766" % (BUILD["version"], BUILD["release"]) in out
        # an unpack interrupted by an earlier run
        host.run("mkdir -p %s.partial/bin && echo broken > %s.partial/bin/python3.11" % (home, home))
        rc, changed, out = install("-e", "python_env_interpreter_root=" + root)
        assert rc == 0 and changed > 0, out[-3000:]
        assert host.check_output(home + "/bin/python3.11 -I -c 'import ssl, sqlite3; print(ssl.OPENSSL_VERSION)'").startswith("OpenSSL")
        assert not host.file(home + ".partial").exists
        assert host.check_output("ls -A %s/.downloads" % root) == "", "the downloaded archive was kept"
        rc, changed, out = install("-e", "python_env_interpreter_root=" + root)
        assert (rc, changed) == (0, 0), out[-3000:]
        # the mirror's archive against a checksum it does not have: nothing is unpacked
        wrong = {"3.11": dict(BUILD, sha256={"x86_64": "0" * 64})}
        rc, changed, out = install("-e", "python_env_interpreter_root=%s/wrong" % root,
                                   "-e", json.dumps({"python_env_interpreter_builds": wrong}))
        assert rc != 0 and re.search(r"checksum", out, re.I) and "0" * 64 in out, out[-3000:]
        assert host.run("ls %s/wrong/cpython-*" % root).rc != 0
    finally:
        host.run("rm -rf %s" % root)


# A module of each engine's registry serving_modules, as a path under site-packages
SERVING_MODULE = {"vllm": "vllm/entrypoints/openai/api_server", "sglang": "sglang/srt/managers/scheduler"}


def test_the_venv_holds_the_bytecode_of_the_engines_serving_modules_not_of_every_file(host):
    """The install compiles nothing; python_env's import of the engine's serving modules, as root,
    writes their bytecode (the engine's user cannot write into the venv)."""
    venv = host.check_output("readlink -f /opt/llmops/venvs/%s-current" % ENGINE)
    site, tag = host.check_output(
        venv + "/bin/python -c 'import sys, sysconfig; print(sysconfig.get_paths()[\"purelib\"], sys.implementation.cache_tag)'"
    ).split()
    module = os.path.join(site, SERVING_MODULE[ENGINE])
    cached = os.path.join(os.path.dirname(module), "__pycache__", "%s.%s.pyc" % (os.path.basename(module), tag))
    assert host.file(module + ".py").exists and host.file(cached).exists, cached
    sources = int(host.check_output("find %s -name '*.py' | wc -l" % site))
    compiled = int(host.check_output("find %s -name '*.pyc' | wc -l" % site))
    print("%s: %d of %d modules compiled" % (os.path.basename(venv), compiled, sources))
    assert compiled < sources / 2, (compiled, sources)
