"""The planner against each hybrid start-up log (tests/fixtures/gpu/hybrid; the whole outputs of
bench/gpu/h200-calibration.sh with RUN=hybrid, ID.raw, in a DIR with their host.txt):
plugins/module_utils/model.py analyze_model on the fixture's config and plan.py make_plan with the
inputs of the logged argv (TP, max-model-len, fraction, max-num-seqs, prefix caching) and the GPU's
memory as torch saw it on that host (host.txt: torch.cuda.mem_get_info total), twice: from first
principles, and with the engine's own "Available KV cache memory" given (available_kv_bytes), which
isolates the KV layout (block size, state pages, groups, what "GPU KV cache size" counts) from the
budget terms. Also prints vLLM 0.26.0's own arithmetic for that line from the plan's layout
(v1/core/kv_cache_utils.py get_kv_cache_capacity: int(max_concurrency x max_model_len), with
max_concurrency = num_blocks / (full groups x cdiv(max_model_len, block) + state groups x states)).
Run from the collection's root:  python3 bench/gpu/h200-hybrid-predict.py [DIR]
One JSON object per log."""
import json
import os
import re
import sys

from startup_log import FIX, M, P, number, read_log  # bench/gpu/startup_log.py, beside this script

DIR = sys.argv[1] if len(sys.argv) > 1 else os.path.join(FIX, "gpu", "hybrid")
GIB = 1024 ** 3


def gpu_total():
    with open(os.path.join(DIR, "host.txt")) as handle:
        return int(re.search(r"mem_get_info \d+ (\d+)", handle.read()).group(1))


def pct(planned, logged):
    return round(100.0 * (planned - logged) / logged, 3) if logged else None


TOTAL = gpu_total()
for name in sorted(os.listdir(DIR)):
    if not (name.endswith(".log") or name.endswith(".raw")):
        continue
    text, fixture, flags = read_log(os.path.join(DIR, name))
    model = M.analyze_model(os.path.join(FIX, "qwen", fixture))
    length = int(flags["max-model-len"])
    prefix = "enable-prefix-caching" in flags and "no-enable-prefix-caching" not in flags
    args = dict(engine="vllm", engine_version="0.26.0", gpu_name="NVIDIA H200",
                max_num_seqs=int(flags["max-num-seqs"]), enable_prefix_caching=prefix)
    plan = P.make_plan(model, TOTAL, 1, int(flags["tensor-parallel-size"]), length,
                       float(flags["gpu-memory-utilization"]), **args)
    row = {"file": name, "fixture": fixture, "prefix_caching": prefix,
           "weights_gib": number(r"Model loading took ([\d.]+) GiB", text),
           "available_gib": number(r"Available KV cache memory: ([\d.]+) GiB", text),
           "tokens": number(r"GPU KV cache size: ([\d,]+) tokens", text),
           "concurrency": number(r"Maximum concurrency for [\d,]+ tokens per request: ([\d.]+)x", text),
           "block_size": number(r"Setting attention block size to (\d+) tokens", text),
           "mamba_padding_pct": number(r"Padding mamba page size by ([\d.]+)%", text),
           "activation_gib": number(r"([\d.]+) GiB for peak activation", text),
           "non_torch_gib": number(r"([\d.]+) GiB for non-torch memory", text),
           "cudagraph_gib": number(r"([\d.]+) GiB for CUDAGraph memory", text),
           "cudagraph_estimate_gib": number(r"Estimated CUDA graph memory: ([\d.]+) GiB", text),
           "planned_weights_gib": round(P.gib(plan["weights_per_gpu_bytes"]), 3),
           "planned_activation_gib": round(P.gib(plan["activation_bytes"]), 3),
           "planned_non_torch_gib": round(P.gib(plan["non_torch_bytes"]), 3),
           "planned_available_gib": round(P.gib(plan["available_kv_bytes"]), 3),
           "planned_tokens": plan["kv_tokens"], "planned_concurrency": plan["max_concurrency_ratio"],
           "planned_block_size": plan["block_size"], "planned_states": plan["hybrid"]["states"],
           "planned_longest_context": plan["longest_context"]}
    if row["available_gib"]:
        given = P.make_plan(model, TOTAL, 1, int(flags["tensor-parallel-size"]), length,
                            float(flags["gpu-memory-utilization"]),
                            available_kv_bytes=int(row["available_gib"] * GIB), **args)
        hybrid = given["hybrid"]
        per_seq = hybrid["full_groups"] * -(-length // hybrid["block_size"]) + hybrid["state_blocks_per_sequence"]
        row.update({"given_tokens": given["kv_tokens"], "given_blocks": given["kv_blocks"],
                    "given_concurrency": given["max_concurrency_ratio"],
                    "vllm_formula_tokens": int(given["kv_blocks"] / float(per_seq) * length),
                    "error_given_tokens_pct": pct(given["kv_tokens"], row["tokens"])})
    row.update({"error_available_pct": pct(row["planned_available_gib"], row["available_gib"]),
                "error_tokens_pct": pct(row["planned_tokens"], row["tokens"])})
    print(json.dumps(row, sort_keys=True))
