#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: llmops.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: serving_plan
short_description: Will the model fit the GPUs, and how much KV cache and context is left
version_added: "0.1.0"
description:
  - Computes, from the facts of M(llmops.serving.model_facts) and M(llmops.serving.gpu_facts),
    the weights per GPU (divided by tensor parallelism), the KV cache bytes per token
    (2 x layers x KV heads per GPU x head_dim x KV dtype bytes, so an fp8 KV cache halves it),
    the memory left for the KV cache, the KV capacity in tokens (whole blocks of 16 for vLLM),
    how many sequences of the requested context fit at once, and the longest context that fits.
  - For hybrid models (Qwen3-Next, Qwen3.5, Qwen3.6) only the full-attention layers count in the
    KV bytes per token; the linear-attention layers' recurrent state is counted per sequence, as
    the engine budgets it (vLLM pads each layer's state to one KV page and draws it from the KV
    pool; SGLang reserves a pool of states up front).
  - The memory left follows vLLM's own budget (V1 engine, checked against vLLM 0.26),
    CUDA-usable memory x O(gpu_memory_fraction) - weights - activation peak - non-torch memory.
    The activation and non-torch terms are modelled (see the module_utils C(plan.py) docstring
    for each assumption and its source) unless O(available_kv_bytes) gives the figure a real
    engine logged. SGLang's budget is (usable - non-torch) x mem_fraction_static - weights instead.
  - Fails, with the numbers and concrete fixes (a larger C(serving_tensor_parallel), a shorter
    C(serving_max_model_len), an fp8 KV cache, a larger memory fraction), when one sequence of
    O(max_model_len) tokens cannot fit, when the context exceeds what the checkpoint supports,
    or when tensor parallelism does not divide the heads or exceeds the GPUs.
  - Also checks the driver against the stack profile (O(stack), O(stack_profiles)), comparing the
    profile's C(driver_branch_min) and CUDA line against the driver and its CUDA API version,
    naming C(serving_stack) and the profiles this driver runs.
  - Changes nothing on the host.
author:
  - llmops.serving maintainers (@llmops)
options:
  model:
    description:
      - The result of M(llmops.serving.model_facts) (at least num_hidden_layers,
        num_attention_heads, num_key_value_heads, head_dim, hidden_size, weight_bytes).
      - Empty defers the memory plan (the stack check still runs).
    type: dict
    default: {}
  gpus:
    description:
      - The C(gpus) list of M(llmops.serving.gpu_facts); the plan uses the smallest usable memory
        among them.
    type: list
    elements: dict
    default: []
  gpu_memory_bytes:
    description:
      - CUDA-usable memory of one GPU, overriding O(gpus) (for planning a host you do not have).
    type: int
  gpu_count:
    description:
      - GPUs on the host; defaults to the length of O(gpus).
    type: int
  gpu_name:
    description:
      - GPU model name, overriding O(gpus) (vLLM picks batch defaults by it).
    type: str
  tensor_parallel:
    description:
      - Tensor-parallel size (C(serving_tensor_parallel)).
    type: int
    default: 1
  pipeline_parallel:
    description:
      - Hosts one instance spans, one pipeline stage each (C(serving_pipeline_parallel)). The plan is
        made for the fullest stage (the first holds the embeddings, the last the output projection),
        and refused when the stages cannot split the layers evenly.
    type: int
    default: 1
  max_model_len:
    description:
      - Requested context length (C(serving_max_model_len)); 0 takes the checkpoint's maximum.
    type: int
    default: 0
  long_context:
    description:
      - The engine is started with a YaRN rope_scaling override (C(serving_long_context)), so
        the context limit becomes O(long_context.original_max_position) x
        O(long_context.factor) instead of the checkpoint's. The checkpoint is not changed.
      - Unset, the limit is the checkpoint's own (max_position_embeddings, or its rope_scaling).
    type: dict
    suboptions:
      factor:
        description:
          - The YaRN factor (above 1).
        type: float
        required: true
      original_max_position:
        description:
          - The context the checkpoint was trained for (its max_position_embeddings for Qwen2.5
            and Qwen3).
        type: int
        required: true
  enable_prefix_caching:
    description:
      - The engine caches prefixes (C(serving_enable_prefix_caching)); vLLM 0.15 and later then
        keep two recurrent states per sequence of a hybrid model instead of one.
    type: bool
    default: true
  gpu_memory_fraction:
    description:
      - Fraction of GPU memory the engine may use (C(serving_gpu_memory_fraction)).
    type: float
    default: 0.9
  max_concurrency:
    description:
      - Requests in flight (C(serving_max_concurrency)); also the engine's max_num_seqs unless
        O(max_num_seqs) is set.
    type: int
  max_num_seqs:
    description:
      - The engine's max_num_seqs when it differs from O(max_concurrency).
    type: int
  max_num_batched_tokens:
    description:
      - The engine's per-step token budget; the engine's default when not set.
    type: int
  kv_cache_dtype:
    description:
      - KV cache dtype (auto follows the model; fp8 halves a 16-bit cache).
    type: str
    default: auto
  block_size:
    description:
      - Tokens per KV-cache block the engine is given (C(serving_block_size)); the engine's own
        block size when not set. The KV tokens are counted in whole blocks.
    type: int
  engine:
    description:
      - Engine whose memory budget to model.
    type: str
    choices: [sglang, vllm]
    default: vllm
  engine_version:
    description:
      - Engine version (rules that change between versions are keyed by it).
    type: str
  available_kv_bytes:
    description:
      - KV cache memory per GPU that a real engine reported ("Available KV cache memory");
        skips the reserve model.
    type: int
  enforce_eager:
    description:
      - The engine runs without CUDA graphs.
    type: bool
    default: false
  custom_all_reduce:
    description:
      - The engine uses its custom all-reduce at tensor parallelism above 1.
    type: bool
    default: true
  stack:
    description:
      - The stack profile name (C(serving_stack)) to check the driver against.
    type: str
  stack_profiles:
    description:
      - The stack profiles (C(serving_stack_profiles)).
    type: dict
    default: {}
  driver_version:
    description:
      - Driver version from M(llmops.serving.gpu_facts).
    type: str
  cuda_driver_version:
    description:
      - CUDA driver API version from M(llmops.serving.gpu_facts).
    type: str
  pci_gpu_count:
    description:
      - NVIDIA GPUs on the PCI bus (a fresh host whose driver is not installed yet).
    type: int
    default: 0
  allow_driver_change:
    description:
      - A driver older than the stack needs is not an error (the driver role will replace it).
    type: bool
    default: false
  fail_when_infeasible:
    description:
      - Fail when the plan cannot work; otherwise report it in RV(errors) and RV(plan).
    type: bool
    default: true
extends_documentation_fragment:
  - llmops.serving.read_only
seealso:
  - module: llmops.serving.gpu_facts
  - module: llmops.serving.model_facts
"""

EXAMPLES = r"""
- name: Plan Qwen2.5-32B on this host's GPUs
  llmops.serving.serving_plan:
    model: "{{ __model }}"
    gpus: "{{ __gpus.gpus }}"
    tensor_parallel: 2
    max_model_len: 32768
    gpu_memory_fraction: 0.9
    engine: vllm
    engine_version: 0.26.0
    stack: cuda12.4
    stack_profiles: "{{ serving_stack_profiles }}"
    driver_version: "{{ __gpus.driver_version }}"
    cuda_driver_version: "{{ __gpus.cuda_driver_version }}"

- name: Check a real engine's figure (from its "Available KV cache memory" log line)
  llmops.serving.serving_plan:
    model: "{{ __model }}"
    gpu_memory_bytes: 150109880320
    gpu_count: 1
    available_kv_bytes: "{{ (62.95 * 1024 ** 3) | int }}"
"""

RETURN = r"""
plan:
  description:
    - The plan; null when deferred (no GPU memory known yet).
    - C(kv_tokens) is the KV cache the engine should report at start-up ("GPU KV cache size" for vLLM),
      C(available_kv_bytes) the memory behind it, with its source in C(available_kv_source)
      (the engine's own figure when I(available_kv_bytes) is given, else the plan's first-principles budget).
    - C(kv_tokens_error_pct) is the expected error band of C(kv_tokens) in percent for this engine
      version and model runner, the largest error measured on real start-ups of that range (the engine
      registry's budget rows, measured on dense models on one host); null where no start-up was compared,
      for MoE, hybrid and multi-host plans, and when the figure was given.
    - C(engine_runner) names the vLLM model runner the budget assumes (C(v1) or C(v2)), and
      C(cudagraph_in_budget) whether that runner takes its CUDA-graph memory estimate out of the KV
      memory, which the plan does not estimate (a notice then says so).
  returned: always
  type: dict
  sample:
    tensor_parallel: 1
    pipeline_parallel: 1
    stages: [{stage: 0, layers: 64, weights_per_gpu_bytes: 65535164416}]
    gpu_memory_bytes: 150109880320
    weights_per_gpu_bytes: 65544529920
    activation_bytes: 1720320000
    non_torch_bytes: 236223201
    available_kv_bytes: 67597819167
    kv_bytes_per_token: 262144
    kv_tokens: 257856
    kv_tokens_error_pct: 0.2
    engine_runner: v2
    cudagraph_in_budget: false
    block_size: 16
    max_model_len: 32768
    sequences_at_max_model_len: 7
    longest_context: 32768
    fits: true
deferred:
  description: Why no plan was made (no model facts, no GPU memory known), or null.
  returned: always
  type: str
stack:
  description: Driver against the stack profile, with fitting_profiles (those this driver runs).
  returned: always
  type: dict
errors:
  description: Why the plan cannot work (also the failure message).
  returned: always
  type: list
  elements: str
summary:
  description: Human-readable lines.
  returned: always
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmops.serving.plugins.module_utils.engines import ENGINES
from ansible_collections.llmops.serving.plugins.module_utils.plan import plan_from_params

ARGUMENT_SPEC = dict(
    model=dict(type="dict", default={}),
    gpus=dict(type="list", elements="dict", default=[]),
    gpu_memory_bytes=dict(type="int"),
    gpu_count=dict(type="int"),
    gpu_name=dict(type="str"),
    tensor_parallel=dict(type="int", default=1),
    pipeline_parallel=dict(type="int", default=1),
    max_model_len=dict(type="int", default=0),
    long_context=dict(type="dict", default=None, options=dict(
        factor=dict(type="float", required=True),
        original_max_position=dict(type="int", required=True),
    )),
    enable_prefix_caching=dict(type="bool", default=True),
    gpu_memory_fraction=dict(type="float", default=0.9),
    max_concurrency=dict(type="int"),
    max_num_seqs=dict(type="int"),
    max_num_batched_tokens=dict(type="int", no_log=False),
    kv_cache_dtype=dict(type="str", default="auto"),
    block_size=dict(type="int"),
    engine=dict(type="str", default="vllm", choices=list(ENGINES)),
    engine_version=dict(type="str"),
    available_kv_bytes=dict(type="int"),
    enforce_eager=dict(type="bool", default=False),
    custom_all_reduce=dict(type="bool", default=True),
    stack=dict(type="str"),
    stack_profiles=dict(type="dict", default={}),
    driver_version=dict(type="str"),
    cuda_driver_version=dict(type="str"),
    pci_gpu_count=dict(type="int", default=0),
    allow_driver_change=dict(type="bool", default=False),
    fail_when_infeasible=dict(type="bool", default=True),
)


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    result = plan_from_params(module.params)
    if result["errors"] and module.params["fail_when_infeasible"]:
        module.fail_json(msg=" | ".join(result["errors"]), **result)
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
