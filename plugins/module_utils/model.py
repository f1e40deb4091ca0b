# -*- coding: utf-8 -*-
# Copyright: llmops.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Model facts from a Hugging Face model folder: config.json, the weights index and the
safetensors headers (only the headers are read, never the tensors), plus whether an engine version
knows the architecture. Pure logic, no Ansible objects, no third-party imports.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import re
import struct

from ansible_collections.llmops.serving.plugins.module_utils.engines import REGISTRY

GIB = 1024 ** 3

# torch dtype names found in config.json
DTYPE_BYTES = {
    "float32": 4, "float": 4, "fp32": 4,
    "float16": 2, "half": 2, "fp16": 2,
    "bfloat16": 2, "bf16": 2,
    "float8_e4m3fn": 1, "float8_e5m2": 1, "fp8": 1, "fp8_e4m3": 1, "fp8_e5m2": 1,
    "int8": 1, "uint8": 1,
}
# safetensors header dtypes
ST_DTYPE_BYTES = {
    "F64": 8, "F32": 4, "F16": 2, "BF16": 2, "F8_E4M3": 1, "F8_E5M2": 1, "F8_E8M0": 1,
    "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1, "U16": 2, "U32": 4, "U64": 8, "BOOL": 1,
}

# Lowest engine version known to ship each architecture (used only while no venv exists to ask the
# engine's own registry), and the probe that asks it: both live in the engine registry.
ARCH_MIN_VERSION = dict((name, REGISTRY[name]["arch_min_version"]) for name in REGISTRY)
REGISTRY_PROBES = dict((name, REGISTRY[name]["registry_probe"]) for name in REGISTRY)


class ModelError(Exception):
    """Bad or incomplete model folder; the message says what to do."""


def parse_version(text):
    """'0.4.6.post1' -> (0, 4, 6, 1); '0.32.0+cpu' -> (0, 32, 0, 0)."""
    text = str(text or "").split("+", 1)[0].strip().lstrip("v")
    post = 0
    match = re.search(r"\.?post(\d+)$", text)
    if match:
        post = int(match.group(1))
        text = text[:match.start()]
    nums = [int(n) for n in re.findall(r"\d+", text)[:3]]
    while len(nums) < 3:
        nums.append(0)
    return tuple(nums) + (post,)


def _load_json(path):
    with open(path) as handle:
        return json.load(handle)


def text_config(config):
    """Multimodal configs keep the language model's fields under text_config."""
    merged = dict(config)
    inner = config.get("text_config")
    if isinstance(inner, dict):
        for key, value in inner.items():
            merged.setdefault(key, value)
            if key in ("num_hidden_layers", "hidden_size", "num_attention_heads",
                       "num_key_value_heads", "head_dim", "intermediate_size", "vocab_size",
                       "max_position_embeddings", "rope_scaling") + HYBRID_KEYS:
                merged[key] = value
    return merged


# The language model's layout fields of hybrid and MoE configs (Qwen3-Next, Qwen3.5/3.6): under
# text_config they describe the decoder, whatever the multimodal wrapper says.
HYBRID_KEYS = ("layer_types", "full_attention_interval", "linear_num_key_heads",
               "linear_num_value_heads", "linear_key_head_dim", "linear_value_head_dim",
               "linear_conv_kernel_dim", "mamba_ssm_dtype", "num_experts", "num_experts_per_tok",
               "moe_intermediate_size", "shared_expert_intermediate_size", "attn_output_gate",
               "rope_parameters")
LINEAR_ATTENTION = "linear_attention"


def layer_kinds(config):
    """Kind of each decoder layer: "linear_attention" for the gated-delta-net layers of hybrid
    models (a fixed recurrent state per sequence, no per-token KV), else the layer keeps a KV
    cache. From layer_types when given, else full_attention_interval (every interval-th layer is
    full attention, transformers' Qwen3-Next/Qwen3.5 default); other models are all attention."""
    c = text_config(config)
    layers = int(c["num_hidden_layers"])
    types = c.get("layer_types")
    if isinstance(types, list) and types:
        kinds = [str(t) for t in types[:layers]]
        return kinds + ["full_attention"] * (layers - len(kinds))
    interval = c.get("full_attention_interval")
    if interval and c.get("linear_num_value_heads"):
        return [LINEAR_ATTENTION if (i + 1) % int(interval) else "full_attention"
                for i in range(layers)]
    return ["full_attention"] * layers


def linear_attention_shape(config):
    """The gated-delta-net dimensions of a hybrid model's linear-attention layers, or None (no
    such layers, or a config that does not name them)."""
    c = text_config(config)
    names = ("linear_num_key_heads", "linear_num_value_heads", "linear_key_head_dim",
             "linear_value_head_dim")
    if LINEAR_ATTENTION not in layer_kinds(config) or not all(c.get(n) for n in names):
        return None
    ssm = c.get("mamba_ssm_dtype")
    return {"num_key_heads": int(c["linear_num_key_heads"]),
            "num_value_heads": int(c["linear_num_value_heads"]),
            "key_head_dim": int(c["linear_key_head_dim"]),
            "value_head_dim": int(c["linear_value_head_dim"]),
            "conv_kernel_dim": int(c.get("linear_conv_kernel_dim") or 4),
            "ssm_dtype": str(ssm).replace("torch.", "") if ssm else None}


def linear_state_bytes(shape, tp, model_dtype_bytes, engine="vllm"):
    """Recurrent state of one linear-attention layer for one sequence on one GPU, in bytes:
    dict(conv_bytes, ssm_bytes, layer_bytes).

    Shapes as both engines size them (vLLM model_executor/layers/mamba/mamba_utils.py
    MambaStateShapeCalculator.gated_delta_net_state_shape, the same from v0.10.2 to v0.32.0;
    SGLang srt/configs/qwen3_next.py hybrid_gdn_params in v0.5.2, Mamba2StateShape.create in
    srt/configs/mamba_utils.py in v0.5.23):
        conv  = (2 x key_heads x key_head_dim + value_heads x value_head_dim) / tp
                x (conv_kernel - 1) elements          (q, k and v of the short convolution)
        ssm   = value_heads / tp x value_head_dim x key_head_dim elements
    dtypes: vLLM keeps the conv state in the model dtype (--mamba-cache-dtype auto) and the ssm
    state in --mamba-ssm-cache-dtype, which auto makes the conv dtype except that Qwen3.5 configs'
    mamba_ssm_dtype sets it (model_executor/models/config.py Qwen3_5ForConditionalGenerationConfig,
    v0.17.0 on; MambaStateDtypeCalculator._mamba_state_dtype). SGLang keeps conv in bfloat16 and
    ssm in --mamba-ssm-dtype, float32 unless the config's mamba_ssm_dtype says otherwise
    (mamba2_state_dtype). Speculative decoding would add num_spec conv rows; not modelled."""
    tp = int(tp)
    conv_dim = 2 * shape["num_key_heads"] * shape["key_head_dim"] + \
        shape["num_value_heads"] * shape["value_head_dim"]
    conv = conv_dim // tp * (shape["conv_kernel_dim"] - 1)
    ssm = shape["num_value_heads"] // tp * shape["value_head_dim"] * shape["key_head_dim"]
    ssm_dtype = shape.get("ssm_dtype")
    if engine == "sglang":
        conv_bytes, ssm_bytes = 2, DTYPE_BYTES.get(ssm_dtype or "float32", 4)
    else:
        conv_bytes = max(2, min(4, int(model_dtype_bytes or 2)))
        ssm_bytes = DTYPE_BYTES.get(ssm_dtype, conv_bytes) if ssm_dtype else conv_bytes
    return {"conv_bytes": conv * conv_bytes, "ssm_bytes": ssm * ssm_bytes,
            "layer_bytes": conv * conv_bytes + ssm * ssm_bytes}


def config_dtype(config):
    dtype = config.get("torch_dtype") or config.get("dtype")
    inner = config.get("text_config")
    if not dtype and isinstance(inner, dict):
        dtype = inner.get("torch_dtype") or inner.get("dtype")
    return str(dtype).replace("torch.", "") if dtype else None


def max_context(config):
    """(limit, source): the longest context the checkpoint is built for, following vLLM's rule:
    rope scaling multiplies max_position_embeddings (yarn: original_max_position_embeddings) by
    its factor, except types that already extend it (llama3, longrope/su)."""
    base = config.get("max_position_embeddings")
    scaling = config.get("rope_scaling")
    if scaling is None and isinstance(config.get("rope_parameters"), dict):
        # transformers 5 keeps rope scaling in rope_parameters (Qwen3.5 configs)
        scaling = config["rope_parameters"]
    if not base:
        return None, "unknown"
    if isinstance(scaling, dict):
        kind = scaling.get("rope_type") or scaling.get("type")
        factor = scaling.get("factor")
        if kind not in ("su", "longrope", "llama3", "default", "mrope") and factor:
            origin = base
            if kind == "yarn" and scaling.get("original_max_position_embeddings"):
                origin = scaling["original_max_position_embeddings"]
            return int(origin * float(factor)), "rope_scaling %s x%s" % (kind, factor)
    return int(base), "max_position_embeddings"


def apply_long_context(facts, long_context):
    """The facts as the engine sees the model when it is started with a YaRN rope_scaling
    override (serving_long_context: dict(factor, original_max_position)): a copy whose context
    limit is original_max_position x factor, by max_context's own rule. The checkpoint's
    config.json is left as it is. ``long_context`` empty returns the facts unchanged."""
    if not long_context:
        return facts
    if not isinstance(long_context, dict):
        raise ValueError("serving_long_context must be a dict like {factor: 4.0, "
                         "original_max_position: 32768}, got %r" % (long_context,))
    original = long_context.get("original_max_position")
    try:
        factor = float(long_context.get("factor"))
        original = int(original)
    except (TypeError, ValueError):
        factor, original = 0, 0
    if isinstance(long_context.get("factor"), bool) or factor <= 1 or original <= 0:
        raise ValueError("serving_long_context needs a factor above 1 and original_max_position "
                         "(the context the checkpoint was trained for), e.g. {factor: 4.0, "
                         "original_max_position: 32768}; got %r" % (long_context,))
    scaling = {"rope_type": "yarn", "factor": factor, "original_max_position_embeddings": original}
    limit = max_context({"max_position_embeddings": original, "rope_scaling": scaling})[0]
    out = dict(facts)
    out.update({"rope_scaling": scaling, "max_context": limit,
                "max_context_source": "serving_long_context YaRN x%s" % factor,
                "long_context": scaling})
    return out


def estimate_parameters(config):
    """Parameter count from the config alone (dense, MoE and hybrid linear-attention decoders;
    a multimodal checkpoint's vision tower and multi-token-prediction layers are not counted)."""
    c = text_config(config)
    hidden = int(c["hidden_size"])
    layers = int(c["num_hidden_layers"])
    heads = int(c["num_attention_heads"])
    kv_heads = int(c.get("num_key_value_heads") or heads)
    head_dim = int(c.get("head_dim") or hidden // heads)
    vocab = int(c.get("vocab_size") or 0)
    inter = int(c.get("intermediate_size") or 0)
    q_dim, kv_dim = heads * head_dim, kv_heads * head_dim
    kinds = layer_kinds(config)
    linear = linear_attention_shape(config)
    attn = hidden * q_dim + 2 * hidden * kv_dim + q_dim * hidden
    if linear and c.get("attn_output_gate", True):
        attn += hidden * q_dim  # hybrid full attention: q_proj also yields the output gate
    if c.get("model_type") in ("qwen2", "qwen2_moe", "qwen2_vl", "qwen2_5_vl") or \
            c.get("attention_bias") or c.get("qkv_bias"):
        attn += q_dim + 2 * kv_dim
    if c.get("model_type", "").startswith("qwen3"):
        attn += 2 * head_dim  # q_norm, k_norm
    linear_attn = attn
    if linear:
        # gated delta net: in_proj q, k, v, z and b, a; depthwise conv over q, k, v (no bias);
        # dt_bias, A_log; the gated norm over value_head_dim; out_proj
        key_dim = linear["num_key_heads"] * linear["key_head_dim"]
        value_dim = linear["num_value_heads"] * linear["value_head_dim"]
        conv_dim = 2 * key_dim + value_dim
        linear_attn = hidden * (2 * key_dim + 2 * value_dim) \
            + hidden * 2 * linear["num_value_heads"] + conv_dim * linear["conv_kernel_dim"] \
            + 2 * linear["num_value_heads"] + linear["value_head_dim"] + value_dim * hidden
    norms = 2 * hidden
    dense_mlp = 3 * hidden * inter
    experts = int(c.get("num_experts") or c.get("num_local_experts") or 0)
    total = 0
    if experts:
        moe_inter = int(c.get("moe_intermediate_size") or inter)
        moe = experts * 3 * hidden * moe_inter + hidden * experts  # experts + router
        shared = int(c.get("shared_expert_intermediate_size") or 0)
        if shared:
            moe += 3 * hidden * shared + hidden  # shared expert + its gate
        sparse_step = int(c.get("decoder_sparse_step") or 1)
        mlp_only = set(c.get("mlp_only_layers") or [])
        for layer in range(layers):
            sparse = layer not in mlp_only and (layer + 1) % sparse_step == 0
            mixer = linear_attn if kinds[layer] == LINEAR_ATTENTION else attn
            total += mixer + norms + (moe if sparse else dense_mlp)
    else:
        for kind in kinds:
            total += (linear_attn if kind == LINEAR_ATTENTION else attn) + norms + dense_mlp
    embed = vocab * hidden
    total += embed + hidden  # embeddings + final norm
    if not c.get("tie_word_embeddings", False):
        total += embed
    return int(total)


def read_safetensors_header(path):
    """(header dict without __metadata__, header length). Reads only the header."""
    with open(path, "rb") as handle:
        raw = handle.read(8)
        if len(raw) != 8:
            raise ModelError("%s: not a safetensors file (shorter than 8 bytes)" % path)
        (length,) = struct.unpack("<Q", raw)
        if length > 100 * 1024 * 1024:
            raise ModelError("%s: implausible safetensors header length %d" % (path, length))
        header = json.loads(handle.read(length).decode("utf-8"))
    header.pop("__metadata__", None)
    return header, length


def summarize_header(header):
    params = 0
    data_bytes = 0
    end = 0
    dtypes = {}
    for name, info in header.items():
        count = 1
        for dim in info.get("shape", []):
            count *= int(dim)
        params += count
        start, stop = info.get("data_offsets", [0, 0])
        data_bytes += int(stop) - int(start)
        end = max(end, int(stop))
        dtypes[info.get("dtype")] = dtypes.get(info.get("dtype"), 0) + count
    return {"parameters": params, "bytes": data_bytes, "data_end": end, "dtypes": dtypes,
            "tensors": len(header)}


def inspect_weights(model_dir, read_headers=True):
    """Which weight files the folder has, whether they are complete, and what they hold."""
    result = {"format": None, "index": None, "files": [], "missing": [], "truncated": [],
              "present": [], "total_size": None, "header_parameters": None, "header_bytes": None,
              "file_bytes": 0, "status": "absent", "problems": [], "dtypes": {}}
    if not model_dir or not os.path.isdir(model_dir):
        result["status"] = "no-folder"
        return result
    names = set(os.listdir(model_dir))
    weight_map = None
    for index_name, fmt in (("model.safetensors.index.json", "safetensors"),
                            ("pytorch_model.bin.index.json", "pytorch_bin")):
        if index_name in names:
            index = _load_json(os.path.join(model_dir, index_name))
            weight_map = index.get("weight_map") or {}
            result["format"] = fmt
            result["index"] = index_name
            result["total_size"] = (index.get("metadata") or {}).get("total_size")
            result["files"] = sorted(set(weight_map.values()))
            break
    if weight_map is None:
        if "model.safetensors" in names:
            result["format"], result["files"] = "safetensors", ["model.safetensors"]
        elif "pytorch_model.bin" in names:
            result["format"], result["files"] = "pytorch_bin", ["pytorch_model.bin"]
        else:
            loose = sorted(n for n in names if n.endswith(".safetensors"))
            if loose:
                result["format"], result["files"] = "safetensors", loose
    if not result["files"]:
        result["status"] = "absent"
        return result
    expected_by_file = {}
    for tensor, filename in (weight_map or {}).items():
        expected_by_file.setdefault(filename, []).append(tensor)
    params = 0
    header_bytes = 0
    headers_complete = True
    for filename in result["files"]:
        path = os.path.join(model_dir, filename)
        if not os.path.isfile(path):
            result["missing"].append(filename)
            headers_complete = False
            continue
        size = os.path.getsize(path)
        result["file_bytes"] += size
        result["present"].append(filename)
        if result["format"] != "safetensors" or not read_headers:
            headers_complete = False
            if size == 0:
                result["truncated"].append(filename)
            continue
        try:
            header, length = read_safetensors_header(path)
        except (ModelError, ValueError) as exc:
            result["truncated"].append(filename)
            result["problems"].append(str(exc))
            headers_complete = False
            continue
        info = summarize_header(header)
        if size < 8 + length + info["data_end"]:
            result["truncated"].append(filename)
            result["problems"].append("%s is %d bytes, its header describes %d: truncated download"
                                      % (filename, size, 8 + length + info["data_end"]))
        lost = [t for t in expected_by_file.get(filename, []) if t not in header]
        if lost:
            result["problems"].append("%s lacks %d tensor(s) the index assigns to it, e.g. %s" % (
                filename, len(lost), lost[0]))
            result["truncated"].append(filename)
        params += info["parameters"]
        header_bytes += info["bytes"]
        for dtype, count in info["dtypes"].items():
            result["dtypes"][dtype] = result["dtypes"].get(dtype, 0) + count
    if headers_complete and result["format"] == "safetensors":
        result["header_parameters"] = params
        result["header_bytes"] = header_bytes
    if result["format"] == "pytorch_bin" and result["total_size"] and not result["missing"] and \
            result["file_bytes"] < 0.95 * result["total_size"]:
        result["problems"].append("the .bin shards hold %s bytes, the index says %s: truncated"
                                  % (result["file_bytes"], result["total_size"]))
        result["truncated"] = list(result["present"])
    result["truncated"] = sorted(set(result["truncated"]))
    if not result["present"]:
        result["status"] = "absent"
    elif result["missing"] or result["truncated"]:
        result["status"] = "incomplete"
    else:
        result["status"] = "complete"
    return result


def engine_support(architecture, engine, engine_version, registry=None, table=None):
    """{supported: True/False/None, source, min_version}. ``registry``: archs read from the
    installed engine (authoritative); otherwise the version table (None when unknown)."""
    if registry is not None:
        return {"supported": architecture in registry, "source": "registry",
                "min_version": None}
    table = ARCH_MIN_VERSION if table is None else table
    minimum = table.get(engine, {}).get(architecture)
    if minimum is None:
        return {"supported": None, "source": "table", "min_version": None}
    if not engine_version:
        return {"supported": None, "source": "table", "min_version": minimum}
    return {"supported": parse_version(engine_version) >= parse_version(minimum),
            "source": "table", "min_version": minimum}


def profiles_supporting(architecture, engine, stack_profiles):
    """Stack profiles whose pinned version of ``engine`` has the architecture (by the table)."""
    names = []
    for name, profile in sorted((stack_profiles or {}).items()):
        version = ((profile or {}).get("engines") or {}).get(engine, {}).get("version")
        if version and engine_support(architecture, engine, version)["supported"]:
            names.append(name)
    return names


def parse_registry_output(out):
    for line in reversed((out or "").strip().splitlines()):
        line = line.strip()
        if line.startswith("["):
            return json.loads(line)
    raise ValueError("no JSON list in the registry probe's output")


def analyze_model(model_dir=None, config=None, engine=None, engine_version=None, registry=None,
                  stack_profiles=None, read_headers=True):
    """Model facts. ``config`` may be given when the folder does not exist yet."""
    config_path = os.path.join(model_dir, "config.json") if model_dir else None
    if config is None:
        if not config_path or not os.path.isfile(config_path):
            raise ModelError("no config.json in %s: the folder is not a Hugging Face model (set "
                             "serving_model.source to a model folder or repository)" % model_dir)
        config = _load_json(config_path)
    c = text_config(config)
    for key in ("hidden_size", "num_hidden_layers", "num_attention_heads"):
        if not c.get(key):
            raise ModelError("config.json lacks %s: not a decoder-only transformer this "
                             "collection can plan for" % key)
    archs = config.get("architectures") or []
    heads = int(c["num_attention_heads"])
    kv_heads = int(c.get("num_key_value_heads") or heads)
    head_dim_explicit = c.get("head_dim")
    head_dim = int(head_dim_explicit or int(c["hidden_size"]) // heads)
    dtype = config_dtype(config)
    quant = config.get("quantization_config") or c.get("quantization_config")
    limit, limit_source = max_context(c)
    kinds = layer_kinds(config)
    linear_layers = kinds.count(LINEAR_ATTENTION)
    linear = linear_attention_shape(config)
    weights = inspect_weights(model_dir, read_headers) if model_dir else \
        {"status": "no-folder", "format": None, "files": [], "missing": [], "truncated": [],
         "present": [], "total_size": None, "header_parameters": None, "header_bytes": None,
         "file_bytes": 0, "problems": [], "dtypes": {}, "index": None}
    dbytes = DTYPE_BYTES.get(dtype or "", 2)
    estimate = estimate_parameters(config)
    if weights["header_parameters"]:
        params, params_source = weights["header_parameters"], "safetensors headers"
    elif weights["total_size"] and not quant:
        params, params_source = int(weights["total_size"]) // dbytes, "index total_size / dtype"
    else:
        params, params_source = estimate, "estimated from config"
    if weights["header_bytes"]:
        wbytes, wbytes_source = weights["header_bytes"], "safetensors headers"
    elif weights["total_size"]:
        wbytes, wbytes_source = int(weights["total_size"]), "index metadata.total_size"
    elif weights["status"] == "complete" and weights["file_bytes"]:
        wbytes, wbytes_source = weights["file_bytes"], "file sizes"
    else:
        wbytes, wbytes_source = params * dbytes, "parameters x dtype bytes"
    facts = {
        "model_dir": model_dir,
        "architecture": archs[0] if archs else None,
        "architectures": archs,
        "model_type": c.get("model_type"),
        "num_hidden_layers": int(c["num_hidden_layers"]),
        "hidden_size": int(c["hidden_size"]),
        "intermediate_size": int(c.get("intermediate_size") or 0),
        "num_attention_heads": heads,
        "num_key_value_heads": kv_heads,
        "head_dim": head_dim,
        "head_dim_source": "config head_dim" if head_dim_explicit else "hidden_size / heads",
        "vocab_size": int(c.get("vocab_size") or 0),
        "tie_word_embeddings": bool(c.get("tie_word_embeddings", False)),
        "num_experts": int(c.get("num_experts") or c.get("num_local_experts") or 0),
        "num_experts_per_tok": int(c.get("num_experts_per_tok") or 0),
        "moe_intermediate_size": int(c.get("moe_intermediate_size") or 0),
        "shared_expert_intermediate_size": int(c.get("shared_expert_intermediate_size") or 0),
        "full_attention_layers": len(kinds) - linear_layers,
        "linear_attention_layers": linear_layers,
        "linear_attention": linear,
        "linear_state_bytes": linear_layers * linear_state_bytes(linear, 1, dbytes)["layer_bytes"]
        if linear else 0,
        "dtype": dtype,
        "dtype_bytes": dbytes,
        "quantization": (quant or {}).get("quant_method") if isinstance(quant, dict) else None,
        "max_position_embeddings": c.get("max_position_embeddings"),
        "rope_scaling": c.get("rope_scaling"),
        "max_context": limit,
        "max_context_source": limit_source,
        "sliding_window": c.get("sliding_window") if c.get("use_sliding_window") else None,
        "parameter_count": int(params),
        "parameter_count_source": params_source,
        "parameter_count_estimate": estimate,
        "weight_bytes": int(wbytes),
        "weight_bytes_source": wbytes_source,
        "weights": weights,
        "needs_conversion": weights["format"] == "pytorch_bin",
    }
    if engine:
        support = engine_support(facts["architecture"], engine, engine_version, registry)
        others = profiles_supporting(facts["architecture"], engine, stack_profiles)
        support.update({"engine": engine, "version": engine_version,
                        "profiles_supporting": others})
        facts["engine_support"] = support
    return facts


def model_errors(facts, require_weights=False):
    """Messages that must stop the play: missing or truncated shards, unsupported arch."""
    errors = []
    weights = facts["weights"]
    if weights["status"] == "incomplete" or (require_weights and weights["status"] != "complete"):
        if weights["missing"]:
            errors.append("model folder %s is missing weight file(s) %s named in %s: re-run the "
                          "model_weights role (or fetch them) before serving" % (
                              facts["model_dir"], ", ".join(weights["missing"]),
                              weights["index"] or "the folder"))
        if weights["truncated"]:
            errors.append("truncated or damaged weight file(s) %s (%s): delete and fetch them "
                          "again" % (", ".join(weights["truncated"]),
                                     "; ".join(weights["problems"]) or "empty"))
        if not weights["missing"] and not weights["truncated"]:
            errors.append("no weight files in %s (status %s)" % (facts["model_dir"],
                                                                 weights["status"]))
    support = facts.get("engine_support")
    if support and support["supported"] is False:
        others = support.get("profiles_supporting") or []
        if support["source"] == "registry":
            why = "the installed %s %s does not register it" % (
                support["engine"], support["version"])
        else:
            why = "%s supports it from %s on, the stack pins %s" % (
                support["engine"], support["min_version"], support["version"])
        errors.append("architecture %s is not supported by %s %s (%s): set serving_stack to a "
                      "profile with a newer %s%s" % (
                          facts["architecture"], support["engine"], support["version"], why,
                          support["engine"],
                          (" (" + ", ".join(others) + ")") if others else
                          " (no profile in serving_stacks_file has one yet)"))
    return errors


def model_summary_line(facts):
    line = "%s (%s): %d layers, %d heads / %d KV heads x head_dim %d, %s, %.2fB params, " \
        "%.2f GiB weights (%s), context %s (%s)" % (
            facts["architecture"], facts["model_type"], facts["num_hidden_layers"],
            facts["num_attention_heads"], facts["num_key_value_heads"], facts["head_dim"],
            facts["dtype"], facts["parameter_count"] / 1e9, facts["weight_bytes"] / float(GIB),
            facts["weights"]["status"], facts["max_context"], facts["max_context_source"])
    if facts.get("linear_attention_layers"):
        line += "; hybrid: %d full-attention layers keep KV, %d linear-attention layers hold " \
            "%.1f MiB of recurrent state per sequence (TP 1)" % (
                facts["full_attention_layers"], facts["linear_attention_layers"],
                facts["linear_state_bytes"] / float(1024 ** 2))
    return line


# ---------------------------------------------------------------------------------------------
# what the engine flags read from the model folder (engine_args)
# ---------------------------------------------------------------------------------------------
MTP_CONFIG_KEYS = ("mtp_num_hidden_layers", "num_nextn_predict_layers")


def model_config(model_path):
    """The model folder's config.json, or None when there is none (a model not fetched yet)."""
    path = os.path.join(model_path, "config.json")
    return _load_json(path) if os.path.isfile(path) else None


def weight_names(model_path):
    """Tensor names of a model folder from its safetensors index, or from the header of its single
    model.safetensors; None when it has neither."""
    index = os.path.join(model_path, "model.safetensors.index.json")
    if os.path.isfile(index):
        return list(_load_json(index).get("weight_map", {}))
    single = os.path.join(model_path, "model.safetensors")
    if os.path.isfile(single):
        return list(read_safetensors_header(single)[0])
    return None


def mtp_head(model_path):
    """Whether the model folder ships a multi-token-prediction head: its config says so (Qwen3.5/3.6:
    mtp_num_hidden_layers, under text_config for the multimodal ones; DeepSeek-style
    num_nextn_predict_layers), or its weights hold mtp.* tensors (Qwen3-Next, whose config names no
    MTP layers). None when there is no config.json to read (a model not fetched yet)."""
    config = model_config(model_path)
    if config is None:
        return None
    for cfg in (config, config.get("text_config") or {}):
        if any(isinstance(cfg.get(k), int) and cfg.get(k) > 0 for k in MTP_CONFIG_KEYS):
            return True
    names = weight_names(model_path)
    if names is None:
        return None
    return any(n.startswith("mtp.") or ".mtp." in n for n in names)
