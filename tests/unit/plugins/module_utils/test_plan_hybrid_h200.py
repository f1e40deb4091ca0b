# -*- coding: utf-8 -*-
"""The planner against five vLLM 0.26.0 start-ups of the hybrid (Gated DeltaNet) Qwen3.5/3.6 shapes.

tests/fixtures/gpu/hybrid (README.md: 1xH200, driver 580.159.04, 2026-12-07): Qwen3.5-27B and
Qwen3.6-35B-A3B from their real configs with vLLM's dummy weights, TP 1, max-model-len 32768,
fraction 0.9, 256 sequences, with --enable-prefix-caching, with --no-enable-prefix-caching, and
(27B) with neither. The planner is called with the inputs of each log's argv and the usable memory
of the H200 that ran them (host.txt: torch.cuda.mem_get_info's total).

What the logs settle:
  * vLLM's "GPU KV cache size" of a hybrid model is its maximum concurrency at max-model-len in
    tokens (plan.VLLM_CONCURRENCY_TOKENS_FROM), not the longest context one sequence gets, which is
    7.5 to 22.2 % above the log given the engine's own KV memory;
  * the layout is the planner's: the block size vLLM sets (784, 1056), the state pages, two states a
    linear layer with prefix caching ("align") and one without, the maximum concurrency to the
    hundredth;
  * vLLM 0.26.0 leaves prefix caching off for hybrids when no flag says otherwise (the 27B start with
    neither flag has one state a layer).
"""
import os
import re

import pytest

from ansible_collections.llmops.serving.plugins.module_utils import model as M
from ansible_collections.llmops.serving.plugins.module_utils import plan as P
from test_plan_calibration import read_run as calibration_run
from test_plan_holdout import FIX, number

GIB = 1024 ** 3
HYBRID = os.path.join(FIX, "gpu", "hybrid")
LOGS = ("q35-27b-pc.log", "q35-27b-nopc.log", "q35-27b-enginedefault.log", "q36-35b-a3b-pc.log",
        "q36-35b-a3b-nopc.log")
# From first principles (no engine figure given) the planned KV memory was 1.3 to 2.9 % above the
# logged one: vLLM's peak activation of these shapes (2.58 GiB for Qwen3.5-27B on a fresh
# torch.compile, 1.42 from its cache; 1.52 for Qwen3.6-35B-A3B) against the V1 runner's 1.03 and
# 0.95 planned, and its CUDA-graph estimate (0.75, 0.57 GiB), which the plan leaves out and says so.
FIRST_PRINCIPLES_PCT = 3.0


def gpu_total():
    with open(os.path.join(HYBRID, "host.txt"), encoding="utf-8") as handle:
        return int(re.search(r"mem_get_info \d+ (\d+)", handle.read()).group(1))


def read_run(name):
    """The calibration's reading of one start-up, with the hybrid layout's figures."""
    run = calibration_run(name, HYBRID)
    text = run["text"]
    run.update({
        # vLLM 0.26.0 turns prefix caching on for a hybrid only when asked (engine/arg_utils.py:
        # default_prefix_caching = is_prefix_caching_supported and not is_hybrid)
        "prefix_caching": "enable-prefix-caching" in run["flags"],
        "concurrency": number(r"Maximum concurrency for [\d,]+ tokens per request: ([\d.]+)x", text),
        "block_size": int(number(r"Setting attention block size to (\d+) tokens", text)),
        "align": "Mamba cache mode is set to 'align'" in text,
    })
    return run


def plan_for(run, available_kv_bytes=None):
    flags = run["flags"]
    return P.make_plan(M.analyze_model(os.path.join(FIX, "qwen", run["model"])), gpu_total(), 1,
                       int(flags["tensor-parallel-size"]), int(flags["max-model-len"]),
                       float(flags["gpu-memory-utilization"]), "vllm", run["version"],
                       gpu_name="NVIDIA H200", max_num_seqs=int(flags["max-num-seqs"]),
                       enable_prefix_caching=run["prefix_caching"], available_kv_bytes=available_kv_bytes)


def test_the_fixtures_are_the_five_hybrid_starts():
    assert sorted(n for n in os.listdir(HYBRID) if n.endswith(".log")) == sorted(LOGS)
    for name in LOGS:
        run = read_run(name)
        assert run["version"] == "0.26.0"
        assert run["flags"]["load-format"] == "dummy" and run["flags"]["language-model-only"] is True
        assert (run["flags"]["max-model-len"], run["flags"]["gpu-memory-utilization"],
                run["flags"]["max-num-seqs"]) == ("32768", "0.9", "256")


@pytest.mark.parametrize("name", LOGS)
def test_kv_tokens_are_the_logged_ones_given_the_engines_kv_memory(name):
    run = read_run(name)
    plan = plan_for(run, int(run["available_gib"] * GIB))
    # the layout: vLLM's block size, the state count of the cache mode, its maximum concurrency
    assert plan["block_size"] == run["block_size"]
    assert plan["hybrid"]["states"] == (2 if run["align"] else 1)
    assert plan["max_concurrency_ratio"] == run["concurrency"]
    # what "GPU KV cache size" counts: int(num_blocks / blocks a sequence x max_model_len): within
    # 3 %, and to the token given the engine's KV memory
    assert abs(plan["kv_tokens"] - run["tokens"]) <= 0.03 * run["tokens"]
    assert plan["kv_tokens"] == run["tokens"]
    # the longest context one sequence gets stays in the plan apart, and is
    # 7.5 to 22.2 % above the logged figure
    hybrid = plan["hybrid"]
    assert hybrid["longest_context_tokens"] == \
        (plan["kv_blocks"] - hybrid["state_blocks_per_sequence"]) * hybrid["block_size"]
    assert hybrid["longest_context_tokens"] > 1.07 * run["tokens"]
    assert plan["longest_context"] == min(hybrid["longest_context_tokens"], 262144)


@pytest.mark.parametrize("name", LOGS)
def test_kv_tokens_from_first_principles_are_within_three_percent(name):
    run = read_run(name)
    plan = plan_for(run)
    error = 100.0 * (plan["kv_tokens"] - run["tokens"]) / run["tokens"]
    assert 0 < error <= FIRST_PRINCIPLES_PCT, error
    assert plan["fits"] and plan["kv_tokens_error_pct"] is None


def test_prefix_caching_is_off_by_default_for_hybrids_in_vllm_0_26():
    flagged_off = read_run("q35-27b-nopc.log")
    neither = read_run("q35-27b-enginedefault.log")
    flagged_on = read_run("q35-27b-pc.log")
    assert not neither["align"] and not flagged_off["align"] and flagged_on["align"]
    # one state a layer: 42 + 3 blocks a 32768-token sequence at 784 tokens a block, two with "align"
    for run, per_sequence in ((neither, 45), (flagged_off, 45), (flagged_on, 48)):
        plan = plan_for(run, int(run["available_gib"] * GIB))
        assert round(plan["kv_blocks"] / float(per_sequence), 2) == run["concurrency"]


def test_dense_plans_and_older_vllm_hybrid_plans_are_unchanged():
    run = read_run("q35-27b-pc.log")
    # before v0.20.1 vLLM logged num_blocks // groups x min block size, which the plan does not
    # model: kv_tokens stays the longest context there
    older = plan_for(dict(run, version="0.19.1"), int(run["available_gib"] * GIB))
    assert older["kv_tokens"] == older["hybrid"]["longest_context_tokens"]
    dense = P.make_plan(M.analyze_model(os.path.join(FIX, "qwen", "Qwen3-4B")), gpu_total(), 1, 1, 32768,
                        0.9, "vllm", "0.26.0", gpu_name="NVIDIA H200", max_num_seqs=256,
                        available_kv_bytes=100 * GIB)
    assert dense["hybrid"] is None and dense["kv_tokens"] == dense["kv_blocks"] * 16
    assert dense["longest_context"] == min(dense["kv_tokens"], 40960)
