# -*- coding: utf-8 -*-
# Copyright: llmops.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: tune_candidates
short_description: The candidates of a tuning round, each with its name and cache key
version_added: 0.1.0
author: llmops.serving maintainers (@llmops)
description:
  - Without O(best), the grid of the search space, the current settings (the baseline) first.
  - With O(best), the refinement around it - the midpoints between its integer values and their
    neighbours in the space - leaving out the candidates in O(tried).
  - Each candidate's cache key covers the spec it is served with (the C(spec) of O(context), the
    other serving inputs, with its values applied) and the rest of O(context) (engine, version,
    model, host, load settings), so a changed input never reuses an old result. The SLA is no part
    of it - a run holds a cached result to its own SLA.
positional: _input, baseline, context, best, tried
options:
  _input:
    description: The checked search space, spec variable to the values to try.
    type: dict
    required: true
  baseline:
    description: The current values of the space's variables.
    type: dict
    required: true
  context:
    description: What else decides a candidate's figures; its C(spec), when given, maps the other
      serving inputs to their values.
    type: dict
    required: true
  best:
    description: The best candidate of the grid; omit for the grid itself.
    type: dict
  tried:
    description: The candidates already tried.
    type: list
    elements: dict
    default: []
"""

EXAMPLES = r"""
candidates: "{{ tune_space | llmops.serving.tune_candidates(baseline, context) }}"
"""

RETURN = r"""
_value:
  description: The candidates, in the order to try them.
  type: list
  elements: dict
  contains:
    candidate:
      description: The spec variables of the candidate.
      type: dict
    name:
      description: What it changes from the baseline, or C(current settings).
      type: str
    key:
      description: Its cache key.
      type: str
"""

from ansible_collections.llmops.serving.plugins.module_utils.tuning import candidate_key, grid, label, refine


def tune_candidates(space, baseline, context, best=None, tried=()):
    found = grid(space, baseline) if best is None else refine(space, baseline, best)
    return [{"candidate": c, "name": label(c, baseline), "key": candidate_key(c, context)}
            for c in found if c not in list(tried)]


class FilterModule(object):
    def filters(self):
        return {"tune_candidates": tune_candidates}
