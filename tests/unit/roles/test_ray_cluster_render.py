# -*- coding: utf-8 -*-
# Copyright: llmops.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""vLLM on a Ray cluster of GPU hosts, as the roles render it for each rank (CI has no GPU, and vLLM's
CPU platform has no Ray executor: the offline scenario runs the cluster itself and the wait below
against it).

The serving_spec and ray_cluster roles' own variables and the drop-in template are rendered by
ansible-playbook for a two-host instance on the default GPU profile (cuda12.4: vLLM 0.8.5.post1,
whose only way across hosts is Ray): rank 0 runs vLLM, tied to the head by the drop-in (after it,
with RAY_ADDRESS, and only once ray_nodes.py finds every host and GPU); rank 1 runs only its Ray
node, which is what the rollout and readiness read there."""
import json
import os
import shlex
import subprocess
import sys

import pytest
import yaml

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
PLAYBOOK = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")

pytestmark = pytest.mark.skipif(not os.path.exists(PLAYBOOK), reason="needs the controller venv (make unit)")

ENGINE_UNIT = os.path.join(REPO, "roles", "engine", "templates", "engine.service.j2")
HOSTS = {"gpu-a": "10.0.0.11", "gpu-b": "10.0.0.12"}
FACTS = ["serving_spec_ray", "serving_spec_runs_engine", "serving_spec_rank_unit", "serving_spec_unit",
         "__ray_cluster_wait_argv", "__ray_cluster_exec", "__ray_cluster_engine_on_cluster", "__ray_cluster_gpus",
         "__ray_cluster_env", "__ray_cluster_auth_token", "__ray_cluster_auth_token_id"]
ENGINE_KEY = "9f8e7d6c5b4a39281706f5e4d3c2b1a0"


def render(tmp_path, **variables):
    """(rc, output, {host: facts}, {host: drop-in text or None}) for the two hosts."""
    inventory = {"all": {"vars": dict({
        "serving_model": {"name": "qwen3-32b", "source": "/srv/models/qwen3-32b", "lora": None},
        "serving_pipeline_parallel": 2, "serving_tensor_parallel": 8,
        "serving_instances": {"qwen3-32b-pp": list(HOSTS)}}, **variables),
        "children": {"llm_servers": {"hosts": dict(
            (h, {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
                 "serving_distributed_address": a}) for h, a in HOSTS.items())}}}}
    (tmp_path / "inventory.yml").write_text(yaml.safe_dump(inventory))
    template = os.path.join(REPO, "roles", "ray_cluster", "templates", "engine-ray-cluster.conf.j2")
    play = [{"hosts": "llm_servers", "gather_facts": False, "tasks": [
        # the role's input checks (ports, sizes), and its variables for the tasks below
        {"ansible.builtin.include_role": {"name": "llmops.serving.ray_cluster", "tasks_from": "validate.yml",
                                          "public": True}},
        {"ansible.builtin.copy": {"content": "{{ dict(%s) | to_json }}" % ", ".join("%s=%s" % (f, f) for f in FACTS),
                                  "dest": str(tmp_path) + "/{{ inventory_hostname }}.json", "mode": "0644"}},
        {"ansible.builtin.template": {"src": template, "dest": str(tmp_path) + "/{{ inventory_hostname }}.conf",
                                      "mode": "0644"},
         "when": "__ray_cluster_engine_on_cluster | bool"},
    ]}]
    (tmp_path / "play.yml").write_text(json.dumps(play))
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"), ANSIBLE_FORCE_COLOR="0")
    res = subprocess.run([PLAYBOOK, "-i", str(tmp_path / "inventory.yml"), str(tmp_path / "play.yml")],
                         capture_output=True, text=True, env=env, timeout=300, check=False)
    facts, dropins = {}, {}
    for host in HOSTS:
        path = tmp_path / (host + ".json")
        facts[host] = json.loads(path.read_text()) if path.exists() else None
        conf = tmp_path / (host + ".conf")
        dropins[host] = conf.read_text() if conf.exists() else None
    return res.returncode, res.stdout + res.stderr, facts, dropins


def _exec_start_pre(dropin):
    line = [x for x in dropin.splitlines() if x.startswith("ExecStartPre=")][0]
    return shlex.split(line.split("=", 1)[1])


def test_rank_0_runs_vllm_after_the_head_and_only_once_every_host_and_gpu_joined(tmp_path):
    rc, out, facts, dropins = render(tmp_path)
    assert rc == 0, out[-3000:]
    head, worker = facts["gpu-a"], facts["gpu-b"]
    assert head["serving_spec_ray"] and worker["serving_spec_ray"], facts
    # rank 0 runs vLLM (its own unit); rank 1 only its Ray node, which is the unit read on it
    assert head["serving_spec_runs_engine"] and not worker["serving_spec_runs_engine"]
    assert head["serving_spec_rank_unit"] == worker["serving_spec_rank_unit"] == "llmops-ray.service"
    assert "--head" in head["__ray_cluster_exec"] and "--address=10.0.0.11:6379" in worker["__ray_cluster_exec"]
    assert "--num-gpus=8" in head["__ray_cluster_exec"] and "--num-gpus=8" in worker["__ray_cluster_exec"]
    # the drop-in on rank 0 only
    dropin = dropins["gpu-a"]
    assert dropins["gpu-b"] is None and dropin is not None, dropins
    assert "\nRequires=llmops-ray.service\nAfter=llmops-ray.service\n" in dropin, dropin
    assert 'Environment="RAY_ADDRESS=10.0.0.11:6379"' in dropin and "ReadWritePaths=/var/lib/llmops/ray" in dropin
    # the engine's own RemoveIPC=yes would delete the Ray node's object store (same account) at each engine stop
    assert "\nRemoveIPC=no\n" in dropin and "RemoveIPC=yes" in open(ENGINE_UNIT).read()
    # the engine's wait is the head's readiness wait: every host by name and address, 16 GPUs
    argv = _exec_start_pre(dropin)
    assert argv == head["__ray_cluster_wait_argv"], (argv, head["__ray_cluster_wait_argv"])
    assert argv[1].endswith("/ray_nodes.py") and "--require" in argv
    pairs = dict(zip(argv[2::2], argv[3::2]))
    assert pairs["--address"] == "10.0.0.11:6379" and pairs["--nodes"] == "2" and pairs["--gpus"] == "16"
    assert pairs["--instance"] == "qwen3-32b-pp" and pairs["--timeout"] == "300"
    assert [a for a in argv if a.startswith("--expect=")] == ["--expect=gpu-a=10.0.0.11", "--expect=gpu-b=10.0.0.12"]


def test_the_ray_settings_reach_the_drop_in_and_the_wait(tmp_path):
    rc, out, facts, dropins = render(tmp_path, ray_cluster_port=7379, ray_cluster_ready_timeout=900,
                                     ray_cluster_dir="/srv/ray")
    assert rc == 0, out[-3000:]
    pairs = dict(zip(*[iter(_exec_start_pre(dropins["gpu-a"])[2:])] * 2))
    assert pairs["--address"] == "10.0.0.11:7379" and pairs["--timeout"] == "900"
    assert 'RAY_ADDRESS=10.0.0.11:7379' in dropins["gpu-a"] and "ReadWritePaths=/srv/ray" in dropins["gpu-a"]


def test_cpu_hosts_form_the_cluster_but_vllm_is_not_tied_to_it(tmp_path):
    # the cpu profile's vLLM (0.32.0) spans hosts on its own launcher by default, on Ray only when asked;
    # its CPU platform has no Ray executor, so no drop-in: the engine role refuses it, naming why
    rc, out, facts, dropins = render(tmp_path, serving_stack="cpu", serving_tensor_parallel=1,
                                     serving_multinode_launcher="ray")
    assert rc == 0, out[-3000:]
    assert facts["gpu-a"]["serving_spec_ray"] and not facts["gpu-a"]["__ray_cluster_engine_on_cluster"]
    assert dropins == {"gpu-a": None, "gpu-b": None}
    assert "--num-gpus=0" in facts["gpu-a"]["__ray_cluster_exec"] and "--gpus" in facts["gpu-a"]["__ray_cluster_wait_argv"]


def test_every_node_and_the_engine_present_one_token_that_follows_its_secret(tmp_path):
    rc, out, facts, dropins = render(tmp_path, serving_api_key=ENGINE_KEY)
    assert rc == 0, out[-3000:]
    head, worker = facts["gpu-a"], facts["gpu-b"]
    token = head["__ray_cluster_auth_token"]
    # one token for the instance's ranks, derived from the engine's key: neither that key nor empty
    assert token == worker["__ray_cluster_auth_token"] and len(token) == 64 and ENGINE_KEY not in token
    for facts_of in (head, worker):
        assert facts_of["__ray_cluster_env"]["RAY_AUTH_MODE"] == "token"
        assert facts_of["__ray_cluster_env"]["RAY_AUTH_TOKEN_PATH"] == "/etc/llmops/ray-auth-token"
    # the driver (vLLM on rank 0) presents it too; the drop-in names its file and digest, never the token
    dropin = dropins["gpu-a"]
    assert 'Environment="RAY_AUTH_MODE=token"' in dropin and 'Environment="RAY_AUTH_TOKEN_PATH=/etc/llmops/ray-auth-token"' in dropin
    assert head["__ray_cluster_auth_token_id"] in dropin and token not in dropin
    # another engine key (a rotation), or a token of the user's own, gives another token, and another digest
    rotated = render(tmp_path, serving_api_key=ENGINE_KEY[::-1])[2]["gpu-a"]
    assert rotated["__ray_cluster_auth_token"] != token and rotated["__ray_cluster_auth_token_id"] != head["__ray_cluster_auth_token_id"]
    own = "0123456789abcdef" * 4
    assert render(tmp_path, serving_api_key=ENGINE_KEY, ray_cluster_auth_token=own)[2]["gpu-b"]["__ray_cluster_auth_token"] == own


def test_a_short_ray_token_is_refused_without_showing_it(tmp_path):
    rc, out, facts, dropins = render(tmp_path, serving_api_key=ENGINE_KEY, ray_cluster_auth_token="short secret")
    assert rc != 0 and "ray_cluster_auth_token must be at least 32 characters without whitespace" in out, out[-3000:]
    assert "short secret" not in out and facts == {"gpu-a": None, "gpu-b": None}


def test_a_worker_port_range_over_the_head_port_is_refused(tmp_path):
    rc, out, facts, dropins = render(tmp_path, ray_cluster_min_worker_port=6000, ray_cluster_max_worker_port=7000)
    said = " ".join(out.split())
    assert rc != 0 and ("ray_cluster_port (6379) is inside the worker port range 6000-7000 (ray_cluster_min_worker_port.."
                        "ray_cluster_max_worker_port): move it or the range. ray_cluster_node_manager_port (6380)") in said, said[-2000:]
    assert facts == {"gpu-a": None, "gpu-b": None}
