# -*- coding: utf-8 -*-
# Copyright: llmops.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: engine_flag_values
short_description: The values of the engine flags a unit gets from its stack profile and serving_engine_extra_args
version_added: 0.1.0
author: llmops.serving maintainers (@llmops)
description:
  - Merges the stack profile's flags (its pipeline flags included, as C(serving_spec_engine_args)
    holds them) and O(extra_args) over them, with the translation point's own code
    (C(plugins/module_utils/engine_args.py), the merge the C(engine_parse_args) module renders
    the unit from), and returns each flag's value under its name with underscores.
  - For what reads the flags before the unit is rendered, such as preflight's memory plan.
  - Fails with the translation point's message for a flag that the spec owns or that is not
    allowed.
positional: _input, extra_args, engine
options:
  _input:
    description: The stack profile's flags for this host (C(serving_spec_engine_args)).
    type: dict
    required: true
  extra_args:
    description: C(serving_engine_extra_args).
    type: dict
    required: true
  engine:
    description: The engine (C(serving_engine)).
    type: str
    required: true
"""

EXAMPLES = r"""
preflight_flags: "{{ serving_spec_engine_args | llmops.serving.engine_flag_values(serving_engine_extra_args, serving_engine) }}"
"""

RETURN = r"""
_value:
  description: "Flag name with underscores, without leading dashes: its value (C(enforce_eager: true))."
  type: dict
"""

from ansible.errors import AnsibleFilterError
from ansible.module_utils.common.text.converters import to_native

from ansible_collections.llmops.serving.plugins.module_utils.engine_args import flag_values
from ansible_collections.llmops.serving.plugins.module_utils.engine_flags import EngineArgsError


def engine_flag_values(stack_args, extra_args, engine):
    try:
        return flag_values(engine, stack_args, extra_args)
    except EngineArgsError as exc:
        raise AnsibleFilterError(to_native(exc))


class FilterModule(object):
    def filters(self):
        return {"engine_flag_values": engine_flag_values}
