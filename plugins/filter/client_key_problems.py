# -*- coding: utf-8 -*-
# Copyright: llmops.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: client_key_problems
short_description: What is wrong with the gateway's client list, in sentences that never hold a key
version_added: 0.1.0
author: llmops.serving maintainers (@llmops)
description:
  - Takes the gateway's clients (a list of C({name, key})) and the engine keys behind it, and returns
    one sentence per problem - no client at all, a bad or repeated name, a bad key (see
    P(llmops.serving.secret_problems#filter)), two clients sharing a key, a client holding an
    engine key.
positional: _input, engine_keys
options:
  _input:
    description: The clients, as C(gateway_api_keys) lists them.
    type: list
    elements: dict
    required: true
  engine_keys:
    description: The engine keys (C(serving_api_key), C(serving_admin_api_key)) of the engines behind the gateway; empty ones are ignored.
    type: list
    elements: str
    default: []
"""

EXAMPLES = r"""
problems: "{{ gateway_api_keys | llmops.serving.client_key_problems([serving_api_key]) }}"
"""

RETURN = r"""
_value:
  description: One sentence per problem (empty list when there is none).
  type: list
  elements: str
  sample: ["names repeat: team-a"]
"""

from ansible_collections.llmops.serving.plugins.module_utils.api_keys import client_problems


def client_key_problems(clients, engine_keys=()):
    return client_problems(clients, [k for k in engine_keys if k])


class FilterModule(object):
    def filters(self):
        return {"client_key_problems": client_key_problems}
