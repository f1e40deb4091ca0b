# Copyright: llmops.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""`make demo` as README.md tells a new user to run it, on a fresh host of its own: vLLM first, then
`ENGINE=sglang make demo` switching the same host to SGLang. Each engine's first run must serve an
answer through the gateway with the README's curl command, and its documented re-run must converge
with changed=0. The host is removed at the end (`make demo-down`). A user's own demo host
(llmops-demo) is left alone: this one has another name and port (DEMO_NAME, DEMO_PORT)."""
import json
import os
import re
import socket
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CACHE = os.environ.get("LLMOPS_CACHE", os.path.expanduser("~/.cache/llmops-serving"))
NAME = "llmops-demo-proof" + os.environ.get("LLMOPS_HOST_SUFFIX", "")


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def demo():
    env = dict(os.environ, DEMO_NAME=NAME, DEMO_PORT=str(free_port()), ANSIBLE_FORCE_COLOR="false",
               ANSIBLE_NOCOLOR="true")
    make(env, "demo-down")
    yield env
    make(env, "demo-down")


def make(env, target, **more):
    run = subprocess.run(["make", "--no-print-directory", "-C", ROOT, target], env=dict(env, **more),
                         capture_output=True, text=True, timeout=1800, check=False)
    return run.returncode, run.stdout + run.stderr


def recap(out):
    """The demo host's line of the last PLAY RECAP: {ok, changed, failed, ...}."""
    lines = re.findall(r"^llmops-demo\s+:\s+(.*)$", out, re.M)
    assert lines, out[-3000:]
    return dict((k, int(v)) for k, v in re.findall(r"(\w+)=(\d+)", lines[-1]))


def why(out):
    fatal = re.findall(r"^fatal: .*$", out, re.M)
    return "%s\n%s" % (" | ".join(fatal)[:1500] or "no fatal line", out[-3000:])


def readme_curl(env):
    """README.md's request, as printed by make demo: curl through the gateway with the client key."""
    key = open(os.path.join(CACHE, "demo", "client_key")).read().strip()
    body = {"model": "qwen3-tiny", "messages": [{"role": "user", "content": "Hello"}], "max_tokens": 16}
    run = subprocess.run(["curl", "-sk", "-w", "\n%{http_code}", "https://127.0.0.1:%s/v1/chat/completions" % env["DEMO_PORT"],
                          "-H", "Authorization: Bearer " + key, "-H", "Content-Type: application/json",
                          "-d", json.dumps(body)], capture_output=True, text=True, timeout=120, check=False)
    text, dummy, status = run.stdout.rpartition("\n")
    return status, text


def active_engine():
    out = subprocess.run(["podman", "exec", NAME, "systemctl", "is-active", "llmops-vllm", "llmops-sglang"],
                         capture_output=True, text=True, check=False,
                         env=dict(os.environ, CONTAINERS_CONF=os.path.join(CACHE, "containers.conf"))).stdout.split()
    return dict(zip(["vllm", "sglang"], out))


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_make_demo_serves_through_the_gateway_and_its_rerun_changes_nothing(demo, engine):
    rc, out = make(demo, "demo", ENGINE=engine)
    assert rc == 0, why(out)
    first = recap(out)
    assert first["failed"] == 0 and first["changed"] > 0, first
    print("%s: %s" % (engine, re.findall(r"^converged in \d+ s$", out, re.M)))
    assert active_engine() == dict((e, "active" if e == engine else "inactive") for e in ("vllm", "sglang"))
    status, text = readme_curl(demo)
    assert status == "200", text[:500]
    answer = json.loads(text)
    choice = answer["choices"][0]
    assert answer["model"] == "qwen3-tiny" and choice["message"]["role"] == "assistant", answer
    # random weights: nonsense text, but real tokens up to the cap (or a stop token)
    assert choice["finish_reason"] in ("length", "stop") and 0 < answer["usage"]["completion_tokens"] <= 16, answer
    assert choice["finish_reason"] == "stop" or answer["usage"]["completion_tokens"] == 16, answer
    rc, out = make(demo, "demo", ENGINE=engine)
    assert rc == 0, why(out)
    again = recap(out)
    assert again["failed"] == 0 and again["changed"] == 0, "the documented re-run changed %s" % again
    print("%s re-run: %s, %s" % (engine, again, re.findall(r"^RUN COST .*$", out, re.M)))
