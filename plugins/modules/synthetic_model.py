#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: llmops.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: synthetic_model
short_description: Create a tiny random-weight Qwen-shaped chat model for demos and CI
description:
  - Writes a Qwen3ForCausalLM (or Qwen2ForCausalLM) with random weights, a byte-level BPE tokenizer
    carrying Qwen's special tokens in Qwen's order, and a chat template, as safetensors.
  - The text it generates is nonsense; the architecture, config, protocol, template and special
    tokens are real, so engines, clients and checks run their real code paths on it.
  - The folder is built beside I(path) and published as a build, I(path) being a link to
    C(<dir>/.builds/<name>/<build>) flipped atomically; the build served before is kept, older ones
    and leftovers of interrupted builds are removed. A marker file records the parameters, so a
    re-run with the same parameters changes nothing.
  - The build runs in the interpreter named by I(python), an engine venv's, which has torch,
    transformers and tokenizers; the module itself runs with the host's Python.
version_added: 0.1.0
author: llmops.serving maintainers (@llmops)
options:
  python:
    description: Interpreter of a venv that has torch, transformers and tokenizers.
    type: path
    required: true
  path:
    description: Folder to create (replaced atomically when parameters change).
    type: path
    required: true
  architecture:
    description: Model class to build.
    type: str
    default: Qwen3ForCausalLM
    choices: [Qwen3ForCausalLM, Qwen2ForCausalLM]
  vocab_size:
    description: Tokenizer length and model vocabulary (BPE merges plus Qwen's 26 added tokens).
    type: int
    default: 1024
  layers:
    description: Number of decoder layers.
    type: int
    default: 2
  max_position_embeddings:
    description: Longest context the config declares.
    type: int
    default: 4096
  seed:
    description: Seed for the corpus and the weights; the same seed gives the same model.
    type: int
    default: 0
  chat_template:
    description: Chat template text stored in C(tokenizer_config.json).
    type: str
notes:
  - Check mode reports whether the model would be (re)built.
requirements:
  - torch, transformers and tokenizers in the venv of I(python)
"""

EXAMPLES = r"""
- name: Create the demo model with the engine venv's interpreter
  llmops.serving.synthetic_model:
    path: /var/lib/llmops/models/qwen3-tiny
    python: /opt/llmops/venvs/vllm-0.32.0/bin/python
    chat_template: "{{ lookup('ansible.builtin.file', 'qwen3.jinja') }}"
"""

RETURN = r"""
path:
  description: The model folder (I(path)).
  returned: success
  type: str
  sample: /var/lib/llmops/models/qwen3-tiny
parameters:
  description: Number of model parameters (read from the marker when nothing was rebuilt).
  returned: when built or current
  type: int
  sample: 92480
special_token_ids:
  description: Id of each Qwen special token in this tokenizer (read from the marker when nothing was rebuilt).
  returned: when built or current
  type: dict
  sample: {"<|endoftext|>": 998, "<|im_start|>": 999, "<|im_end|>": 1000}
build:
  description: The build folder I(path) now points at (C(<dir>/.builds/<name>/<build>)).
  returned: when built
  type: str
  sample: /var/lib/llmops/models/.builds/qwen3-tiny/5d41402abc4b2a76
previous_build:
  description: The build I(path) pointed at before (kept; older ones are removed); null on the first build.
  returned: when built
  type: str
  sample: /var/lib/llmops/models/.builds/qwen3-tiny/7d793037a0760186
cleaned:
  description: Leftovers of interrupted builds removed from beside I(path).
  returned: when built
  type: list
  elements: str
  sample: ["/var/lib/llmops/models/.qwen3-tiny.tmp-abc123"]
msg:
  description: What failed, or in check mode C(would build the synthetic model).
  returned: failure, or in check mode when the model would be built
  type: str
  sample: would build the synthetic model
rc:
  description: Exit status of I(python) running the build.
  returned: failure, when I(python) cannot run the build
  type: int
  sample: 1
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.llmops.serving.plugins.module_utils import builds, running, synthetic, venv_runner


def main():
    module = AnsibleModule(
        argument_spec=dict(
            python=dict(type="path", required=True),
            path=dict(type="path", required=True),
            architecture=dict(type="str", default="Qwen3ForCausalLM", choices=sorted(synthetic.ARCHITECTURES)),
            vocab_size=dict(type="int", default=1024),
            layers=dict(type="int", default=2),
            max_position_embeddings=dict(type="int", default=4096),
            seed=dict(type="int", default=0),
            chat_template=dict(type="str"),
        ),
        supports_check_mode=True,
    )
    p = module.params
    if p["vocab_size"] < 256 + len(synthetic.QWEN_SPECIAL_TOKENS):
        module.fail_json(msg="vocab_size must be at least %d (the 256 byte tokens and Qwen's %d added tokens)"
                         % (256 + len(synthetic.QWEN_SPECIAL_TOKENS), len(synthetic.QWEN_SPECIAL_TOKENS)))
    params = dict((k, p[k]) for k in ("architecture", "vocab_size", "layers", "max_position_embeddings", "seed"))
    params["chat_template_sha256"] = synthetic.params_digest(p["chat_template"] or "")
    if synthetic.is_current(p["path"], params):
        marker = synthetic.read_marker(p["path"])
        module.exit_json(changed=False, path=p["path"], parameters=marker.get("parameters"),
                         special_token_ids=marker.get("special_token_ids"))
    if module.check_mode:
        module.exit_json(changed=True, path=p["path"], msg="would build the synthetic model")
    cleaned = builds.clean_leftovers(p["path"])
    try:
        marker = venv_runner.call(module.run_command, p["python"], synthetic, "create",
                                  dict(path=p["path"], params=params, chat_template=p["chat_template"]))
    except venv_runner.VenvCallError as e:
        module.fail_json(msg="building the synthetic model failed; python must be an engine venv's interpreter "
                             "(with torch, transformers, tokenizers). %s" % e, rc=e.rc)
    pub = builds.publish(marker["tmp"], p["path"], marker["digest"][:16], keep=1,
                         in_use=running.in_use(builds.all_builds(p["path"])))
    module.exit_json(changed=True, path=p["path"], parameters=marker["parameters"],
                     special_token_ids=marker["special_token_ids"], build=pub["build"],
                     previous_build=pub["previous"], cleaned=cleaned + pub["cleaned"])


if __name__ == "__main__":
    main()
