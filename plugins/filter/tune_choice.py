# -*- coding: utf-8 -*-
# Copyright: llmops.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: tune_choice
short_description: The best tried candidate under an SLA, and the settings suggested for review
version_added: 0.1.0
author: llmops.serving maintainers (@llmops)
description:
  - Ranks the tried candidates by the highest request rate that met the SLA, then the goodput
    there (within 3 % counted equal), then the fewest changes from the current settings.
  - When a candidate met the SLA, returns the C(group_vars)/C(host_vars) text that suggests it;
    otherwise names the candidate that came closest and how it missed.
positional: _input, baseline, sla, context
options:
  _input:
    description:
      - The tried candidates, each C({candidate, name, key, result}) with the load generator's result.
      - The result of a candidate that failed is C({failed, phases, max_rate_meeting_sla}).
    type: list
    elements: dict
    required: true
  baseline:
    description: The current values of the space's variables.
    type: dict
    required: true
  sla:
    description: The SLA (C(tune_sla)).
    type: list
    elements: dict
    required: true
  context:
    description: What the figures were measured on (host, engine, engine_version, model).
    type: dict
    required: true
"""

EXAMPLES = r"""
choice: "{{ tried | llmops.serving.tune_choice(baseline, tune_sla, context) }}"
"""

RETURN = r"""
_value:
  description: The choice.
  type: dict
  contains:
    met:
      description: Whether any candidate met the SLA at a tried rate.
      type: bool
    best:
      description: The best candidate (C({candidate, name, key, result})), or the closest when none met it.
      type: dict
    ranking:
      description: Each candidate's changes, highest rate meeting the SLA, goodput there and why it failed (empty when it did not), best first.
      type: list
      elements: dict
    suggestion:
      description: The suggested variables file (YAML with comments); empty when none met the SLA.
      type: str
    message:
      description: The outcome in one line.
      type: str
"""

from ansible_collections.llmops.serving.plugins.module_utils import tuning


def tune_choice(tried, baseline, sla, context):
    checked = tuning.check_sla(sla)
    choice = tuning.choose(tried, baseline)
    best = choice["best"]
    out = {"met": choice["met"], "best": best, "ranking": choice["ranking"], "suggestion": "", "message": ""}
    failed = [t for t in tried if t["result"].get("failed")]
    if best is None:
        out["message"] = "no candidate was tried: the time budget ended before the first"
    elif len(failed) == len(tried):
        out["message"] = "every candidate tried failed; %s: %s" % (failed[0]["name"], failed[0]["result"]["failed"])
    elif choice["met"]:
        out["suggestion"] = tuning.suggestion(choice, checked, context)
        out["message"] = "best: %s, meeting the SLA up to %g req/s" % (
            best["name"], choice["ranking"][0]["peak_rate"] if choice["ranking"] else 0)
    else:
        out["message"] = "no candidate met the SLA (%s) at any rate tried; the closest was %s, %s" % (
            tuning.sla_argument(checked), best["name"], tuning.closest(best["result"], checked))
    return out


class FilterModule(object):
    def filters(self):
        return {"tune_choice": tune_choice}
