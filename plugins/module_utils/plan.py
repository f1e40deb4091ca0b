# -*- coding: utf-8 -*-
# Copyright: llmops.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Serving plan: does the model fit the GPUs at the requested tensor parallelism, context length
and memory fraction, and how many tokens of KV cache are left? Pure arithmetic, no Ansible.

KV cache per token and GPU (GQA; the field report's ``2 x layers x hidden x dtype`` is wrong):
    2 (K and V) x layers x kv_heads_per_rank x head_dim x kv_dtype_bytes
    kv_heads_per_rank = max(1, kv_heads // tp)  (vLLM replicates KV heads when tp > kv_heads)
layers are the layers that keep a KV cache: all of them, except in hybrid models (Qwen3-Next,
Qwen3.5/3.6), whose gated-delta-net linear-attention layers hold a fixed recurrent state per
sequence instead (model.linear_state_bytes) and only the full-attention layers count; see
``hybrid_layout`` for how each engine budgets those states.

How vLLM (V1 engine, 0.8 up to at least 0.26) budgets one GPU, read from its startup lines
("Model loading took X GiB", "Available KV cache memory: Y GiB", "GPU KV cache size: N tokens"):
    available_kv = cuda_total x gpu_memory_utilization - weights - activation_peak - non_torch
    tokens       = floor(available_kv / (block_size x kv_bytes_per_token)) x block_size
cuda_total is cudaMemGetInfo's total (what torch sees): NVML's total minus the memory the driver
reserves (nvidia-smi "Reserved", NVML memory v2). Measured on H200: NVML 150754820096 - reserved
644939776 = 150109880320 = torch.cuda.mem_get_info()[1], exactly (tests/fixtures/gpu/h200-x2-live).
What differs between vLLM releases and model runners (read from vLLM's source: the comment above
the engine registry's budget rows) is keyed by version in those rows and resolved for the model by
``budget_rule``: the sampler warm-up's size, whether the CUDA-graph memory estimate is subtracted
(from 0.20.0 in the V1 model runner; the plan does not estimate it and says so in a notice), which
models the V2 model runner serves, the reserve terms fitted per release (non-torch base, NCCL per
peer, profile floor), and the measured error band of the KV tokens (``kv_tokens_error_pct`` of the
plan; measured on dense models on one host only: 0.2 % for vLLM 0.26 on H200).

The reserve terms when the real available KV memory is not given (``available_kv_bytes``), each
with its assumption and source:
  * weights: the checkpoint's bytes (safetensors headers or index total_size) / tp, plus the rotary
    cos/sin cache (max_context x head_dim x 4 bytes). Source: vLLM logged 61.04 GiB for
    Qwen2.5-32B whose index says 61.03 GiB (testing.md).
  * activation peak: the larger of (a) the forward pass of the profiling run at
    max_num_batched_tokens T: during the MLP the residual, the normed input, gate_up (2 x I/tp),
    the activated half (I/tp) and the output are live: T x act_bytes x (3 x hidden + 3 x I/tp)
    (vLLM's fused SiluAndMul; measured on H200 in eager PyTorch with an unfused silu, the peak was
    this plus the one extra I-sized temporary: tests/fixtures/gpu/h200-x2-live/torch.json);
    for MoE, I is replaced by experts_per_token x moe_intermediate_size; and (b) the sampler's
    dummy run over S = min(max_num_seqs, T) rows of the vocabulary: logits in the model dtype plus
    what the release's warm-up keeps live per entry, S x vocab x (act_bytes + sampler_extra_bytes)
    plus its own float32 rows (sampler_buffer_rows x vocab x 4): the fp32 copy only (4) in vLLM's
    V2 model runner, 12 plus about 128 Triton top-k/top-p rows in the V1 runner from 0.17, 26 in
    0.15 and 0.16 (the engine registry's budget rows). T and S are vLLM's own defaults for
    ``vllm serve`` unless given: 8192 / 1024 on GPUs with >= 70 GiB that are not A100, else
    2048 / 256 (vLLM engine/arg_utils.py, usage context OPENAI_API_SERVER). Source: the vLLM
    profile_run (dummy forward at max_num_batched_tokens, then the dummy sampler run). And where
    the budget row has one (vLLM 0.26, V2 runner), (c) a floor that does not shrink with the
    scheduler limits: activation_floor_rows x act_bytes x hidden/tp. An assumption fitted on the
    fourteen 1xH200 start-ups of tests/fixtures/gpu/calibration, not read from vLLM's source: at
    8192 batched tokens the logged peak of a fresh torch.compile is 0.31 to 0.32 GiB per 1000
    hidden on every shape from 2560 to 5120 wide, whatever the intermediate size (13824 to 27648
    at 5120) and the layer count, so it is not the MLP; at 2048 tokens it stays 0.74 GiB (Qwen3-4B,
    0.80 at 8192) where (a) is 0.14 GiB. It is taken as a per-GPU hidden-sized buffer (hidden/tp)
    because plan.CALIBRATION's TP2 runs leave no room for an unsharded one. A run that loads its
    graph from vLLM's torch.compile cache peaks lower (0.62 vs 0.80 GiB for Qwen3-4B): the plan
    keeps the fresh-compile figure, the first start on a host.
  * non-torch memory: CUDA/cuBLAS workspaces and lazily loaded kernel modules on one GPU
    (non_torch_base_gib), NCCL buffers growing with the number of peers (nccl_per_peer_gib), and
    with tp > 1, CUDA graphs and the custom all-reduce the extra buffers of that all-reduce
    (CUSTOM_ALLREDUCE). vLLM's worker measures it as cudaMemGetInfo's used memory minus torch's
    reserved memory (utils/mem_utils.py MemorySnapshot). The budget row's values apply where it has
    them, else NON_TORCH_BASE / NCCL_PER_PEER: those and CUSTOM_ALLREDUCE were solved from
    vLLM 0.26 on H200 (NVLink) with Qwen2.5-32B (testing.md): TP1 62.95 GiB available, TP2 93.25
    GiB per GPU, TP2 with --enforce-eager --disable-custom-all-reduce 93.99 GiB (CALIBRATION
    below), with the activation of (a) and (b) only, so the 0.33 GiB base absorbed 0.11 GiB of
    activation. vLLM 0.26's row: base 0.22 GiB, the "non-torch memory" its breakdown line logged in
    all fourteen TP1 runs of tests/fixtures/gpu/calibration; with it and the floor (c), the TP2
    eager run leaves 0.22 GiB for its one NCCL peer (the activation at TP2 is the sampler's
    0.87 GiB either way) and the custom all-reduce stays 0.74 GiB. On a public vLLM 0.19 start-up
    at TP 4 over PCIe (L40S, tests/fixtures/gpu/public) the per-peer term is too large: vLLM's
    figures leave about 0.28 GiB where the plan has 0.66 GiB.
SGLang budgets differently: --mem-fraction-static of the memory free after its CUDA context and
NCCL start covers weights and the KV pool; activations and CUDA graphs live in the remainder, so:
    kv_pool = (cuda_total - non_torch) x mem_fraction_static - weights   (page size 1)
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.llmops.serving.plugins.module_utils.engines import REGISTRY
from ansible_collections.llmops.serving.plugins.module_utils.gpu import driver_branch
from ansible_collections.llmops.serving.plugins.module_utils.model import (
    apply_long_context,
    linear_state_bytes,
    parse_version,
)

GIB = 1024 ** 3

KV_DTYPE_BYTES = {
    "auto": None, "bfloat16": 2, "bf16": 2, "float16": 2, "half": 2, "float32": 4,
    "fp8": 1, "fp8_e4m3": 1, "fp8_e5m2": 1, "fp8_inc": 1,
}

# Calibrated terms (GiB) where the engine registry's budget row has none; see the module docstring.
NON_TORCH_BASE = 0.33
NCCL_PER_PEER = 0.11
CUSTOM_ALLREDUCE = 0.74
SGLANG_NON_TORCH = 0.75

# Engine behaviours that change between versions (the engine registry's budget rows): first
# version -> rule (the last rule whose version is <= the engine's applies).
BUDGET_RULES = dict((name, REGISTRY[name]["budget"]) for name in REGISTRY)

# vLLM keeps two recurrent states per sequence and linear-attention layer when prefix caching is
# on for a gated-delta-net hybrid (mamba_cache_mode "align": the running state and the last
# block-aligned one, MambaSpec.max_memory_usage_bytes), one otherwise. Read from the released
# wheels: v0.10.2 to v0.14.1 switch prefix caching off for these models (MambaModelConfig), v0.15.0
# is the first to keep it on in "align" mode. Off by default for hybrids in v0.26.0 (engine/
# arg_utils.py: default_prefix_caching = supported and not is_hybrid; "align" only when asked), so
# the state count follows the flag: the collection passes --enable-prefix-caching, or
# --no-enable-prefix-caching when serving_enable_prefix_caching is false (one state). Measured on
# one H200 with v0.26.0 (tests/fixtures/gpu/hybrid): Qwen3.5-27B at 32768 tokens takes 42 + 6 blocks
# a sequence with the first flag (31.33x logged), 42 + 3 with the second or with neither (33.42x,
# 33.98x: no "align" mode when the flag is left out).
VLLM_ALIGN_MODE_FROM = "0.15.0"
# What vLLM's "GPU KV cache size: N tokens" line counts for a hybrid model. Up to v0.20.0 the
# pool's blocks shared out evenly over the KV cache groups times the smallest block size
# (v1/core/kv_cache_utils.py _report_kv_cache_config: num_blocks // groups x min block size;
# vllm-project/vllm#40691 on v0.19.0). From v0.20.1 (read in the wheels of 0.20.1, 0.20.2, 0.22.0,
# 0.23.0, 0.26.0 and 0.32.0) it is the maximum concurrency in tokens:
#     N = int(num_blocks / blocks_per_sequence x max_model_len)
# blocks_per_sequence = full groups x cdiv(max_model_len, block) + state groups x states
# (get_max_concurrency_for_kv_cache_config, get_kv_cache_capacity), which is not the longest
# context one sequence gets ((num_blocks - state blocks) // full groups x block). Measured on one
# H200 with v0.26.0 at 32768 tokens (tests/fixtures/gpu/hybrid, test_plan_hybrid_h200.py): given the
# logged KV memory, the longest context is 7.5 % (Qwen3.5-27B) and 12.7 % (Qwen3.6-35B-A3B) above
# the logged tokens without prefix caching, 14.4 % and 22.2 % with it; the formula above gives the
# logged figure to the token in all five starts. For one group (dense models) both are
# num_blocks x block.
VLLM_CONCURRENCY_TOKENS_FROM = "0.20.1"
# The mamba state slots SGLang reserves when --max-running-requests is not given
# (model_runner.py, v0.5.2).
SGLANG_STATE_SLOTS = 512

# testing.md, vLLM 0.26.0 on one/two H200 (cudaMemGetInfo total 139.80 GiB, measured),
# Qwen2.5-32B-Instruct bf16, --gpu-memory-utilization 0.9, default T/S (8192 / 1024). Solving
# total x 0.9 - weights - activation - non_torch = available for each run gives non-torch
# 0.33 GiB at TP1, 0.44 GiB at TP2 eager (so NCCL ~0.11 GiB per peer) and 1.18 GiB at TP2 with
# CUDA graphs and the custom all-reduce (+0.74 GiB) with the activation of the forward and the
# sampler only; with vLLM 0.26's profile floor (1.60 GiB at TP1, under the sampler's 0.87 GiB at
# TP2) the same runs give 0.22 GiB at TP1 and 0.22 GiB per NCCL peer. unit tests pin the three runs.
CALIBRATION = [
    {"tp": 1, "eager": False, "available_gib": 62.95, "tokens": 257840},
    {"tp": 2, "eager": False, "available_gib": 93.25, "tokens": 763888},
    {"tp": 2, "eager": True, "available_gib": 93.99, "tokens": 769936},
]


class PlanError(Exception):
    """The plan cannot work; the message has the numbers and the fixes."""


def rule_for(engine, version):
    rules = BUDGET_RULES.get(engine) or BUDGET_RULES["vllm"]
    chosen = rules[0][1]
    if version:
        for first, rule in rules:
            if parse_version(version) >= parse_version(first):
                chosen = rule
    return chosen


def uses_v2_runner(selector, model):
    """Whether the engine serves `model` with its V2 model runner by default, per a budget row's
    v2_for selector (see the engine registry's budget rows)."""
    if not selector or not model:
        return False
    kind, names, conditions = selector
    archs = model.get("architectures") or [model.get("architecture")]
    listed = any(a in names for a in archs)
    moe = bool(model.get("num_experts"))
    if kind == "architectures":
        return listed and not ("dense" in conditions and moe) and \
            not ("unquantized" in conditions and model.get("quantization"))
    if kind == "dense_or_architectures":
        return not model.get("linear_attention_layers") and (listed or not moe)
    raise ValueError("unknown v2_for selector %r" % (kind,))


def budget_rule(engine, version, model=None):
    """The engine registry's budget row for `version`, with the V2 runner's terms where that
    runner serves `model` by default."""
    rule = dict(rule_for(engine, version))
    if rule.get("v2") and uses_v2_runner(rule.get("v2_for"), model):
        rule.update(rule["v2"])
    return rule


def gib(value):
    return value / float(GIB)


def kv_heads_per_rank(kv_heads, tp):
    return max(1, int(kv_heads) // int(tp))


def kv_bytes_per_token(layers, kv_heads, head_dim, tp, kv_dtype_bytes):
    """Bytes of K and V one token occupies on each GPU."""
    return 2 * int(layers) * kv_heads_per_rank(kv_heads, tp) * int(head_dim) * int(kv_dtype_bytes)


def resolve_kv_dtype_bytes(kv_cache_dtype, model_dtype_bytes):
    kv_cache_dtype = (kv_cache_dtype or "auto").lower()
    if kv_cache_dtype not in KV_DTYPE_BYTES:
        raise PlanError("serving_kv_cache_dtype %r has no size known to the plan (%s)"
                        % (kv_cache_dtype, ", ".join(sorted(KV_DTYPE_BYTES))))
    value = KV_DTYPE_BYTES[kv_cache_dtype]
    if value is None:
        # auto: the model's dtype; quantized checkpoints still keep a 16-bit cache
        value = max(2, min(4, int(model_dtype_bytes or 2)))
    return value


def valid_tp_sizes(heads, kv_heads, limit, linear_heads=()):
    """TP sizes vLLM accepts: heads % tp == 0 and (kv_heads % tp == 0 or tp % kv_heads == 0), and
    for hybrid models the linear-attention key and value heads divisible too (the state shapes
    divide them by tp)."""
    sizes = []
    for tp in range(1, max(1, int(limit)) + 1):
        if heads % tp == 0 and (kv_heads % tp == 0 or tp % kv_heads == 0) and \
                all(int(h) % tp == 0 for h in linear_heads):
            sizes.append(tp)
    return sizes


def _linear_heads(model):
    shape = model.get("linear_attention") if model.get("linear_attention_layers") else None
    return (shape["num_key_heads"], shape["num_value_heads"]) if shape else ()


def kv_layers(model):
    """Layers that keep a per-token KV cache (the full-attention layers of a hybrid model)."""
    return int(model.get("full_attention_layers") or model["num_hidden_layers"])


def hybrid_layout(model, tp, kv_dtype_bytes, engine="vllm", version=None, block_size=16,
                  enable_prefix_caching=True):
    """How the engine budgets a hybrid model's recurrent states on one GPU, or None for a model
    without linear-attention layers (or whose config does not size them).

    vLLM (v1 hybrid KV cache manager; the block size as model_executor/models/config.py picks it
    in v0.10.2 and v0.19.1 and platforms/interface.py in v0.26.0 and v0.32.0, the groups and
    get_max_concurrency_for_kv_cache_config of v1/core/kv_cache_utils.py in v0.32.0):
      * one linear layer's state is one "mamba page"; the attention block size grows to the
        smallest multiple of 16 tokens whose page (block x one layer's KV bytes per token) holds
        it, and the state is padded to that page:
            block = 16 x ceil(state_layer / (16 x kv_bytes_per_token_of_one_layer))
      * layers are grouped by kind into groups of equal size (the smaller count, or the larger
        when below 1.5x the smaller); every group draws blocks of (group size x page) bytes from
        one shared pool, so there is no up-front reservation:
            blocks   = available / (group_size x page)
            per seq  = full_groups x ceil(tokens / block) + state_groups x states
        where states is 2 in "align" prefix caching (VLLM_ALIGN_MODE_FROM) and 1 otherwise.
        Maximum concurrency = blocks / per seq, vLLM's own "Maximum concurrency" figure.
    SGLang (v0.5.2 model_runner.profile_max_num_token): a pool of its own of
    max_running_requests states (512 when not given) is taken from the KV memory before the
    KV pool is sized, unpadded; newer releases may size it by --mamba-full-memory-ratio instead,
    which this does not model."""
    linear_layers = int(model.get("linear_attention_layers") or 0)
    shape = model.get("linear_attention")
    if not linear_layers or not shape:
        return None
    state = linear_state_bytes(shape, tp, model.get("dtype_bytes"), engine)
    full_layers = kv_layers(model)
    layer_token = kv_bytes_per_token(1, model["num_key_value_heads"], model["head_dim"], tp,
                                     kv_dtype_bytes)
    layout = {"engine": engine, "linear_layers": linear_layers, "full_layers": full_layers,
              "conv_bytes": state["conv_bytes"], "ssm_bytes": state["ssm_bytes"],
              "state_layer_bytes": state["layer_bytes"]}
    if engine == "sglang":
        layout.update({"block_size": 1, "state_page_bytes": state["layer_bytes"], "states": 1,
                       "state_bytes_per_sequence": linear_layers * state["layer_bytes"]})
        return layout
    block = int(block_size)
    block = max(block, block * -(-state["layer_bytes"] // (block * layer_token)))
    states = 2 if enable_prefix_caching and (
        not version or parse_version(version) >= parse_version(VLLM_ALIGN_MODE_FROM)) else 1
    group = min(full_layers, linear_layers)
    if max(full_layers, linear_layers) < 1.5 * group:
        group = max(full_layers, linear_layers)
    page = block * layer_token
    layout.update({
        "block_size": block, "state_page_bytes": page, "states": states, "group_size": group,
        "group_bytes": group * page,
        "full_groups": -(-full_layers // group), "state_groups": -(-linear_layers // group),
        "state_bytes_per_sequence": -(-linear_layers // group) * states * group * page,
    })
    layout["state_blocks_per_sequence"] = layout["state_groups"] * states
    return layout


def scheduler_defaults(engine, version, gpu_name, gpu_bytes):
    """(max_num_batched_tokens, max_num_seqs) that ``vllm serve`` picks when not told."""
    rule = rule_for(engine, version)
    big = gpu_bytes >= 70 * GIB and "a100" not in (gpu_name or "").lower()
    return rule.get("large_gpu_defaults" if big else "small_gpu_defaults", (2048, 256))


def reserve_terms(model, tp, batched_tokens, num_seqs, engine="vllm", enforce_eager=False,
                  custom_all_reduce=True, sampler_extra_bytes=4, sampler_buffer_rows=0,
                  non_torch_base_gib=None, nccl_per_peer_gib=None, activation_floor_rows=0):
    """Activation peak and non-torch memory on each GPU, in bytes, with their parts. The sampler's
    warm-up keeps, per row and vocabulary entry, the logits in the model dtype plus
    `sampler_extra_bytes`, and `sampler_buffer_rows` float32 vocabulary rows of its own; the
    profile's peak is at least `activation_floor_rows` hidden-sized rows (hidden / tp), and the
    non-torch memory is `non_torch_base_gib` plus `nccl_per_peer_gib` per NCCL peer (the engine
    registry's budget row says each for the engine version; None: the module's constants)."""
    act_bytes = 4 if int(model.get("dtype_bytes") or 2) >= 4 else 2
    hidden = int(model["hidden_size"])
    inter = int(model.get("intermediate_size") or 4 * hidden)
    if model.get("num_experts"):
        per_token = int(model.get("num_experts_per_tok") or 8)
        inter = per_token * int(model.get("moe_intermediate_size") or inter)
    vocab = int(model.get("vocab_size") or 0)
    tokens = int(batched_tokens)
    rows = min(int(num_seqs), tokens)
    forward = tokens * act_bytes * (3 * hidden + 3 * inter // tp)
    floor = int(activation_floor_rows) * act_bytes * (hidden // tp)
    sampler = rows * vocab * (act_bytes + int(sampler_extra_bytes)) + \
        min(int(sampler_buffer_rows), rows) * vocab * 4
    if engine == "sglang":
        non_torch = (SGLANG_NON_TORCH + NCCL_PER_PEER * (tp - 1)) * GIB
        return {"activation_bytes": 0, "forward_bytes": forward, "sampler_bytes": sampler,
                "non_torch_bytes": int(non_torch), "custom_all_reduce_bytes": 0,
                "note": "SGLang keeps activations and CUDA graphs outside "
                        "--mem-fraction-static"}
    base = NON_TORCH_BASE if non_torch_base_gib is None else float(non_torch_base_gib)
    per_peer = NCCL_PER_PEER if nccl_per_peer_gib is None else float(nccl_per_peer_gib)
    non_torch = base + per_peer * (tp - 1)
    extra = CUSTOM_ALLREDUCE if (tp > 1 and custom_all_reduce and not enforce_eager) else 0.0
    return {"activation_bytes": max(forward, sampler, floor), "forward_bytes": forward,
            "sampler_bytes": sampler, "activation_floor_bytes": floor,
            "non_torch_bytes": int((non_torch + extra) * GIB),
            "custom_all_reduce_bytes": int(extra * GIB),
            "note": "activation = max(forward at %d tokens, sampler over %d rows%s)"
                    % (tokens, rows, ", profile floor of %d hidden rows" % int(activation_floor_rows)
                       if floor > max(forward, sampler) else "")}


def weights_per_gpu(model, tp, pp=1):
    """The weights on one GPU of the fullest pipeline stage (the whole model when pp is 1)."""
    rope = int(model.get("max_context") or model.get("max_position_embeddings") or 0) * \
        int(model["head_dim"]) * 4
    return max(stage_weights(model, pp)) // int(tp) + rope


def pp_error(model, pp):
    """Why `pp` hosts cannot each hold an equal slice of the model's layers, or None."""
    pp = int(pp)
    layers = int(model["num_hidden_layers"])
    if pp == 1 or (pp <= layers and layers % pp == 0):
        return None
    sizes = [n for n in range(2, min(layers, 16) + 1) if layers % n == 0]
    return ("serving_pipeline_parallel=%d does not divide the model's %d layers: each host of an instance holds an "
            "equal slice (an uneven split leaves the fullest host the bottleneck); use %s, or serve on one host "
            "(serving_pipeline_parallel: 1)" % (pp, layers, ", ".join(str(n) for n in sizes) or "1"))


def stage_weights(model, pp=1):
    """Weight bytes of each pipeline stage (before tensor parallel): an equal slice of the decoder
    layers each; the first stage also holds the input embeddings, the last the final norm and the
    output projection (a copy of the embeddings when they are tied: the last stage has no access
    to the first stage's). One stage: the checkpoint's bytes."""
    total = int(model["weight_bytes"])
    pp = int(pp)
    if pp == 1:
        return [total]
    dtype_bytes = int(model.get("dtype_bytes") or 2)
    hidden = int(model["hidden_size"])
    embed = int(model.get("vocab_size") or 0) * hidden * dtype_bytes
    norm = hidden * dtype_bytes
    tied = bool(model.get("tie_word_embeddings"))
    body = max(0, total - embed - norm - (0 if tied else embed))
    per_stage = body // pp
    stages = [per_stage] * pp
    stages[0] += embed
    stages[-1] += norm + embed
    return stages


def capacity(model, gpu_bytes, tp, fraction, kv_dtype_bytes, engine="vllm", version=None,
             batched_tokens=None, num_seqs=None, available_kv_bytes=None, enforce_eager=False,
             custom_all_reduce=True, gpu_name=None, enable_prefix_caching=True, pp=1, block_size=None,
             max_model_len=None):
    """KV capacity on each GPU for one configuration. Returns a dict (no judgement). For a vLLM
    hybrid model, hybrid["longest_context_tokens"] is the longest context one sequence gets once
    its recurrent states are counted (see hybrid_layout), and kv_tokens what vLLM logs as its "GPU
    KV cache size" (from VLLM_CONCURRENCY_TOKENS_FROM, with max_model_len given: the maximum
    concurrency at max_model_len in tokens; else the longest context). block_size: the KV block
    the engine is given (serving_block_size), else the engine's own."""
    rule = budget_rule(engine, version, model)
    block = int(block_size or rule["block_size"])
    d_tokens, d_seqs = scheduler_defaults(engine, version, gpu_name, gpu_bytes)
    state_slots = int(num_seqs or SGLANG_STATE_SLOTS)
    batched_tokens = int(batched_tokens or d_tokens)
    num_seqs = int(num_seqs or d_seqs)
    # each pipeline stage keeps the KV cache of its own layers
    per_token = kv_bytes_per_token(kv_layers(model) // int(pp), model["num_key_value_heads"],
                                   model["head_dim"], tp, kv_dtype_bytes)
    hybrid = hybrid_layout(model, tp, kv_dtype_bytes, engine, version, block,
                           enable_prefix_caching)
    weights = weights_per_gpu(model, tp, pp)
    terms = reserve_terms(model, tp, batched_tokens, num_seqs, engine, enforce_eager,
                          custom_all_reduce, rule.get("sampler_extra_bytes", 4),
                          rule.get("sampler_buffer_rows", 0), rule.get("non_torch_base_gib"),
                          rule.get("nccl_per_peer_gib"), rule.get("activation_floor_rows", 0))
    budget = int(gpu_bytes * float(fraction))
    if available_kv_bytes:
        available = int(available_kv_bytes)
        source = "given (engine log)"
    elif engine == "sglang":
        available = int((gpu_bytes - terms["non_torch_bytes"]) * float(fraction)) - weights
        source = "first principles (SGLang budget)"
    else:
        available = budget - weights - terms["activation_bytes"] - terms["non_torch_bytes"]
        source = "first principles (vLLM budget)"
    if hybrid and engine == "sglang":
        hybrid["state_slots"] = state_slots
        if not available_kv_bytes:
            available -= state_slots * hybrid["state_bytes_per_sequence"]
    longest = None
    if hybrid and engine != "sglang":
        block = hybrid["block_size"]
        blocks = max(0, available) // hybrid["group_bytes"]
        longest = max(0, blocks - hybrid["state_blocks_per_sequence"]) // hybrid["full_groups"] \
            * block
        tokens = longest
        if max_model_len and (not version or parse_version(version) >=
                              parse_version(VLLM_CONCURRENCY_TOKENS_FROM)):
            per_seq = hybrid["full_groups"] * -(-int(max_model_len) // block) + \
                hybrid["state_blocks_per_sequence"]
            # the engine's own order of operations (a float concurrency, then int of the product)
            tokens = int(blocks / float(per_seq) * int(max_model_len))
        hybrid["longest_context_tokens"] = int(longest)
    else:
        blocks = max(0, available) // (block * per_token)
        tokens = blocks * block
    return {
        "gpu_memory_bytes": int(gpu_bytes),
        "budget_bytes": budget,
        "weights_per_gpu_bytes": weights,
        "activation_bytes": terms["activation_bytes"],
        "forward_bytes": terms["forward_bytes"],
        "sampler_bytes": terms["sampler_bytes"],
        "non_torch_bytes": terms["non_torch_bytes"],
        "custom_all_reduce_bytes": terms["custom_all_reduce_bytes"],
        "reserve_note": terms["note"],
        "max_num_batched_tokens": batched_tokens,
        "max_num_seqs": num_seqs,
        "available_kv_bytes": available,
        "available_kv_source": source,
        "kv_bytes_per_token": per_token,
        "kv_heads_per_rank": kv_heads_per_rank(model["num_key_value_heads"], tp),
        "block_size": block,
        "kv_blocks": int(blocks),
        "kv_tokens": int(tokens),
        "hybrid": hybrid,
        "engine_runner": rule.get("runner"),
        "cudagraph_in_budget": bool(rule.get("cudagraph_in_budget")) and not enforce_eager,
        # the band was measured on first-principles plans of dense models on one host; a figure
        # given from the engine's log, MoE, hybrid and multi-host plans have none
        "kv_tokens_error_pct": None if (available_kv_bytes or model.get("num_experts") or hybrid
                                        or int(pp) > 1) else rule.get("kv_tokens_error_pct"),
    }


def longest_context_tokens(cap):
    """The longest context one sequence gets: kv_tokens, except for a vLLM hybrid plan, whose
    kv_tokens is the engine's logged figure (see VLLM_CONCURRENCY_TOKENS_FROM)."""
    hybrid = cap.get("hybrid") or {}
    return hybrid.get("longest_context_tokens", cap["kv_tokens"])


def _fits(cap, max_model_len):
    return cap["available_kv_bytes"] > 0 and longest_context_tokens(cap) >= max_model_len


def tp_error(model, tp, sizes_up_to=8):
    """Why tensor parallel `tp` cannot split the model's heads (naming the sizes that can, up to
    `sizes_up_to`), or None."""
    tp = int(tp)
    heads = int(model["num_attention_heads"])
    kv_heads = int(model["num_key_value_heads"])
    linear = _linear_heads(model)
    sizes = valid_tp_sizes(heads, kv_heads, max(tp, sizes_up_to), linear)
    if tp in sizes:
        return None
    return ("serving_tensor_parallel=%d does not divide the model's %d attention heads / %d KV "
            "heads%s; valid sizes: %s" % (
                tp, heads, kv_heads,
                " / %d and %d linear-attention key and value heads" % linear if linear else "",
                ", ".join(str(s) for s in sizes)))


def context_error(model, max_model_len):
    """Why a context of `max_model_len` tokens is beyond what the checkpoint supports, or None."""
    limit = model.get("max_context")
    if not (limit and max_model_len and max_model_len > limit):
        return None
    if model.get("long_context"):
        more = ", or raise serving_long_context's factor"
    elif model.get("rope_scaling"):
        more = ""
    else:
        # The engine gets a YaRN override of the model's config at start; the checkpoint stays as it is.
        more = (", or set serving_long_context (e.g. {factor: %.1f, original_max_position: %d}) "
                "where the model card documents YaRN (Qwen2.5/Qwen3: factor 4 on 32768)" % (
                    max(2, -(-int(max_model_len) // int(limit))), limit))
    return ("serving_max_model_len=%d exceeds what the checkpoint supports: %d (%s). Lower "
            "serving_max_model_len to %d%s" % (
                max_model_len, limit, model.get("max_context_source"), limit, more))


def model_checks(model, tp, max_model_len, pp=1):
    """What the spec asks of the model that no GPU is needed to check: a tensor parallel size that
    divides its heads, pipeline stages that split its layers evenly, a context within what the
    checkpoint supports. [error messages]."""
    return [e for e in (tp_error(model, tp), pp_error(model, pp), context_error(model, max_model_len)) if e]


def make_plan(model, gpu_bytes, gpu_count, tp, max_model_len, fraction=0.9, engine="vllm",
              engine_version=None, kv_cache_dtype="auto", max_num_seqs=None,
              max_num_batched_tokens=None, available_kv_bytes=None, enforce_eager=False,
              custom_all_reduce=True, gpu_name=None, max_concurrency=None,
              compute_capability=None, enable_prefix_caching=True, pipeline_parallel=1, block_size=None):
    """The full plan. Raises PlanError with numbers and fixes when one sequence of
    ``max_model_len`` tokens cannot fit; otherwise returns the plan with warnings."""
    tp = int(tp)
    heads = int(model["num_attention_heads"])
    kv_heads = int(model["num_key_value_heads"])
    warnings = []
    errors = []
    if not 0 < float(fraction) <= 1:
        raise PlanError("serving_gpu_memory_fraction must be in (0, 1], got %s" % fraction)
    sizes = valid_tp_sizes(heads, kv_heads, max(tp, gpu_count or 1, 8), _linear_heads(model))
    if tp not in sizes:
        raise PlanError(tp_error(model, tp, max(gpu_count or 1, 8)))
    pp = int(pipeline_parallel)
    if pp < 1:
        raise PlanError("serving_pipeline_parallel must be an integer >= 1, got %s" % pipeline_parallel)
    if pp_error(model, pp):
        raise PlanError(pp_error(model, pp))
    if pp > 1 and model.get("linear_attention_layers"):
        raise PlanError("serving_pipeline_parallel=%d: the model has linear-attention layers, whose recurrent "
                        "states this plan counts for one stage only; serve it on one host "
                        "(serving_pipeline_parallel: 1)" % pp)
    if gpu_count == 0:
        raise PlanError("no GPU found on this host: a GPU plan needs NVIDIA GPUs with a working "
                        "driver (serving_stack cpu serves without them)")
    if gpu_count is not None and tp > gpu_count:
        raise PlanError(
            "serving_tensor_parallel=%d but the host has %d GPU(s): lower serving_tensor_parallel "
            "to %s or serve on a host with %d GPUs" % (
                tp, gpu_count, max([s for s in sizes if s <= gpu_count] or [0]), tp))
    if compute_capability:
        major = int(str(compute_capability).split(".", 1)[0])
        if major < 7:
            raise PlanError("GPU compute capability %s: vLLM and SGLang need 7.0 (Volta) or newer"
                            % compute_capability)
        if major < 8 and model.get("dtype") == "bfloat16":
            warnings.append("compute capability %s has no bfloat16: the engine will cast to "
                            "float16" % compute_capability)
    too_long = context_error(model, max_model_len)
    if too_long:
        raise PlanError(too_long)
    limit = model.get("max_context")
    model_dtype_bytes = model.get("dtype_bytes") or 2
    kv_bytes = resolve_kv_dtype_bytes(kv_cache_dtype, model_dtype_bytes)
    common = dict(engine=engine, version=engine_version, batched_tokens=max_num_batched_tokens,
                  num_seqs=max_num_seqs or max_concurrency, enforce_eager=enforce_eager,
                  custom_all_reduce=custom_all_reduce, gpu_name=gpu_name,
                  enable_prefix_caching=enable_prefix_caching, pp=pp, block_size=block_size,
                  max_model_len=max_model_len)
    cap = capacity(model, gpu_bytes, tp, fraction, kv_bytes,
                   available_kv_bytes=available_kv_bytes, **common)
    kv_tokens = longest_context_tokens(cap)
    longest = min(kv_tokens, limit) if limit else kv_tokens
    sequences, ratio = concurrency(cap, max_model_len)
    if model.get("linear_attention_layers") and not cap["hybrid"]:
        warnings.append("%d linear-attention layers whose state size config.json does not give: "
                        "their recurrent state is not counted" % model["linear_attention_layers"])
    plan = dict(cap)
    plan.update({
        "engine": engine,
        "engine_version": engine_version,
        "tensor_parallel": tp,
        "pipeline_parallel": pp,
        "stages": [{"stage": i, "layers": int(model["num_hidden_layers"]) // pp,
                    "weights_per_gpu_bytes": w // tp} for i, w in enumerate(stage_weights(model, pp))],
        "gpu_memory_fraction": float(fraction),
        "max_model_len": int(max_model_len),
        "kv_cache_dtype": kv_cache_dtype or "auto",
        "kv_dtype_bytes": kv_bytes,
        "sequences_at_max_model_len": sequences,
        "max_concurrency_ratio": ratio,
        "longest_context": int(longest),
        "requested_concurrency": max_concurrency,
        "fits": _fits(cap, max_model_len),
        "valid_tp_sizes": sizes,
        "notices": warnings,
    })
    if not plan["fits"]:
        plan["fixes"] = suggest_fixes(model, gpu_bytes, gpu_count, tp, max_model_len, fraction,
                                      kv_cache_dtype, model_dtype_bytes, sizes, cap, common)
        errors.append(infeasible_message(model, plan))
    else:
        if max_concurrency and plan["sequences_at_max_model_len"] < int(max_concurrency):
            warnings.append(
                "%d requests of the full %d tokens fit in the KV cache at once; "
                "serving_max_concurrency=%d is reached only with shorter requests (longer ones "
                "wait or are preempted)" % (plan["sequences_at_max_model_len"], max_model_len,
                                            int(max_concurrency)))
        if cap["cudagraph_in_budget"] and not available_kv_bytes:
            warnings.append(
                "vLLM %s takes its CUDA-graph memory estimate out of the KV cache memory "
                "(VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS, on by default in its %s model runner); "
                "the plan does not estimate that memory, so the engine will report fewer KV tokens "
                "than planned (its startup log names the estimate)" % (engine_version, cap["engine_runner"]))
        if engine == "vllm" and tp > 1 and custom_all_reduce and not enforce_eager:
            warnings.append(
                "TP %d with CUDA graphs and the custom all-reduce: on hosts without NVLink "
                "multicast vLLM 0.26 crashed in graph capture (illegal memory access); if startup "
                "dies there, add --disable-custom-all-reduce and --enforce-eager" % tp)
    plan["errors"] = errors
    return plan


def concurrency(cap, max_model_len):
    """(sequences of max_model_len tokens that fit at once, the engine's maximum concurrency)."""
    if not max_model_len:
        return 0, None
    tokens = int(max_model_len)
    hybrid = cap.get("hybrid")
    if hybrid and hybrid["engine"] != "sglang":
        per_seq = hybrid["full_groups"] * -(-tokens // hybrid["block_size"]) + \
            hybrid["state_blocks_per_sequence"]
        return cap["kv_blocks"] // per_seq, round(cap["kv_blocks"] / float(per_seq), 2)
    sequences, ratio = cap["kv_tokens"] // tokens, cap["kv_tokens"] / float(tokens)
    if hybrid:
        sequences, ratio = min(sequences, hybrid["state_slots"]), min(ratio, hybrid["state_slots"])
    return sequences, round(ratio, 2)


def suggest_fixes(model, gpu_bytes, gpu_count, tp, max_model_len, fraction, kv_cache_dtype,
                  model_dtype_bytes, sizes, cap, common):
    fixes = []
    kv_bytes = resolve_kv_dtype_bytes(kv_cache_dtype, model_dtype_bytes)
    for bigger in [s for s in sizes if s > tp]:
        other = capacity(model, gpu_bytes, bigger, fraction, kv_bytes, **common)
        if _fits(other, max_model_len):
            where = "" if gpu_count is None or bigger <= gpu_count else \
                " (needs a host with %d GPUs; this one has %d)" % (bigger, gpu_count)
            fixes.append({"variable": "serving_tensor_parallel", "value": bigger,
                          "text": "raise serving_tensor_parallel to %d: %d KV tokens per GPU%s" % (
                              bigger, other["kv_tokens"], where)})
            break
    if longest_context_tokens(cap) > 0:
        fixes.append({"variable": "serving_max_model_len", "value": longest_context_tokens(cap),
                      "text": "lower serving_max_model_len to %d (the longest context that fits)"
                              % longest_context_tokens(cap)})
    if kv_bytes > 1:
        fp8 = capacity(model, gpu_bytes, tp, fraction, 1, **common)
        if _fits(fp8, max_model_len):
            # fp8_e4m3: the spelling both engines accept
            fixes.append({"variable": "serving_kv_cache_dtype", "value": "fp8_e4m3",
                          "text": "use an fp8 KV cache (serving_kv_cache_dtype: fp8_e4m3): %d KV tokens"
                                  % fp8["kv_tokens"]})
    for frac in (0.92, 0.95):
        if frac > float(fraction):
            more = capacity(model, gpu_bytes, tp, frac, kv_bytes, **common)
            if _fits(more, max_model_len):
                fixes.append({"variable": "serving_gpu_memory_fraction", "value": frac,
                              "text": "raise serving_gpu_memory_fraction to %.2f: %d KV tokens"
                                      % (frac, more["kv_tokens"])})
                break
    if not fixes:
        fixes.append({"variable": "serving_model", "value": None,
                      "text": "serve a smaller or quantized checkpoint, or use GPUs with more "
                              "memory"})
    return fixes


def infeasible_message(model, plan):
    if plan["available_kv_bytes"] <= 0:
        head = ("%s does not fit: weights %.2f GiB per GPU + activation %.2f GiB + non-torch "
                "%.2f GiB exceed %.2f GiB (%.2f of %.2f GiB) at serving_tensor_parallel=%d" % (
                    model.get("architecture") or "the model", gib(plan["weights_per_gpu_bytes"]),
                    gib(plan["activation_bytes"]), gib(plan["non_torch_bytes"]),
                    gib(plan["budget_bytes"]), plan["gpu_memory_fraction"],
                    gib(plan["gpu_memory_bytes"]), plan["tensor_parallel"]))
    else:
        hybrid = plan.get("hybrid")
        head = ("one sequence of serving_max_model_len=%d tokens needs %.2f GiB of KV cache per "
                "GPU (%d bytes/token%s), only %.2f GiB = %d tokens are left at "
                "serving_tensor_parallel=%d, serving_gpu_memory_fraction=%.2f (weights %.2f GiB "
                "per GPU)" % (
                    plan["max_model_len"],
                    gib(plan["max_model_len"] * plan["kv_bytes_per_token"]),
                    plan["kv_bytes_per_token"],
                    ", plus %.2f GiB of linear-attention state" % gib(
                        hybrid["state_bytes_per_sequence"]) if hybrid else "",
                    gib(plan["available_kv_bytes"]), longest_context_tokens(plan),
                    plan["tensor_parallel"], plan["gpu_memory_fraction"],
                    gib(plan["weights_per_gpu_bytes"])))
    return head + ". Fixes: " + "; ".join(f["text"] for f in plan["fixes"])


def plan_summary_lines(plan):
    lines = [
        "TP %d, %s %s, fraction %.2f of %.2f GiB: weights %.2f GiB/GPU, activation %.2f GiB, "
        "non-torch %.2f GiB" % (
            plan["tensor_parallel"], plan["engine"], plan["engine_version"] or "",
            plan["gpu_memory_fraction"], gib(plan["gpu_memory_bytes"]),
            gib(plan["weights_per_gpu_bytes"]), gib(plan["activation_bytes"]),
            gib(plan["non_torch_bytes"])),
        "KV cache %.2f GiB/GPU (%s) = %d tokens at %d bytes/token (%s, %d KV heads/GPU)" % (
            gib(max(0, plan["available_kv_bytes"])), plan["available_kv_source"],
            plan["kv_tokens"], plan["kv_bytes_per_token"], plan["kv_cache_dtype"],
            plan["kv_heads_per_rank"]),
        "context %d: %d full-length sequences at once (%.2fx); longest context that fits %d" % (
            plan["max_model_len"], plan["sequences_at_max_model_len"],
            plan["max_concurrency_ratio"] or 0, plan["longest_context"]),
    ]
    hybrid = plan.get("hybrid")
    if hybrid:
        lines.append(
            "hybrid model: KV from the %d full-attention layers only; %d linear-attention layers "
            "hold %.2f MiB of recurrent state each per sequence/GPU (conv %d + ssm %d bytes), "
            "%.2f MiB per sequence %s" % (
                hybrid["full_layers"], hybrid["linear_layers"],
                hybrid["state_layer_bytes"] / float(1024 ** 2), hybrid["conv_bytes"],
                hybrid["ssm_bytes"], hybrid["state_bytes_per_sequence"] / float(1024 ** 2),
                "(%d state slots reserved up front)" % hybrid["state_slots"]
                if hybrid["engine"] == "sglang" else
                "(%d state(s) per layer, each padded to one %d-token KV page)" % (
                    hybrid["states"], hybrid["block_size"])))
    return lines


# ------------------------------------------------------------------------------- stack/driver
def _cuda_tuple(text):
    nums = [int(n) for n in re.findall(r"\d+", str(text or ""))[:2]]
    return tuple(nums + [0] * (2 - len(nums)))


def check_stack(stack_name, profiles, gpu_count, driver_version=None, cuda_driver_version=None,
                pci_gpu_count=0):
    """Driver and GPUs against the stack profile. Returns dict(profile, problems, notes,
    fitting_profiles); problems are dicts with variable/msg/fix."""
    profiles = profiles or {}
    result = {"profile": None, "problems": [], "notes": [], "fitting_profiles": [],
              "gpu_stack": None}
    if stack_name not in profiles:
        result["problems"].append({
            "check": "profile", "variable": "serving_stack",
            "msg": "serving_stack %r is not a profile in serving_stacks_file" % stack_name,
            "fix": "choose one of: %s" % ", ".join(sorted(profiles)),
        })
        return result
    profile = profiles[stack_name] or {}
    result["profile"] = profile
    needed = profile.get("driver_branch_min")
    result["gpu_stack"] = needed is not None
    branch = driver_branch(driver_version)
    cuda = _cuda_tuple(cuda_driver_version) if cuda_driver_version else None
    fitting = []
    for name, other in sorted(profiles.items()):
        other_min = (other or {}).get("driver_branch_min")
        if other_min is None:
            continue
        ok = branch is not None and branch >= int(other_min)
        if ok and cuda and other.get("cuda"):
            ok = cuda >= _cuda_tuple(other["cuda"])
        if ok:
            fitting.append(name)
    fitting.sort(key=lambda n: _cuda_tuple(profiles[n].get("cuda")), reverse=True)
    result["fitting_profiles"] = fitting
    if needed is None:
        if gpu_count:
            result["notes"].append("serving_stack %s is CPU-only: the %d GPU(s) stay unused"
                                   % (stack_name, gpu_count))
        return result
    if not gpu_count:
        if pci_gpu_count:
            result["notes"].append(
                "%d NVIDIA GPU(s) on the PCI bus but no working driver: the nvidia_driver role "
                "installs branch %s for serving_stack %s; the memory plan waits for it"
                % (pci_gpu_count, needed, stack_name))
        else:
            result["problems"].append({
                "check": "no_gpu", "variable": "serving_stack",
                "msg": "serving_stack %s needs NVIDIA GPUs (driver branch >= %s, CUDA %s) and this "
                       "host has none" % (stack_name, needed, profile.get("cuda")),
                "fix": "set serving_stack: cpu for a CPU host, or run on a GPU host",
            })
        return result
    too_old = branch is None or branch < int(needed)
    cuda_short = cuda is not None and profile.get("cuda") and cuda < _cuda_tuple(profile["cuda"])
    if too_old or cuda_short:
        alternatives = [n for n in fitting if n != stack_name]
        result["problems"].append({
            "check": "driver", "variable": "serving_stack",
            "msg": "driver %s (branch %s, CUDA driver API %s) is too old for serving_stack %s, "
                   "which needs branch >= %s for CUDA %s" % (
                       driver_version, branch, cuda_driver_version, stack_name, needed,
                       profile.get("cuda")),
            "fix": "%s; or let the nvidia_driver role install branch %s (a reboot; set "
                   "preflight_allow_driver_change: true)" % (
                       ("set serving_stack to %s, which this driver runs" %
                        " or ".join(alternatives)) if alternatives else
                       "no profile in serving_stacks_file runs on this driver", needed),
        })
    return result


# ------------------------------------------------------------------------- the module's whole job
def smallest_gpu(gpus, gpu_memory_bytes=None, gpu_name=None):
    """(memory, name, compute_capability) the plan uses: the smallest usable memory among `gpus`
    unless `gpu_memory_bytes` is given, the first GPU's name unless `gpu_name` is given, and the
    lowest compute capability."""
    memory, name, capability = gpu_memory_bytes, gpu_name, None
    if not memory and gpus:
        usable = [g.get("memory_usable_bytes") or g.get("memory_total_bytes") or 0 for g in gpus]
        memory = min(usable)
    if gpus:
        name = name or gpus[0].get("name")
        caps = [g.get("compute_capability") for g in gpus if g.get("compute_capability")]
        capability = min(caps, key=lambda c: [int(x) for x in str(c).split(".")]) if caps else None
    return memory, name, capability


def plan_from_params(params):
    """What the serving_plan module returns, from its parameters: dict(plan, deferred, stack,
    errors, summary). The module fails with " | ".join(errors) when errors is not empty and
    fail_when_infeasible is set."""
    p = params
    gpus = p.get("gpus") or []
    gpu_count = p["gpu_count"] if p.get("gpu_count") is not None else len(gpus)
    errors = []
    summary = []
    result = {"plan": None, "deferred": None, "stack": None, "errors": errors,
              "summary": summary}

    if p.get("stack"):
        stack = check_stack(p["stack"], p.get("stack_profiles"), gpu_count, p.get("driver_version"),
                            p.get("cuda_driver_version"), p.get("pci_gpu_count", 0))
        stack.pop("profile", None)
        result["stack"] = stack
        for problem in stack["problems"]:
            if problem["check"] == "driver" and p.get("allow_driver_change"):
                stack["notes"].append(problem["msg"] + " (the driver role will replace it)")
                continue
            errors.append("%s: %s" % (problem["msg"], problem["fix"]))
        summary.extend(stack["notes"])

    memory, name, capability = smallest_gpu(gpus, p.get("gpu_memory_bytes"), p.get("gpu_name"))
    model = p.get("model")
    if model and p.get("long_context"):
        try:
            model = apply_long_context(model, p["long_context"])
        except ValueError as exc:
            errors.append(str(exc))
            return result
    if not model:
        result["deferred"] = "no model facts (config.json not obtainable yet)"
        summary.append("plan deferred: " + result["deferred"])
    elif not memory:
        result["deferred"] = "no GPU memory known (no GPU visible and gpu_memory_bytes unset)"
        summary.append("plan deferred: " + result["deferred"])
        # What needs no GPU is checked all the same (CPU stacks, hosts before their driver).
        try:
            errors.extend(model_checks(model, p.get("tensor_parallel", 1), p.get("max_model_len") or 0,
                                       p.get("pipeline_parallel", 1)))
        except (KeyError, ValueError) as exc:
            errors.append("model facts lack %s" % exc if isinstance(exc, KeyError) else str(exc))
    else:
        max_len = p.get("max_model_len") or int(model.get("max_context") or 0)
        try:
            plan = make_plan(
                model, memory, gpu_count or None, p.get("tensor_parallel", 1), max_len,
                p.get("gpu_memory_fraction", 0.9), p.get("engine", "vllm"), p.get("engine_version"),
                p.get("kv_cache_dtype", "auto"), max_num_seqs=p.get("max_num_seqs"),
                max_num_batched_tokens=p.get("max_num_batched_tokens"),
                available_kv_bytes=p.get("available_kv_bytes"),
                enforce_eager=p.get("enforce_eager", False),
                custom_all_reduce=p.get("custom_all_reduce", True), gpu_name=name,
                max_concurrency=p.get("max_concurrency"), compute_capability=capability,
                enable_prefix_caching=p.get("enable_prefix_caching", True),
                pipeline_parallel=p.get("pipeline_parallel", 1), block_size=p.get("block_size"))
            result["plan"] = plan
            summary.extend(plan_summary_lines(plan))
            if model.get("long_context"):
                summary.append("context limit %d (%s): the engine starts with that YaRN override, "
                               "the checkpoint unchanged" % (model["max_context"], model["max_context_source"]))
            errors.extend(plan["errors"])
        except (PlanError, KeyError, ValueError) as exc:
            errors.append(str(exc) if not isinstance(exc, KeyError)
                          else "model facts lack %s" % exc)
    return result
