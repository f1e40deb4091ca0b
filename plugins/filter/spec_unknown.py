# -*- coding: utf-8 -*-
# Copyright: llmops.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: spec_unknown
short_description: The serving_* variables the serving spec does not know, with the closest known name
version_added: 0.1.0
author: llmops.serving maintainers (@llmops)
description:
  - Takes the names of the variables set for a host (for example from the
    C(ansible.builtin.varnames) lookup) and returns a sentence for each C(serving_*) name that is
    not an option of the serving_spec role, one of its published C(serving_spec_*) facts, or a
    play-level name the playbooks read (C(serving_hosts)), with the closest known name
    ("did you mean ...").
  - Returns an empty string when every name is known.
positional: _input, known
options:
  _input:
    description: Variable names set for the host.
    type: list
    elements: str
    required: true
  known:
    description: The names the spec knows (the options of its argument spec).
    type: list
    elements: str
    required: true
"""

EXAMPLES = r"""
typos: "{{ query('ansible.builtin.varnames', '^serving_') | llmops.serving.spec_unknown(spec_options) }}"
"""

RETURN = r"""
_value:
  description: One sentence per unknown name (empty when there is none).
  type: str
  sample: "serving_modle is not a variable of the serving spec: did you mean serving_model?"
"""

from ansible_collections.llmops.serving.plugins.module_utils.spec_names import describe, unknown_names


def spec_unknown(names, known):
    return describe(unknown_names(names, known))


class FilterModule(object):
    def filters(self):
        return {"spec_unknown": spec_unknown}
