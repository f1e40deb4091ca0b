# -*- coding: utf-8 -*-
# Copyright: llmops.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: engine_flag_problems
short_description: What is wrong with some spec keys for an engine version, as messages
version_added: 0.1.0
author: llmops.serving maintainers (@llmops)
description:
  - Looks each spec key up in the collection's one flag translation table
    (C(plugins/module_utils/engine_spec.py)) at O(version) and returns, for every key the version
    cannot render, a message naming the C(serving_*) variable, the first version that has the flag
    and what to do instead.
  - With a dict of values, first checks the values as the translation point does (a message naming the
    variable and what it takes) and returns only that message when one is wrong.
  - Lets a play refuse such a spec before anything on a host changes; rendering the flags refuses
    it too.
positional: _input, version, keys
options:
  _input:
    description: The engine name (C(serving_engine)).
    type: str
    required: true
  version:
    description: The engine version (C(serving_spec_engine_version)).
    type: str
    required: true
  keys:
    description:
      - The spec keys that are set (for example C(tls_certfile) when the engine serves TLS), or a
        dict of spec key to value, for keys whose support depends on the value (the method of
        C(speculative)). Keys whose value is null or false are not set.
    type: raw
    required: true
"""

EXAMPLES = r"""
problems: "{{ serving_engine | llmops.serving.engine_flag_problems(serving_spec_engine_version, ['tls_certfile']) }}"
speculative: "{{ 'sglang' | llmops.serving.engine_flag_problems('0.4.6.post5', {'speculative': {'method': 'ngram'}}) }}"
"""

RETURN = r"""
_value:
  description: One message per key the version has no flag for; empty when it has them all.
  type: list
  elements: str
"""

from ansible.errors import AnsibleFilterError
from ansible.module_utils.common.text.converters import to_native

from ansible_collections.llmops.serving.plugins.module_utils import engine_spec


def engine_flag_problems(engine, version, keys):
    try:
        return engine_spec.engine_flag_problems_for(engine, version, keys)
    except (KeyError, engine_spec.EngineArgsError) as exc:
        raise AnsibleFilterError("engine_flag_problems: %s" % to_native(exc))


class FilterModule(object):
    def filters(self):
        return {"engine_flag_problems": engine_flag_problems}
