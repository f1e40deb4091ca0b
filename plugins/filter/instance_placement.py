# -*- coding: utf-8 -*-
# Copyright: llmops.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: instance_placement
short_description: A host's model instance and rank, from serving_instances
version_added: 0.1.0
author: llmops.serving maintainers (@llmops)
description:
  - Finds the instance of C(serving_instances) that lists the host. A host that no instance lists is
    an instance of its own (empty name, rank 0).
positional: _input, host
options:
  _input:
    description: C(serving_instances), instance name to its hosts, rank 0 first.
    type: dict
    required: true
  host:
    description: The inventory host.
    type: str
    required: true
"""

EXAMPLES = r"""
rank: "{{ (serving_instances | llmops.serving.instance_placement(inventory_hostname)).rank }}"
"""

RETURN = r"""
_value:
  description: The placement.
  type: dict
  contains:
    name:
      description: The instance's name; empty for a host of its own.
      type: str
    hosts:
      description: The instance's hosts, rank 0 first.
      type: list
      elements: str
    rank:
      description: The host's rank; 0 serves the API.
      type: int
"""

from ansible_collections.llmops.serving.plugins.module_utils import instances


def instance_placement(value, host):
    name, hosts, rank = instances.placement(value, host)
    return {"name": name, "hosts": hosts, "rank": rank}


class FilterModule(object):
    def filters(self):
        return {"instance_placement": instance_placement}
