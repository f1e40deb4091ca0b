# -*- coding: utf-8 -*-
# Copyright: llmops.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: engine_info
short_description: What the collection knows of one serving engine, from its engine registry
version_added: 0.1.0
author: llmops.serving maintainers (@llmops)
description:
  - Looks the engine up in the collection's one engine registry
    (C(plugins/module_utils/engines.py)) and returns everything engine-specific that is not a
    flag, with the rows that change between versions resolved for O(version).
  - Fails, naming the known engines, for an engine the registry does not know.
positional: _input, version
options:
  _input:
    description: The engine name (C(serving_engine)).
    type: str
    required: true
  version:
    description: The engine version; empty picks the oldest rows.
    type: str
    default: ""
"""

EXAMPLES = r"""
health_path: "{{ (serving_engine | llmops.serving.engine_info).health_path }}"
kv_metric: "{{ (serving_engine | llmops.serving.engine_info('0.32.0')).metrics.kv_usage }}"
"""

RETURN = r"""
_value:
  description: The engine's registry entry.
  type: dict
  contains:
    name: {description: The engine name., type: str}
    label: {description: Its display name., type: str}
    unit: {description: The systemd unit the collection runs it as., type: str}
    distributions: {description: Python distributions that carry it, most specific first., type: list}
    entry: {description: Entry module, words before the flags, how the model is passed., type: dict}
    api_key_env: {description: The environment variable its API key is read from., type: str}
    admin_key_env: {description: "The environment variable its admin key is read from (SGLang), or null.", type: str}
    health_path: {description: The route polled before the readiness generation., type: str}
    process_words: {description: Words in a listener's command line that mark it as this engine., type: list}
    metric_prefix: {description: Prefix of its Prometheus metric names., type: str}
    metrics:
      description: >-
        Metric names and selectors at this version (kv_usage, running, waiting, ttft_bucket, e2e_bucket,
        requests_total, errors_total, queue_time_bucket, preemptions).
      type: dict
    arch_min_version: {description: Lowest version known to serve each architecture., type: dict}
    budget: {description: How it budgets GPU memory at this version., type: dict}
"""

from ansible.errors import AnsibleFilterError
from ansible.module_utils.common.text.converters import to_native

from ansible_collections.llmops.serving.plugins.module_utils.engines import engine_info as _info


def engine_info(engine, version=""):
    try:
        return _info(engine, version or None)
    except ValueError as exc:
        raise AnsibleFilterError(to_native(exc))


class FilterModule(object):
    def filters(self):
        return {"engine_info": engine_info}
