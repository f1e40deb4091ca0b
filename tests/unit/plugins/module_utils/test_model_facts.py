# -*- coding: utf-8 -*-
"""model_facts logic on the real Qwen2.5-32B-Instruct, Qwen3-4B, and the hybrid Qwen3-Next-80B-A3B,
Qwen3.6-35B-A3B and Qwen3.5-27B configs (tests/fixtures/qwen, SOURCES.md) and on generated model
folders with real safetensors headers."""
import json
import os
import shutil
import struct
import subprocess

import pytest

from ansible_collections.llmops.serving.plugins.module_utils import model as M

QWEN = os.path.join(os.path.dirname(__file__), "..", "..", "..", "fixtures", "qwen")
Q25 = os.path.join(QWEN, "Qwen2.5-32B-Instruct")
Q3 = os.path.join(QWEN, "Qwen3-4B")
QNEXT = os.path.join(QWEN, "Qwen3-Next-80B-A3B-Instruct")
Q36 = os.path.join(QWEN, "Qwen3.6-35B-A3B")
Q35 = os.path.join(QWEN, "Qwen3.5-27B")
VLLM_PY = os.environ.get("LLMOPS_TEST_VLLM_PYTHON")
SGLANG_PY = os.environ.get("LLMOPS_TEST_SGLANG_PYTHON")
SGL_OVERLAY = os.path.join(QWEN, "..", "sgl_kernel_cpu_shim", "overlay")

ST_BYTES = {"BF16": 2, "F16": 2, "F32": 4, "F8_E4M3": 1}


def write_safetensors(path, tensors, truncate=0):
    """A real safetensors file: 8-byte length, JSON header, zeroed data."""
    header = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name, (dtype, shape) in tensors.items():
        count = 1
        for dim in shape:
            count *= dim
        size = count * ST_BYTES[dtype]
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + size]}
        offset += size
    raw = json.dumps(header).encode()
    with open(path, "wb") as handle:
        handle.write(struct.pack("<Q", len(raw)))
        handle.write(raw)
        handle.write(b"\0" * max(0, offset - truncate))
    return offset


def tiny_config(**over):
    config = {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": 64,
              "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
              "head_dim": 32, "intermediate_size": 128, "vocab_size": 256,
              "max_position_embeddings": 4096, "tie_word_embeddings": True,
              "torch_dtype": "bfloat16"}
    config.update(over)
    return config


def tiny_tensors(config, layers):
    h, hd = config["hidden_size"], config["head_dim"]
    q, kv, inter = config["num_attention_heads"] * hd, config["num_key_value_heads"] * hd, \
        config["intermediate_size"]
    out = {}
    for i in layers:
        p = "model.layers.%d." % i
        out.update({
            p + "self_attn.q_proj.weight": ("BF16", (q, h)),
            p + "self_attn.k_proj.weight": ("BF16", (kv, h)),
            p + "self_attn.v_proj.weight": ("BF16", (kv, h)),
            p + "self_attn.o_proj.weight": ("BF16", (h, q)),
            p + "self_attn.q_norm.weight": ("BF16", (hd,)),
            p + "self_attn.k_norm.weight": ("BF16", (hd,)),
            p + "mlp.gate_proj.weight": ("BF16", (inter, h)),
            p + "mlp.up_proj.weight": ("BF16", (inter, h)),
            p + "mlp.down_proj.weight": ("BF16", (h, inter)),
            p + "input_layernorm.weight": ("BF16", (h,)),
            p + "post_attention_layernorm.weight": ("BF16", (h,)),
        })
    return out


def sharded_model(folder, config=None):
    """Two shards + index, like a hub download. Returns (config, total params)."""
    config = config or tiny_config()
    folder.mkdir(exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config))
    shard1 = tiny_tensors(config, [0])
    shard1["model.embed_tokens.weight"] = ("BF16", (config["vocab_size"], config["hidden_size"]))
    shard2 = tiny_tensors(config, [1])
    shard2["model.norm.weight"] = ("BF16", (config["hidden_size"],))
    names = ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]
    total = 0
    weight_map = {}
    for name, tensors in zip(names, (shard1, shard2)):
        total += write_safetensors(str(folder / name), tensors)
        weight_map.update(dict((t, name) for t in tensors))
    (folder / "model.safetensors.index.json").write_text(json.dumps(
        {"metadata": {"total_size": total}, "weight_map": weight_map}))
    params = sum(_count(shape) for tensors in (shard1, shard2) for _d, shape in tensors.values())
    return config, params, total, names


def _count(shape):
    n = 1
    for d in shape:
        n *= d
    return n


# ------------------------------------------------------------------------ real configs
def test_qwen25_32b_from_config_and_index():
    facts = M.analyze_model(Q25, engine="vllm", engine_version="0.26.0")
    assert facts["architecture"] == "Qwen2ForCausalLM"
    assert (facts["num_hidden_layers"], facts["num_attention_heads"],
            facts["num_key_value_heads"]) == (64, 40, 8)
    assert facts["head_dim"] == 5120 // 40 and facts["head_dim_source"] == "hidden_size / heads"
    assert facts["dtype"] == "bfloat16"
    assert facts["max_context"] == 32768
    # no shards in the fixture: counted from the index's total_size / 2 bytes
    with open(os.path.join(Q25, "model.safetensors.index.json")) as handle:
        total = json.load(handle)["metadata"]["total_size"]
    assert facts["weight_bytes"] == total
    assert facts["parameter_count"] == total // 2
    assert facts["parameter_count_source"] == "index total_size / dtype"
    assert facts["weights"]["status"] == "absent"
    assert len(facts["weights"]["files"]) == 17
    assert facts["engine_support"]["supported"] is True


def test_config_estimate_agrees_with_the_real_index():
    """The config-only estimate (used before anything is downloaded) against the real index."""
    facts = M.analyze_model(Q25)
    assert abs(facts["parameter_count_estimate"] - facts["parameter_count"]) \
        <= 0.001 * facts["parameter_count"]


def test_qwen3_4b_explicit_head_dim_wins_over_hidden_by_heads():
    facts = M.analyze_model(Q3)
    assert facts["hidden_size"] // facts["num_attention_heads"] == 80
    assert facts["head_dim"] == 128 and facts["head_dim_source"] == "config head_dim"
    assert facts["tie_word_embeddings"] is True
    assert facts["weights"]["status"] == "absent" and facts["weights"]["files"] == []
    # Qwen3-4B is published as 4.02B parameters
    assert 3.9e9 < facts["parameter_count"] < 4.1e9
    assert facts["parameter_count_source"] == "estimated from config"
    assert facts["max_context"] == 40960 and facts["rope_scaling"] is None


def test_dtype_field_of_newer_transformers_and_text_config():
    config = tiny_config()
    del config["torch_dtype"]
    config["dtype"] = "float16"
    assert M.analyze_model(config=config)["dtype"] == "float16"
    wrapped = {"architectures": ["Qwen2_5_VLForConditionalGeneration"], "model_type": "qwen2_5_vl",
               "torch_dtype": "bfloat16", "text_config": tiny_config(num_hidden_layers=5)}
    facts = M.analyze_model(config=wrapped)
    assert facts["num_hidden_layers"] == 5 and facts["dtype"] == "bfloat16"


# ------------------------------------------------------------------- hybrid (linear attention)
def gdn_layer_bytes(key_heads, value_heads, key_dim, value_dim, kernel, tp, conv_bytes, ssm_bytes):
    """One gated-delta-net layer's state for one sequence on one GPU, by the engines' shape rule:
    conv (2 x key_heads x key_dim + value_heads x value_dim) / tp x (kernel - 1), ssm
    value_heads / tp x value_dim x key_dim."""
    conv = (2 * key_heads * key_dim + value_heads * value_dim) // tp * (kernel - 1)
    ssm = value_heads // tp * value_dim * key_dim
    return conv * conv_bytes + ssm * ssm_bytes


def test_qwen3_next_layers_from_full_attention_interval():
    facts = M.analyze_model(QNEXT, engine="vllm", engine_version="0.10.2")
    assert facts["architecture"] == "Qwen3NextForCausalLM"
    # no layer_types in this config: every 4th of the 48 layers is full attention
    assert facts["num_hidden_layers"] == 48
    assert facts["full_attention_layers"] == 48 // 4 == 12
    assert facts["linear_attention_layers"] == 48 - 12 == 36
    assert facts["linear_attention"] == {"num_key_heads": 16, "num_value_heads": 32,
                                         "key_head_dim": 128, "value_head_dim": 128,
                                         "conv_kernel_dim": 4, "ssm_dtype": None}
    # bf16 conv and ssm state (no mamba_ssm_dtype): conv (2*16*128 + 32*128) * 3 = 24576
    # elements, ssm 32*128*128 = 524288 elements, 2 bytes each = 1097728 bytes a layer
    layer = gdn_layer_bytes(16, 32, 128, 128, 4, 1, 2, 2)
    assert layer == (8192 * 3 + 32 * 128 * 128) * 2 == 1097728
    assert facts["linear_state_bytes"] == 36 * layer == 39518208
    assert (facts["num_experts"], facts["num_experts_per_tok"], facts["moe_intermediate_size"],
            facts["shared_expert_intermediate_size"]) == (512, 10, 512, 512)
    assert facts["vocab_size"] == 151936 and facts["max_context"] == 262144
    assert facts["engine_support"]["supported"] is True
    assert "hybrid: 12 full-attention layers" in M.model_summary_line(facts)


def test_qwen3_next_layer_types_list_gives_the_same_split():
    with open(os.path.join(QNEXT, "config.json")) as handle:
        config = json.load(handle)
    # the list transformers derives from full_attention_interval 4, written out
    config["layer_types"] = (["linear_attention"] * 3 + ["full_attention"]) * 12
    facts = M.analyze_model(config=config)
    assert (facts["full_attention_layers"], facts["linear_attention_layers"]) == (12, 36)
    assert M.layer_kinds(config)[:4] == ["linear_attention"] * 3 + ["full_attention"]


def test_qwen3_next_parameter_estimate_by_hand():
    # every shape as the checkpoint's modules print them (SOURCES.md): hidden 2048, 16 heads x
    # 256 (q_proj 2048 -> 8192: queries and their output gate), 2 KV heads; gated delta net:
    # in_proj_qkvz 2048 -> 12288, in_proj_ba 2048 -> 64, conv1d 8192 x 4, dt_bias and A_log 32
    # each, norm 128, out_proj 4096 -> 2048; 512 experts of 3 x 2048 x 512 + router, a shared
    # expert of 3 x 2048 x 512 + its gate; untied 151936 x 2048 embeddings
    full = 2048 * 8192 + 2 * 2048 * 512 + 4096 * 2048 + 2 * 256
    linear = 2048 * 12288 + 2048 * 64 + 8192 * 4 + 2 * 32 + 128 + 4096 * 2048
    moe = 512 * 3 * 2048 * 512 + 2048 * 512 + 3 * 2048 * 512 + 2048
    norms = 2 * 2048
    total = 12 * (full + norms + moe) + 36 * (linear + norms + moe) + 2 * 151936 * 2048 + 2048
    facts = M.analyze_model(QNEXT)
    assert facts["parameter_count_estimate"] == total == 79674391296  # the published "80B"
    assert facts["parameter_count_source"] == "estimated from config"


def test_qwen36_moe_text_config_with_layer_types():
    facts = M.analyze_model(Q36, engine="vllm", engine_version="0.17.0")
    assert facts["architecture"] == "Qwen3_5MoeForConditionalGeneration"
    assert facts["model_type"] == "qwen3_5_moe"  # the wrapper's; the layout is text_config's
    # layer_types: 10 x (3 linear, 1 full) over 40 layers
    assert (facts["num_hidden_layers"], facts["full_attention_layers"],
            facts["linear_attention_layers"]) == (40, 10, 30)
    assert (facts["hidden_size"], facts["num_attention_heads"], facts["num_key_value_heads"],
            facts["head_dim"], facts["vocab_size"]) == (2048, 16, 2, 256, 248320)
    assert facts["dtype"] == "bfloat16" and facts["max_context"] == 262144
    assert (facts["num_experts"], facts["num_experts_per_tok"]) == (256, 8)
    # mamba_ssm_dtype float32: conv 8192 * 3 elements x 2 bytes + ssm 32*128*128 x 4 bytes
    layer = gdn_layer_bytes(16, 32, 128, 128, 4, 1, 2, 4)
    assert layer == 8192 * 3 * 2 + 524288 * 4 == 2146304
    assert facts["linear_state_bytes"] == 30 * layer == 64389120
    assert facts["engine_support"]["supported"] is True
    assert M.engine_support(facts["architecture"], "vllm", "0.16.0")["supported"] is False


def test_qwen35_dense_text_config():
    facts = M.analyze_model(Q35)
    assert facts["architecture"] == "Qwen3_5ForConditionalGeneration"
    assert (facts["num_hidden_layers"], facts["full_attention_layers"],
            facts["linear_attention_layers"]) == (64, 16, 48)
    assert facts["num_experts"] == 0 and facts["intermediate_size"] == 17408
    # 48 value heads: conv (2*16*128 + 48*128) * 3 = 30720 elements x 2 bytes, ssm 48*128*128 x 4
    layer = gdn_layer_bytes(16, 48, 128, 128, 4, 1, 2, 4)
    assert layer == 10240 * 3 * 2 + 48 * 128 * 128 * 4 == 3207168
    assert facts["linear_state_bytes"] == 48 * layer


@pytest.mark.parametrize("tp", [1, 2, 4])
def test_linear_state_splits_across_tensor_parallel_ranks(tp):
    shape = M.analyze_model(Q36)["linear_attention"]
    vllm = M.linear_state_bytes(shape, tp, 2, "vllm")
    assert vllm["layer_bytes"] == gdn_layer_bytes(16, 32, 128, 128, 4, tp, 2, 4) == 2146304 // tp
    # SGLang: bf16 conv, ssm in mamba_ssm_dtype (float32 here and by default)
    qnext = M.analyze_model(QNEXT)["linear_attention"]
    assert M.linear_state_bytes(qnext, tp, 2, "sglang")["layer_bytes"] == \
        gdn_layer_bytes(16, 32, 128, 128, 4, tp, 2, 4)
    assert M.linear_state_bytes(qnext, tp, 2, "vllm")["layer_bytes"] == \
        gdn_layer_bytes(16, 32, 128, 128, 4, tp, 2, 2)


@pytest.mark.parametrize("path", [Q25, Q3])
def test_models_without_linear_attention_are_unchanged(path):
    facts = M.analyze_model(path)
    assert facts["full_attention_layers"] == facts["num_hidden_layers"]
    assert facts["linear_attention_layers"] == 0 and facts["linear_attention"] is None
    assert facts["linear_state_bytes"] == 0
    assert "hybrid" not in M.model_summary_line(facts)
    with open(os.path.join(path, "config.json")) as handle:
        config = json.load(handle)
    # newer transformers write layer_types for plain models too: still all KV layers
    config["layer_types"] = ["full_attention"] * config["num_hidden_layers"]
    assert M.analyze_model(config=config)["full_attention_layers"] == config["num_hidden_layers"]
    assert M.estimate_parameters(config) == facts["parameter_count_estimate"]


STATE_SCRIPTS = {
    "vllm": r'''
import json, sys, torch
from vllm.model_executor.layers.mamba.mamba_utils import (
    MambaStateDtypeCalculator, MambaStateShapeCalculator)
from vllm.v1.kv_cache_interface import MambaSpec
out = []
for c, tp in json.loads(sys.stdin.read()):
    shapes = MambaStateShapeCalculator.gated_delta_net_state_shape(
        tp, c["linear_num_key_heads"], c["linear_num_value_heads"], c["linear_key_head_dim"],
        c["linear_value_head_dim"], c["linear_conv_kernel_dim"])
    # what vLLM's Qwen3.5 config hook makes of mamba_ssm_dtype; "auto" otherwise
    dtypes = MambaStateDtypeCalculator.gated_delta_net_state_dtype(
        torch.bfloat16, "auto", c.get("mamba_ssm_dtype") or "auto")
    out.append(MambaSpec(shapes=shapes, dtypes=dtypes, block_size=-1).page_size_bytes)
print("@@" + json.dumps(out))
''',
    "sglang": r'''
import json, sys, types
from sglang.srt.configs.mamba_utils import Mamba2StateShape, mamba2_state_dtype
out = []
for c, tp in json.loads(sys.stdin.read()):
    shape = Mamba2StateShape.create(
        tp_world_size=tp, intermediate_size=c["linear_value_head_dim"] * c["linear_num_value_heads"],
        n_groups=c["linear_num_key_heads"], num_heads=c["linear_num_value_heads"],
        head_dim=c["linear_value_head_dim"], state_size=c["linear_key_head_dim"],
        conv_kernel=c["linear_conv_kernel_dim"])
    cfg = types.SimpleNamespace(**({"mamba_ssm_dtype": c["mamba_ssm_dtype"]} if "mamba_ssm_dtype" in c else {}))
    dt = mamba2_state_dtype(cfg)
    size = sum(a * b for a, b in shape.conv) * dt.conv.itemsize
    t = shape.temporal
    out.append(size + t[0] * t[1] * t[2] * dt.temporal.itemsize)
print("@@" + json.dumps(out))
''',
}


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_state_size_matches_the_engines_own_state_shapes(engine):
    """The planner's per-layer state against the installed engine's own shape and dtype functions
    for the real configs (runs in the engine venvs `make unit` names)."""
    python = VLLM_PY if engine == "vllm" else SGLANG_PY
    if not python or not os.path.exists(python):
        pytest.skip("set LLMOPS_TEST_%s_PYTHON to the engine venv's python (make unit does)"
                    % engine.upper())
    cases, expected = [], []
    for path in (QNEXT, Q36, Q35):
        with open(os.path.join(path, "config.json")) as handle:
            text = M.text_config(json.load(handle))
        shape = M.analyze_model(path)["linear_attention"]
        for tp in (1, 2, 4):
            cases.append([text, tp])
            expected.append(M.linear_state_bytes(shape, tp, 2, engine)["layer_bytes"])
    env = dict(os.environ, **({"PYTHONPATH": SGL_OVERLAY} if engine == "sglang" else {}))
    proc = subprocess.run([python, "-c", STATE_SCRIPTS[engine]], input=json.dumps(cases),
                          capture_output=True, text=True, env=env, timeout=600, check=False)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("@@")]
    assert proc.returncode == 0 and lines, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert json.loads(lines[-1][2:]) == expected


@pytest.mark.parametrize("scaling,expected", [
    (None, 32768),
    ({"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}, 131072),
    ({"rope_type": "linear", "factor": 2.0}, 65536),
    ({"rope_type": "llama3", "factor": 8.0}, 32768),
])
def test_rope_scaling_extends_the_context(scaling, expected):
    with open(os.path.join(Q25, "config.json")) as handle:
        config = json.load(handle)
    config["rope_scaling"] = scaling
    assert M.max_context(config)[0] == expected


# -------------------------------------------------------------------------- generated folders
def test_complete_shards_are_counted_from_headers(tmp_path):
    config, params, total, _names = sharded_model(tmp_path / "m")
    facts = M.analyze_model(str(tmp_path / "m"))
    assert facts["weights"]["status"] == "complete"
    assert facts["parameter_count"] == params
    assert facts["parameter_count_source"] == "safetensors headers"
    assert facts["weight_bytes"] == total == 2 * params
    # the config estimate of the same shapes agrees exactly
    assert M.estimate_parameters(config) == params
    assert M.model_errors(facts, require_weights=True) == []


def test_missing_shard_fails_with_its_name(tmp_path):
    _config, _params, _total, names = sharded_model(tmp_path / "m")
    os.remove(str(tmp_path / "m" / names[1]))
    facts = M.analyze_model(str(tmp_path / "m"))
    assert facts["weights"]["status"] == "incomplete"
    assert facts["weights"]["missing"] == [names[1]]
    errors = M.model_errors(facts)
    assert len(errors) == 1 and names[1] in errors[0] and names[0] not in errors[0]
    # headers alone no longer give the count: back to the index
    assert facts["parameter_count_source"] == "index total_size / dtype"


def test_truncated_shard_is_caught(tmp_path):
    config, _params, _total, names = sharded_model(tmp_path / "m")
    write_safetensors(str(tmp_path / "m" / names[0]),
                      dict(list(tiny_tensors(config, [0]).items()) +
                           [("model.embed_tokens.weight", ("BF16", (256, 64)))]), truncate=100)
    facts = M.analyze_model(str(tmp_path / "m"))
    assert facts["weights"]["truncated"] == [names[0]]
    assert "truncated" in M.model_errors(facts)[0] and names[0] in M.model_errors(facts)[0]


def test_shard_lacking_a_tensor_of_the_index(tmp_path):
    config, _params, _total, names = sharded_model(tmp_path / "m")
    tensors = tiny_tensors(config, [1])
    tensors.pop("model.layers.1.mlp.down_proj.weight")
    tensors["model.norm.weight"] = ("BF16", (64,))
    write_safetensors(str(tmp_path / "m" / names[1]), tensors)
    facts = M.analyze_model(str(tmp_path / "m"))
    assert facts["weights"]["status"] == "incomplete"
    assert any("down_proj" in p for p in facts["weights"]["problems"])


def test_no_weights_yet_is_not_an_error_unless_required(tmp_path):
    folder = tmp_path / "m"
    folder.mkdir()
    shutil.copy(os.path.join(Q25, "config.json"), str(folder / "config.json"))
    facts = M.analyze_model(str(folder))
    assert facts["weights"]["status"] == "absent"
    assert M.model_errors(facts) == []
    assert "no weight files" in M.model_errors(facts, require_weights=True)[0]


def test_single_safetensors_file(tmp_path):
    folder = tmp_path / "m"
    folder.mkdir()
    config = tiny_config(num_hidden_layers=1)
    (folder / "config.json").write_text(json.dumps(config))
    tensors = tiny_tensors(config, [0])
    tensors["model.embed_tokens.weight"] = ("BF16", (256, 64))
    tensors["model.norm.weight"] = ("BF16", (64,))
    size = write_safetensors(str(folder / "model.safetensors"), tensors)
    facts = M.analyze_model(str(folder))
    assert facts["weights"]["format"] == "safetensors" and facts["weights"]["index"] is None
    assert facts["weight_bytes"] == size
    assert facts["parameter_count"] == M.estimate_parameters(config)


def test_pytorch_bin_index_needs_conversion(tmp_path):
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(tiny_config()))
    (folder / "pytorch_model.bin.index.json").write_text(json.dumps(
        {"metadata": {"total_size": 4000},
         "weight_map": {"a": "pytorch_model-00001-of-00002.bin",
                        "b": "pytorch_model-00002-of-00002.bin"}}))
    (folder / "pytorch_model-00001-of-00002.bin").write_bytes(b"x" * 2100)
    facts = M.analyze_model(str(folder))
    assert facts["needs_conversion"] is True
    assert facts["weights"]["missing"] == ["pytorch_model-00002-of-00002.bin"]
    assert facts["weight_bytes"] == 4000 and facts["parameter_count"] == 2000
    (folder / "pytorch_model-00002-of-00002.bin").write_bytes(b"x" * 1900)
    assert M.analyze_model(str(folder))["weights"]["status"] == "complete"


def test_config_missing_is_a_clear_error(tmp_path):
    with pytest.raises(M.ModelError) as err:
        M.analyze_model(str(tmp_path))
    assert "config.json" in str(err.value) and "serving_model.source" in str(err.value)


def test_moe_estimate_counts_experts():
    dense = tiny_config()
    moe = tiny_config(num_experts=8, num_experts_per_tok=2, moe_intermediate_size=32,
                      architectures=["Qwen3MoeForCausalLM"], model_type="qwen3_moe")
    per_layer_experts = 8 * 3 * 64 * 32 + 64 * 8
    per_layer_dense = 3 * 64 * 128
    assert M.estimate_parameters(moe) - M.estimate_parameters(dense) == \
        2 * (per_layer_experts - per_layer_dense)


# ----------------------------------------------------------------------------- engine support
@pytest.mark.parametrize("arch,engine,version,expected", [
    ("Qwen3ForCausalLM", "vllm", "0.8.4", False),
    ("Qwen3ForCausalLM", "vllm", "0.8.5", True),
    ("Qwen3ForCausalLM", "vllm", "0.32.0+cpu", True),
    ("Qwen3ForCausalLM", "sglang", "0.4.6", False),
    ("Qwen3ForCausalLM", "sglang", "0.4.6.post1", True),
    ("Qwen2ForCausalLM", "sglang", "0.5.23", True),
    ("Qwen3NextForCausalLM", "vllm", "0.10.1", False),
    ("Qwen3NextForCausalLM", "vllm", "0.10.2", True),
    ("Qwen3NextForCausalLM", "sglang", "0.5.1.post3", False),
    ("Qwen3NextForCausalLM", "sglang", "0.5.2", True),
    ("Qwen3_5ForConditionalGeneration", "vllm", "0.16.0", False),
    ("Qwen3_5ForConditionalGeneration", "vllm", "0.17.0", True),
    ("Qwen3_5MoeForConditionalGeneration", "vllm", "0.19.1", True),
    ("Qwen3_5MoeForConditionalGeneration", "sglang", "0.5.8.post1", False),
    ("Qwen3_5ForConditionalGeneration", "sglang", "0.5.9", True),
    ("SomethingNewForCausalLM", "vllm", "0.26.0", None),
])
def test_engine_support_table(arch, engine, version, expected):
    assert M.engine_support(arch, engine, version)["supported"] is expected


def test_registry_overrides_the_table():
    assert M.engine_support("Qwen3ForCausalLM", "vllm", "0.1.0",
                            registry=["Qwen3ForCausalLM"])["supported"] is True
    assert M.engine_support("Qwen2ForCausalLM", "vllm", "0.26.0",
                            registry=["LlamaForCausalLM"])["supported"] is False
    assert M.parse_registry_output("INFO loading\n[\"A\", \"B\"]\n") == ["A", "B"]
    with pytest.raises(ValueError):
        M.parse_registry_output("Traceback ...")


def test_architecture_the_engine_version_lacks_names_the_profiles_that_have_it():
    profiles = {
        "old": {"engines": {"vllm": {"version": "0.8.0"}}},
        "new": {"engines": {"vllm": {"version": "0.10.0"}}},
        "cpu": {"engines": {"vllm": {"version": "0.32.0"}}},
    }
    facts = M.analyze_model(Q3, engine="vllm", engine_version="0.8.0", stack_profiles=profiles)
    assert facts["engine_support"]["supported"] is False
    assert facts["engine_support"]["profiles_supporting"] == ["cpu", "new"]
    errors = M.model_errors(facts)
    assert len(errors) == 1
    assert "Qwen3ForCausalLM" in errors[0] and "serving_stack" in errors[0]
    assert "0.8.5" in errors[0] and "cpu, new" in errors[0]


def test_version_parsing():
    assert M.parse_version("0.4.6.post1") > M.parse_version("0.4.6")
    assert M.parse_version("0.32.0+cpu") == M.parse_version("0.32.0")
    assert M.parse_version("0.10.2") > M.parse_version("0.9.9")
