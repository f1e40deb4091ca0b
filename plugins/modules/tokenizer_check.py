#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: llmops.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: tokenizer_check
short_description: Prove a tokenizer and chat template by their special-token ids
description:
  - Loads the tokenizer of a model folder with the venv's transformers, renders a multi-turn and a
    tool-call probe conversation with the chat template the engine uses (for Qwen3 templates also
    with C(enable_thinking=false)), and checks the special-token ids.
  - Real Qwen tokenizers (more than 151000 tokens) must give C(<|endoftext|>) 151643,
    C(<|im_start|>) 151644, C(<|im_end|>) 151645, and for Qwen3 C(<think>) 151667, C(</think>) 151668.
    Smaller (synthetic) tokenizers must hold the same tokens in Qwen's order.
  - Each special token written in a rendered prompt must encode to its one id; the multi-turn probe
    must render as ChatML. Failures come with a readable diff of the rendering.
  - Reads only; runs in check mode too.
version_added: 0.1.0
author: llmops.serving maintainers (@llmops)
options:
  python:
    description: Interpreter of a venv that has transformers (an engine venv's).
    type: path
    required: true
  tokenizer_path:
    description: Folder holding the tokenizer files (the model folder).
    type: path
    required: true
  template_path:
    description: Chat template file the engine applies; omitted, the tokenizer's own template.
    type: path
  template:
    description: Which template family the file is; guessed from its text when omitted.
    type: str
    choices: [qwen2.5, qwen3]
  real_qwen:
    description: Expect the published Qwen ids; omitted, decided from the tokenizer's length.
    type: bool
  cache_dir:
    description:
      - Folder where the check's answers are kept, one file per venv and input (the bytes of the
        template and of the tokenizer's files are part of the key). A later run with the same venv,
        template and tokenizer reads the answer instead of starting the venv's Python again. A venv
        is not changed after it is built. Unset, every run checks.
      - Only read in check mode.
    type: path
requirements:
  - transformers in the venv of I(python)
"""

EXAMPLES = r"""
- name: Prove the template the engine will use
  llmops.serving.tokenizer_check:
    python: /opt/llmops/venvs/vllm-0.32.0/bin/python
    tokenizer_path: /var/lib/llmops/models/qwen3-32b
    template_path: /etc/llmops/chat-templates/qwen3.jinja
"""

RETURN = r"""
msg:
  description: "The ids proven (C(<family> template proven: <token>=<id>, ...)), or what is wrong."
  returned: always
  type: str
  sample: "qwen3 template proven: <|endoftext|>=151643, <|im_start|>=151644, <|im_end|>=151645"
problems:
  description: What is wrong (empty when the check passed; the module fails when it is not).
  returned: when the check ran (always but when I(python) cannot run it)
  type: list
  elements: str
  sample: ["<think> is absent from the vocabulary (expected id 151667)"]
template:
  description:
    - The template family checked, I(template) or guessed from the template's text.
    - Null when the tokenizer did not load or there is no chat template and I(template) is not given.
  returned: when the check ran (always but when I(python) cannot run it)
  type: str
  sample: qwen3
cached:
  description: Whether the answer was read from O(cache_dir).
  returned: when the check ran (always but when I(python) cannot run it)
  type: bool
  sample: false
real_qwen:
  description: Whether the published Qwen ids were expected (I(real_qwen), or the tokenizer has more than 151000 tokens).
  returned: when the tokenizer loaded and a chat template was found (always on success)
  type: bool
  sample: true
tokenizer_length:
  description: Number of tokens of the tokenizer, added tokens included.
  returned: when the tokenizer loaded and a chat template was found (always on success)
  type: int
  sample: 151669
special_token_ids:
  description: Id of each special token the template writes, as the tokenizer reports it (null when absent).
  returned: when the tokenizer loaded and a chat template was found (always on success)
  type: dict
  sample: {"<|endoftext|>": 151643, "<|im_start|>": 151644, "<|im_end|>": 151645}
expected_ids:
  description: The ids expected for those tokens.
  returned: when the tokenizer loaded and a chat template was found (always on success)
  type: dict
  sample: {"<|endoftext|>": 151643, "<|im_start|>": 151644, "<|im_end|>": 151645}
renders:
  description: The rendered probe prompts, by probe (a probe the template does not render is left out).
  returned: when the tokenizer loaded and a chat template was found (always on success)
  type: dict
  sample: {"multi-turn": "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n..."}
rc:
  description: Exit status of I(python) running the check.
  returned: failure, when I(python) cannot run the check
  type: int
  sample: 1
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.llmops.serving.plugins.module_utils import tokenizer_check, venv_runner
from ansible_collections.llmops.serving.plugins.module_utils.probe_cache import memoized

# The tokenizer's own files in the model folder (never the weights): what the check reads.
TOKENIZER_SUFFIXES = (".json", ".txt", ".model", ".jinja", ".tiktoken")


def tokenizer_inputs(tokenizer_path, template_path):
    names = []
    if os.path.isdir(tokenizer_path):
        names = [os.path.join(tokenizer_path, n) for n in sorted(os.listdir(tokenizer_path))
                 if n.endswith(TOKENIZER_SUFFIXES) and not n.endswith(".index.json")]
    return names + ([template_path] if template_path else [])


def main():
    module = AnsibleModule(
        argument_spec=dict(
            python=dict(type="path", required=True),
            tokenizer_path=dict(type="path", required=True),
            template_path=dict(type="path"),
            template=dict(type="str", choices=["qwen2.5", "qwen3"]),
            real_qwen=dict(type="bool"),
            cache_dir=dict(type="path"),
        ),
        supports_check_mode=True,
    )
    p = module.params

    def run(argv, data=None, env=None):
        return module.run_command(argv, data=data, binary_data=True, environ_update=env or {})

    cached = memoized(run, p["cache_dir"], p["python"], inputs=tokenizer_inputs(p["tokenizer_path"], p["template_path"]),
                      store=not module.check_mode)

    def run_command(argv, data=None, binary_data=False, environ_update=None):
        return cached(argv, data, environ_update)

    try:
        r = venv_runner.call(run_command, p["python"], tokenizer_check, "check",
                             dict(tokenizer_path=p["tokenizer_path"], template_path=p["template_path"],
                                  template_name=p["template"], real_qwen=p["real_qwen"]))
    except venv_runner.VenvCallError as e:
        module.fail_json(msg="the tokenizer check could not run; python must be an engine venv's interpreter "
                             "(with transformers). %s" % e, rc=e.rc)
    r.pop("ok", None)
    r["cached"] = bool(cached.hits)
    if r["problems"]:
        module.fail_json(msg="the tokenizer or chat template is wrong for %s:\n- %s"
                         % (p["tokenizer_path"], "\n- ".join(r["problems"])), **r)
    module.exit_json(changed=False, msg="%s template proven: %s" % (r["template"], ", ".join(
        "%s=%s" % kv for kv in sorted(r["special_token_ids"].items(), key=lambda kv: kv[1]))), **r)


if __name__ == "__main__":
    main()
