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
    (C(torch.load) with C(weights_only=True) and C(mmap)); safetensors sources are hard-linked (or
    copied); a LoRA I(adapter) is checked against the base's layer shapes and merged with peft
    (dtype kept, embeddings never resized).
  - Stores the chat template in the new folder's C(tokenizer_config.json), proves it with the
    tokenizer_check logic (special-token ids, probe renderings), writes the folder's manifest, and
    only then renames it into place. A failure or an interruption leaves the previous folder serving.
  - A marker records what the folder was built from; a re-run with the same source, adapter and
    template changes nothing.
  - Writes progress (bytes done and total, rate, ETA) as JSON to I(progress_file).
version_added: 0.1.0
author: llmops.serving maintainers (@llmops)
options:
  python:
    description: Interpreter of a venv that has torch, safetensors, transformers and peft.
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
    description: Shard size of merged models.
    type: str
    default: 5GB
  progress_file:
    description: File receiving progress JSON while the task runs.
    type: path
notes:
  - Check mode verifies and reports whether the folder would be rebuilt; it records no manifest.
requirements:
  - torch, safetensors, transformers and peft in the venv of I(python)
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
  description: The served folder.
  returned: always
  type: str
digest:
  description: Identity of the recipe (source manifest, adapter, template).
  returned: always
  type: str
source_format:
  description: C(bin) or C(safetensors).
  returned: when built
  type: str
special_token_ids:
  description: Special-token ids of the built folder's tokenizer.
  returned: when built
  type: dict
manifest_recorded:
  description: Whether the source's manifest was recorded on this run (first sight).
  returned: always
  type: bool
"""

import os
import shutil

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.llmops.serving.plugins.module_utils import tokenizer_check, venv_runner, weights

# Every failure below happens before the new folder is renamed over the served one.
UNTOUCHED = "Nothing served was changed."


def _sha(path):
    return weights.sha256_file(path) if path else None


def main():
    module = AnsibleModule(
        argument_spec=dict(
            python=dict(type="path", required=True),
            src=dict(type="path", required=True),
            dest=dict(type="path", required=True),
            adapter=dict(type="path"),
            template_path=dict(type="path"),
            template=dict(type="str", choices=["qwen2.5", "qwen3"]),
            source_manifest=dict(type="path"),
            verify=dict(type="str", default="cheap", choices=["cheap", "full"]),
            max_shard_size=dict(type="str", default="5GB"),
            progress_file=dict(type="path"),
        ),
        supports_check_mode=True,
    )
    p = module.params
    src, dest = p["src"], p["dest"]
    if not os.path.isfile(os.path.join(src, "config.json")):
        module.fail_json(msg="source %s holds no config.json: not a model folder" % src)
    problems = weights.check_shards(src)
    if problems:
        module.fail_json(msg="source %s is incomplete (copy the missing files, or fetch again):\n  %s\n%s"
                         % (src, "\n  ".join(problems), UNTOUCHED), problems=problems)
    man_path = p["source_manifest"] or os.path.join(src, weights.MANIFEST)
    man = weights.read_manifest(man_path)
    recorded = False
    if man:
        prog = weights.Progress(p["progress_file"], "verify source (%s)" % p["verify"], man.get("total_bytes", 0))
        problems = weights.verify(src, man, p["verify"], prog, skip=())
        prog.finish("done" if not problems else "failed")
        if problems:
            module.fail_json(msg="source %s does not match its integrity manifest %s (damaged or altered files; "
                                 "restore them, or delete the manifest to accept the folder as it is now):\n  %s\n%s"
                                 % (src, man_path, "\n  ".join(problems), UNTOUCHED), problems=problems)
    elif module.check_mode:
        module.exit_json(changed=True, path=dest, digest=None, manifest_recorded=False,
                         msg="would record the source's manifest and build %s" % dest)
    else:
        prog = weights.Progress(p["progress_file"], "hash source (first sight)", 0)
        man = weights.make_manifest(src, progress=prog)
        man["source"] = src
        d = os.path.dirname(man_path)
        if not os.path.isdir(d):
            os.makedirs(d)
        weights.write_json(man_path, man)
        prog.finish()
        recorded = True
    adapter_digest = None
    if p["adapter"]:
        if not os.path.isfile(os.path.join(p["adapter"], "adapter_config.json")):
            module.fail_json(msg="adapter %s has no adapter_config.json: not a PEFT adapter folder" % p["adapter"])
        adapter_digest = weights.manifest_digest(weights.make_manifest(p["adapter"]))
    digest = weights.recipe_digest(dict(v=1, source=weights.manifest_digest(man), adapter=adapter_digest,
                                        template=_sha(p["template_path"]), family=p["template"]))
    current, why = weights.is_current(dest, digest)
    if current and p["verify"] == "full":
        why = weights.verify(dest, weights.read_manifest(os.path.join(dest, weights.MANIFEST)), "full")
        current = not why
    if current:
        module.exit_json(changed=recorded, path=dest, digest=digest, manifest_recorded=recorded)
    if module.check_mode:
        module.exit_json(changed=True, path=dest, digest=digest, manifest_recorded=False,
                         msg="would build %s: %s" % (dest, "; ".join(why[:5])))
    template_text = None
    if p["template_path"]:
        with open(p["template_path"]) as f:
            template_text = f.read()

    def venv(mod, entry, args):
        try:
            return venv_runner.call(module.run_command, p["python"], mod, entry, args)
        except venv_runner.VenvCallError as e:
            module.fail_json(msg="%s; python must be an engine venv's interpreter (torch, safetensors, transformers, peft)" % e,
                             rc=e.rc)

    r = venv(weights, "run_in_venv", dict(fn="build", src=src, dest=dest, adapter=p["adapter"], chat_template=template_text,
                                          digest=digest, progress_path=p["progress_file"], max_shard_size=p["max_shard_size"]))
    if not r["ok"]:
        module.fail_json(msg=r["error"] + "\n" + UNTOUCHED)
    built = r["result"]
    tmp = built["tmp"]
    chk = venv(tokenizer_check, "check", dict(tokenizer_path=tmp, template_path=p["template_path"], template_name=p["template"]))
    if chk["problems"]:
        shutil.rmtree(tmp, ignore_errors=True)
        module.fail_json(msg="the built folder's tokenizer or chat template is wrong; nothing served was changed:\n- %s"
                         % "\n- ".join(chk["problems"]), problems=chk["problems"], renders=chk.get("renders"))
    weights.swap_in(tmp, dest)
    module.exit_json(changed=True, path=dest, digest=digest, manifest_recorded=recorded, source_format=built["source_format"],
                     tensors=built["tensors"], merged_dtype=built["merged_dtype"], total_bytes=built["total_bytes"],
                     special_token_ids=chk["special_token_ids"])


if __name__ == "__main__":
    main()
