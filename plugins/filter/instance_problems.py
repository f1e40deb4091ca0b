# -*- coding: utf-8 -*-
# Copyright: llmops.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: instance_problems
short_description: What is wrong with the model instances that span hosts, as messages
version_added: 0.1.0
author: llmops.serving maintainers (@llmops)
description:
  - Checks C(serving_instances) (instance name to its hosts, rank 0 first) against
    C(serving_pipeline_parallel), the inventory and the serving hosts, and returns one message per
    problem naming the variable and the fix (see C(plugins/module_utils/instances.py)).
  - Lets the serving_spec role refuse a layout before anything on a host changes.
positional: _input, pipeline_parallel, inventory_hosts, engine_hosts
options:
  _input:
    description: C(serving_instances).
    type: raw
    required: true
  pipeline_parallel:
    description: C(serving_pipeline_parallel), hosts per instance.
    type: raw
    required: true
  inventory_hosts:
    description: Every host of the inventory (C(groups.all)).
    type: list
    elements: str
    required: true
  engine_hosts:
    description: The hosts that serve (the play's hosts); each must be in an instance when O(pipeline_parallel) > 1.
    type: list
    elements: str
    required: true
  host:
    description: The host being checked, for its own port check.
    type: str
  launcher_problem:
    description: Why the engine version cannot span hosts (from the translation point), or empty.
    type: str
  distributed_port:
    description: C(serving_distributed_port).
    type: raw
  listen_port:
    description: The engine's port.
    type: raw
"""

EXAMPLES = r"""
problems: >-
  {{ serving_instances | llmops.serving.instance_problems(serving_pipeline_parallel, groups['all'],
     ansible_play_hosts_all) }}
"""

RETURN = r"""
_value:
  description: One message per problem; empty when the layout is sound.
  type: list
  elements: str
"""

from ansible_collections.llmops.serving.plugins.module_utils import instances


def instance_problems(value, pipeline_parallel, inventory_hosts, engine_hosts, host=None, launcher_problem=None,
                      distributed_port=None, listen_port=None):
    return instances.problems(value, pipeline_parallel, inventory_hosts, engine_hosts, host,
                              launcher_problem or None, distributed_port, listen_port)


class FilterModule(object):
    def filters(self):
        return {"instance_problems": instance_problems}
