# -*- coding: utf-8 -*-
# Copyright: llmops.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: pool_budget
short_description: Whether draining a host keeps its model pool at its minimum of serving hosts
version_added: 0.1.0
author: llmops.serving maintainers (@llmops)
description:
  - The disruption budget of a model pool (the hosts that serve the same model behind the gateways),
    like a Kubernetes PodDisruptionBudget - draining I(_input) now, with the other hosts that drain
    with it, must leave at least I(min_available) hosts of its pool serving.
  - A host that does not serve now (down, drained, or a first deploy) takes nothing away from its
    pool and is always allowed.
positional: _input, pools, available, draining, min_available
options:
  _input:
    description: The host to drain (its inventory name).
    type: str
    required: true
  pools:
    description: The pool (model name) of each host that serves an API, by inventory name.
    type: dict
    required: true
  available:
    description: Whether each host serves now (reachable, engine active, drained neither in its state nor on a gateway).
    type: dict
    required: true
  draining:
    description: The hosts that drain now, with I(_input).
    type: list
    elements: str
    required: true
  min_available:
    description: The fewest hosts of a pool that must keep serving (C(serving_rollout_min_available)).
    type: int
    required: true
"""

EXAMPLES = r"""
budget: "{{ inventory_hostname | llmops.serving.pool_budget(pools, available, draining, serving_rollout_min_available) }}"
"""

RETURN = r"""
_value:
  description: The decision.
  type: dict
  contains:
    pool: {description: The host's pool (null when it serves no API)., type: str}
    members: {description: The pool's hosts., type: list, elements: str}
    available: {description: Those that serve now., type: list, elements: str}
    after: {description: How many keep serving while the drain lasts., type: int}
    ok: {description: Whether the host may drain., type: bool}
    msg: {description: Why not, naming the pool, its hosts and what to do (empty when ok)., type: str}
"""

from ansible.errors import AnsibleFilterError
from ansible.module_utils.common.text.converters import to_native

from ansible_collections.llmops.serving.plugins.module_utils.rollout import pool_budget as _pool_budget


def pool_budget(host, pools, available, draining, min_available):
    try:
        return _pool_budget(host, dict(pools), dict(available), list(draining), int(min_available))
    except (TypeError, ValueError) as e:
        raise AnsibleFilterError("pool_budget: %s" % to_native(e))


class FilterModule(object):
    def filters(self):
        return {"pool_budget": pool_budget}
