"""Re-running site.yml against the converged host, as users do: check mode and bad inputs.

- `--check --diff` on a converged host predicts no change: README.md's own command, run by
  tests/integration/test_readme.py.
- Bad inputs fail the play with a message naming the variable, before anything changes: the unit
  file and its environment are untouched and the running engine keeps its process.
Enabled by LLMOPS_RERUN=1 in the scenario's verifier env.
"""
import concurrent.futures
import datetime
import json
import os
import re
import subprocess

import pytest

pytestmark = pytest.mark.skipif(os.environ.get("LLMOPS_RERUN") != "1", reason="scenario does not re-run site.yml")

ENGINE = os.environ.get("LLMOPS_ENGINE", "vllm")
UNIT = "llmops-%s.service" % ENGINE
SQUAT_PORT = 18555
GATEWAY_SQUAT_PORT = 18556
ENGINE_KEY = os.environ.get("LLMOPS_API_KEY", "")
CERT = "/etc/nginx/llmops/gateway.crt"
# The recorded H200's nvidia-smi -q -x, which a stand-in nvidia-smi prints (the test host has no GPU)
SMI_XML = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "gpu", "h200-x2-live",
                       "nvidia-smi-q.xml")
GPU_WORK = "/var/lib/llmops-rollout-gpu-test"


def certificate(days, key=None):
    """(certificate PEM, private key PEM): self-signed, valid from `days` ago if days < 0."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID
    key = key or ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, u"llmops-test")])
    now = datetime.datetime.now(datetime.timezone.utc)
    start, end = (now + datetime.timedelta(days=days - 30), now + datetime.timedelta(days=days)) if days < 0 else \
        (now - datetime.timedelta(days=1), now + datetime.timedelta(days=days))
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(start).not_valid_after(end)
            .sign(key, hashes.SHA256()))
    pem_key = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption()).decode()
    return cert.public_bytes(serialization.Encoding.PEM).decode(), pem_key


def tls_inputs():
    from cryptography.hazmat.primitives.asymmetric import ec
    good_cert, good_key = certificate(365)
    other_key = certificate(365, key=ec.generate_private_key(ec.SECP256R1()))[1]
    expired_cert, expired_key = certificate(-1)
    return {
        "tls_key_mismatch": ({"gateway_tls_certificate": good_cert, "gateway_tls_private_key": other_key},
                             "does not belong to gateway_tls_private_key"),
        "tls_expired": ({"gateway_tls_certificate": expired_cert, "gateway_tls_private_key": expired_key},
                        "gateway_tls_certificate has expired"),
    }


def playbook(*args, extra=None):
    cmd = ["ansible-playbook", "-i", os.environ["MOLECULE_INVENTORY_FILE"],
           os.path.join(os.environ["MOLECULE_SCENARIO_DIRECTORY"], "converge.yml")] + list(args)
    if extra is not None:
        cmd += ["-e", json.dumps(extra)]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=900, check=False)
    return run.returncode, run.stdout + run.stderr


def stand_in_smi(host, xml_text, work):
    """An nvidia-smi in `work` that prints recorded output (the test host has no GPU driver)."""
    host.run("mkdir -p %s" % work)
    host.run("cat > %s/nvidia-smi-q.xml <<'EOF'\n%s\nEOF" % (work, xml_text))
    host.run("printf '#!/bin/sh\\n[ \"$1 $2\" = \"-q -x\" ] && exec cat %s/nvidia-smi-q.xml\\nexit 9\\n' > %s/nvidia-smi"
             " && chmod 0755 %s/nvidia-smi" % (work, work, work))


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
    # a host the pool budget would not count (as with -e serving_hosts=<a group outside it>)
    "outside_pool_group": ({"rollout_pool_group": "llm_canaries"}, "is not in group llm_canaries (rollout_pool_group)"),
    # alerts that reach no one: neither a webhook nor receivers, and no opt-out
    "no_alert_receiver": ({"monitoring_alert_webhook_url": ""}, "monitoring_alerts_undelivered: true"),
    # keys as users really type them
    "client_key_short": ({"gateway_api_keys": [{"name": "team-a", "key": "short-key-1"}]},
                         "gateway_api_keys[0] (team-a) is shorter than 16"),
    "engine_key_placeholder": ({"serving_api_key": "replace-with-openssl-rand-hex-32"},
                               "serving_api_key looks like a placeholder"),
    "client_key_quote_dollar": ({"gateway_api_keys": [{"name": "team-a", "key": 'molecule-"key"-$HOME-0123456789'}]},
                                "gateway_api_keys[0] (team-a) holds a double quote, a dollar sign"),
    "client_key_is_engine_key": ({"gateway_api_keys": [{"name": "team-a", "key": ENGINE_KEY}]},
                                 "the key of team-a is the engine key"),
    "no_client_keys": ({"gateway_api_keys": []}, "gateway_api_keys is empty"),
    "monitoring_cidr": ({"gateway_monitoring_cidrs": ["10.0.0.300/24"]}, "gateway_monitoring_cidrs"),
    "gateway_port_taken": ({"gateway_listen": "0.0.0.0:%d" % GATEWAY_SQUAT_PORT},
                           "port %d on" % GATEWAY_SQUAT_PORT),
    "old_tls": ({"gateway_tls_protocols": ["TLSv1", "TLSv1.2"]}, "gateway_tls_protocols"),
    "engine_env_dollar": ({"engine_environment": {"HOME_COPY": "$HOME"}}, "engine_environment"),
    # an engine on a network address with no gateway group and no allowed addresses (this scenario has neither)
    "engine_open_network": ({"serving_listen": "0.0.0.0:8000"}, "engine_allow_open_network: true"),
    # the validate benchmark would send the API key in clear to another host
    "validate_url_plain_http": ({"validate_engine_url": "http://10.0.0.5:8000"}, "validate_engine_url a base URL over https"),
    "kernels_mode": ({"sglang_kernels_mode": "fast"}, "sglang_kernels_mode"),
    # a type that only the roles' argument specs check: refused with the input checks, not by the
    # play that would change the gateway after the engines were rolled
    "gateway_burst_type": ({"gateway_burst_per_key": "lots"}, "argument 'gateway_burst_per_key' is of type str"),
    "engine_timeout_type": ({"engine_readiness_timeout": "soon"}, "argument 'engine_readiness_timeout' is of type str"),
    # a misspelt spec variable would be ignored and the spec's own value served
    "typo": ({"serving_modle": {"name": "qwen3-32b", "source": "hf://Qwen/Qwen3-32B@main"}},
             "serving_modle is not a variable of the serving spec: did you mean serving_model?"),
    "tool_calling": ({"serving_tool_calling": "maybe"}, "serving_tool_calling must be auto, true or false"),
    "speculative_method": ({"serving_speculative": {"method": "medusa"}}, "serving_speculative (spec.speculative) needs a method"),
    "chunked_prefill_key": ({"serving_chunked_prefill": {"chunk_size": 2048}},
                            "serving_chunked_prefill takes chunk_tokens and long_prefill_threshold only"),
    "long_context_shape": ({"serving_long_context": {"factor": 4}}, "serving_long_context (spec.long_context) must be"),
    "priority_unsupported": ({"serving_engine": "sglang", "serving_stack": "cuda12.4", "serving_allow_synthetic": True,
                              "serving_priority_scheduling": True},
                             "serving_priority_scheduling: SGLang 0.4.6.post5 has no flag for it"),
    # TLS on the engine's port asked of an SGLang that has no TLS flags (cuda12.4 pins 0.4.6.post5)
    "engine_tls_unsupported": ({"serving_engine": "sglang", "serving_stack": "cuda12.4", "serving_allow_synthetic": True,
                                "serving_engine_tls": True},
                               "serving_engine_tls: SGLang 0.4.6.post5 has no flag"),
    # LoRA adapters served by name, and the gateway clients' priorities
    "lora_sglang_cpu": ({"serving_engine": "sglang", "serving_lora_adapters": {"qwen3-tiny-support": "/srv/adapters/support"}},
                        "serving_lora_adapters: SGLang 0.5.23 serves LoRA adapters only on a GPU"),
    "lora_name_is_the_model": ({"serving_lora_adapters": {"qwen3-tiny-lora": "/srv/adapters/support"}},
                               'serving_lora_adapters: ["qwen3-tiny-lora"] cannot be served names'),
    "lora_missing": ({"serving_lora_adapters": {"qwen3-tiny-gone": "/srv/adapters/gone"}},
                     'serving_lora_adapters ["qwen3-tiny-gone"]: no adapter_config.json'),
    "lora_hub_unpinned": ({"serving_lora_adapters": {"qwen3-tiny-hub": "hf://org/adapter"}}, "with the revision pinned"),
    "client_priority_word": ({"gateway_api_keys": [{"name": "team-a", "key": "molecule-prio-key-a-0123456789",
                                                    "priority": "high"}]},
                             "(team-a): priority must be an integer from -1000 to 1000"),
    "client_priority_unscheduled": ({"serving_priority_scheduling": False},
                                    "no engine behind this gateway schedules by priority"),
    # validate (the end of site.yml), as users would mistype it
    "validate_tolerance_words": ({"validate_tolerance_pct": "five"}, "validate_tolerance_pct"),
    "validate_fail_on_unknown": ({"validate_fail_on": ["memory", "disk"]}, "validate_fail_on"),
    "validate_benchmark_unbounded": ({"validate_benchmark_duration_s": 0}, "validate_benchmark_duration_s"),
    "validate_warmup_negative": ({"validate_benchmark_warmup_requests": -4}, "validate_benchmark_warmup_requests 0..1000 (got -4)"),
    # the profile's Python: a source that does not exist, none allowed on this Debian 13 host, a mirror without builds
    # (refused on the controller by the role's argument spec, before the host's Pythons are read)
    "interpreter_mode": ({"python_env_interpreter": "conda"},
                         "value of python_env_interpreter must be one of: auto, system, os-package, standalone, got: conda"),
    "interpreter_system_only": ({"python_env_interpreter": "system"},
                                "needs Python 3.11 (its locks are compiled for it) and python_env_interpreter is system"),
    "interpreter_no_build": ({"python_env_interpreter_builds": {}},
                             "python_env_interpreter_builds has no 3.11 build for x86_64"),
    # random weights on a GPU profile
    "synthetic_on_gpu": ({"serving_stack": "cuda12.4",
                          "serving_model": {"name": "qwen3-tiny", "source": "synthetic://qwen3-tiny", "lora": None}},
                         "serving_allow_synthetic"),
}


# Inputs whose checks read the host (its ports, its folders, the Python it has): they run against
# the converged host itself. Every other bad input is checked on the controller before any host is
# contacted, and runs as a host of its own in one generated play (test_bad_inputs_fail_on_the_controller).
HOST_STATE_INPUTS = ("port_taken", "gateway_port_taken", "model_path", "lora_missing",
                     "interpreter_system_only", "interpreter_no_build")


def failures_by_host(out):
    """Each host's first failure in a run's output (fatal: [HOST]: FAILED! => ... up to the next
    result), its JSON string escapes undone so that a message reads as it was written."""
    found = {}
    for m in re.finditer(r"^fatal: \[([^\]]+)\]: FAILED! =>(.*?)(?=^(?:fatal|ok|skipping|changed|included):|^TASK |^PLAY |\Z)",
                         out, re.M | re.S):
        found.setdefault(m.group(1), m.group(2).replace('\\"', '"'))
    return found


def why_failed(out, tail=3000):
    """A failed run's output for an assertion message: each host's first failure on the first line
    (the summary of `make test` keeps only that line), then the end of the output."""
    found = failures_by_host(out)
    first = "; ".join("%s: %s" % (host, " ".join(msg.split())[:600]) for host, msg in found.items()) or "no fatal line"
    return "%s\n%s" % (first, out[-tail:])


def assert_named_and_secret(name, extra, variable, rc, out):
    assert rc != 0, "%s: the play passed with %s" % (name, extra)
    assert variable in out, "%s: the failure does not name %s:\n%s" % (name, variable, out[-2500:])
    for secret in [ENGINE_KEY] + [c["key"] for c in extra.get("gateway_api_keys", [])]:
        assert len(secret) < 12 or secret not in out, "%s: a key is printed in the failure" % name


@pytest.mark.engine_independent
def test_bad_inputs_fail_on_the_controller(tmp_path):
    """One run, one generated host per bad input (local connection, never contacted): each fails in the
    input checks with a message naming its variable, and the run stops before any other play."""
    cases = dict((name, case) for name, case in dict(BAD_INPUTS, **tls_inputs()).items() if name not in HOST_STATE_INPUTS)
    hosts = dict(("bad-%s" % name, dict(extra, ansible_connection="local")) for name, (extra, dummy) in cases.items())
    generated = tmp_path / "bad-inputs.yml"
    generated.write_text(json.dumps({"all": {"children": {"llm_servers": {"hosts": hosts}}}}))
    cmd = ["ansible-playbook", "-i", os.path.dirname(os.environ["MOLECULE_INVENTORY_FILE"]), "-i", str(generated),
           os.path.join(os.environ["MOLECULE_SCENARIO_DIRECTORY"], "converge.yml"), "--limit", "bad-*"]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=900, check=False)
    out = run.stdout + run.stderr
    assert run.returncode != 0, out[-3000:]
    found = failures_by_host(out)
    assert "Preflight the serving hosts" not in out and "Serve a Qwen chat model" not in out, out[-3000:]
    for name, (extra, variable) in cases.items():
        assert "bad-%s" % name in found, "%s: its host did not fail:\n%s" % (name, out[-2500:])
        assert_named_and_secret(name, extra, variable, run.returncode, found["bad-%s" % name])


@pytest.mark.engine_independent
def test_bad_host_state_fails_before_anything_changes(host):
    before = snapshot(host)
    # Other programs hold ports (transient units outside our llmops-* names).
    for port in (SQUAT_PORT, GATEWAY_SQUAT_PORT):
        host.run("systemd-run --unit squatter-%d python3 -m http.server %d --bind 127.0.0.1" % (port, port))
    listening = host.run("for i in $(seq 100); do ss -Hltn 'sport = :%d' | grep -q . && ss -Hltn 'sport = :%d' | grep -q . "
                         "&& exit 0; sleep 0.1; done; exit 1" % (SQUAT_PORT, GATEWAY_SQUAT_PORT))
    cases = dict((name, BAD_INPUTS[name]) for name in HOST_STATE_INPUTS)
    try:
        # without them the "port taken" runs would really move the engine or the gateway to that port
        assert listening.rc == 0, "the squatters never listened on %d, %d" % (SQUAT_PORT, GATEWAY_SQUAT_PORT)
        with concurrent.futures.ThreadPoolExecutor(max_workers=3) as pool:
            runs = dict((name, pool.submit(playbook, extra=extra)) for name, (extra, dummy) in cases.items())
            results = dict((name, fut.result()) for name, fut in runs.items())
    finally:
        for port in (SQUAT_PORT, GATEWAY_SQUAT_PORT):
            host.run("systemctl stop squatter-%d" % port)
    for name, (extra, variable) in cases.items():
        rc, out = results[name]
        assert_named_and_secret(name, extra, variable, rc, out)
        # It stopped in the read-only plays: no task of the changing roles ran.
        assert "Serve a Qwen chat model" not in out, "%s: reached the changing play" % name
    assert snapshot(host) == before
    assert host.service(UNIT).is_running


def not_after(host):
    return host.check_output("openssl x509 -noout -enddate -in %s" % CERT).split("=", 1)[1]


@pytest.mark.engine_independent
def test_a_self_signed_certificate_about_to_expire_is_renewed(host):
    # the gateway's own key, a certificate that ends in two days (inside gateway_tls_renew_days)
    host.check_output("openssl req -x509 -key /etc/nginx/llmops/gateway.key -days 2 -subj /CN=old -out %s "
                      "&& systemctl reload nginx" % CERT)
    old = not_after(host)
    rc, out = playbook("--tags", "gateway")
    assert rc == 0, out[-3000:]
    new = not_after(host)
    days = (datetime.datetime.strptime(new, "%b %d %H:%M:%S %Y %Z") - datetime.datetime.utcnow()).days
    print("self-signed certificate: ended %s, renewed to end %s (%d days)" % (old, new, days))
    assert days > 800
    served = host.check_output("echo | openssl s_client -connect 127.0.0.1:8443 2>/dev/null | openssl x509 -noout -enddate")
    assert served.split("=", 1)[1] == new
    # renewed once: the next run leaves it
    rc, out = playbook("--tags", "gateway")
    assert rc == 0 and not_after(host) == new


# A hand edit of each kind of file the roles manage, and a stopped daemon: roles whose record of a
# full run still matches skip their changing steps, so each of these must make its role run in full.
HAND_EDITS = {
    "/etc/systemd/system/%s" % UNIT: "sed -i 's/^Restart=.*/Restart=no/' {path}",
    "/etc/llmops/%s.env" % ENGINE: "echo 'HAND_EDITED=1' >> {path}",
    "/etc/nginx/llmops/proxy.conf": "echo '# hand edit' >> {path}",
    "/etc/prometheus/prometheus.yml": "echo '# hand edit' >> {path}",
    "/etc/llmops/chat-templates/qwen3.jinja": "echo '{{# hand edit #}}' >> {path}",
}


@pytest.mark.engine_independent
def test_a_hand_edited_host_is_put_back_by_the_next_run(host):
    before = dict((path, host.check_output("sha256sum %s" % path)) for path in HAND_EDITS)
    for path, edit in HAND_EDITS.items():
        host.check_output(edit.format(path=path))
    host.check_output("systemctl stop prometheus-alertmanager")
    assert all(host.check_output("sha256sum %s" % path) != digest for path, digest in before.items())
    # The changed unit needs a restart, which would drain the only server of the model's pool: with
    # the fleet's default budget (1) it is refused by name, and the engine keeps serving undrained.
    pid = host.check_output("systemctl show -p MainPID --value %s" % UNIT)
    rc, out = playbook(extra={"serving_rollout_min_available": 1})
    flat = " ".join(out.split())
    assert rc != 0 and re.search(r"pool \S+ \(llmops-default\S*\) would keep 0 of its 1 servers serving", flat), \
        why_failed(out)
    assert "serving_rollout_min_available is 1" in flat and "was changed" in flat, why_failed(out)
    assert "Keep what runs now for a restore" not in out, why_failed(out)
    assert host.check_output("systemctl show -p MainPID --value %s" % UNIT) == pid
    assert '"drained": true' not in host.run("cat /var/lib/llmops/rollout/state.json").stdout
    assert " down;" not in host.check_output("cat /etc/nginx/llmops/upstream.d/*.conf")
    # The repair restarts the engine through the rollout (drained, restarted, proven). A GPU that
    # reports a pending row remap (a stand-in nvidia-smi printing the recorded H200's XML so changed)
    # keeps the host out of the gateways on the repaired files, and the rollout stops.
    with open(SMI_XML, encoding="utf-8") as handle:
        sick = handle.read().replace("<remapped_row_pending>No<", "<remapped_row_pending>Yes<", 1)
    stand_in_smi(host, sick, GPU_WORK)
    host.run(": > %s/kern.log" % GPU_WORK)
    rc, out = playbook(extra={"rollout_gpu_health": True, "rollout_nvidia_smi": GPU_WORK + "/nvidia-smi",
                              "rollout_kernel_log_file": GPU_WORK + "/kern.log"})
    flat = " ".join(out.split())
    assert rc != 0 and re.search(r"PLAN \S+: .*restart \(.*unit, environment or launcher", flat), why_failed(out)
    assert "GPU HEALTH on llmops-default" in flat and "a row remapping is pending" in flat, why_failed(out)
    assert "stays drained" in flat and "RESTORED" not in flat, why_failed(out)
    assert host.check_output("systemctl show -p MainPID --value %s" % UNIT) != pid
    assert '"drained": true' in host.check_output("cat /var/lib/llmops/rollout/state.json")
    assert " down;" in host.check_output("cat /etc/nginx/llmops/upstream.d/*.conf")
    # the GPU repaired (the default checks GPU stacks only): the next run restarts the host it finds
    # left drained and puts it back
    rc, out = playbook()
    assert rc == 0, why_failed(out)
    after = dict((path, host.check_output("sha256sum %s" % path)) for path in HAND_EDITS)
    assert after == before, "not put back: %s" % sorted(p for p in before if after[p] != before[p])
    assert host.service("prometheus-alertmanager").is_running
    assert host.service(UNIT).is_running
    assert re.search(r"ROLLED OUT \S+: .*left drained by an interrupted run", out), why_failed(out)
    assert '"drained": true' not in host.check_output("cat /var/lib/llmops/rollout/state.json")
    assert " down;" not in host.check_output("cat /etc/nginx/llmops/upstream.d/*.conf")
    # and the next run finds every role as its full run left it, working out and checking the spec
    # once and rendering the engine's flags once (the parse play's render serves the rollout too)
    rc, out = playbook()
    assert rc == 0 and re.search(r"^llmops-default\S*\s+: ok=\d+\s+changed=0\s", out, re.M), why_failed(out)
    assert out.count("TASK [llmops.serving.serving_spec : Check the serving spec]") == 1, why_failed(out)
    assert out.count("TASK [llmops.serving.engine : Render and validate the engine flags]") == 1, why_failed(out)
