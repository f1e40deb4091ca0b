# -*- coding: utf-8 -*-
"""The four preflight modules run as Ansible runs them (AnsibleModule, exit/fail JSON), with
run_command and the binaries patched."""
import json
import os
import socket
import stat

import pytest

from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args

from ansible_collections.llmops.serving.plugins.modules import (
    gpu_facts,
    host_preflight,
    model_facts,
    serving_plan,
)

FIX = os.path.join(os.path.dirname(__file__), "..", "..", "..", "fixtures")
H200 = os.path.join(FIX, "gpu", "h200-x2")
Q25 = os.path.join(FIX, "qwen", "Qwen2.5-32B-Instruct")
GIB = 1024 ** 3


def run_module(module, args, capsys):
    with patch_module_args(args):
        with pytest.raises(SystemExit):
            module.main()
    return json.loads(capsys.readouterr().out)


def read(*parts):
    with open(os.path.join(*parts)) as handle:
        return handle.read()


@pytest.fixture
def h200_host(monkeypatch):
    answers = {"-q -x": read(H200, "nvidia-smi-q.xml"), "--query-gpu": read(H200, "query.csv"),
               "topo -m": read(H200, "topo.txt")}

    def run_command(self, argv, **_kw):
        key = " ".join(argv[1:])
        for prefix, out in answers.items():
            if key.startswith(prefix):
                return 0, out, ""
        return 1, "", ""

    monkeypatch.setattr(gpu_facts, "import_pynvml", lambda: None)
    monkeypatch.setattr(basic.AnsibleModule, "run_command", run_command)
    monkeypatch.setattr(basic.AnsibleModule, "get_bin_path",
                        lambda self, name, *a, **k: "/usr/bin/" + name
                        if name == "nvidia-smi" else None)


@pytest.fixture
def bare_host(monkeypatch):
    monkeypatch.setattr(gpu_facts, "import_pynvml", lambda: None)
    monkeypatch.setattr(basic.AnsibleModule, "get_bin_path", lambda self, name, *a, **k: None)


def test_gpu_facts_on_h200_recording(h200_host, capsys):
    result = run_module(gpu_facts, {"_ansible_check_mode": True}, capsys)
    assert result["changed"] is False and not result.get("failed")
    assert result["gpu_count"] == 2 and result["source"] == "nvidia-smi"
    assert result["summary"][1].startswith("GPU0 NVIDIA H200 cc 9.0")


def test_gpu_facts_without_gpu(bare_host, capsys):
    result = run_module(gpu_facts, {}, capsys)
    assert not result.get("failed") and result["gpu_count"] == 0
    result = run_module(gpu_facts, {"require_gpus": True}, capsys)
    assert result["failed"] and "serving_stack: cpu" in result["msg"]


def test_model_facts_real_config_and_missing_shard(tmp_path, capsys):
    result = run_module(model_facts, {"path": Q25, "engine": "vllm", "engine_version": "0.26.0"},
                        capsys)
    assert not result.get("failed")
    assert result["architecture"] == "Qwen2ForCausalLM" and result["weights"]["status"] == "absent"
    assert "state" not in result  # no file attributes mixed into the facts
    # one of 17 shards present: a broken download names the other 16
    folder = tmp_path / "m"
    folder.mkdir()
    for name in ("config.json", "model.safetensors.index.json"):
        (folder / name).write_text(read(Q25, name))
    (folder / "model-00001-of-00017.safetensors").write_bytes(b"\0" * 16)
    result = run_module(model_facts, {"path": str(folder)}, capsys)
    assert result["failed"] and "model-00017-of-00017.safetensors" in result["msg"]


def test_model_facts_reads_the_engine_registry(tmp_path, capsys):
    python = tmp_path / "python"
    python.write_text("#!/bin/sh\necho 'INFO noise'\necho '[\"LlamaForCausalLM\"]'\n")
    python.chmod(python.stat().st_mode | stat.S_IEXEC)
    result = run_module(model_facts, {"path": Q25, "engine": "vllm", "engine_version": "0.26.0",
                                      "engine_python": str(python)}, capsys)
    assert result["failed"]
    assert "does not register it" in result["msg"] and "serving_stack" in result["msg"]
    assert result["engine_support"]["source"] == "registry"


def test_model_facts_reads_the_registry_of_a_venv_once(tmp_path, capsys):
    venv = tmp_path / "vllm-0.26.0-0123456789ab"
    (venv / "bin").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
    runs = tmp_path / "runs"
    python = venv / "bin" / "python"
    python.write_text("#!/bin/sh\necho run >> %s\necho '[\"Qwen2ForCausalLM\"]'\n" % runs)
    python.chmod(python.stat().st_mode | stat.S_IEXEC)
    args = {"path": Q25, "engine": "vllm", "engine_version": "0.26.0", "engine_python": str(python),
            "cache_dir": str(tmp_path / "probes")}
    first = run_module(model_facts, args, capsys)
    second = run_module(model_facts, args, capsys)
    assert first["engine_support"]["source"] == second["engine_support"]["source"] == "registry"
    assert first["engine_support"] == second["engine_support"]
    assert runs.read_text().count("run") == 1


def test_model_facts_from_config_only(capsys):
    config = json.loads(read(Q25, "config.json"))
    result = run_module(model_facts, {"path": "/nonexistent/models/qwen", "config": config,
                                      "engine": "sglang", "engine_version": "0.5.23"}, capsys)
    assert not result.get("failed") and result["weights"]["status"] == "no-folder"
    assert result["parameter_count_source"] == "estimated from config"


def _model(capsys):
    return run_module(model_facts, {"path": Q25}, capsys)


def test_serving_plan_module_fits_and_fails(capsys):
    model = _model(capsys)
    gpus = [{"name": "NVIDIA H200", "memory_total_bytes": 150754820096,
             "memory_usable_bytes": 150109880320, "compute_capability": "9.0"}] * 2
    ok = run_module(serving_plan, {"model": model, "gpus": gpus, "tensor_parallel": 2,
                                   "max_model_len": 32768, "engine_version": "0.26.0",
                                   "stack": "cuda12.4",
                                   "stack_profiles": {"cuda12.4": {"driver_branch_min": 550,
                                                                   "cuda": "12.4"}},
                                   "driver_version": "580.159.04",
                                   "cuda_driver_version": "13.0"}, capsys)
    assert not ok.get("failed") and ok["plan"]["fits"]
    assert ok["plan"]["kv_bytes_per_token"] == 131072
    assert ok["summary"][1].startswith("KV cache")
    bad = run_module(serving_plan, {"model": model, "gpus": gpus[:1], "gpu_count": 1,
                                    "max_model_len": 32768, "gpu_memory_fraction": 0.5}, capsys)
    assert bad["failed"] and "serving_max_model_len" in bad["msg"]
    assert bad["plan"]["fits"] is False and bad["plan"]["fixes"]


def test_serving_plan_deferred_and_driver_rules(capsys):
    model = _model(capsys)
    profiles = {"cuda12.4": {"driver_branch_min": 550, "cuda": "12.4"}}
    deferred = run_module(serving_plan, {"model": model, "stack": "cuda12.4",
                                         "stack_profiles": profiles, "pci_gpu_count": 2},
                          capsys)
    assert not deferred.get("failed") and deferred["plan"] is None and deferred["deferred"]
    args = {"model": model, "gpu_memory_bytes": 150109880320, "gpu_count": 1,
            "max_model_len": 8192, "stack": "cuda12.4", "stack_profiles": profiles,
            "driver_version": "535.183.01", "cuda_driver_version": "12.2"}
    old = run_module(serving_plan, args, capsys)
    assert old["failed"] and "serving_stack" in old["msg"] and "535.183.01" in old["msg"]
    args["allow_driver_change"] = True
    allowed = run_module(serving_plan, args, capsys)
    assert not allowed.get("failed") and "driver role will replace it" in allowed["summary"][0]


def test_host_preflight_module_port_taken(monkeypatch, capsys):
    monkeypatch.setattr(basic.AnsibleModule, "get_bin_path", lambda self, name, *a, **k: None)
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    try:
        listen = "127.0.0.1:%d" % server.getsockname()[1]
        result = run_module(host_preflight, {"listen": listen, "checks": ["listen_port"]}, capsys)
        assert result["failed"] and "serving_listen" in result["msg"]
        result = run_module(host_preflight, {"listen": listen, "checks": ["listen_port"],
                                             "fail_on": []}, capsys)
        assert not result.get("failed") and result["problems"][0]["check"] == "listen_port"
    finally:
        server.close()
