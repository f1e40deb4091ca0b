"""Writes bench/gpu/h200-calibration-cases.txt: one vLLM 0.26.0 start per line for
bench/gpu/h200-calibration.sh, the argv rendered by the collection's own
plugins/module_utils/engine_args.py render("vllm", "0.26.0", spec). Run from the collection's root
with the collection importable as ansible_collections.llmops.serving (the script links it under a
temporary folder). Line: ID<TAB>FIXTURE<TAB>flags (the model directory is /root/ckpt/FIXTURE)."""
import os
import sys
import tempfile

ROOT = os.getcwd()
base = tempfile.mkdtemp()
os.makedirs(os.path.join(base, "ansible_collections", "llmops"))
os.symlink(ROOT, os.path.join(base, "ansible_collections", "llmops", "serving"))
sys.path.insert(0, base)
from ansible_collections.llmops.serving.plugins.module_utils import engine_args  # noqa: E402  pylint: disable=wrong-import-position

# (id, fixture, max_model_len, fraction, max_concurrency, max_batched_tokens); max_concurrency 256 is
# serving_max_concurrency's default, which the engine role renders as --max-num-seqs
CASES = [
    ("q3-0.6b-f0.9-len32768-s256", "Qwen3-0.6B", 32768, 0.9, 256, None),
    ("q25-7b-f0.9-len32768-s256", "Qwen2.5-7B-Instruct", 32768, 0.9, 256, None),
    ("q3-14b-f0.9-len32768-s256", "Qwen3-14B", 32768, 0.9, 256, None),
    ("q3-4b-f0.5-len32768-s256", "Qwen3-4B", 32768, 0.5, 256, None),
    ("q3-4b-f0.9-len32768-s64-t16384", "Qwen3-4B", 32768, 0.9, 64, 16384),
    ("q25-0.5b-f0.9-len32768-s256", "Qwen2.5-0.5B", 32768, 0.9, 256, None),
    ("q3-8b-f0.9-len32768-s256", "Qwen3-8B", 32768, 0.9, 256, None),
    ("q25-14b-f0.9-len32768-s256", "Qwen2.5-14B", 32768, 0.9, 256, None),
    ("q3-4b-f0.95-len32768-s256", "Qwen3-4B", 32768, 0.95, 256, None),
    ("q3-4b-f0.9-len32768-s256-t2048", "Qwen3-4B", 32768, 0.9, 256, 2048),
    ("q25-1.5b-f0.9-len32768-s256", "Qwen2.5-1.5B-Instruct", 32768, 0.9, 256, None),
    ("q3-4b-f0.9-len8192-s256", "Qwen3-4B", 8192, 0.9, 256, None),
    ("q3-4b-f0.7-len32768-s256", "Qwen3-4B", 32768, 0.7, 256, None),
    ("q3-4b-f0.9-len32768-s256", "Qwen3-4B", 32768, 0.9, 256, None),
    ("q25-32b-f0.95-len32768-s256", "Qwen2.5-32B-Instruct", 32768, 0.95, 256, None),
]

with open(os.path.join(ROOT, "bench", "gpu", "h200-calibration-cases.txt"), "w") as out:
    for ident, fixture, length, fraction, seqs, batched in CASES:
        spec = {"model_path": "/root/ckpt/" + fixture, "served_model_name": "m", "host": "127.0.0.1",
                "port": 8000, "max_model_len": length, "gpu_memory_fraction": fraction,
                "max_concurrency": seqs}
        if batched:
            spec["max_batched_tokens"] = batched
        result = engine_args.render("vllm", "0.26.0", spec)
        assert result["argv_prefix"] == ["serve", spec["model_path"]], result
        assert result["entry_module"] == "vllm.entrypoints.cli.main", result
        out.write("%s\t%s\t%s\n" % (ident, fixture, " ".join(result["flags"])))
