# -*- coding: utf-8 -*-
"""rollout.pool_budget: a model pool's disruption budget, as the rollout and tune.yml apply it before
a host drains."""
import pytest

from ansible_collections.llmops.serving.plugins.filter.pool_budget import pool_budget as the_filter
from ansible_collections.llmops.serving.plugins.module_utils.rollout import pool_budget

# two pools: chat on three hosts, long-context on one
POOLS = {"h1": "qwen3-32b", "h2": "qwen3-32b", "h3": "qwen3-32b", "h4": "qwen3-32b-long"}
ALL_UP = {"h1": True, "h2": True, "h3": True, "h4": True}


def test_a_single_host_pool_is_refused_by_name_and_the_other_pool_rolls():
    lone = pool_budget("h4", POOLS, ALL_UP, ["h4"], 1)
    assert not lone["ok"] and lone["pool"] == "qwen3-32b-long" and lone["after"] == 0
    assert "pool qwen3-32b-long (h4)" in lone["msg"] and "serving_rollout_min_available" in lone["msg"]
    assert "nothing on h4 was changed" in lone["msg"]
    assert pool_budget("h1", POOLS, ALL_UP, ["h1"], 1)["ok"]
    # 0 accepts the outage
    assert pool_budget("h4", POOLS, ALL_UP, ["h4"], 0)["ok"]


def test_what_is_already_down_or_drained_counts_against_the_budget():
    # h2 is down and h3 drained (by a tune run, or a host of another batch): h1 is the last server
    seen = dict(ALL_UP, h2=False, h3=False)
    last = pool_budget("h1", POOLS, seen, ["h1"], 1)
    assert not last["ok"] and last["available"] == ["h1"] and "1 serve now: h1" in last["msg"]
    # with one of them back, h1 may go
    assert pool_budget("h1", POOLS, dict(seen, h3=True), ["h1"], 1)["ok"]


def test_the_hosts_of_one_batch_are_counted_together():
    # serial 2 on a pool of three: one stays
    assert pool_budget("h1", POOLS, ALL_UP, ["h1", "h2"], 1)["ok"]
    # serial 3: none stays; each host of the batch is refused and the message names the batch's drains
    both = pool_budget("h2", POOLS, ALL_UP, ["h1", "h2", "h3"], 1)
    assert not both["ok"] and "while h1, h2, h3 drains" in both["msg"]
    # a host of another pool in the batch takes nothing from this one
    assert pool_budget("h1", POOLS, ALL_UP, ["h1", "h4"], 2)["ok"]
    assert not pool_budget("h1", POOLS, ALL_UP, ["h1", "h2"], 2)["ok"]


def test_a_host_that_serves_nothing_may_always_restart():
    # a first deploy, a crashed engine, a host left drained: restarting it takes nothing away
    assert pool_budget("h4", POOLS, dict(ALL_UP, h4=False), ["h4"], 1)["ok"]
    # a Ray worker rank (no API of its own) is in no pool
    assert pool_budget("w1", POOLS, ALL_UP, ["w1"], 1) == dict(pool=None, members=[], available=[], after=0, ok=True,
                                                               msg="")


def test_the_filter_takes_what_the_role_passes():
    assert not the_filter("h4", POOLS, ALL_UP, ("h4",), "1")["ok"]
    with pytest.raises(Exception, match="pool_budget"):
        the_filter("h4", POOLS, ALL_UP, ["h4"], "one")
