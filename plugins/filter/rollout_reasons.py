# -*- coding: utf-8 -*-
# Copyright: llmops.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: rollout_reasons
short_description: Why an engine host must restart onto the serving spec
version_added: 0.1.0
author: llmops.serving maintainers (@llmops)
description:
  - Compares what a host runs (the result of M(llmops.serving.rollout_state)) with what the spec
    asks for, and lists the reasons to restart it; an empty list means it serves the spec.
positional: _input, desired, unit_changed
options:
  _input:
    description: The registered result of M(llmops.serving.rollout_state).
    type: dict
    required: true
  desired:
    description: What the spec asks for - engine, venv, model (the build the model link points at) and chat_template (its sha256).
    type: dict
    required: true
  unit_changed:
    description: Whether the engine role's unit entry point, in check mode, would change the unit, environment, launcher or link.
    type: bool
    default: false
"""

EXAMPLES = r"""
reasons: "{{ observed | llmops.serving.rollout_reasons(desired, engine_unit_changed) }}"
"""

RETURN = r"""
_value:
  description: The reasons, in words (empty when the host serves the spec).
  type: list
  elements: str
"""

from ansible.errors import AnsibleFilterError
from ansible.module_utils.common.text.converters import to_native

from ansible_collections.llmops.serving.plugins.module_utils.rollout import reasons


def rollout_reasons(observed, desired, unit_changed=False):
    try:
        return reasons(observed, desired, bool(unit_changed))
    except (KeyError, TypeError) as e:
        raise AnsibleFilterError("rollout_reasons: %s" % to_native(e))


class FilterModule(object):
    def filters(self):
        return {"rollout_reasons": rollout_reasons}
