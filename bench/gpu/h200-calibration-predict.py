"""The planner's prediction for each calibration log in tests/fixtures/gpu/calibration, computed as
tests/unit/plugins/module_utils/test_plan_holdout.py does (plugins/module_utils/model.py
analyze_model on the fixture, plan.py make_plan with the usable memory of one H200 from
tests/fixtures/gpu/h200-x2-live/nvml.json and the flags of the logged argv). Run from the
collection's root; prints one JSON object per log (logged and planned figures, errors in %)."""
import json
import os

from startup_log import FIX, M, P, number, read_log  # bench/gpu/startup_log.py, beside this script

CAL = os.path.join(FIX, "gpu", "calibration")
with open(os.path.join(FIX, "gpu", "h200-x2-live", "nvml.json")) as handle:
    MEM = json.load(handle)["gpus"][0]["mem_v2"]
H200 = MEM["total"] - MEM["reserved"]

for name in sorted(os.listdir(CAL)):
    if not name.endswith(".log"):
        continue
    text, fixture, flags = read_log(os.path.join(CAL, name))
    seqs = flags.get("max-num-seqs")
    batched = flags.get("max-num-batched-tokens")
    plan = P.make_plan(M.analyze_model(os.path.join(FIX, "qwen", fixture)), H200, 1,
                       int(flags["tensor-parallel-size"]), int(flags["max-model-len"]),
                       float(flags["gpu-memory-utilization"]), "vllm", "0.26.0", gpu_name="NVIDIA H200",
                       max_num_seqs=int(seqs) if seqs else None,
                       max_num_batched_tokens=int(batched) if batched else None)
    logged_gib = number(r"Available KV cache memory: ([\d.]+) GiB", text)
    logged_tokens = int(number(r"GPU KV cache size: ([\d,]+) tokens", text))
    row = {"file": name, "fixture": fixture, "weights_gib": number(r"Model loading took ([\d.]+) GiB", text),
           "available_gib": logged_gib, "tokens": logged_tokens,
           "activation_gib": number(r"([\d.]+) GiB for peak activation", text),
           "non_torch_gib": number(r"([\d.]+) GiB for non-torch memory", text),
           "compile_cache": "hit" if "Directly load the compiled graph" in text else "miss",
           "planned_weights_gib": round(P.gib(plan["weights_per_gpu_bytes"]), 3),
           "planned_activation_gib": round(P.gib(plan["activation_bytes"]), 3),
           "planned_non_torch_gib": round(P.gib(plan["non_torch_bytes"]), 3),
           "planned_available_gib": round(P.gib(plan["available_kv_bytes"]), 3),
           "planned_tokens": plan["kv_tokens"], "source": plan["available_kv_source"],
           "error_available_pct": round(100.0 * (P.gib(plan["available_kv_bytes"]) - logged_gib) / logged_gib, 3),
           "error_tokens_pct": round(100.0 * (plan["kv_tokens"] - logged_tokens) / logged_tokens, 3)}
    print(json.dumps(row, sort_keys=True))
