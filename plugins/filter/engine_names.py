# -*- coding: utf-8 -*-
# Copyright: llmops.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: engine_names
short_description: The serving engines the collection's engine registry knows
version_added: 0.1.0
author: llmops.serving maintainers (@llmops)
description:
  - The names of every engine in the collection's engine registry, sorted; the input is ignored
    (pipe anything, for example the current engine).
positional: _input
options:
  _input:
    description: Ignored.
    type: raw
    required: true
"""

EXAMPLES = r"""
other_engines: "{{ serving_engine | llmops.serving.engine_names | difference([serving_engine]) }}"
"""

RETURN = r"""
_value:
  description: Engine names.
  type: list
  elements: str
"""

from ansible_collections.llmops.serving.plugins.module_utils.engines import ENGINES


def engine_names(_ignored=None):
    return list(ENGINES)


class FilterModule(object):
    def filters(self):
        return {"engine_names": engine_names}
