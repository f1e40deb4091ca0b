# -*- coding: utf-8 -*-
# Copyright: llmops.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: ray_port_problems
short_description: What is wrong with a Ray node's ports
version_added: 0.1.0
author: llmops.serving maintainers (@llmops)
description:
  - Checks the ports a Ray node listens on against each other, the worker port range and the host's
    other services' ports. One message per problem, naming the variables; empty when they fit.
positional: _input, min_worker, max_worker, others
options:
  _input:
    description: The node's own ports, variable name to port.
    type: dict
    required: true
  min_worker:
    description: The lowest port of Ray's worker processes (C(ray_cluster_min_worker_port)).
    type: int
    required: true
  max_worker:
    description: The highest port of Ray's worker processes (C(ray_cluster_max_worker_port)).
    type: int
    required: true
  others:
    description: Ports of the host's other services, description to port, that Ray must leave free.
    type: dict
    default: {}
"""

EXAMPLES = r"""
problems: "{{ {'ray_cluster_port': 6379} | llmops.serving.ray_port_problems(20000, 20999, {'serving_listen': 8000}) }}"
"""

RETURN = r"""
_value:
  description: The problems; empty when the ports fit.
  type: list
  elements: str
"""

from ansible_collections.llmops.serving.plugins.module_utils import ray_ports


def ray_port_problems(fixed, min_worker, max_worker, others=None):
    return ray_ports.problems(fixed, min_worker, max_worker, others or {})


class FilterModule(object):
    def filters(self):
        return {"ray_port_problems": ray_port_problems}
