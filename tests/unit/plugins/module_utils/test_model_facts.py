# -*- coding: utf-8 -*-
"""model_facts logic on the real Qwen2.5-32B-Instruct and Qwen3-4B configs (tests/fixtures/qwen)
and on generated model folders with real safetensors headers."""
import json
import os
import shutil
import struct

import pytest

from ansible_collections.llmops.serving.plugins.module_utils import model as M

QWEN = os.path.join(os.path.dirname(__file__), "..", "..", "..", "fixtures", "qwen")
Q25 = os.path.join(QWEN, "Qwen2.5-32B-Instruct")
Q3 = os.path.join(QWEN, "Qwen3-4B")

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
