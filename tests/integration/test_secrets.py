"""No key in Ansible's output: the scenario's converge ran at -vvv (tests/harness/run-scenarios.sh
writes it to LLMOPS_CONVERGE_LOG) and not one key it set, nor the admin key the engine role made on
the host, appears in it. The engine's admin routes take only the admin key.

Run by the default scenario's verifier (testinfra, podman backend), on both engines.
"""
import os
import shlex

import pytest

ENGINE = os.environ.get("LLMOPS_ENGINE", "vllm")
LISTEN = os.environ.get("LLMOPS_LISTEN", "127.0.0.1:8000")
ENGINE_KEY = os.environ["LLMOPS_API_KEY"]
CLIENT_KEYS = [kv.split("=", 1)[1] for kv in os.environ.get("LLMOPS_GATEWAY_KEYS", "").split(",") if "=" in kv]
LOG = os.environ.get("LLMOPS_CONVERGE_LOG", "")
ADMIN_KEY_FILE = "/etc/llmops/%s-admin.key" % ENGINE

pytestmark = pytest.mark.skipif(not CLIENT_KEYS, reason="no gateway keys in this scenario")


def admin_key(host):
    f = host.file(ADMIN_KEY_FILE)
    return f.content_string.strip() if f.exists else ""


@pytest.mark.skipif(not LOG, reason="the converge was not run at -vvv by tests/harness/run-scenarios.sh")
def test_no_key_in_the_verbose_converge_output(host):
    with open(LOG, errors="replace") as handle:
        text = handle.read()
    # a -vvv log of a real converge: module invocations and the play recap are in it
    assert "PLAY RECAP" in text and '"invocation"' in text and len(text) > 200000, (LOG, len(text))
    keys = {"serving_api_key": ENGINE_KEY}
    keys.update(("gateway_api_keys[%d]" % i, k) for i, k in enumerate(CLIENT_KEYS))
    if admin_key(host):
        keys["the admin key made on the host"] = admin_key(host)
    found = sorted(label for label, key in keys.items() if key in text)
    print("-vvv converge log %s: %d bytes, %d keys looked for, found: %s" % (LOG, len(text), len(keys), found or "none"))
    assert found == [], "keys printed in %s: %s" % (LOG, found)


def curl(host, path, key, method="POST"):
    return host.check_output("curl -s -o /dev/null -w '%%{http_code}' -m 30 -X %s -H %s http://%s%s"
                             % (method, shlex.quote("Authorization: Bearer %s" % key), LISTEN, path))


def test_admin_routes_take_only_the_admin_key(host):
    env = host.file("/etc/llmops/%s.env" % ENGINE).content_string
    if ENGINE == "vllm":
        # vLLM has no admin routes of its own: no admin key is made or passed
        assert not host.file(ADMIN_KEY_FILE).exists and "ADMIN" not in env
        return
    assert host.file(ADMIN_KEY_FILE).mode == 0o640 and host.file(ADMIN_KEY_FILE).user == "root"
    assert "LLMOPS_SGLANG_ADMIN_API_KEY_FILE=" in env
    # /flush_cache drops the radix cache: an admin route, harmless on a test host
    assert curl(host, "/flush_cache", ENGINE_KEY) == "401"
    assert curl(host, "/flush_cache", admin_key(host)) == "200"
    # ...while the engine key still serves the OpenAI routes
    assert curl(host, "/v1/models", ENGINE_KEY, method="GET") == "200"
    cmdline = host.check_output("cat /proc/$(systemctl show -p MainPID --value llmops-sglang.service)/cmdline | tr '\\0' ' '")
    assert admin_key(host) not in cmdline and ENGINE_KEY not in cmdline
