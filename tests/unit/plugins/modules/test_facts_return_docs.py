# -*- coding: utf-8 -*-
"""gpu_facts and model_facts as Ansible runs them: every key they return is documented in RETURN
(and nothing documented is missing), each documented key has what validate-modules asks for, and
the facts come under ansible_facts (llmops_gpu, llmops_model) as well as top-level."""
import json
import os

import pytest
import yaml

from ansible.module_utils import basic

from ansible_collections.llmops.serving.plugins.modules import gpu_facts, model_facts

from .module_harness import documented_by, run_module

FIX = os.path.join(os.path.dirname(__file__), "..", "..", "..", "fixtures")
H200 = os.path.join(FIX, "gpu", "h200-x2")
Q25 = os.path.join(FIX, "qwen", "Qwen2.5-32B-Instruct")
Q3 = os.path.join(FIX, "qwen", "Qwen3-4B")
# What Ansible's exit_json/fail_json add or every module may return: not in a module's RETURN.
COMMON = {"changed", "failed", "msg"}
FACT_KEY = {gpu_facts: "llmops_gpu", model_facts: "llmops_model"}


def read(*parts):
    with open(os.path.join(*parts)) as handle:
        return handle.read()


def h200_run_command(self, argv, **kwargs):
    """nvidia-smi of the recorded H200 x2 host; every other command fails."""
    key = " ".join(argv[1:])
    for prefix, name in (("-q -x", "nvidia-smi-q.xml"), ("--query-gpu", "query.csv"), ("topo -m", "topo.txt")):
        if key.startswith(prefix):
            return 0, read(H200, name), ""
    return 1, "", ""


def no_command(self, argv, **kwargs):
    raise AssertionError("no command expected: %s" % argv)


def check_result(module, result, returned):
    """The keys of `result` are those RETURN documents as returned in `returned` (plus
    ansible_facts), and ansible_facts.<llmops_*> is the same data as the top-level keys."""
    returns = yaml.safe_load(module.RETURN)
    documented = documented_by(returns)
    keys = set(result) - COMMON
    assert keys == documented("always", *returned)
    facts = result["ansible_facts"]
    assert set(facts) == {FACT_KEY[module]}
    top = dict((k, v) for k, v in result.items() if k not in COMMON | {"ansible_facts"})
    assert facts[FACT_KEY[module]] == top
    # what the task result carries is JSON: the facts survive the trip
    assert json.loads(json.dumps(facts))[FACT_KEY[module]] == json.loads(json.dumps(top))


@pytest.fixture
def no_pynvml(monkeypatch):
    monkeypatch.setattr(gpu_facts, "import_pynvml", lambda: None)


@pytest.fixture
def h200_bins(monkeypatch, no_pynvml):
    monkeypatch.setattr(basic.AnsibleModule, "get_bin_path",
                        lambda self, name, *a, **k: "/usr/bin/" + name if name == "nvidia-smi" else None)


@pytest.fixture
def no_bins(monkeypatch, no_pynvml):
    monkeypatch.setattr(basic.AnsibleModule, "get_bin_path", lambda self, name, *a, **k: None)


@pytest.mark.parametrize("module", [gpu_facts, model_facts])
def test_return_is_valid_yaml_with_what_validate_modules_asks(module):
    returns = yaml.safe_load(module.RETURN)
    assert isinstance(returns, dict) and "ansible_facts" in returns

    def check(name, spec):
        assert {"description", "returned", "type"} <= set(spec), name
        if spec["type"] == "list":
            assert "elements" in spec, name
        for child, child_spec in (spec.get("contains") or {}).items():
            check(name + "." + child, child_spec)

    for name, spec in returns.items():
        check(name, spec)
    assert set(returns["ansible_facts"]["contains"]) == {FACT_KEY[module]}


def test_gpu_facts_h200_recording(monkeypatch, h200_bins):
    result = run_module(monkeypatch, gpu_facts, {}, h200_run_command, check_mode=True, failed_key=True)[1]
    assert not result.get("failed") and result["changed"] is False
    assert result["gpu_count"] == 2 and result["source"] == "nvidia-smi"
    check_result(gpu_facts, result, ())
    facts = result["ansible_facts"]["llmops_gpu"]
    assert facts["gpu_names"] == ["NVIDIA H200"] and facts["memory_total_bytes_min"] > facts["memory_usable_bytes_min"]


def test_gpu_facts_without_gpu_and_when_gpus_are_required(monkeypatch, no_bins):
    result = run_module(monkeypatch, gpu_facts, {}, no_command, failed_key=True)[1]
    assert not result.get("failed") and result["gpu_count"] == 0
    check_result(gpu_facts, result, ())
    result = run_module(monkeypatch, gpu_facts, {"require_gpus": True}, no_command, failed_key=True)[1]
    assert result["failed"] and "serving_stack: cpu" in result["msg"]
    check_result(gpu_facts, result, ())


def test_gpu_facts_nvml_asked_for_but_missing(monkeypatch, no_bins):
    result = run_module(monkeypatch, gpu_facts, {"prefer": "nvml"}, no_command, failed_key=True)[1]
    assert result["errors"] == ["NVML: the pynvml module (package nvidia-ml-py) is not importable"]
    check_result(gpu_facts, result, ())


@pytest.mark.parametrize("args,returned", [
    ({"path": Q25, "engine": "vllm", "engine_version": "0.26.0"}, ("when engine is set",)),
    ({"path": Q25}, ()),
    ({"path": Q3, "engine": "sglang", "engine_version": "0.5.23"}, ("when engine is set",)),
    ({"path": "/nonexistent/models/qwen", "config": json.loads(read(Q25, "config.json"))}, ()),
])
def test_model_facts_keys_are_documented(monkeypatch, args, returned):
    result = run_module(monkeypatch, model_facts, args, no_command, check_mode=True, failed_key=True)[1]
    assert not result.get("failed") and result["changed"] is False
    check_result(model_facts, result, returned)


def test_model_facts_failure_carries_the_facts_too(monkeypatch, tmp_path):
    for name in ("config.json", "model.safetensors.index.json"):
        (tmp_path / name).write_text(read(Q25, name))
    (tmp_path / "model-00001-of-00017.safetensors").write_bytes(b"\0" * 16)
    result = run_module(monkeypatch, model_facts, {"path": str(tmp_path)}, no_command, failed_key=True)[1]
    assert result["failed"] and "model-00017-of-00017.safetensors" in result["msg"]
    check_result(model_facts, result, ())
    assert result["ansible_facts"]["llmops_model"]["weights"]["status"] == "incomplete"
