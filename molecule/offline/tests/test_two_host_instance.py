# -*- coding: utf-8 -*-
# Copyright: llmops.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One model instance across this scenario's two hosts (serving_pipeline_parallel 2): the spec's
checks, and each rank's argv rendered by the translation point and parsed by the vLLM installed on
that host. Read-only: nothing here starts an engine or changes a host."""

import json
import os
import re
import shlex
import subprocess
import tempfile

import testinfra
import yaml

SUFFIX = os.environ.get("LLMOPS_HOST_SUFFIX", "")
HEAD = "llmops-offline" + SUFFIX
WORKER = "llmops-offline-el9" + SUFFIX
# Addresses for the rendezvous only: no engine starts here, so no rank connects to them.
ADDRESSES = {HEAD: "10.89.0.11", WORKER: "10.89.0.12"}
INSTANCE = {"qwen3-tiny-pp": [HEAD, WORKER]}


def _play(tasks, gather_facts=False, **variables):
    """A play on both hosts with the instance's variables: (rc, output in one line)."""
    play = [{"hosts": "%s,%s" % (HEAD, WORKER), "gather_facts": gather_facts, "tasks": tasks}]
    extra = {"serving_pipeline_parallel": 2, "serving_instances": INSTANCE}
    extra.update(variables)
    with tempfile.NamedTemporaryFile("w", suffix=".yml", prefix="instance-", delete=False) as f:
        json.dump(play, f)
    try:
        res = subprocess.run(["ansible-playbook", "-i", os.path.dirname(os.environ["MOLECULE_INVENTORY_FILE"]), f.name,
                              "-e", json.dumps(extra)],
                             capture_output=True, text=True, timeout=600, check=False,
                             env=dict(os.environ, ANSIBLE_FORCE_COLOR="0"))
    finally:
        os.unlink(f.name)
    return res.returncode, " ".join((res.stdout + res.stderr).split())


# each host's own address comes from the play (host_vars would need an inventory of their own)
ADDRESS_TASK = {"name": "Set this host's rendezvous address",
                "ansible.builtin.set_fact": {"serving_distributed_address": "{{ %s[inventory_hostname] }}"
                                             % json.dumps(ADDRESSES)}}
RENDER = [ADDRESS_TASK,
          {"name": "Render and parse the engine flags", "ansible.builtin.include_role":
           {"name": "llmops.serving.engine", "tasks_from": "args.yml"}},
          {"name": "Show the argv", "ansible.builtin.debug":
           {"msg": "ARGV {{ inventory_hostname }} {{ __engine_args.command[1:] | join(' ') }} "
                   "ALLOW {{ __engine_ip_allow | join(' ') }} END"}}]


def _argv(out, host):
    return out.split("ARGV %s " % host, 1)[1].split(" END", 1)[0]


def test_each_rank_renders_its_place_and_the_installed_vllm_parses_it():
    rc, out = _play(RENDER)
    assert rc == 0, out[-3000:]
    head, worker = _argv(out, HEAD), _argv(out, WORKER)
    for argv in (head, worker):
        assert "--pipeline-parallel-size 2 --nnodes 2" in argv, argv
        assert "--master-addr 10.89.0.11 --master-port 29500" in argv, argv
    assert "--node-rank 0" in head and "--headless" not in head, head
    assert "--node-rank 1" in worker and "--headless" in worker, worker
    # the engine's unit admits the other rank (the ranks talk on ports of their own)
    assert "10.89.0.12" in head.split("ALLOW", 1)[1] and "10.89.0.11" in worker.split("ALLOW", 1)[1]


def test_bad_instance_layouts_are_refused_before_any_change():
    validate = [ADDRESS_TASK, {"name": "Check the spec", "ansible.builtin.include_role":
                               {"name": "llmops.serving.serving_spec"}}]
    rc, out = _play(validate, serving_instances={"qwen3-tiny-pp": [HEAD, "gpu-404"]})
    assert rc != 0 and "serving_instances.qwen3-tiny-pp lists gpu-404, not in the inventory" in out, out[-2000:]
    rc, out = _play(validate, serving_instances={"a": [HEAD, WORKER], "b": [HEAD]})
    assert rc != 0 and "serving_instances.b has 1 host(s) and serving_pipeline_parallel is 2" in out, out[-2000:]
    assert "is in both a and b" in out
    rc, out = _play(validate, serving_distributed_port=8000)
    assert rc != 0 and "serving_distributed_port 8000 is the engine's own port" in out, out[-2000:]
    # the default profile's vLLM (0.8.5.post1) spans hosts only on Ray, which the collection does not run
    rc, out = _play(validate, serving_stack="cuda12.4", serving_allow_synthetic=True)
    assert rc != 0 and "vLLM 0.8.5.post1 spans hosts only on a Ray cluster" in out, out[-2000:]


# The live instance: the RHEL host (rank 0, with the gateway test_offline.py set up) and the Debian
# host (rank 1) over the scenario's cluster network, one pipeline stage each.
RANK0, RANK1 = WORKER, HEAD
LIVE = {"qwen3-tiny-pp": [RANK0, RANK1]}
GATEWAY_KEY = "molecule-el9-client-key-0123456789"
CHAT = """
import json, ssl, sys, urllib.request
ctx = ssl.create_default_context(cafile="/etc/nginx/llmops/gateway.crt")
ctx.check_hostname = False
body = json.dumps({"model": sys.argv[1], "max_tokens": 8, "messages": [{"role": "user", "content": "Say hello."}]})
req = urllib.request.Request("https://127.0.0.1:8443/v1/chat/completions", data=body.encode(),
                             headers={"Content-Type": "application/json", "Authorization": "Bearer " + sys.argv[2]})
with urllib.request.urlopen(req, context=ctx, timeout=300) as r:
    answer = json.load(r)
print(r.status, answer["choices"][0]["finish_reason"], answer.get("system_fingerprint"))
"""


def _site(*args, **variables):
    extra = {"serving_pipeline_parallel": 2, "serving_instances": LIVE, "serving_rollout_serial": 1,
             "gateway_api_keys": [{"name": "el9-client", "key": GATEWAY_KEY}]}
    extra.update(variables)
    res = subprocess.run(["ansible-playbook", "-i", os.path.dirname(os.environ["MOLECULE_INVENTORY_FILE"]),
                          os.path.join(os.environ["MOLECULE_PROJECT_DIRECTORY"], "playbooks", "site.yml"),
                          "-e", json.dumps(extra)] + list(args),
                         capture_output=True, text=True, timeout=1500, check=False,
                         env=dict(os.environ, ANSIBLE_FORCE_COLOR="0"))
    return res.returncode, res.stdout + res.stderr


def test_site_yml_serves_one_model_across_both_hosts_through_rank_0s_gateway():
    """site.yml takes both hosts to one instance (pipeline parallel 2 over vLLM's own launcher): one
    rollout batch holds both, rank 1 runs headless, rank 0 is proven by a real generation and is the
    gateway's one upstream. Monitoring is left out: the Debian host has no OS mirror for Prometheus."""
    rc, out = _site("--skip-tags", "monitoring")
    said = " ".join(out.split())
    assert rc == 0, out[-5000:]
    # one batch, rank 0 first
    batch = said.split("Roll the engines onto the spec, host by host", 1)[1]
    assert "ROLLED OUT %s" % RANK0 in batch and "ROLLED OUT %s" % RANK1 in batch, said[-3000:]
    ready = re.search(r"ROLLED OUT %s.*?ready\D*?([\d.]+) s after the restart" % re.escape(RANK0), batch)
    print("two-host instance ready %s s after the restart (rank 0's real generation through both stages)"
          % (ready.group(1) if ready else "?"))
    rank0, rank1 = (testinfra.get_host("podman://" + h) for h in (RANK0, RANK1))
    exec0 = rank0.check_output("systemctl show -p ExecStart --value llmops-vllm.service")
    exec1 = rank1.check_output("systemctl show -p ExecStart --value llmops-vllm.service")
    assert "--node-rank 0" in exec0 and "--headless" not in exec0, exec0
    assert "--node-rank 1" in exec1 and "--headless" in exec1, exec1
    assert "--compilation-config" in exec1 and "--enforce-eager" not in exec1, exec1
    # the pool has the instance once: rank 0
    upstream = rank0.check_output("cat /etc/nginx/llmops/upstream.conf")
    assert "least_conn;" in upstream and RANK1 + ".conf" not in upstream and RANK0 + ".conf" in upstream, upstream
    # a chat completion through rank 0's gateway, answered by both stages (vLLM names pp2 in the fingerprint)
    with open(os.path.join(os.environ["MOLECULE_PROJECT_DIRECTORY"], ".config", "molecule", "config.yml")) as f:
        model = yaml.safe_load(f)["provisioner"]["inventory"]["group_vars"]["all"]["serving_model"]["name"]
    answer = rank0.run("python3 -c %s %s %s" % (shlex.quote(CHAT), model, GATEWAY_KEY))
    assert answer.rc == 0 and answer.stdout.startswith("200 "), (answer.stdout, answer.stderr[-2000:])
    assert "-pp2-" in answer.stdout, answer.stdout
    print("two-host instance answered through rank 0's gateway: %s" % answer.stdout.strip())
    # rank 1 serves no API and runs no gateway
    assert not rank1.file("/etc/nginx/llmops/upstream.conf").exists


def test_a_stopped_rank_fails_readiness_naming_its_host():
    rank1 = testinfra.get_host("podman://" + RANK1)
    rank1.run("systemctl stop llmops-vllm.service")
    rc, out = _play([{"name": "Wait for a real generation", "ansible.builtin.include_role":
                      {"name": "llmops.serving.engine", "tasks_from": "ready.yml"}}],
                    gather_facts=True, serving_instances=LIVE, engine_readiness_timeout=60)
    assert rc != 0, out[-2000:]
    assert "Instance qwen3-tiny-pp cannot serve: llmops-vllm.service is not running on %s (rank 1: inactive)" % RANK1 in out, \
        out[-3000:]
