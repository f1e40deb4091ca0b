# -*- coding: utf-8 -*-
"""instances: model instances that span hosts, and the bad layouts users type."""
from ansible_collections.llmops.serving.plugins.module_utils import instances as I

INVENTORY = ["gpu-01", "gpu-02", "gpu-03", "gpu-04", "gw-01"]
ENGINES = ["gpu-01", "gpu-02", "gpu-03", "gpu-04"]
GOOD = {"qwen-a": ["gpu-01", "gpu-02"], "qwen-b": ["gpu-03", "gpu-04"]}


def test_placement_gives_rank_0_to_the_first_host_and_every_other_host_an_instance_of_its_own():
    assert I.placement(GOOD, "gpu-02") == ("qwen-a", ["gpu-01", "gpu-02"], 1)
    assert I.placement(GOOD, "gpu-03") == ("qwen-b", ["gpu-03", "gpu-04"], 0)
    assert I.placement(GOOD, "gw-01") == ("", ["gw-01"], 0)
    assert I.placement({}, "gpu-01") == ("", ["gpu-01"], 0)


def test_a_sound_layout_has_no_problems():
    assert I.problems(GOOD, 2, INVENTORY, ENGINES, "gpu-01", None, 29500, 8000) == []
    assert I.problems({}, 1, INVENTORY, ENGINES) == []


def test_instances_of_different_sizes_are_refused_naming_the_instance():
    out = I.problems({"qwen-a": ["gpu-01", "gpu-02", "gpu-03"], "qwen-b": ["gpu-04"]}, 2, INVENTORY, ENGINES)
    assert any(m.startswith("serving_instances.qwen-a has 3 host(s) and serving_pipeline_parallel is 2") for m in out)
    assert any(m.startswith("serving_instances.qwen-b has 1 host(s)") for m in out)


def test_a_host_missing_from_the_inventory_is_named():
    out = I.problems({"qwen-a": ["gpu-01", "gpu-9"], "qwen-b": ["gpu-03", "gpu-04"]}, 2, INVENTORY, ENGINES)
    assert "serving_instances.qwen-a lists gpu-9, not in the inventory" in out[0]
    # and gpu-02, now in no instance, is named too
    assert any("gpu-02 is in no instance" in m for m in out)


def test_a_host_in_two_instances_or_twice_in_one_is_refused():
    out = I.problems({"a": ["gpu-01", "gpu-02"], "b": ["gpu-02", "gpu-03"], "c": ["gpu-04", "gpu-04"]}, 2,
                     INVENTORY, ENGINES)
    assert any("gpu-02 is in both a and b" in m for m in out)
    assert any("serving_instances.c lists gpu-04 more than once" in m for m in out)


def test_the_rendezvous_port_may_not_be_the_engines_port():
    out = I.problems(GOOD, 2, INVENTORY, ENGINES, "gpu-01", None, 8000, 8000)
    assert out == ["serving_distributed_port 8000 is the engine's own port (serving_listen): pick another port "
                   "for the ranks' rendezvous (29500 by default)"]


def test_bad_values_and_a_launcher_problem_are_reported():
    assert I.problems(GOOD, 0, INVENTORY, ENGINES)[0].startswith("serving_pipeline_parallel must be an integer >= 1")
    assert I.problems(GOOD, "two", INVENTORY, ENGINES)[0].startswith("serving_pipeline_parallel must be an integer")
    assert I.problems(["gpu-01"], 2, INVENTORY, ENGINES)[0].startswith("serving_instances must map an instance name")
    assert I.problems(GOOD, 1, INVENTORY, ENGINES) == [
        "serving_instances is set and serving_pipeline_parallel is 1: set serving_pipeline_parallel to the hosts per "
        "instance, or leave serving_instances empty (every host its own instance)"]
    assert I.problems(GOOD, 2, INVENTORY, ENGINES, launcher_problem="no launcher") == ["no launcher"]


def test_rollout_order_puts_each_instances_hosts_together_in_rank_order():
    hosts = ["gpu-03", "gpu-01", "gw-01", "gpu-04", "gpu-02"]
    assert I.rollout_order(GOOD, hosts) == ["gpu-03", "gpu-04", "gpu-01", "gpu-02", "gw-01"]
    # hosts outside the run (--limit) are left out
    assert I.rollout_order(GOOD, ["gpu-02", "gpu-03"]) == ["gpu-02", "gpu-03"]
