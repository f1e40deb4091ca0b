"""Writes bench/gpu/h200-hybrid-cases.txt: the vLLM 0.26.0 starts of the hybrid (Gated DeltaNet)
Qwen3.5/3.6 shapes for bench/gpu/h200-calibration.sh with RUN=hybrid MODEL_DIR=config, one per
line, with the argv the collection renders: plugins/module_utils/engine_args.py render("vllm", "0.26.0", spec, extra_args=...).
The spec is the engine role's default (roles/serving_spec/defaults/main.yml: serving_gpu_memory_fraction,
serving_max_concurrency, serving_enable_prefix_caching) at max_model_len 32768, TP 1, with and without
prefix caching. Two flags come in as serving_engine_extra_args, since the fixtures hold a config and
no weights: --load-format dummy (vLLM fills the weights with random values: no checkpoint needed) and
--language-model-only (the multimodal Qwen3_5(Moe)ForConditionalGeneration without its vision tower
and without a processor config, which the fixtures lack; vllm/config/multimodal.py and
model_executor/models/interfaces.py _mark_tower_model of the 0.26.0 wheel). Run from the collection's
root; the collection is linked as ansible_collections.llmops.serving under a temporary folder.
Line: ID<TAB>FIXTURE<TAB>flags (the model directory is /root/ckpt/FIXTURE)."""
import os
import re
import sys
import tempfile

ROOT = os.getcwd()
base = tempfile.mkdtemp()
os.makedirs(os.path.join(base, "ansible_collections", "llmops"))
os.symlink(ROOT, os.path.join(base, "ansible_collections", "llmops", "serving"))
sys.path.insert(0, base)
from ansible_collections.llmops.serving.plugins.module_utils import engine_args  # noqa: E402  pylint: disable=wrong-import-position


def role_default(name):
    """A scalar default of the serving_spec role (null -> None)."""
    with open(os.path.join(ROOT, "roles", "serving_spec", "defaults", "main.yml")) as handle:
        for line in handle:
            found = re.match(r"^%s:\s*(\S+)" % name, line)
            if found:
                value = found.group(1)
                if value in ("null", "~"):
                    return None
                if value in ("true", "false"):
                    return value == "true"
                return float(value) if "." in value else int(value)
    raise KeyError(name)


FRACTION = role_default("serving_gpu_memory_fraction")
SEQS = role_default("serving_max_concurrency")
EXTRA = {"load-format": "dummy", "language-model-only": True}

# (id, fixture, enable_prefix_caching)
CASES = [
    ("q35-27b-pc", "Qwen3.5-27B", True),
    ("q35-27b-nopc", "Qwen3.5-27B", False),
    ("q36-35b-a3b-pc", "Qwen3.6-35B-A3B", True),
    ("q36-35b-a3b-nopc", "Qwen3.6-35B-A3B", False),
]

with open(os.path.join(ROOT, "bench", "gpu", "h200-hybrid-cases.txt"), "w") as out:
    for ident, fixture, prefix_caching in CASES:
        spec = {"model_path": "/root/ckpt/" + fixture, "served_model_name": "m", "host": "127.0.0.1",
                "port": 8000, "max_model_len": 32768, "gpu_memory_fraction": FRACTION,
                "max_concurrency": SEQS, "enable_prefix_caching": prefix_caching}
        result = engine_args.render("vllm", "0.26.0", spec, extra_args=EXTRA)
        assert result["argv_prefix"] == ["serve", spec["model_path"]], result
        assert result["entry_module"] == "vllm.entrypoints.cli.main", result
        assert not result["warnings"], result["warnings"]
        out.write("%s\t%s\t%s\n" % (ident, fixture, " ".join(result["flags"])))
