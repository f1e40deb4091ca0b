# -*- coding: utf-8 -*-
"""Regression against what the collection's own code returned on the 2 x H200 host
(tests/fixtures/gpu/h200-x2-live/outputs, written by tests/fixtures/gpu/record_gpu_host.py and an
ad-hoc run of the gpu_facts module): the same module_utils code, re-run here on the recorded
nvidia-smi and NVML outputs beside them, must give the same facts and plans.

Not compared, because the recorded inputs cannot reproduce them:
  * gpus[].uuid: the raw recordings in h200-x2-live and the outputs come from two different
    H200 pairs (same model, driver, memory, bus ids and links; other serial numbers);
  * gpus[].memory_used_bytes: live usage, read after the recorder had made CUDA contexts;
  * pci_gpus / pci_gpu_count: read from /sys, which is not recorded.
"""
import copy
import json
import os

import pytest

from ansible_collections.llmops.serving.plugins.module_utils import engines, gpu, model, plan
from test_gpu_facts import LIVE, FakeNVML, read, smi_replay

OUTPUTS = os.path.join(LIVE, "outputs")
Q25 = os.path.join(LIVE, "..", "..", "qwen", "Qwen2.5-32B-Instruct")


CONTEXT_HINT_THEN = ("or add a rope_scaling entry (YaRN) to the model's config.json where the model card "
                     "documents one (Qwen2.5/Qwen3: factor 4 on 32768)")
CONTEXT_HINT_NOW = ("or set serving_long_context (e.g. {factor: 4.0, original_max_position: 32768}) where the "
                    "model card documents YaRN (Qwen2.5/Qwen3: factor 4 on 32768)")


def renamed_since_recording(text):
    """The recorded plans in today's wording (the figures did not change): the fp8 fix names the
    spec key that owns the flag now, serving_kv_cache_dtype, not serving_engine_extra_args; a
    context beyond the checkpoint names serving_long_context instead of an edit of config.json."""
    return (text.replace(CONTEXT_HINT_THEN, CONTEXT_HINT_NOW)
            .replace("(serving_engine_extra_args: {kv_cache_dtype: fp8})", "(serving_kv_cache_dtype: fp8_e4m3)")
            .replace('"value": {\n       "kv_cache_dtype": "fp8"\n      },\n      "variable": "serving_engine_extra_args"',
                     '"value": "fp8_e4m3",\n      "variable": "serving_kv_cache_dtype"'))


def recorded(name):
    return json.loads(renamed_since_recording(read(OUTPUTS, name)))


def deterministic(facts):
    facts = copy.deepcopy(facts)
    facts.pop("pci_gpus")
    facts.pop("pci_gpu_count")
    for entry in facts["gpus"]:
        entry.pop("uuid")
        entry.pop("memory_used_bytes")
    return facts


def gather(source):
    # the recording host had no systemctl (fabric manager service "unknown") and no local
    # NVSwitch devices (a VM slice of an HGX board)
    nvml = FakeNVML(json.loads(read(LIVE, "nvml.json"))) if source != "nvidia-smi" else None
    return gpu.gather_gpu_facts(smi_replay(LIVE), nvml=nvml, nvidia_smi="/x/nvidia-smi",
                                systemctl=None, prefer=source, sys_root=None, nvswitch_dir=None)


@pytest.mark.parametrize("source,name", [("nvml", "gpu_facts_nvml.json"),
                                         ("nvidia-smi", "gpu_facts_smi.json")])
def test_gpu_facts_match_the_recorded_ones(source, name):
    assert deterministic(gather(source)) == deterministic(recorded(name))


def test_gpu_facts_module_result_matches_the_adhoc_run():
    text = read(OUTPUTS, "adhoc-gpu_facts.json")
    module_result = json.loads(text[text.index("=>") + 2:])  # "h200 | SUCCESS => {...}"
    facts = gather("auto")
    facts["summary"] = gpu.gpu_summary_lines(facts)  # as the gpu_facts module adds it
    facts["changed"] = False
    assert deterministic(facts) == deterministic(module_result)


ADDED_SINCE_RECORDING = {"hybrid": None, "pipeline_parallel": 1,
                         # vLLM 0.26 serves a dense model on its V2 runner (engine registry budget rows)
                         "engine_runner": "v2", "cudagraph_in_budget": False, "kv_tokens_error_pct": 0.2}

# The cases record_gpu_host.py plans on the host: label -> (tp, max_model_len, fraction, options).
CASES = {
    "TP1": (1, 32768, 0.9, {}),
    "TP2": (2, 32768, 0.9, {}),
    "TP2 eager, no custom all-reduce": (2, 32768, 0.9,
                                        {"enforce_eager": True, "custom_all_reduce": False}),
    "TP1 128K context (beyond max_position_embeddings)": (1, 131072, 0.9, {}),
    "TP1 fraction 0.5": (1, 32768, 0.5, {}),
}


def test_recorded_plans_are_the_cases_planned_here():
    assert [case["case"] for case in recorded("serving_plan.json")["plans"]] == list(CASES)


# The vLLM 0.26 V2-runner terms when the plans were recorded (the module constants then); they were
# refitted on tests/fixtures/gpu/calibration afterwards. The recorded plans are compared with these,
# and today's KV tokens with the recorded ones within the stated error band.
TERMS_AT_RECORDING = {"non_torch_base_gib": 0.33, "nccl_per_peer_gib": 0.11, "activation_floor_rows": 0}


def v2_terms():
    return [rule["v2"] for first, rule in engines.REGISTRY["vllm"]["budget"] if first == "0.26.0"][0]


@pytest.mark.parametrize("label", list(CASES))
def test_serving_plan_matches_the_recorded_one(label, monkeypatch):
    terms = v2_terms()
    for key, value in TERMS_AT_RECORDING.items():
        monkeypatch.setitem(terms, key, value)
    check_recorded_plan(label)


@pytest.mark.parametrize("label", list(CASES))
def test_refitted_terms_move_the_recorded_plans_within_the_band(label):
    expected = [c["plan"] for c in recorded("serving_plan.json")["plans"] if c["case"] == label][0]
    if "error" in expected:
        return  # a plan the module refuses: test_serving_plan_matches_the_recorded_one pins the message
    tp, max_model_len, fraction, options = CASES[label]
    mfacts = model.analyze_model(Q25, engine="vllm", engine_version="0.26.0")
    result = plan.make_plan(mfacts, recorded("serving_plan.json")["gpu_memory_bytes_from_gpu_facts"], 2, tp,
                            max_model_len, fraction, "vllm", "0.26.0", gpu_name="NVIDIA H200", **options)
    change = abs(result["kv_tokens"] - expected["kv_tokens"]) / float(expected["kv_tokens"])
    assert change * 100 <= result["kv_tokens_error_pct"], (label, result["kv_tokens"], expected["kv_tokens"])


def check_recorded_plan(label):
    facts = gather("nvml")
    usable = facts["memory_usable_bytes_min"]
    assert usable == recorded("serving_plan.json")["gpu_memory_bytes_from_gpu_facts"]
    tp, max_model_len, fraction, options = CASES[label]
    mfacts = model.analyze_model(Q25, engine="vllm", engine_version="0.26.0")
    try:
        result = plan.make_plan(mfacts, usable, facts["gpu_count"], tp, max_model_len, fraction,
                                "vllm", "0.26.0", gpu_name=facts["gpus"][0]["name"], **options)
    except plan.PlanError as exc:
        result = {"error": str(exc)}
    expected = [c["plan"] for c in recorded("serving_plan.json")["plans"] if c["case"] == label]
    # keys the plan gained after the recording, with what they must be for this dense model
    for key, value in ADDED_SINCE_RECORDING.items():
        assert result.pop(key, value) == value, key
    # one stage (one host per instance): the whole model's layers
    stages = result.pop("stages", None)
    assert stages is None or [(s["stage"], s["layers"]) for s in stages] == [(0, mfacts["num_hidden_layers"])]
    assert result == expected[0]
