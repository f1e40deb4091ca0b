# -*- coding: utf-8 -*-
"""The summary the preflight role prints (roles/preflight/templates/summary.j2), rendered the way
the role renders it: report.yml's debug expression through Ansible's own templar. Its inputs are
what gpu_facts, model_facts and serving_plan compute from the 2 x H200 recording
(tests/fixtures/gpu/h200-x2-live) and the Qwen2.5-32B-Instruct config, so a change in parsing,
planning or wording shows up in the lines a user reads."""
import json
import os

import pytest
import yaml

from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template
from ansible.utils.collection_loader._collection_finder import _AnsibleCollectionFinder

from ansible_collections.llmops.serving.plugins.filter.interpreter_choice import interpreter_choice
from ansible_collections.llmops.serving.plugins.module_utils import gpu, model, plan
from test_gpu_facts import LIVE, FakeNVML, read, smi_replay
from test_h200_live_outputs import CONTEXT_HINT_NOW, CONTEXT_HINT_THEN, TERMS_AT_RECORDING, v2_terms

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
ROLE = os.path.join(REPO, "roles", "preflight")
Q25 = os.path.join(REPO, "tests", "fixtures", "qwen", "Qwen2.5-32B-Instruct")
PLAYBOOK_LOG = os.path.join(LIVE, "outputs", "playbook.log")

# The recording ran the cuda13.0 profile pinned to vLLM 0.26.0; its description as printed there.
ENGINE_VERSION = "0.26.0"
PROFILE_DESCRIPTION = "CUDA 13.0 line (vLLM 0.26 wheels, as run on these H200s)"
# host_preflight reads the lab host itself (disk, /dev/shm, container), which the recording does
# not hold: its summary line is taken as the role printed it there.
HOST_LINE = ("host: container docker; disk <repo>/tests/fixtures/qwen/Qwen2.5-32B-Instruct: "
             "127.97 GiB free, model needs 67.13 GiB more; /dev/shm 256.00 GiB; memlock unlimited; "
             "nouveau not loaded; nvidia module loaded; secure boot not-efi; 127.0.0.1:8000 free")


@pytest.fixture(scope="module")
def collection_loader():
    """The template lookup is loaded as ansible.builtin.template: that needs Ansible's collection
    finder, installed for this module's tests only."""
    _AnsibleCollectionFinder()._install()
    yield
    _AnsibleCollectionFinder._remove()


def stack_profiles():
    with open(os.path.join(REPO, "stacks", "profiles.yml")) as handle:
        profiles = yaml.safe_load(handle)["serving_stack_profiles"]
    profiles["cuda13.0"]["description"] = PROFILE_DESCRIPTION
    profiles["cuda13.0"]["engines"]["vllm"]["version"] = ENGINE_VERSION
    return profiles


def gpu_facts(dump=None):
    """gpu_facts' result on the recorded host: NVML, with nvidia-smi for the link matrix and the
    fabric state this NVML binding could not read."""
    dump = dump or json.loads(read(LIVE, "nvml.json"))
    facts = gpu.gather_gpu_facts(smi_replay(LIVE), nvml=FakeNVML(dump), nvidia_smi="/x/nvidia-smi",
                                 sys_root=None, nvswitch_dir=None)
    facts["summary"] = gpu.gpu_summary_lines(facts)
    return facts


def model_facts(profiles):
    """model_facts' result for the config-only folder (no weights fetched yet)."""
    facts = model.analyze_model(Q25, engine="vllm", engine_version=ENGINE_VERSION,
                                stack_profiles=profiles)
    facts["summary"] = model.model_summary_line(facts)
    facts["notices"] = []
    facts["errors"] = model.model_errors(facts)
    return facts


def summary(tp=2, max_model_len=32768, fraction=0.9, concurrency=256, gpus=None, interpreter=None):
    """The summary lines for one serving spec, every fact gathered as the role gathers it."""
    profiles = stack_profiles()
    gpus = gpus or gpu_facts()
    mfacts = model_facts(profiles)
    # serving_plan's parameters as tasks/plan.yml passes them (no budget flags in the profile)
    plan_result = plan.plan_from_params({
        "model": mfacts, "gpus": gpus["gpus"],
        "gpu_count": max(gpus["gpu_count"], gpus["pci_gpu_count"]),
        "tensor_parallel": tp, "max_model_len": max_model_len, "gpu_memory_fraction": fraction,
        "max_concurrency": concurrency, "kv_cache_dtype": "auto", "enforce_eager": False,
        "custom_all_reduce": True, "engine": "vllm", "engine_version": ENGINE_VERSION,
        "stack": "cuda13.0", "stack_profiles": profiles,
        "driver_version": gpus["driver_version"],
        "cuda_driver_version": gpus["cuda_driver_version"],
        "pci_gpu_count": gpus["pci_gpu_count"], "allow_driver_change": False,
    })
    variables = {
        "ansible_search_path": [ROLE],
        "inventory_hostname": "h200",
        "serving_stack": "cuda13.0",
        "serving_spec_profile": profiles["cuda13.0"],
        "serving_engine": "vllm",
        "serving_spec_engine_version": ENGINE_VERSION,
        "serving_tensor_parallel": tp,
        "serving_max_model_len": max_model_len,
        "serving_gpu_memory_fraction": fraction,
        "serving_max_concurrency": concurrency,
        "serving_model": {"name": "qwen2.5-32b", "source": Q25},
        "preflight_hf_endpoint": "https://huggingface.co",
        "__preflight_gpu_stack": True,
        "preflight_gpus": gpus,
        "preflight_model_known": True,
        "__preflight_model_origin": "folder " + Q25,
        "preflight_model": mfacts,
        "__preflight_hub_config": {"changed": False, "skipped": True},  # the folder has config.json
        "__preflight_host": {"summary": [HOST_LINE], "problems": [], "fatal": []},
        "preflight_plan": plan_result,
    }
    if interpreter is not None:
        variables["python_env_interpreter_choice"] = interpreter
    with open(os.path.join(ROLE, "tasks", "report.yml")) as handle:
        expression = yaml.safe_load(handle)[0]["ansible.builtin.debug"]["msg"]
    templar = Templar(loader=DataLoader(), variables=variables)
    lines = templar.template(trust_as_template(expression))
    return [line.replace(REPO, "<repo>") for line in lines]  # the recording's placeholder


# Wording changed since the recording (the figures did not): the fp8 fix names the spec key that
# owns the flag now, not serving_engine_extra_args.
RENAMED_SINCE_RECORDING = {
    "(serving_engine_extra_args: {kv_cache_dtype: fp8})": "(serving_kv_cache_dtype: fp8_e4m3)",
    # the collection no longer asks users to edit the checkpoint for YaRN
    CONTEXT_HINT_THEN: CONTEXT_HINT_NOW,
}


def recorded_summaries():
    """The summaries the role printed on the H200 host, keyed by the run's heading."""
    runs = {}
    decoder = json.JSONDecoder()
    text = read(PLAYBOOK_LOG)
    for old, new in RENAMED_SINCE_RECORDING.items():
        text = text.replace(old, new)
    for block in text.split("=== ")[1:]:
        heading, dummy, body = block.partition("\n")
        start = body.index("{", body.index("Print the preflight summary"))
        runs[heading] = decoder.raw_decode(body[start:])[0]["msg"]
    return runs


def test_the_interpreter_choice_is_the_second_line(collection_loader):
    # the H200 host of the recordings: Ubuntu 24.04, whose python3.12 is cuda13.0's Python
    choice = interpreter_choice({"python": "3.12", "os_family": "Debian", "distribution": "Ubuntu",
                                 "major_version": "24", "present": "Python 3.12.3", "builds": {}, "mirror": ""})
    lines = summary(tp=1, interpreter=choice)
    assert lines[1] == "Python 3.12: python3.12 from Ubuntu 24.04's packages (python3.12, python3.12-venv)"
    assert lines[2].startswith("GPUs: driver 580.159.04")
    refused = interpreter_choice({"python": "3.12", "mode": "system", "os_family": "Debian", "distribution": "Debian",
                                  "major_version": "13", "builds": {}, "mirror": "", "profile_name": "cuda13.0"})
    assert summary(tp=1, interpreter=refused)[1] == "Python 3.12: no source fits (below)"
    # and report.yml stops on it, naming the options
    with open(os.path.join(ROLE, "tasks", "report.yml")) as handle:
        stops = [t for t in yaml.safe_load(handle) if "python_env_interpreter_choice" in json.dumps(t)]
    assert len(stops) == 1 and "needs Python 3.12" in refused["error"]


def test_tp2_summary_names_gpus_driver_kv_tokens_and_concurrency(collection_loader):
    lines = summary(tp=2)
    assert lines[0] == ("h200: stack cuda13.0 (%s); vllm 0.26.0; TP 2, context 32768, memory "
                        "fraction 0.9, concurrency 256" % PROFILE_DESCRIPTION)
    assert lines[1] == "GPUs: driver 580.159.04 (branch 580), CUDA driver API 13.0, source nvml"
    gpu_lines = [line for line in lines if line.startswith("  GPU")]
    assert len(gpu_lines) == 2
    assert all(" NVIDIA H200 cc 9.0 143771 MiB (139.80 GiB usable) " in line for line in gpu_lines)
    assert "  interconnect nvswitch (NV18); NVSwitch yes, fabric Completed" in lines
    assert lines[lines.index(HOST_LINE) + 1].startswith("plan: TP 2, vllm 0.26.0, fraction 0.90")
    assert ("  KV cache 93.24 GiB/GPU (first principles (vLLM budget)) = 763840 tokens at 131072 "
            "bytes/token (auto, 4 KV heads/GPU)") in lines
    assert ("  context 32768: 23 full-length sequences at once (23.31x); longest context that "
            "fits 32768") in lines
    notes = [line for line in lines if line.startswith("note: ")]
    assert notes[0].startswith("note: 23 requests of the full 32768 tokens fit in the KV cache at "
                               "once; serving_max_concurrency=256 is reached only with shorter")
    assert "--disable-custom-all-reduce and --enforce-eager" in notes[1]
    assert not [line for line in lines if line.startswith(("FAIL", "warning"))]


def test_context_beyond_the_checkpoint_is_a_fail_line_and_no_plan(collection_loader):
    lines = summary(tp=1, max_model_len=131072)
    assert not [line for line in lines if line.startswith(("plan:", "  KV cache", "note:"))]
    assert lines[-1] == (
        "FAIL: serving_max_model_len=131072 exceeds what the checkpoint supports: 32768 "
        "(max_position_embeddings). Lower serving_max_model_len to 32768, or set serving_long_context "
        "(e.g. {factor: 4.0, original_max_position: 32768}) where the model card documents YaRN "
        "(Qwen2.5/Qwen3: factor 4 on 32768)")
    assert len([line for line in lines if line.startswith("FAIL: ")]) == 1


def test_kv_cache_too_small_shows_the_plan_then_the_fixes(collection_loader):
    lines = summary(tp=1, fraction=0.5)
    assert ("  KV cache 7.04 GiB/GPU (first principles (vLLM budget)) = 28800 tokens at 262144 "
            "bytes/token (auto, 8 KV heads/GPU)") in lines
    assert ("  context 32768: 0 full-length sequences at once (0.88x); longest context that fits "
            "28800") in lines
    fail = [line for line in lines if line.startswith("FAIL: ")]
    assert len(fail) == 1 and fail[0] == lines[-1]
    assert fail[0].startswith("FAIL: one sequence of serving_max_model_len=32768 tokens needs "
                              "8.00 GiB of KV cache per GPU")
    for fix in ("raise serving_tensor_parallel to 2: 305744 KV tokens per GPU",
                "lower serving_max_model_len to 28800",
                "use an fp8 KV cache (serving_kv_cache_dtype: fp8_e4m3): 57616 KV tokens",
                "raise serving_gpu_memory_fraction to 0.92: 269312 KV tokens"):
        assert fix in fail[0]
    # a plan that does not fit gets no concurrency note: the FAIL line says it all
    assert not [line for line in lines if line.startswith("note: ")]


def test_gpu_problem_is_a_warning_line_with_its_fix(collection_loader):
    dump = json.loads(read(LIVE, "nvml.json"))
    dump["gpus"][1]["persistence"] = 0
    lines = summary(tp=2, gpus=gpu_facts(dump))
    assert "  GPU1 NVIDIA H200 cc 9.0 143771 MiB (139.80 GiB usable) bus 00000000:00:07.0 " \
        "persistence off MIG off" in lines
    assert [line for line in lines if line.startswith("warning: ")] == [
        "warning: GPU 1 (00000000:00:07.0): persistence mode is off; fix: enable "
        "nvidia-persistenced (the nvidia_driver role does); without it the first CUDA call "
        "after idle pays the driver load"]


# The runs of playbook.log whose inputs are all recorded (its cuda13.2 run used a stacks file that
# is not in the repository), with the serving spec each ran.
RECORDED_RUNS = {
    "TP 1 --check": dict(tp=1),
    "TP 2 --check": dict(tp=2),
    "TP 1 fraction 0.5 (must fail)": dict(tp=1, fraction=0.5),
    "TP 2 context 131072 (beyond max_position_embeddings, must fail)":
        dict(tp=2, max_model_len=131072),
}


@pytest.mark.parametrize("heading", sorted(RECORDED_RUNS))
def test_same_lines_as_the_role_printed_on_the_h200_host(collection_loader, heading, monkeypatch):
    # planned with the vLLM 0.26 terms of the recording (refitted since: test_h200_live_outputs.py)
    terms = v2_terms()
    for key, value in TERMS_AT_RECORDING.items():
        monkeypatch.setitem(terms, key, value)
    assert summary(**RECORDED_RUNS[heading]) == recorded_summaries()[heading]


def test_the_example_inventory_passes_its_own_preflight_on_the_recorded_h200_facts():
    """inventories/example (Qwen2.5-32B at 128K tokens through serving_long_context) as its preflight
    plans it on the recorded 2 x H200 host, with its own stack profile's engine version; without the
    YaRN key the same context is refused."""
    with open(os.path.join(REPO, "inventories", "example", "group_vars", "llm_servers", "serving.yml")) as handle:
        spec = yaml.safe_load(handle)
    with open(os.path.join(REPO, "stacks", "profiles.yml")) as handle:
        profiles = yaml.safe_load(handle)["serving_stack_profiles"]
    version = profiles[spec["serving_stack"]]["engines"][spec["serving_engine"]]["version"]
    gpus = gpu_facts()
    mfacts = model.analyze_model(Q25, engine=spec["serving_engine"], engine_version=version, stack_profiles=profiles)

    def preflight(long_context):
        return plan.plan_from_params({
            "model": mfacts, "gpus": gpus["gpus"], "gpu_count": max(gpus["gpu_count"], gpus["pci_gpu_count"]),
            "tensor_parallel": spec["serving_tensor_parallel"], "max_model_len": spec["serving_max_model_len"],
            "gpu_memory_fraction": spec["serving_gpu_memory_fraction"],
            "max_concurrency": spec["serving_max_concurrency"], "kv_cache_dtype": "auto", "enforce_eager": False,
            "custom_all_reduce": True, "engine": spec["serving_engine"], "engine_version": version,
            "stack": spec["serving_stack"], "stack_profiles": profiles, "driver_version": gpus["driver_version"],
            "cuda_driver_version": gpus["cuda_driver_version"], "pci_gpu_count": gpus["pci_gpu_count"],
            "allow_driver_change": False, "long_context": long_context})

    assert spec["serving_max_model_len"] > mfacts["max_position_embeddings"] and spec["serving_long_context"]
    result = preflight(spec["serving_long_context"])
    assert result["errors"] == [], result["errors"]
    # at least one full-length sequence fits, as the plan counts it
    assert result["plan"]["fits"] and result["plan"]["kv_tokens"] >= spec["serving_max_model_len"], result["summary"]
    assert "context limit 131072 (serving_long_context YaRN x4.0)" in "\n".join(result["summary"])
    refused = preflight(None)
    assert [e for e in refused["errors"] if "set serving_long_context" in e], refused["errors"]
