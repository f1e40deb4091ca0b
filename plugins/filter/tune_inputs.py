# -*- coding: utf-8 -*-
# Copyright: llmops.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: tune_inputs
short_description: What is wrong with the inputs of the tune playbook, and what one candidate takes
version_added: 0.1.0
author: llmops.serving maintainers (@llmops)
description:
  - Checks the SLA, the search space, the request rates and the time budget of
    C(llmops.serving.tune), and lists every problem, each naming its variable.
  - Works out the most seconds one candidate takes (its restart, the warm-up, each rate's
    arrivals and the answers of the last); a budget below it is a problem.
positional: _input, space, rates, budget_s, load
options:
  _input:
    description: The SLA (C(tune_sla)), a list of C({metric, percentile, bound_ms}).
    type: raw
    required: true
  space:
    description: The search space (C(tune_space)), spec variable to the values to try.
    type: raw
    required: true
  rates:
    description: The request rates (C(tune_rates)) in requests per second.
    type: raw
    required: true
  budget_s:
    description: The time budget (C(tune_time_budget_s)) in seconds.
    type: raw
    required: true
  load:
    description: The load settings, C(restart_s), C(request_timeout_s), C(requests_per_rate), C(rate_duration_s) and C(warmup_requests).
    type: dict
    required: true
"""

EXAMPLES = r"""
checked: >-
  {{ tune_sla | llmops.serving.tune_inputs(tune_space, tune_rates, tune_time_budget_s,
     {'restart_s': 180, 'request_timeout_s': 120, 'requests_per_rate': 64, 'rate_duration_s': 60, 'warmup_requests': 8}) }}
"""

RETURN = r"""
_value:
  description: The check.
  type: dict
  contains:
    problems:
      description: The problems, in words (empty when the inputs are right).
      type: list
      elements: str
    per_candidate_s:
      description: The most seconds one candidate takes (0 when the rates are wrong).
      type: int
    sla_argument:
      description: The SLA as the load generator's C(--sla) takes it (empty when the SLA is wrong).
      type: str
"""

from ansible_collections.llmops.serving.plugins.module_utils.tuning import inputs


def tune_inputs(sla, space, rates, budget_s, load):
    return inputs(sla, space, rates, budget_s, dict((k, float(v)) for k, v in load.items()))


class FilterModule(object):
    def filters(self):
        return {"tune_inputs": tune_inputs}
