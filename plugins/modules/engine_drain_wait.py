#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: llmops.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: engine_drain_wait
short_description: Wait until a drained engine has no running or waiting requests
version_added: "0.1.0"
description:
  - Polls the engine's Prometheus C(/metrics) until the engine's own counts of running and waiting
    requests are both zero, or O(timeout) seconds pass. Use it after the gateway stopped sending the
    engine new requests and before the engine restarts, so no stream or long generation is cut.
  - The metric names are the engine's (vLLM C(vllm:num_requests_running) and
    C(vllm:num_requests_waiting), SGLang C(sglang:num_running_reqs) and C(sglang:num_queue_reqs));
    the roles take them from the engine registry (C(serving_spec_engine.metrics)).
  - An engine that does not answer has nothing in flight (it is stopped or starting).
  - Fails with the counts left when the timeout passes, unless O(fail_on_timeout) is false.
author:
  - llmops.serving maintainers (@llmops)
options:
  url:
    description: Base URL of the engine, for example C(http://127.0.0.1:8000).
    type: str
    required: true
  running_metric:
    description: Name of the gauge of requests being generated.
    type: str
    required: true
  waiting_metric:
    description: Name of the gauge of requests queued.
    type: str
    required: true
  timeout:
    description: Seconds to wait at most; must be above 0.
    type: int
    default: 300
  interval:
    description: Seconds between two scrapes.
    type: float
    default: 1.0
  fail_on_timeout:
    description: Fail when requests are still in flight at the timeout (otherwise return idle=false).
    type: bool
    default: true
  api_key:
    description: Bearer token, for engines that protect C(/metrics).
    type: str
  ca_path:
    description: The CA file an https engine's certificate is checked against (the collection's own CA).
    type: path
notes:
  - In check mode the module scrapes once, reports the counts and never waits or fails on them.
attributes:
  check_mode:
    description: Scrapes once and reports the counts.
    support: full
  diff_mode:
    description: Nothing to compare.
    support: none
"""

EXAMPLES = r"""
- name: Wait for the requests the engine holds to finish
  llmops.serving.engine_drain_wait:
    url: "{{ serving_spec_engine_url }}"
    running_metric: "{{ serving_spec_engine.metrics.running }}"
    waiting_metric: "{{ serving_spec_engine.metrics.waiting }}"
    timeout: 300
  register: drained
"""

RETURN = r"""
idle:
  description: Whether no request was running or waiting at the end.
  returned: always
  type: bool
  sample: true
reachable:
  description: Whether the engine answered on /metrics (false means nothing can be in flight).
  returned: always
  type: bool
running_at_start:
  description: Requests running at the first scrape.
  returned: always
  type: int
  sample: 3
waiting_at_start:
  description: Requests waiting at the first scrape.
  returned: always
  type: int
  sample: 0
running_left:
  description: Requests running at the last scrape.
  returned: always
  type: int
  sample: 0
waiting_left:
  description: Requests waiting at the last scrape.
  returned: always
  type: int
  sample: 0
waited_s:
  description: Seconds from the first scrape to the last.
  returned: always
  type: float
  sample: 7.3
polls:
  description: Scrapes made.
  returned: always
  type: int
  sample: 8
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.llmops.serving.plugins.module_utils import drain, readiness


def scraper(url, api_key, ca_path=None):
    def scrape():
        try:
            status, body, dummy = readiness.http("GET", url.rstrip("/") + "/metrics", api_key=api_key, timeout=10,
                                                 ca_path=ca_path)
        except (OSError, ValueError):
            return None
        if status != 200 or not isinstance(body, str):
            return None
        return body
    return scrape


def main():
    module = AnsibleModule(
        argument_spec=dict(
            url=dict(type="str", required=True),
            running_metric=dict(type="str", required=True),
            waiting_metric=dict(type="str", required=True),
            timeout=dict(type="int", default=300),
            interval=dict(type="float", default=1.0),
            fail_on_timeout=dict(type="bool", default=True),
            api_key=dict(type="str", no_log=True),
            ca_path=dict(type="path"),
        ),
        supports_check_mode=True,
    )
    p = module.params
    if p["timeout"] <= 0:
        module.fail_json(msg="timeout must be a number of seconds above 0 (got %s)" % p["timeout"])
    try:
        result = drain.wait_idle(scraper(p["url"], p["api_key"], p["ca_path"]), p["running_metric"], p["waiting_metric"],
                                 0 if module.check_mode else p["timeout"], p["interval"])
    except drain.MetricsMissing as e:
        module.fail_json(msg="%s at %s: check the engine's metric names (engine registry) and that its "
                             "metrics are enabled" % (e, p["url"]))
    if not result["idle"] and p["fail_on_timeout"] and not module.check_mode:
        module.fail_json(msg="%d running and %d waiting requests were still in flight after %s s (%d and %d "
                             "when the wait began): raise the drain timeout, or let the restart cut them"
                             % (result["running_left"], result["waiting_left"], p["timeout"],
                                result["running_at_start"], result["waiting_at_start"]), **result)
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
