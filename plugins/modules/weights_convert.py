#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: llmops.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: weights_convert
short_description: "Build the served model folder: verified, .bin converted to safetensors, LoRA merged, atomically"
description:
  - Verifies the source folder against its integrity manifest (sha256 per file; recorded at first
    sight when the source has none), cheaply (size, mtime; files whose mtime moved are hashed) or
    fully (I(verify=full)), and checks that every shard its index names is present.
  - Builds the served folder in a temporary folder beside I(dest) with the venv of I(python).
    pickle C(.bin) shards become sharded safetensors with an index, one shard in memory at a time
    (C(torch.load) with C(weights_only=True) and C(mmap)); safetensors sources are reflinked where
    the filesystem has it, else copied (never hard-linked, so the served bytes and modes are the
    build's own); a LoRA I(adapter) is checked against the base's layer shapes and merged into
    the base's tensors (W + scale * B @ A in float32, stored in the base's dtype; embeddings never
    resized; rsLoRA and PEFT's alpha_pattern honoured; DoRA refused), one tensor at a time, with
    torch and safetensors alone.
  - Stores the chat template in the new folder's C(tokenizer_config.json), proves it with the
    tokenizer_check logic (special-token ids, probe renderings), writes the folder's manifest, and
    only then publishes it - I(dest) is a link to C(<dir of dest>/.builds/<name>/<build>), flipped by
    renaming a new link over it, so I(dest) is always one whole build. A failure or an interruption
    leaves the previous build serving; what an interrupted build left beside I(dest) is removed by the
    next run. The build served before stays (I(keep_previous)); older builds are removed, except one
    that a running engine started on (a held-back restart leaves an engine on an older build).
  - Checks, before any byte is written, that the filesystem of I(dest) (not of the source) has room
    for the build.
  - A marker records what the folder was built from; a re-run with the same source, adapter and
    template changes nothing.
  - When only the I(adapters) served by name changed, the new build copies the served build's
    weights (reflinked where the filesystem has it) instead of converting and merging again, so a
    change of the adapter set costs a copy and needs no peft in the venv.
  - Writes progress (bytes done and total, rate, ETA) as JSON to I(progress_file).
version_added: 0.1.0
author: llmops.serving maintainers (@llmops)
options:
  python:
    description: Interpreter of a venv that has torch, safetensors and transformers (any engine's venv).
    type: path
    required: true
  src:
    description: Source model folder (config.json, tokenizer, weights).
    type: path
    required: true
  dest:
    description: The served model folder to build.
    type: path
    required: true
  adapter:
    description: PEFT LoRA adapter folder to merge into the base.
    type: path
  adapters:
    description:
      - LoRA adapters served by name beside the base (C(serving_lora_adapters)), each checked against the
        base's layer shapes and copied into the build as C(adapters/NAME); C(adapters.json) lists their ranks.
      - Part of the recipe digest, so a changed adapter makes a new build.
    type: list
    elements: dict
    default: []
    suboptions:
      name:
        description: The name clients send as C(model).
        type: str
        required: true
      path:
        description: The adapter's folder on the host (a local source, or where model_fetch put a hub source).
        type: path
        required: true
      source:
        description: Where the adapter came from (C(hf://owner/name@revision) or the folder), recorded in C(adapters.json).
        type: str
  template_path:
    description: Chat template file the engine applies; stored in tokenizer_config.json and proven.
    type: path
  template:
    description: Template family of I(template_path).
    type: str
    choices: [qwen2.5, qwen3]
  source_manifest:
    description: Where the source's manifest lives; default C(<src>/.llmops-manifest.json).
    type: path
  verify:
    description: C(cheap) (size and mtime) or C(full) (hash every file) verification of source and result.
    type: str
    default: cheap
    choices: [cheap, full]
  max_shard_size:
    description: Largest shard of a merged model (C(5GB), C(200KB), C(2GiB)).
    type: str
    default: 5GB
  progress_file:
    description: File receiving progress JSON while the task runs.
    type: path
  min_free_bytes:
    description:
      - Bytes that must stay free on the filesystem of I(dest) once the build is written; checked
        with the build's own size before any byte is written.
    type: int
    default: 0
  keep_previous:
    description: Builds kept besides the served one (the one served before is the rollback).
    type: int
    default: 1
notes:
  - Check mode verifies and reports whether the folder would be rebuilt; it records no manifest.
requirements:
  - torch, safetensors and transformers in the venv of I(python)
"""

EXAMPLES = r"""
- name: Build the served folder from a .bin checkpoint and an adapter
  llmops.serving.weights_convert:
    python: /opt/llmops/venvs/vllm-0.32.0/bin/python
    src: /srv/models/qwen3-32b-bin
    adapter: /srv/adapters/support-lora
    dest: /var/lib/llmops/models/qwen3-32b-support
    template_path: /etc/llmops/chat-templates/qwen3.jinja
"""

RETURN = r"""
path:
  description: The served folder (I(dest)).
  returned: success
  type: str
  sample: /var/lib/llmops/models/qwen3-32b-support
digest:
  description:
    - Identity of the recipe (source manifest, adapter, template, template family).
    - Null in check mode when the source has no manifest yet (it would be recorded first).
  returned: success
  type: str
  sample: 3f1c0a9b2d4e5f6071829a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f
manifest_recorded:
  description: Whether the source's manifest was recorded on this run (first sight; never in check mode).
  returned: success
  type: bool
  sample: false
msg:
  description: What failed (ending with C(Nothing served was changed.) when the build was refused), or in check mode why the folder would be built.
  returned: failure, or in check mode when the folder would be built
  type: str
  sample: "would build /var/lib/llmops/models/qwen3-32b-support: not built from this source/adapter/template"
source_format:
  description: C(bin) or C(safetensors).
  returned: when built
  type: str
  sample: safetensors
special_token_ids:
  description: Special-token ids of the built folder's tokenizer.
  returned: when built
  type: dict
  sample: {"<|endoftext|>": 151643, "<|im_start|>": 151644, "<|im_end|>": 151645}
tensors:
  description: Number of tensors in the built folder's safetensors files.
  returned: when built
  type: int
  sample: 707
adapters:
  description: The adapters served by name from the new build, by name (their largest rank, target modules and source).
  returned: when built
  type: dict
  sample: {"support": {"rank": 16, "target_modules": ["q_proj", "v_proj"], "source": "/srv/adapters/support"}}
reused:
  description: The served build whose weights the new build copied (only the I(adapters) served by name differed), else null.
  returned: when built
  type: str
  sample: /var/lib/llmops/models/.builds/qwen3-32b/9d8e7f6a5b4c3d2e
merged_dtype:
  description: dtype of the merged model when I(adapter) was merged, else null.
  returned: when built
  type: str
  sample: bfloat16
total_bytes:
  description: Total size of the files the built folder's manifest records.
  returned: when built
  type: int
  sample: 65535080448
build:
  description: The build folder I(dest) points at.
  returned: when built or current
  type: str
  sample: /var/lib/llmops/models/.builds/qwen3-32b/3f1c0a9b2d4e5f60
previous_build:
  description: The build I(dest) pointed at before this run (kept for rollback); null on the first build.
  returned: when built
  type: str
  sample: /var/lib/llmops/models/.builds/qwen3-32b/9d8e7f6a5b4c3d2e
pruned:
  description: Older builds removed.
  returned: when built
  type: list
  elements: str
  sample: ["/var/lib/llmops/models/.builds/qwen3-32b/0a1b2c3d4e5f6071"]
cleaned:
  description: Leftovers of interrupted builds removed from beside I(dest) (none in check mode).
  returned: when built or current
  type: list
  elements: str
  sample: ["/var/lib/llmops/models/.qwen3-32b-support.tmp-k2j4h1"]
problems:
  description: What is wrong with the source (missing shards, files that differ from its manifest) or with the built folder's tokenizer or chat template.
  returned: failure, when the source is incomplete or differs from its manifest, or the built folder's tokenizer check fails
  type: list
  elements: str
  sample: ["model.safetensors.index.json names shard model-00002-of-00002.safetensors, which is missing"]
renders:
  description: The built folder's rendered probe prompts, by probe (null when its tokenizer did not load or it has no chat template).
  returned: failure, when the built folder's tokenizer check fails
  type: dict
  sample: {"multi-turn": "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n..."}
rc:
  description: Exit status of I(python) running the build or the tokenizer check.
  returned: failure, when I(python) cannot run the build or the tokenizer check
  type: int
  sample: 1
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.llmops.serving.plugins.module_utils import tokenizer_check, venv_runner, weights

ARGUMENT_SPEC = dict(
    python=dict(type="path", required=True),
    src=dict(type="path", required=True),
    dest=dict(type="path", required=True),
    adapter=dict(type="path"),
    adapters=dict(type="list", elements="dict", default=[], options=dict(
        name=dict(type="str", required=True), path=dict(type="path", required=True), source=dict(type="str"))),
    template_path=dict(type="path"),
    template=dict(type="str", choices=["qwen2.5", "qwen3"]),
    source_manifest=dict(type="path"),
    verify=dict(type="str", default="cheap", choices=["cheap", "full"]),
    max_shard_size=dict(type="str", default="5GB"),
    progress_file=dict(type="path"),
    keep_previous=dict(type="int", default=1),
    min_free_bytes=dict(type="int", default=0),
)


def _in_venv(module, mod, entry):
    """args -> mod.entry(**args) run by the venv's interpreter; a venv that cannot run it fails."""
    def call(args):
        try:
            return venv_runner.call(module.run_command, module.params["python"], mod, entry, args)
        except venv_runner.VenvCallError as e:
            raise weights.ConvertError("%s; python must be an engine venv's interpreter (torch, safetensors, transformers)"
                                       % e, rc=e.rc)
    return call


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    try:
        result = weights.convert(module.params, module.check_mode, _in_venv(module, weights, "run_in_venv"),
                                 _in_venv(module, tokenizer_check, "check"))
    except weights.ConvertError as e:
        module.fail_json(msg=e.msg, **e.extra)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
