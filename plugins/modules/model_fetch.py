#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: llmops.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: model_fetch
short_description: Download a model from the Hugging Face hub (or a mirror) at a pinned revision, verified
description:
  - Downloads C(repo) at C(revision) with huggingface_hub, in the venv of I(python), into
    C(<dest_root>/<owner>--<name>/<commit sha>).
  - Files go to a staging folder beside the target (resumed by the next run after an interruption),
    are checked against the hub's sha256 (LFS files) or git blob id (small files), and the folder is
    renamed into place only when every file matched. An integrity manifest (sha256 per file) is kept
    in the folder; later runs verify it cheaply (size, mtime) or fully (I(verify=full)).
  - Writes its progress (bytes done and total, rate, ETA) as JSON to I(progress_file) every few seconds,
    for a play that polls it while the task runs asynchronously.
version_added: 0.1.0
author: llmops.serving maintainers (@llmops)
options:
  python:
    description: Interpreter of a venv that has huggingface_hub.
    type: path
    required: true
  repo:
    description: Repository id, for example C(Qwen/Qwen3-32B).
    type: str
    required: true
  revision:
    description: Commit sha (recommended), branch or tag.
    type: str
    required: true
  dest_root:
    description: Folder holding fetched models.
    type: path
    required: true
  allow_patterns:
    description: Glob patterns of the files to fetch; empty fetches the whole repository.
    type: list
    elements: str
    default: []
  endpoint:
    description: Hub or mirror base URL (C(HF_ENDPOINT)); omitted, huggingface_hub's default.
    type: str
  token:
    description: Hub token (from a vault).
    type: str
  retries:
    description: Attempts per request beyond the first, with backoff.
    type: int
    default: 5
  min_free_bytes:
    description:
      - Bytes that must stay free once the download and the build that copies it are written. Checked
        before any byte is downloaded (what a resumed download already holds is not counted again).
    type: int
    default: 0
  verify:
    description: How an already fetched folder is verified; C(full) hashes every file.
    type: str
    default: cheap
    choices: [cheap, full]
  progress_file:
    description: File receiving progress JSON while the task runs.
    type: path
notes:
  - Check mode contacts the hub for the revision's file list and reports whether a download is needed.
requirements:
  - huggingface_hub in the venv of I(python)
"""

EXAMPLES = r"""
- name: Fetch Qwen3-32B at a pinned commit
  llmops.serving.model_fetch:
    python: /opt/llmops/venvs/vllm-0.32.0/bin/python
    repo: Qwen/Qwen3-32B
    revision: 9216db5781bf21249d130ec9da846c4624c16137
    dest_root: /var/lib/llmops/sources
    token: "{{ vault_hf_token }}"
"""

RETURN = r"""
path:
  description: Folder holding the verified files (C(<dest_root>/<owner>--<name>/<commit sha>)); in check mode, the folder it would hold them in.
  returned: success
  type: str
  sample: /var/lib/llmops/sources/Qwen--Qwen3-32B/9216db5781bf21249d130ec9da846c4624c16137
commit:
  description: The commit sha the revision resolved to.
  returned: success
  type: str
  sample: 9216db5781bf21249d130ec9da846c4624c16137
total_bytes:
  description: Bytes of the revision's files (those I(allow_patterns) selects), as the hub lists them.
  returned: success
  type: int
  sample: 65535080448
files:
  description: Number of files (those I(allow_patterns) selects).
  returned: success
  type: int
  sample: 26
pruned:
  description: Other revisions of the repository removed from beside I(path) once it was verified.
  returned: success, when not in check mode
  type: list
  elements: str
  sample: ["/var/lib/llmops/sources/Qwen--Qwen3-32B/ffffffffffffffffffffffffffffffffffffffff"]
problems:
  description: Why the copy already in I(path) fails verification (I(verify)), so that a run would fetch again.
  returned: in check mode, when the copy in I(path) fails verification
  type: list
  elements: str
  sample: ["vocab.json: truncated (100 bytes, the manifest says 2776833)"]
msg:
  description: What failed; in check mode, C(would fetch again) with the I(problems).
  returned: failure; in check mode when the copy in I(path) fails verification
  type: str
  sample: "would fetch again: vocab.json: truncated (100 bytes, the manifest says 2776833)"
rc:
  description: Exit status of I(python) running the fetch.
  returned: failure, when I(python) cannot run the fetch
  type: int
  sample: 1
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.llmops.serving.plugins.module_utils import venv_runner, weights


def main():
    module = AnsibleModule(
        argument_spec=dict(
            python=dict(type="path", required=True),
            repo=dict(type="str", required=True),
            revision=dict(type="str", required=True),
            dest_root=dict(type="path", required=True),
            allow_patterns=dict(type="list", elements="str", default=[]),
            endpoint=dict(type="str"),
            token=dict(type="str", no_log=True),
            retries=dict(type="int", default=5),
            verify=dict(type="str", default="cheap", choices=["cheap", "full"]),
            progress_file=dict(type="path"),
            min_free_bytes=dict(type="int", default=0),
        ),
        supports_check_mode=True,
    )
    p = module.params
    args = dict(fn="fetch_hf", repo=p["repo"], revision=p["revision"], dest_root=p["dest_root"],
                allow_patterns=p["allow_patterns"] or None, endpoint=p["endpoint"], token=p["token"],
                retries=p["retries"], progress_path=p["progress_file"], verify_mode=p["verify"],
                check_only=module.check_mode, min_free_bytes=p["min_free_bytes"])
    try:
        r = venv_runner.call(module.run_command, p["python"], weights, "run_in_venv", args)
    except venv_runner.VenvCallError as e:
        module.fail_json(msg="fetching hf://%s@%s failed: %s" % (p["repo"], p["revision"], e), rc=e.rc)
    if not r["ok"]:
        module.fail_json(msg=r["error"])
    res = r["result"]
    if res.get("problems") and module.check_mode:
        res["msg"] = "would fetch again: " + "; ".join(res["problems"])
    module.exit_json(**res)


if __name__ == "__main__":
    main()
