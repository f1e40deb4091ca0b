#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: llmops.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: model_facts
short_description: Architecture, shape, size and completeness of a Hugging Face model folder
version_added: "0.1.0"
description:
  - Reads C(config.json) (or O(config) when the folder does not exist yet) and the weights
    index (C(model.safetensors.index.json), a single C(model.safetensors), or
    C(pytorch_model.bin[.index.json])).
  - Reports architecture, layers, attention heads, KV heads, C(head_dim) (the explicit field
    first, else hidden_size / heads), dtype (C(torch_dtype) or C(dtype)), C(max_position_embeddings),
    rope scaling and the longest context it allows, the parameter count (from the safetensors
    headers when the files are there, else the index's C(metadata.total_size) / dtype bytes, else
    estimated from the config) and the weight bytes.
  - For hybrid models (Qwen3-Next, Qwen3.5, Qwen3.6) it also counts the full-attention layers,
    which keep a KV cache, and the gated-delta-net linear-attention layers, which hold a fixed
    recurrent state per sequence, and sizes that state.
  - Checks that every file the index names exists and is as long as its header says; a partly
    downloaded folder fails with the missing file names. A folder with no weight files yet is
    reported (status V(absent)) and fails only with O(require_weights=true).
  - Tells whether the engine version supports the architecture, from the engine's own model
    registry when O(engine_python) is given and exists, else from a table per engine version.
  - Returns its facts under C(ansible_facts.llmops_model), as C(*_facts) modules do, and, for
    compatibility with results registered by earlier versions, also as top-level keys of the
    result (the same data).
  - Reads only headers (never tensors) and changes nothing.
author:
  - llmops.serving maintainers (@llmops)
options:
  path:
    description:
      - The model folder.
    type: path
  config:
    description:
      - The parsed config.json, for planning before the folder exists.
    type: dict
  engine:
    description:
      - Engine whose support to check.
    type: str
    choices: [sglang, vllm]
  engine_version:
    description:
      - Engine version pinned by the stack profile.
    type: str
  engine_python:
    description:
      - Python of the engine's venv; when it exists, the engine's ModelRegistry is read with it.
    type: path
  cache_dir:
    description:
      - Folder where the registry read from O(engine_python)'s venv is kept (a venv is not changed
        after it is built), so that a later run does not import the engine again. Unset, every run
        reads it. Only read in check mode.
    type: path
  stack_profiles:
    description:
      - The stack profiles (C(serving_stack_profiles)), to name the profiles whose engine version
        supports the architecture.
    type: dict
    default: {}
  require_weights:
    description:
      - Fail unless all weight files are present and complete.
    type: bool
    default: false
  read_headers:
    description:
      - Read each safetensors header (parameter count, completeness). Off, only sizes are used.
    type: bool
    default: true
  fail_on_unsupported:
    description:
      - Fail when the engine version lacks the architecture.
    type: bool
    default: true
  fail_on_incomplete:
    description:
      - Fail when weight files named by the index are missing or truncated (or, with
        O(require_weights=true), absent).
    type: bool
    default: true
extends_documentation_fragment:
  - llmops.serving.read_only
"""

EXAMPLES = r"""
- name: Facts of a downloaded model, checked against the pinned vLLM
  llmops.serving.model_facts:
    path: /var/lib/llmops/models/qwen2.5-32b
    engine: vllm
    engine_version: 0.11.0
    engine_python: /opt/llmops/venvs/vllm-0.11.0/bin/python
    require_weights: true
  register: __model

- name: Facts from a config alone (weights not fetched yet)
  llmops.serving.model_facts:
    config: "{{ lookup('ansible.builtin.file', 'files/qwen3-32b-config.json') | from_json }}"
    engine: sglang
    engine_version: 0.5.2
"""

RETURN = r"""
# Every key below but ansible_facts is also returned as ansible_facts.llmops_model.<key>: the facts
# convention. The top-level keys remain for results registered by earlier versions.
ansible_facts:
  description: The facts, by the C(*_facts) convention; set as host facts when the task succeeds.
  returned: always
  type: dict
  contains:
    llmops_model:
      description: Every other key of this result (C(architecture), C(parameter_count),
        C(weights) ...), the same data as the top-level keys.
      returned: always
      type: dict
      sample: {architecture: Qwen2ForCausalLM, num_hidden_layers: 64, dtype: bfloat16}
model_dir:
  description: The folder read, null when planning from O(config).
  returned: always
  type: str
architecture:
  description: First entry of config.json's architectures.
  returned: always
  type: str
  sample: Qwen2ForCausalLM
architectures:
  description: config.json's architectures, as listed (empty when it names none).
  returned: always
  type: list
  elements: str
  sample: [Qwen2ForCausalLM]
model_type:
  description: config.json's model_type (of the text config for multimodal models), null when
    unset.
  returned: always
  type: str
  sample: qwen2
hidden_size:
  description: Width of the hidden state.
  returned: always
  type: int
  sample: 5120
intermediate_size:
  description: Width of the MLP (0 when config.json does not give it).
  returned: always
  type: int
  sample: 27648
vocab_size:
  description: Vocabulary size (0 when config.json does not give it).
  returned: always
  type: int
  sample: 152064
tie_word_embeddings:
  description: Whether the output projection shares the input embedding's weights.
  returned: always
  type: bool
  sample: false
num_experts:
  description: Experts per MoE layer (num_experts or num_local_experts), 0 for a dense model.
  returned: always
  type: int
  sample: 0
num_experts_per_tok:
  description: Experts routed to per token (num_experts_per_tok), 0 for a dense model.
  returned: always
  type: int
  sample: 10
moe_intermediate_size:
  description: Width of one expert's MLP, 0 for a dense model.
  returned: always
  type: int
  sample: 512
shared_expert_intermediate_size:
  description: Width of the shared expert's MLP, 0 when the model has none.
  returned: always
  type: int
  sample: 512
full_attention_layers:
  description: Layers that keep a per-token KV cache; all layers except a hybrid model's
    linear-attention layers (from layer_types, else full_attention_interval).
  returned: always
  type: int
  sample: 12
linear_attention_layers:
  description: Gated-delta-net linear-attention layers of a hybrid model (Qwen3-Next, Qwen3.5),
    which hold a fixed recurrent state per sequence instead of a KV cache; 0 for other models.
  returned: always
  type: int
  sample: 36
linear_attention:
  description: The linear-attention dimensions (num_key_heads, num_value_heads, key_head_dim,
    value_head_dim, conv_kernel_dim, ssm_dtype from mamba_ssm_dtype), null for a model without
    linear-attention layers.
  returned: always
  type: dict
  sample: {num_key_heads: 16, num_value_heads: 32, key_head_dim: 128, value_head_dim: 128,
           conv_kernel_dim: 4, ssm_dtype: null}
linear_state_bytes:
  description: Recurrent state of all linear-attention layers for one sequence at tensor
    parallelism 1, as vLLM sizes it (convolution state in the model dtype, ssm state in
    mamba_ssm_dtype or the model dtype), before the engine pads it; 0 for other models.
  returned: always
  type: int
  sample: 39518208
num_hidden_layers:
  description: Decoder layers.
  returned: always
  type: int
  sample: 64
num_attention_heads:
  description: Query heads.
  returned: always
  type: int
  sample: 40
num_key_value_heads:
  description: KV heads (GQA).
  returned: always
  type: int
  sample: 8
head_dim:
  description: Size of one head; head_dim_source says whether config gave it.
  returned: always
  type: int
  sample: 128
head_dim_source:
  description: Where head_dim came from.
  returned: always
  type: str
  choices: [config head_dim, hidden_size / heads]
  sample: hidden_size / heads
dtype:
  description: torch_dtype (or dtype) of the checkpoint.
  returned: always
  type: str
  sample: bfloat16
dtype_bytes:
  description: Bytes per parameter of dtype.
  returned: always
  type: int
  sample: 2
quantization:
  description: quant_method of config.json's quantization_config, null for an unquantized model.
  returned: always
  type: str
  sample: fp8
max_position_embeddings:
  description: config.json's max_position_embeddings, null when unset.
  returned: always
  type: int
  sample: 32768
rope_scaling:
  description: config.json's rope_scaling as given, null when unset.
  returned: always
  type: dict
  sample: {type: yarn, factor: 4.0, original_max_position_embeddings: 32768}
sliding_window:
  description: The sliding window size when config.json enables it (use_sliding_window), else
    null.
  returned: always
  type: int
  sample: 4096
max_context:
  description: Longest context the checkpoint supports (max_position_embeddings, scaled by rope
    scaling where the engine does).
  returned: always
  type: int
  sample: 32768
max_context_source:
  description: How max_context was found (C(max_position_embeddings), C(rope_scaling <type> x<factor>)
    or C(unknown)).
  returned: always
  type: str
  sample: max_position_embeddings
parameter_count:
  description: Parameters; parameter_count_source says how they were counted.
  returned: always
  type: int
  sample: 32763876352
parameter_count_source:
  description: How parameter_count was counted.
  returned: always
  type: str
  choices: [safetensors headers, index total_size / dtype, estimated from config]
  sample: index total_size / dtype
parameter_count_estimate:
  description: Parameters estimated from config.json alone (layers, widths, vocabulary, experts).
  returned: always
  type: int
  sample: 32763876352
weight_bytes:
  description: Bytes the weights take in GPU memory and on disk.
  returned: always
  type: int
  sample: 65527752704
weight_bytes_source:
  description: How weight_bytes was found.
  returned: always
  type: str
  choices: [safetensors headers, index metadata.total_size, file sizes, parameters x dtype bytes]
  sample: index metadata.total_size
needs_conversion:
  description: Whether the weights are pickle C(pytorch_model*.bin) files, which the served folder
    gets as safetensors (llmops.serving.weights_convert).
  returned: always
  type: bool
  sample: false
weights:
  description: Format, index, files, missing, truncated, status (complete, incomplete, absent,
    no-folder).
  returned: always
  type: dict
engine_support:
  description: supported (true, false, null when unknown), source (registry or table),
    min_version and the stack profiles that support it.
  returned: when engine is set
  type: dict
summary:
  description: One human-readable line.
  returned: always
  type: str
errors:
  description: Missing or truncated weight files and an unsupported architecture, whether or not
    they failed the module.
  returned: always
  type: list
  elements: str
notices:
  description: Registry probe failures and the like.
  returned: always
  type: list
  elements: str
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmops.serving.plugins.module_utils.engines import ENGINES
from ansible_collections.llmops.serving.plugins.module_utils.probe_cache import memoized
from ansible_collections.llmops.serving.plugins.module_utils.model import (
    REGISTRY_PROBES,
    ModelError,
    analyze_model,
    model_errors,
    model_summary_line,
    parse_registry_output,
)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path"),
            config=dict(type="dict"),
            engine=dict(type="str", choices=list(ENGINES)),
            engine_version=dict(type="str"),
            engine_python=dict(type="path"),
            cache_dir=dict(type="path"),
            stack_profiles=dict(type="dict", default={}),
            require_weights=dict(type="bool", default=False),
            read_headers=dict(type="bool", default=True),
            fail_on_unsupported=dict(type="bool", default=True),
            fail_on_incomplete=dict(type="bool", default=True),
        ),
        required_one_of=[["path", "config"]],
        supports_check_mode=True,
    )
    params = module.params
    warnings = []
    registry = None
    python = params["engine_python"]
    if params["engine"] and python and os.path.exists(python):
        def run(argv, data=None, env=None):
            return module.run_command(argv)

        probe = memoized(run, params["cache_dir"], python, store=not module.check_mode)
        rc, out, err = probe([python, "-c", REGISTRY_PROBES[params["engine"]]])
        if rc == 0:
            try:
                registry = parse_registry_output(out)
            except ValueError as exc:
                warnings.append("engine registry probe: %s" % exc)
        else:
            warnings.append("could not read %s's model registry with %s (rc %s): %s; using the "
                            "version table" % (params["engine"], python, rc,
                                               (err or out).strip()[-300:]))
    path = params["path"] if params["path"] and os.path.isdir(params["path"]) else None
    if params["path"] and not path and not params["config"]:
        module.fail_json(msg="model folder %s does not exist and no config was given"
                             % params["path"])
    try:
        facts = analyze_model(path, config=params["config"] if not path else None,
                              engine=params["engine"], engine_version=params["engine_version"],
                              registry=registry, stack_profiles=params["stack_profiles"],
                              read_headers=params["read_headers"])
    except (ModelError, ValueError, KeyError) as exc:
        module.fail_json(msg="model facts: %s" % exc)
    facts["summary"] = model_summary_line(facts)
    facts["notices"] = warnings
    errors = model_errors(facts, require_weights=params["require_weights"])
    facts["errors"] = errors
    fatal = [e for e in errors
             if (params["fail_on_unsupported"] if e.startswith("architecture")
                 else params["fail_on_incomplete"])]
    # ansible_facts by the *_facts convention; the same keys stay top-level for compatibility.
    result = dict(facts, ansible_facts={"llmops_model": dict(facts)})
    if fatal:
        module.fail_json(msg=" | ".join(fatal), **result)
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
