"""Switching a converged host to the other engine (scenario env LLMOPS_SWITCH_TO).

Runs site.yml again with serving_engine changed, as a user would, then checks that the old unit is
stopped and disabled, the new one serves on the same listen address, and nothing else runs.
Runs last in the scenario (pytest orders files by name), because it changes the host.
"""
import json
import os
import shlex
import subprocess

import pytest

SWITCH_TO = os.environ.get("LLMOPS_SWITCH_TO")
ENGINE = os.environ.get("LLMOPS_ENGINE", "vllm")
LISTEN = os.environ.get("LLMOPS_LISTEN", "127.0.0.1:8000")
API_KEY = os.environ.get("LLMOPS_API_KEY", "")
MODEL = os.environ.get("LLMOPS_MODEL", "qwen3-tiny")

pytestmark = pytest.mark.skipif(not SWITCH_TO, reason="this scenario does not switch engines")


def converge(extra_vars):
    inventory = os.environ["MOLECULE_INVENTORY_FILE"]
    playbook = os.path.join(os.environ["MOLECULE_SCENARIO_DIRECTORY"], "converge.yml")
    cmd = ["ansible-playbook", "-i", inventory, playbook, "-e", json.dumps(extra_vars)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=1500, check=False)


def test_switch_engine_keeps_the_endpoint(host):
    old_unit, new_unit = "llmops-%s.service" % ENGINE, "llmops-%s.service" % SWITCH_TO
    run = converge({"serving_engine": SWITCH_TO})
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]

    assert not host.service(old_unit).is_running
    assert not host.service(old_unit).is_enabled
    assert host.service(new_unit).is_running and host.service(new_unit).is_enabled
    # Only the new engine's processes remain under llmops-*.service cgroups.
    running = host.check_output("systemctl list-units 'llmops-*' --state=running --no-legend --plain | awk '{print $1}'")
    assert running.split() == [new_unit]

    body = json.dumps({"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4})
    out = host.check_output("curl -s -m 60 -H %s -H 'Content-Type: application/json' -d %s http://%s/v1/chat/completions"
                            % (shlex.quote("Authorization: Bearer " + API_KEY), shlex.quote(body), LISTEN))
    resp = json.loads(out)
    assert resp["usage"]["completion_tokens"] > 0
    # vLLM fingerprints its responses; SGLang does not.
    assert ("vllm" in (resp.get("system_fingerprint") or "")) == (SWITCH_TO == "vllm")
