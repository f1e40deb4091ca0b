# -*- coding: utf-8 -*-
# Copyright: llmops.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Variables a user set that the serving spec does not know, each with the closest known name.

Ansible passes any variable through silently, so `-e serving_modle=...` would plan and serve the
spec's default instead of what the user meant. The serving spec owns the serving_* namespace: every
name under it is an option of the serving_spec role, a fact it publishes (serving_spec_*), or one of
the few play-level names the playbooks read.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import difflib

# Names the spec publishes itself (its facts) and the play-level names the playbooks read.
PUBLISHED_PREFIX = "serving_spec_"
PLAY_LEVEL = ("serving_hosts", "serving_stack_profiles")
# How alike a typo must be to be suggested (difflib's ratio of the parts after the prefix).
CUTOFF = 0.6
# The engines' own names for spec options, which users coming from vLLM or SGLang type.
ENGINE_NAMES = {
    "gpu_memory_utilization": "serving_gpu_memory_fraction",
    "mem_fraction_static": "serving_gpu_memory_fraction",
    "tensor_parallel_size": "serving_tensor_parallel",
    "tp_size": "serving_tensor_parallel",
    "max_num_seqs": "serving_max_concurrency",
    "max_running_requests": "serving_max_concurrency",
    "context_length": "serving_max_model_len",
    "served_model_name": "serving_model",
    "api_key": "serving_api_key",
}


def unknown_names(names, known, prefix="serving_"):
    """[(name, closest known name or None)] for each name under prefix that is neither known, a
    published fact nor a play-level name; sorted by name."""
    known = sorted(set(known) | set(PLAY_LEVEL))
    # Compared without the shared prefix, which would make every pair look alike.
    tails = dict((k[len(prefix):], k) for k in known if k.startswith(prefix))
    out = []
    for name in sorted(set(names)):
        if not name.startswith(prefix) or name in known or name.startswith(PUBLISHED_PREFIX):
            continue
        tail = name[len(prefix):]
        close = difflib.get_close_matches(tail, list(tails), n=1, cutoff=CUTOFF)
        meant = ENGINE_NAMES.get(tail) or (tails[close[0]] if close else None)
        out.append((name, meant if meant in known else None))
    return out


def describe(unknown):
    """One sentence per unknown name: what to do about it."""
    return " ".join(
        "%s is not a variable of the serving spec: %s" % (
            name, ("did you mean %s?" % close) if close else "remove it, or see roles/serving_spec/meta/argument_specs.yml.")
        for name, close in unknown)
