"""Roles used on their own, as a user's playbook would: `roles: [llmops.serving.<role>]`.

On the converged serving host the tokenizer and engine roles alone pass with changed=0 (their
handlers and facts are their own or their dependency's). On the scenario's engine-less client
host they refuse before changing anything, naming the roles that must run first.
Enabled by LLMOPS_RERUN=1 in the scenario's verifier env.
"""
import concurrent.futures
import os
import re
import subprocess
import tempfile

import pytest

pytestmark = [pytest.mark.skipif(os.environ.get("LLMOPS_RERUN") != "1", reason="scenario does not re-run site.yml"),
              pytest.mark.engine_independent]

SUFFIX = os.environ.get("LLMOPS_HOST_SUFFIX", "")
SERVER = "llmops-default" + SUFFIX
CLIENT = os.environ.get("LLMOPS_GATEWAY_CLIENT_HOST", "llmops-default-client" + SUFFIX)
PLAY = "- hosts: %s\n  gather_facts: false\n  roles:\n    - llmops.serving.%s\n"
# What each role alone says is missing on a host where nothing was built.
NEEDS = {"tokenizer": ["llmops.serving.python_env", "llmops.serving.model_weights"],
         "engine": ["llmops.serving.python_env", "llmops.serving.model_weights", "llmops.serving.tokenizer"]}


def alone(role, host, *args):
    with tempfile.NamedTemporaryFile("w", suffix=".yml", prefix="alone-%s-" % role, delete=False) as f:
        f.write(PLAY % (host, role))
    try:
        res = subprocess.run(["ansible-playbook", "-i", os.path.dirname(os.environ["MOLECULE_INVENTORY_FILE"]),
                              f.name] + list(args), capture_output=True, text=True, timeout=900, check=False,
                             env=dict(os.environ, ANSIBLE_FORCE_COLOR="0"))
    finally:
        os.unlink(f.name)
    return res.returncode, res.stdout + res.stderr


def test_roles_alone_pass_on_a_converged_host_and_name_what_is_missing_elsewhere():
    runs = {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
        for role in NEEDS:
            runs[(role, "converged")] = pool.submit(alone, role, SERVER)
            runs[(role, "bare")] = pool.submit(alone, role, CLIENT)
        results = dict((k, f.result()) for k, f in runs.items())
    for role, needs in NEEDS.items():
        rc, out = results[(role, "converged")]
        recap = re.findall(r"^%s\s+: ok=\d+\s+changed=(\d+)" % re.escape(SERVER), out, re.M)
        assert rc == 0 and recap == ["0"], "%s alone on the converged host: rc %s, changed %s\n%s" % (
            role, rc, recap, out[-2500:])
        rc, out = results[(role, "bare")]
        said = " ".join(out.split())
        assert rc != 0 and all(n in said for n in needs), "%s alone on a bare host: rc %s\n%s" % (role, rc, out[-2500:])
        assert re.search(r"^%s\s+: ok=\d+\s+changed=0 " % re.escape(CLIENT), out, re.M), out[-1500:]
