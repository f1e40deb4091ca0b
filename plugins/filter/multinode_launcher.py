# -*- coding: utf-8 -*-
# Copyright: llmops.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: multinode_launcher
short_description: How one model instance spans hosts for an engine version
version_added: 0.1.0
author: llmops.serving maintainers (@llmops)
description:
  - Resolves C(serving_multinode_launcher) for an engine version and host kind. C(auto) picks the
    engine's own launcher across hosts where the version has one, else a Ray cluster (vLLM on GPUs).
  - Never fails; a choice the engine cannot run comes back as C(problem), a message naming the
    variable and the way out, for the caller's input check.
positional: _input, engine, engine_version, gpu
options:
  _input:
    description: C(serving_multinode_launcher), one of C(auto), C(native), C(ray).
    type: str
    required: true
  engine:
    description: The engine, C(vllm) or C(sglang).
    type: str
    required: true
  engine_version:
    description: The engine version of the stack profile.
    type: str
    required: true
  gpu:
    description: Whether the hosts serve on GPUs (false for a CPU stack profile).
    type: bool
    default: true
"""

EXAMPLES = r"""
launcher: "{{ serving_multinode_launcher | llmops.serving.multinode_launcher('vllm', '0.8.5.post1') }}"
# -> {'kind': 'ray', 'problem': '', 'engine_problem': ''}
"""

RETURN = r"""
_value:
  description: The launcher.
  type: dict
  contains:
    kind:
      description: C(native) (the engine's own launcher) or C(ray); empty when there is a problem.
      type: str
    problem:
      description: Why the choice cannot run, naming serving_multinode_launcher; empty when it can.
      type: str
    engine_problem:
      description: Why the engine cannot serve on the Ray cluster that forms (vLLM's CPU platform), naming
        serving_multinode_launcher; empty otherwise.
      type: str
"""

from ansible_collections.llmops.serving.plugins.module_utils import engine_flags


def multinode_launcher(choice, engine, engine_version, gpu=True):
    try:
        kind = engine_flags.launcher_kind(engine, str(engine_version), choice, gpu=bool(gpu))
    except engine_flags.EngineArgsError as exc:
        return {"kind": "", "problem": exc.msg, "engine_problem": ""}
    return {"kind": kind, "problem": "",
            "engine_problem": (engine_flags.ray_engine_problem(engine, gpu=bool(gpu)) or "") if kind == "ray" else ""}


class FilterModule(object):
    def filters(self):
        return {"multinode_launcher": multinode_launcher}
