# -*- coding: utf-8 -*-
# Copyright: llmops.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""This scenario's two hosts as one model instance across them (serving_pipeline_parallel 2): the
spec's checks, each rank's argv rendered by the translation point and parsed by the vLLM installed on
that host, site.yml serving the instance through rank 0's gateway, a stopped rank named by readiness,
the same instance's Ray cluster formed by ray_cluster.yml.
Then the same hosts as a replica pool: two single-host instances behind one gateway, one engine killed
under streamed load."""

import concurrent.futures
import json
import os
import re
import shlex
import subprocess
import tempfile
import time

import pytest
import testinfra
import yaml

SUFFIX = os.environ.get("LLMOPS_HOST_SUFFIX", "")
# The replica pool and the SGLang instance: `make test` runs them with the rest of the scenario;
# `make test-scale-out` runs this scenario alone.
SCALE_OUT = pytest.mark.scale_out
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
    # the default profile's vLLM (0.8.5.post1) spans hosts only on a Ray cluster: its own launcher is refused
    rc, out = _play(validate, serving_stack="cuda12.4", serving_allow_synthetic=True, serving_multinode_launcher="native")
    assert rc != 0 and "serving_multinode_launcher: native: vLLM 0.8.5.post1 has no launcher of its own" in out, out[-2000:]
    rc, out = _play(validate, serving_multinode_launcher="slurm")
    assert rc != 0 and "value of serving_multinode_launcher must be one of: auto, native, ray, got: slurm" in out, out[-2000:]


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


def _site(*args, inventory=(), **variables):
    extra = {"serving_pipeline_parallel": 2, "serving_instances": LIVE, "serving_rollout_serial": 1,
             "gateway_api_keys": [{"name": "el9-client", "key": GATEWAY_KEY}]}
    extra.update(variables)
    sources = [os.path.dirname(os.environ["MOLECULE_INVENTORY_FILE"])] + list(inventory)
    res = subprocess.run(["ansible-playbook"] + [a for s in sources for a in ("-i", s)] +
                         [os.path.join(os.environ["MOLECULE_PROJECT_DIRECTORY"], "playbooks", "site.yml"),
                          "-e", json.dumps(extra)] + list(args),
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=1500,
                         check=False, env=dict(os.environ, ANSIBLE_FORCE_COLOR="0"))
    # one stream in the order written, so that a failure's tail ends with the task that failed
    out = res.stdout
    if res.returncode < 0:
        out += "\nansible-playbook was killed by signal %d (the kernel's memory killer sends 9)" % -res.returncode
    return res.returncode, out


def _model():
    with open(os.path.join(os.environ["MOLECULE_PROJECT_DIRECTORY"], ".config", "molecule", "config.yml")) as f:
        return yaml.safe_load(f)["provisioner"]["inventory"]["group_vars"]["all"]["serving_model"]["name"]


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
    answer = rank0.run("python3 -c %s %s %s" % (shlex.quote(CHAT), _model(), GATEWAY_KEY))
    assert answer.rc == 0 and answer.stdout.startswith("200 "), (answer.stdout, answer.stderr[-2000:])
    assert "-pp2-" in answer.stdout, answer.stdout
    print("two-host instance answered through rank 0's gateway: %s" % answer.stdout.strip())
    # rank 1 serves no API and runs no gateway
    assert not rank1.file("/etc/nginx/llmops/upstream.conf").exists


def test_a_stopped_rank_fails_readiness_naming_its_host():
    rank0, rank1 = (testinfra.get_host("podman://" + h) for h in (RANK0, RANK1))
    rank1.run("systemctl stop llmops-vllm.service")
    try:
        rc, out = _play([{"name": "Wait for a real generation", "ansible.builtin.include_role":
                          {"name": "llmops.serving.engine", "tasks_from": "ready.yml"}}],
                        gather_facts=True, serving_instances=LIVE, engine_readiness_timeout=60)
    finally:
        # Rank 0 without its peer restarts on failure, each start a CPU-heavy import and load: the
        # rest of the scenario runs without the instance (the replica pool rebuilds it by site.yml).
        rank0.run("systemctl stop llmops-vllm.service")
    assert rc != 0, out[-2000:]
    assert "Instance qwen3-tiny-pp cannot serve: llmops-vllm.service is not running on %s (rank 1: inactive)" % RANK1 in out, \
        out[-3000:]


RAY_UNIT = "llmops-ray.service"
# Ray's object store in shared memory: the test hosts' /dev/shm is small, and vLLM passes no tensor through it.
RAY = {"serving_multinode_launcher": "ray", "ray_cluster_object_store_memory": 83886080}


def _ray_cluster(*args, **variables):
    """playbooks/ray_cluster.yml on both hosts as the live instance on a Ray cluster: (rc, output, seconds)."""
    extra = {"serving_pipeline_parallel": 2, "serving_instances": LIVE}
    extra.update(RAY, **variables)
    start = time.time()
    res = subprocess.run(["ansible-playbook", "-i", os.path.dirname(os.environ["MOLECULE_INVENTORY_FILE"]),
                          os.path.join(os.environ["MOLECULE_PROJECT_DIRECTORY"], "playbooks", "ray_cluster.yml"),
                          "-e", json.dumps(extra)] + list(args),
                         capture_output=True, text=True, timeout=900, check=False,
                         env=dict(os.environ, ANSIBLE_FORCE_COLOR="0"))
    return res.returncode, res.stdout + res.stderr, time.time() - start


def test_the_instance_forms_a_ray_cluster_and_a_missing_worker_is_named():
    """vLLM's CPU engine cannot run on Ray (the spec refuses it with the engine's reason): the cluster
    itself is what runs here. The venv gets the profile's Ray lock, rank 0 runs the head and rank 1 a
    worker as systemd units, the head waits for both; a second run changes nothing; a stopped worker
    is named by the wait that the head's readiness and, on GPU stacks, rank 0's vLLM run; the
    rollout's retire entry point takes both hosts off Ray when the instance leaves it."""
    rank0, rank1 = (testinfra.get_host("podman://" + h) for h in (RANK0, RANK1))
    # bad input first: a worker port range over the engine's port fails before anything is written
    rc, out, dummy = _ray_cluster(ray_cluster_min_worker_port=7000, ray_cluster_max_worker_port=9000)
    said = " ".join(out.split())
    assert rc != 0 and "takes serving_listen (the engine's port)'s port 8000: move the range" in said, said[-2000:]
    assert not rank0.file("/etc/systemd/system/" + RAY_UNIT).exists and not rank1.file("/etc/systemd/system/" + RAY_UNIT).exists
    # and vLLM itself on a Ray cluster of CPU hosts, refused before any change with the engine's reason
    rc, out = _play([{"name": "Check the engine's inputs", "ansible.builtin.include_role":
                      {"name": "llmops.serving.engine", "tasks_from": "validate.yml"}}],
                    gather_facts=True, serving_instances=LIVE, **RAY)
    assert rc != 0 and "vLLM's CPU platform cannot run on a Ray cluster" in out, out[-2000:]
    try:
        rc, out, seconds = _ray_cluster()
        assert rc == 0, out[-5000:]
        print("Ray cluster of the two-host instance formed by ray_cluster.yml in %.0f s (venv with Ray included)" % seconds)
        venv = rank0.check_output("systemctl show -p ExecStart --value %s" % RAY_UNIT)
        assert "--head" in venv and "--block" in venv and "--address=" not in venv, venv
        worker = rank1.check_output("systemctl show -p ExecStart --value %s" % RAY_UNIT)
        assert "--address=" in worker and "--head" not in worker, worker
        ray = re.search(r"path=(\S+/bin/ray)", venv).group(1)
        address = re.search(r"--node-ip-address=(\S+)", venv).group(1)
        # ray status reads the autoscaler's view, which takes a resource report from each node: a few seconds.
        # The cluster takes only callers that present its token (the nodes' account reads its file).
        with_token = "env RAY_AUTH_MODE=token RAY_AUTH_TOKEN_PATH=/etc/llmops/ray-auth-token"
        deadline = time.time() + 60
        while True:
            status = rank0.run("runuser -u llmops -- %s %s status --address %s:6379" % (with_token, ray, address))
            assert status.rc == 0, status.stderr[-2000:]
            active = status.stdout.split("Active:", 1)[1].split("Pending:", 1)[0]
            if len(re.findall(r"^\s*1 node_", active, re.M)) == 2 or time.time() > deadline:
                break
            time.sleep(2)
        assert len(re.findall(r"^\s*1 node_", active, re.M)) == 2, status.stdout
        print("ray status on rank 0: %s" % " ".join(active.split()))
        # the same account and command without the token is refused by the cluster; another user of the
        # host cannot read the token
        refused = rank0.run("runuser -u llmops -- timeout 60 %s status --address %s:6379" % (ray, address))
        assert refused.rc != 0 and re.search(r"auth|token", refused.stdout + refused.stderr, re.I), \
            (refused.rc, (refused.stdout + refused.stderr)[-2000:])
        print("ray status without the token: refused, %s" % (refused.stdout + refused.stderr).strip().splitlines()[-1][:200])
        assert rank1.run("runuser -u nobody -- cat /etc/llmops/ray-auth-token").rc != 0
        # the units run as the engine's account, hardened
        assert rank1.check_output("systemctl show -p User --value %s" % RAY_UNIT) == "llmops"
        assert rank1.check_output("systemctl show -p ProtectSystem --value %s" % RAY_UNIT) == "strict"
        rc, out, seconds = _ray_cluster()
        changed = [task for task, result in re.findall(r"TASK \[([^\]]+)\][^\n]*\n(.*?)\n\n", out, re.S)
                   if "changed:" in result]
        assert rc == 0 and len(re.findall(r"changed=0 ", out)) == 2, (changed, out[-3000:])
        print("a second ray_cluster.yml run: changed=0 on both hosts, %.0f s" % seconds)
        rank1.run("systemctl stop %s" % RAY_UNIT)
        rc, out = _play([{"name": "Wait for the cluster", "ansible.builtin.include_role":
                          {"name": "llmops.serving.ray_cluster", "tasks_from": "ready.yml"}}],
                        gather_facts=True, serving_instances=LIVE, ray_cluster_ready_timeout=20, **RAY)
        assert rc != 0, out[-2000:]
        assert "Ray cluster of instance qwen3-tiny-pp: 1 of 2 nodes joined after 20 s" in out, out[-3000:]
        assert "%s (" % RANK1 in out and "rank 1) has not joined" in out, out[-3000:]
        # the instance leaves Ray (its own launcher again): the rollout's retire entry point takes each
        # host off it, and a second pass changes nothing
        for expected in (r"changed=[1-9]", r"changed=0 "):
            rc, out = _play([{"name": "Take the host off Ray", "ansible.builtin.include_role":
                              {"name": "llmops.serving.ray_cluster", "tasks_from": "retire.yml"}}],
                            gather_facts=True, serving_instances=LIVE, serving_multinode_launcher="native")
            assert rc == 0 and len(re.findall(expected, out)) == 2, out[-3000:]
        for host in (rank0, rank1):
            assert not host.file("/etc/systemd/system/" + RAY_UNIT).exists
            # stopped by SIGTERM, Ray exits non-zero: the gone unit may read "failed", never "active"
            assert host.run("systemctl is-active %s" % RAY_UNIT).stdout.strip() != "active"
            assert not host.run("pgrep -f '[r]ay start --block'").stdout.strip(), "a Ray node still runs"
    finally:
        # the rest of the scenario runs without a cluster
        for host in (rank0, rank1):
            host.run("systemctl disable --now %s; rm -f /etc/systemd/system/%s; systemctl daemon-reload" % (RAY_UNIT, RAY_UNIT))


# The replica pool: each host an instance of its own, behind one gateway (the RHEL host's, in the
# llm_gateways group of an inventory added to molecule's; it stays an engine host too). The Debian
# host's engine is killed while streams run through the gateway.
GATEWAY_HOST, KILLED = RANK0, RANK1
# Bounds of the load: STREAMS at a time, each request LOAD_TOKENS long; it stops AFTER_KILL seconds
# after the kill, at LOAD_MAX_SECONDS or after LOAD_MAX_REQUESTS, whichever comes first.
STREAMS = 4
LOAD_TOKENS = 48
AFTER_KILL = 15
LOAD_MAX_SECONDS = 240
LOAD_MAX_REQUESTS = 400
# Each stream starts a request at most every PACE_S seconds: the four stay at 8 requests a second,
# under the gateway's rate per key (gateway_rate_per_key, 20r/s), which a quiet host's short answers
# would pass; the gateway would then refuse requests with 429, and the test would count them lost.
PACE_S = 0.5
LOAD_STOP = "/tmp/pool-load-stop"
ACCESS_LOG = "/var/log/nginx/llmops-gateway.access.log"
# Streams through the gateway with the official openai client (from the engine's venv), as many at
# once as asked, until the stop file appears: per request its start, first chunk, end and outcome
# (ok, failed before its first chunk, cut after it), and a user id of its own (X-User-Id), by which
# the gateway's access log names the engine that answered it. No retries: a failure is counted, not
# resent.
LOAD = r"""
import json, os, ssl, sys, threading, time
import httpx, openai
model, key, streams, tokens, stop, seconds, most, pace = sys.argv[1:9]
ctx = ssl.create_default_context(cafile="/etc/nginx/llmops/gateway.crt")
ctx.check_hostname = False
client = openai.OpenAI(base_url="https://127.0.0.1:8443/v1", api_key=key, max_retries=0, timeout=120,
                       http_client=httpx.Client(verify=ctx))
end, records, lock = time.time() + float(seconds), [], threading.Lock()
def stream():
    while time.time() < end and not os.path.exists(stop):
        with lock:
            if len(records) >= int(most):
                return
            rec = {"start": time.time(), "first": None, "user": "pool-%d" % len(records)}
            records.append(rec)
        finish = None
        try:
            for chunk in client.chat.completions.create(
                    model=model, stream=True, max_tokens=int(tokens), extra_body={"ignore_eos": True},
                    extra_headers={"X-User-Id": rec["user"]},
                    messages=[{"role": "user", "content": "Count to one hundred."}]):
                rec["first"] = rec["first"] or time.time()
                if chunk.choices and chunk.choices[0].finish_reason:
                    finish = chunk.choices[0].finish_reason
            rec["outcome"] = "ok" if finish else "cut"
        except Exception as exc:
            rec["outcome"] = "cut" if rec["first"] else "failed"
            rec["error"] = "%s: %s" % (type(exc).__name__, str(exc)[:160])
        rec["end"] = time.time()
        time.sleep(max(0.0, rec["start"] + float(pace) - time.time()))
threads = [threading.Thread(target=stream) for _ in range(int(streams))]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(json.dumps(records))
"""
RUNNING = """
import re, ssl, urllib.request
page = urllib.request.urlopen("https://127.0.0.1:8000/metrics", context=ssl._create_unverified_context(), timeout=5).read().decode()
print(int(sum(float(v) for v in re.findall(r"^vllm:num_requests_running\\{[^}]*\\} (\\S+)", page, re.M))))
"""


def _engine_python(host):
    """The Python of the venv the engine unit runs from (it has the openai client)."""
    unit = host.check_output("systemctl show -p ExecStart --value llmops-vllm.service")
    return os.path.join(os.path.dirname(re.search(r"path=(\S+)", unit).group(1)), "python")


def _running_on(host, seconds):
    """Wait until the engine on host runs a request; how many it runs (0 when it never did)."""
    deadline = time.time() + seconds
    while time.time() < deadline:
        res = host.run("python3 -c %s" % shlex.quote(RUNNING))
        if res.rc == 0 and int(res.stdout.strip() or 0) > 0:
            return int(res.stdout.strip())
        time.sleep(0.5)
    return 0


def _engines_admit_only_their_gateway_over_tls(gateway, other, other_address):
    """Engines that listen beyond loopback behind a gateway: the other engine host's packets to the
    gateway host's engine are dropped by the unit's IP filter (curl times out, rc 28), while the
    gateway reaches the other host's engine over TLS only, with a certificate of the collection's CA
    that it checks."""
    gateway_address = other.check_output("getent hosts %s" % GATEWAY_HOST).split()[0]
    probe = "curl -s -m 5 -o /dev/null -w '%%{http_code}' %s %s://%s:8000/version; echo \" rc=$?\""
    blocked = other.run(probe % ("--cacert /etc/llmops/tls/ca.crt", "https", gateway_address)).stdout.strip()
    allowed = gateway.run(probe % ("--cacert /etc/nginx/llmops/engine-ca.crt", "https", other_address)).stdout.strip()
    plain = gateway.run(probe % ("", "http", other_address)).stdout.strip()
    print("engine ports: %s from %s: %s; %s from the gateway: %s over TLS, %s in plain HTTP"
          % (GATEWAY_HOST, KILLED, blocked, KILLED, allowed, plain))
    assert blocked.endswith("rc=28"), blocked
    assert allowed.startswith("200"), allowed
    assert not plain.startswith("200"), plain
    assert "IPAddressDeny=any" in other.check_output("systemctl cat llmops-vllm.service")
    proxy = gateway.check_output("cat /etc/nginx/llmops/proxy.conf")
    assert "proxy_pass https://$llmops_pool;" in proxy and "proxy_ssl_verify on;" in proxy, proxy


@SCALE_OUT
def test_two_single_host_instances_behind_one_gateway_fail_over_under_streamed_load():
    """The two hosts become two single-host instances of one pool behind the RHEL host's gateway
    (least_conn, passive health checks), each engine admitting only the gateway, over TLS. Under
    bounded streamed load the Debian host's engine is killed: only the streams it was serving fail,
    and every request sent after the kill is answered by the other instance (a refused connect is
    passed on to it by the gateway)."""
    with tempfile.NamedTemporaryFile("w", suffix=".ini", prefix="gateways-", delete=False) as inventory:
        inventory.write("[llm_gateways]\n%s\n" % GATEWAY_HOST)
    try:
        rc, out = _site("--skip-tags", "monitoring", inventory=[inventory.name], serving_pipeline_parallel=1,
                        serving_instances={}, serving_listen="0.0.0.0:8000")
    finally:
        os.unlink(inventory.name)
    assert rc == 0, out[-5000:]
    gateway, killed = (testinfra.get_host("podman://" + h) for h in (GATEWAY_HOST, KILLED))
    upstream = gateway.check_output("cat /etc/nginx/llmops/upstream.conf")
    for host in (GATEWAY_HOST, KILLED):
        assert "upstream.d/%s.conf" % host in upstream, upstream
    killed_address = gateway.check_output("getent hosts %s" % KILLED).split()[0]
    _engines_admit_only_their_gateway_over_tls(gateway, killed, killed_address)

    gateway.run("rm -f %s" % LOAD_STOP)
    command = " ".join([_engine_python(gateway), "-c", shlex.quote(LOAD), _model(), GATEWAY_KEY] +
                       [str(v) for v in (STREAMS, LOAD_TOKENS, LOAD_STOP, LOAD_MAX_SECONDS, LOAD_MAX_REQUESTS, PACE_S)])
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        load = pool.submit(gateway.run, command)
        running = _running_on(killed, 120)
        kill_sent = time.time()
        killed.run("systemctl kill --signal=SIGKILL llmops-vllm.service")
        killed_at = time.time()
        time.sleep(AFTER_KILL)
        gateway.run("touch %s" % LOAD_STOP)
        res = load.result(timeout=LOAD_MAX_SECONDS + 120)
    assert res.rc == 0, res.stderr[-3000:]
    records = json.loads(res.stdout.strip().splitlines()[-1])
    # the gateway's record of each request (by its user id): the engines it tried, the last answered
    logged = [json.loads(line) for line in gateway.check_output("cat %s" % ACCESS_LOG).splitlines()
              if line.startswith("{")]
    engines = {e["user"]: e["upstream"].split(", ") for e in logged if e["user"].startswith("pool-")}
    assert all(r["user"] in engines for r in records), "requests missing from the gateway's access log"
    on_killed = [r for r in records if engines[r["user"]][-1].startswith(killed_address + ":")]
    in_flight = [r for r in records if r["start"] < killed_at and r["end"] > kill_sent]
    after = [r for r in records if r["start"] >= killed_at]
    lost = [r for r in records if r["outcome"] != "ok"]
    passed_on = [r for r in after if len(engines[r["user"]]) > 1]
    print("replica pool failover: %d requests (%d sent after the kill), %d in flight at the kill "
          "(%d on the killed engine); %d failed before their first token, %d cut after it; %d sent "
          "after the kill were passed on from the killed engine to the other after a refused connect"
          % (len(records), len(after), len(in_flight), len([r for r in in_flight if r in on_killed]),
             sum(r["outcome"] == "failed" for r in lost), sum(r["outcome"] == "cut" for r in lost), len(passed_on)))
    assert running > 0 and on_killed, "the killed engine served no request of the load"
    # only the requests in flight on the killed engine were lost
    assert all(r in in_flight and r in on_killed for r in lost), lost
    # every request sent after the kill was answered, by the other instance
    assert after and all(r["outcome"] == "ok" and r not in on_killed for r in after), \
        [(r, engines[r["user"]]) for r in after if r["outcome"] != "ok" or r in on_killed]


@SCALE_OUT
def test_site_yml_serves_one_model_across_both_hosts_on_sglang():
    """The same two hosts as one instance on SGLang, switched by site.yml: each rank's unit runs
    SGLang's own multi-node launcher, its threads pinned to the host's CPUs (SGLang's CPU engine
    refuses two ranks on a host of one NUMA node otherwise), and rank 0 answers through its gateway."""
    rc, out = _site("--skip-tags", "monitoring", serving_engine="sglang")
    said = " ".join(out.split())
    assert rc == 0, out[-5000:]
    ready = re.search(r"ROLLED OUT %s.*?ready\D*?([\d.]+) s after the restart" % re.escape(RANK0), said)
    print("two-host SGLang instance ready %s s after the restart" % (ready.group(1) if ready else "?"))
    rank0, rank1 = (testinfra.get_host("podman://" + h) for h in (RANK0, RANK1))
    rank0_address = rank1.check_output("getent hosts %s" % RANK0).split()[0]
    for rank, host in enumerate((rank0, rank1)):
        argv = host.check_output("systemctl show -p ExecStart --value llmops-sglang.service")
        assert "--pp-size 2 " in argv and "--nnodes 2 " in argv and "--node-rank %d " % rank in argv, argv
        assert "--dist-init-addr %s:29500" % rank0_address in argv, argv
        env_file = host.check_output("systemctl show -p EnvironmentFiles --value llmops-sglang.service").split()[0]
        cpus = int(host.check_output("nproc"))
        assert 'SGLANG_CPU_OMP_THREADS_BIND="0-%d"' % (cpus - 1) in host.check_output("cat %s" % env_file)
        assert host.service("llmops-sglang.service").is_running and not host.service("llmops-vllm.service").is_running
    answer = rank0.run("python3 -c %s %s %s" % (shlex.quote(CHAT), _model(), GATEWAY_KEY))
    assert answer.rc == 0 and answer.stdout.startswith("200 "), (answer.stdout, answer.stderr[-2000:])
    print("two-host SGLang instance answered through rank 0's gateway: %s" % answer.stdout.strip())
