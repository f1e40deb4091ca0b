# -*- coding: utf-8 -*-
# Copyright: llmops.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: instance_rollout_order
short_description: The serving hosts ordered so that each instance's hosts are next to each other
version_added: 0.1.0
author: llmops.serving maintainers (@llmops)
description:
  - Orders the hosts of a rollout so that the hosts of each instance of C(serving_instances) follow
    each other in rank order, where the instance's first listed host stands. Batches of a multiple of the
    instance size then never split an instance. Hosts that no instance lists keep their place.
positional: _input, hosts
options:
  _input:
    description: C(serving_instances), instance name to its hosts, rank 0 first.
    type: dict
    required: true
  hosts:
    description: The play's hosts, in inventory order.
    type: list
    elements: str
    required: true
"""

EXAMPLES = r"""
order: "{{ serving_instances | llmops.serving.instance_rollout_order(ansible_play_hosts_all) }}"
"""

RETURN = r"""
_value:
  description: The hosts, reordered; only hosts of O(hosts).
  type: list
  elements: str
"""

from ansible_collections.llmops.serving.plugins.module_utils import instances


def instance_rollout_order(value, hosts):
    return instances.rollout_order(value, hosts)


class FilterModule(object):
    def filters(self):
        return {"instance_rollout_order": instance_rollout_order}
