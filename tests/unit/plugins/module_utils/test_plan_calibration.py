# -*- coding: utf-8 -*-
"""The planner against the fourteen vLLM 0.26.0 start-ups it was calibrated on.

tests/fixtures/gpu/calibration (README.md: 1xH200, driver 580.159.04, 2026-12-03) is the fit set of
the vLLM 0.26 V2-runner terms (the engine registry's V2_026_TERMS: non-torch base, per-peer NCCL,
profile floor), so these tests pin the fit, not the planner's accuracy elsewhere: that is
test_plan_holdout.py's and test_plan_public.py's. Each tolerance is the error measured on
2026-12-03 with those terms, rounded up. The planner is called as test_plan_holdout.py calls it:
the argv of the log's first line, the fixture config of the checkpoint's name, the usable memory
of the live H200.
"""
import os
import re

import pytest

from ansible_collections.llmops.serving.plugins.module_utils import engines as E
from ansible_collections.llmops.serving.plugins.module_utils import model as M
from ansible_collections.llmops.serving.plugins.module_utils import plan as P
from test_plan_holdout import FIX, H200, number

CALIBRATION = os.path.join(FIX, "gpu", "calibration")


# log -> (relative tolerance on KV tokens, tolerance on available KV memory in GiB). The comments
# give planned vs logged tokens and GiB, the error before these terms in brackets.
RUNS = {
    # 10,869,552 vs 10,862,704 (+0.063 %; -0.012 %), 124.392 vs 124.31 GiB: activation 0.280 planned
    # vs 0.35 logged (the floor is low for Qwen2.5's small shapes).
    "q25-0.5b-f0.9-len32768-s256.log": (0.0007, 0.09),
    # 4,577,360 vs 4,570,592 (+0.148 %; +0.058 %), 122.229 vs 122.05 GiB: weights 2.891 planned vs
    # 2.98 logged, activation 0.481 vs 0.57.
    "q25-1.5b-f0.9-len32768-s256.log": (0.0015, 0.18),
    # 526,592 vs 526,368 (+0.043 %; +0.693 %), 96.425 vs 96.38 GiB
    "q25-14b-f0.9-len32768-s256.log": (0.0005, 0.05),
    # 2,064,912 vs 2,063,088 (+0.088 %; +0.071 %), 110.278 vs 110.18 GiB: weights 0.09 GiB low
    "q25-7b-f0.9-len32768-s256.log": (0.0009, 0.1),
    # 1,162,320 vs 1,162,352 (-0.003 %; -0.008 %), 124.150 vs 124.15 GiB
    "q3-0.6b-f0.9-len32768-s256.log": (0.0001, 0.01),
    # 632,224 vs 632,224 (0 %; +0.478 %), 96.471 vs 96.47 GiB
    "q3-14b-f0.9-len32768-s256.log": (0.0001, 0.01),
    # 446,848 vs 446,496 (+0.079 %; +0.290 %), 61.367 vs 61.32 GiB
    "q3-4b-f0.5-len32768-s256.log": (0.0008, 0.05),
    # 650,448 vs 651,440 (-0.152 %; -0.007 %), 89.327 vs 89.46 GiB: the compiled graph came from the
    # torch.compile cache and vLLM logged a 0.62 GiB peak where the floor says 0.80 (fresh compile).
    "q3-4b-f0.7-len32768-s256.log": (0.0016, 0.14),
    # 854,048 vs 854,112 (-0.007 %; +0.397 %), 117.288 vs 117.30 GiB: 2048 batched tokens, the floor
    # (0.80 GiB) where the MLP forward is 0.14 GiB; vLLM logged 0.74.
    "q3-4b-f0.9-len32768-s256-t2048.log": (0.0001, 0.02),
    # 854,048 vs 855,040 (-0.116 %; -0.006 %), 117.288 vs 117.42 GiB: compile cache hit, as f0.7
    "q3-4b-f0.9-len32768-s256.log": (0.0012, 0.14),
    # 851,696 vs 850,352 (+0.158 %; +0.064 %), 116.964 vs 116.78 GiB: at 16384 batched tokens the
    # MLP forward (1.125 GiB) is the planned peak, vLLM logged 1.26.
    "q3-4b-f0.9-len32768-s64-t16384.log": (0.0016, 0.19),
    # 854,048 vs 853,696 (+0.041 %; +0.152 %), 117.288 vs 117.24 GiB
    "q3-4b-f0.9-len8192-s256.log": (0.0005, 0.05),
    # 904,960 vs 905,952 (-0.110 %; -0.007 %), 124.278 vs 124.41 GiB: compile cache hit, as f0.7
    "q3-4b-f0.95-len32768-s256.log": (0.0011, 0.14),
    # 794,016 vs 794,016 (0 %; +0.387 %), 109.043 vs 109.04 GiB
    "q3-8b-f0.9-len32768-s256.log": (0.0001, 0.01),
}


def logged_argv(text):
    """The model folder's name and the flags of a start-up log's argv (its first line)."""
    argv = re.search(r"argv: vllm serve (.*)", text.splitlines()[0]).group(1).split()
    flags = {}
    for i, word in enumerate(argv[1:], 1):
        if word.startswith("--"):
            flags[word[2:]] = argv[i + 1] if i + 1 < len(argv) and not argv[i + 1].startswith("--") else True
    return os.path.basename(argv[0]), flags


def read_run(name, folder=CALIBRATION):
    """The flags of the logged argv (first line) and the engine's figures of one start-up, with
    its whole text."""
    with open(os.path.join(folder, name), encoding="utf-8") as handle:
        text = handle.read()
    model, flags = logged_argv(text)
    return {
        "text": text,
        "model": model,
        "flags": flags,
        "version": re.search(r"version (\d+\.\d+\.\d+)", text).group(1),
        "available_gib": number(r"Available KV cache memory: ([\d.]+) GiB", text),
        "tokens": int(number(r"GPU KV cache size: ([\d,]+) tokens", text)),
        "activation_gib": number(r"([\d.]+) GiB for peak activation", text),
        "non_torch_gib": number(r"([\d.]+) GiB for non-torch memory", text),
        "compile_cache_hit": "Directly load the compiled graph" in text,
    }


def plan_for(run):
    flags = run["flags"]
    seqs = flags.get("max-num-seqs")
    batched = flags.get("max-num-batched-tokens")
    return P.make_plan(M.analyze_model(os.path.join(FIX, "qwen", run["model"])), H200, 1,
                       int(flags["tensor-parallel-size"]), int(flags["max-model-len"]),
                       float(flags["gpu-memory-utilization"]), "vllm", run["version"], gpu_name="NVIDIA H200",
                       max_num_seqs=int(seqs) if seqs else None,
                       max_num_batched_tokens=int(batched) if batched else None)


def readme_rows():
    """file -> (available KV GiB, KV tokens) of the fixture README's first table."""
    with open(os.path.join(CALIBRATION, "README.md"), encoding="utf-8") as handle:
        text = handle.read()
    table = text[:text.index("## The planner on these runs")]
    rows = {}
    for line in table.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) > 7 and cells[0].startswith("`") and cells[0].endswith(".log`"):
            rows[cells[0].strip("`")] = (float(cells[6].split()[0]), int(cells[7].split()[0].replace(",", "")))
    return rows


def test_every_recorded_run_is_pinned_and_the_readme_agrees():
    logs = sorted(n for n in os.listdir(CALIBRATION) if n.endswith(".log"))
    assert logs == sorted(RUNS)
    rows = readme_rows()
    assert sorted(rows) == logs
    for name in logs:
        run = read_run(name)
        assert rows[name] == (run["available_gib"], run["tokens"]), name


@pytest.mark.parametrize("name", sorted(RUNS))
def test_calibration_runs_are_single_gpu_vllm_0_26_dense(name):
    run = read_run(name)
    assert run["version"] == "0.26.0"
    assert run["flags"]["tensor-parallel-size"] == "1"
    assert run["non_torch_gib"] == E.V2_026_TERMS["non_torch_base_gib"]
    plan = plan_for(run)
    assert plan["engine_runner"] == "v2"
    assert plan["kv_tokens_error_pct"] == E.V2_026_ERROR_PCT


@pytest.mark.parametrize("name", sorted(RUNS))
def test_planner_reproduces_the_calibration_run(name):
    rel_tokens, abs_gib = RUNS[name]
    run = read_run(name)
    plan = plan_for(run)
    assert plan["available_kv_source"].startswith("first principles")
    error = (plan["kv_tokens"] - run["tokens"]) / float(run["tokens"])
    assert abs(error) <= rel_tokens, (name, plan["kv_tokens"], run["tokens"], error)
    assert abs(P.gib(plan["available_kv_bytes"]) - run["available_gib"]) <= abs_gib
    # the fit's band: the largest of these errors, rounded up
    assert abs(error) * 100 <= plan["kv_tokens_error_pct"]


def test_the_profile_floor_is_fresh_compile_peak_by_hidden_size():
    # The runs at 8192 batched tokens that compiled their graph: the floor (hidden x 168,000 bf16
    # rows) is within 0.01 GiB of the logged peak from 2560 to 5120 wide, and below it for the two
    # small Qwen2.5 shapes (0.07 / 0.09 GiB, where the sampler and other buffers matter more).
    for name in sorted(RUNS):
        run = read_run(name)
        if run["compile_cache_hit"] or run["flags"].get("max-num-batched-tokens"):
            continue
        plan = plan_for(run)
        planned = P.gib(plan["activation_bytes"])
        slack = 0.1 if run["model"] in ("Qwen2.5-0.5B", "Qwen2.5-1.5B-Instruct") else 0.01
        assert -slack <= planned - run["activation_gib"] <= 0.01, (name, planned, run["activation_gib"])
