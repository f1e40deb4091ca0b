"""Re-running site.yml against the converged host, as users do: check mode and bad inputs.

- `--check --diff` on a converged host predicts no change: README.md's own command, run by
  tests/integration/test_readme.py.
- Bad inputs fail the play with a message naming the variable, before anything changes: the unit
  file and its environment are untouched and the running engine keeps its process.
Enabled by LLMOPS_RERUN=1 in the scenario's verifier env.
"""
import concurrent.futures
import json
import os
import subprocess

import pytest

pytestmark = pytest.mark.skipif(os.environ.get("LLMOPS_RERUN") != "1", reason="scenario does not re-run site.yml")

ENGINE = os.environ.get("LLMOPS_ENGINE", "vllm")
UNIT = "llmops-%s.service" % ENGINE
SQUAT_PORT = 18555


def playbook(*args, extra=None):
    cmd = ["ansible-playbook", "-i", os.environ["MOLECULE_INVENTORY_FILE"],
           os.path.join(os.environ["MOLECULE_SCENARIO_DIRECTORY"], "converge.yml")] + list(args)
    if extra is not None:
        cmd += ["-e", json.dumps(extra)]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=900, check=False)
    return run.returncode, run.stdout + run.stderr


def snapshot(host):
    return {
        "pid": host.check_output("systemctl show -p MainPID --value %s" % UNIT),
        "unit": host.check_output("sha256sum /etc/systemd/system/%s" % UNIT),
        "env": host.check_output("sha256sum /etc/llmops/%s.env" % ENGINE),
        "link": host.check_output("readlink /opt/llmops/venvs/%s-current" % ENGINE),
    }


BAD_INPUTS = {
    "engine": ({"serving_engine": "tgi"}, "serving_engine"),
    "api_key": ({"serving_api_key": ""}, "serving_api_key"),
    "model_path": ({"serving_model": {"name": "qwen3-tiny", "source": "/srv/models/does-not-exist", "lora": None}},
                   "serving_model.source"),
    "port_taken": ({"serving_listen": "127.0.0.1:%d" % SQUAT_PORT}, "serving_listen"),
    # the tokenizer's template, the gateway's clients and the monitoring role's thresholds
    "chat_template": ({"serving_chat_template": "qwen9"}, "serving_chat_template"),
    "duplicate_client": ({"gateway_api_keys": [{"name": "team-a", "key": "molecule-dup-key-a-0123456789"},
                                               {"name": "team-a", "key": "molecule-dup-key-b-0123456789"}]},
                         "gateway_api_keys"),
    "kv_threshold": ({"monitoring_vllm_kv_cache_usage_max": 1.5}, "monitoring_vllm_kv_cache_usage_max"),
    "kernels_mode": ({"sglang_kernels_mode": "fast"}, "sglang_kernels_mode"),
    # a misspelt spec variable would be ignored and the spec's own value served
    "typo": ({"serving_modle": {"name": "qwen3-32b", "source": "hf://Qwen/Qwen3-32B@main"}},
             "serving_modle is not a variable of the serving spec: did you mean serving_model?"),
    # random weights on a GPU profile
    "synthetic_on_gpu": ({"serving_stack": "cuda12.4",
                          "serving_model": {"name": "qwen3-tiny", "source": "synthetic://qwen3-tiny", "lora": None}},
                         "serving_allow_synthetic"),
}


def test_bad_inputs_fail_before_anything_changes(host):
    before = snapshot(host)
    # Another program holds a port (a transient unit outside our llmops-* names).
    host.run("systemd-run --unit squatter-%d python3 -m http.server %d --bind 127.0.0.1" % (SQUAT_PORT, SQUAT_PORT))
    listening = host.run("for i in $(seq 100); do ss -Hltn 'sport = :%d' | grep -q . && exit 0; sleep 0.1; done; "
                         "exit 1" % SQUAT_PORT)
    try:
        # without it the "port taken" run would really move the engine to that port
        assert listening.rc == 0, "the squatter never listened on %d" % SQUAT_PORT
        with concurrent.futures.ThreadPoolExecutor(max_workers=len(BAD_INPUTS)) as pool:
            runs = dict((name, pool.submit(playbook, extra=extra)) for name, (extra, _) in BAD_INPUTS.items())
            results = dict((name, fut.result()) for name, fut in runs.items())
    finally:
        host.run("systemctl stop squatter-%d" % SQUAT_PORT)
    for name, (extra, variable) in BAD_INPUTS.items():
        rc, out = results[name]
        assert rc != 0, "%s: the play passed with %s" % (name, extra)
        assert variable in out, "%s: the failure does not name %s:\n%s" % (name, variable, out[-2500:])
        # It stopped in the read-only plays: no task of the changing roles ran.
        assert "Serve a Qwen chat model" not in out, "%s: reached the changing play" % name
    assert snapshot(host) == before
    assert host.service(UNIT).is_running
