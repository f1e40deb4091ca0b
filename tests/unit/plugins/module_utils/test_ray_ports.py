# -*- coding: utf-8 -*-
"""The Ray node port checks (ray_cluster role's input check)."""
import pytest

from ansible_collections.llmops.serving.plugins.module_utils import ray_ports

FIXED = {"ray_cluster_port": 6379, "ray_cluster_node_manager_port": 6380, "ray_cluster_object_manager_port": 6381}
OTHERS = {"serving_listen (the engine's port)": 8000, "serving_distributed_port": 29500}


def test_the_defaults_fit():
    assert ray_ports.problems(FIXED, 20000, 20999, OTHERS) == []


@pytest.mark.parametrize("fixed,low,high,words", [
    # the worker range over the engine's port: Ray would hand it to a worker process
    (FIXED, 7000, 9000, "the Ray worker port range 7000-9000 (ray_cluster_min_worker_port..ray_cluster_max_worker_port) "
                        "takes serving_listen (the engine's port)'s port 8000: move the range"),
    (FIXED, 29000, 30000, "takes serving_distributed_port's port 29500"),
    (dict(FIXED, ray_cluster_port=8000), 20000, 20999, "ray_cluster_port is serving_listen (the engine's port)'s port 8000"),
    (dict(FIXED, ray_cluster_node_manager_port=6379), 20000, 20999,
     "ray_cluster_node_manager_port and ray_cluster_port are both port 6379"),
    (dict(FIXED, ray_cluster_object_manager_port=20500), 20000, 20999,
     "ray_cluster_object_manager_port (20500) is inside the worker port range 20000-20999"),
    (FIXED, 21000, 20000, "ray_cluster_min_worker_port (21000) and ray_cluster_max_worker_port (20000) must be"),
    (dict(FIXED, ray_cluster_port="six"), 20000, 20999, "ray_cluster_port must be a port number 1-65535, not 'six'"),
    (dict(FIXED, ray_cluster_port=70000), 20000, 20999, "ray_cluster_port must be a port number 1-65535"),
])
def test_ports_that_clash_are_named(fixed, low, high, words):
    found = ray_ports.problems(fixed, low, high, OTHERS)
    assert any(words in p for p in found), found


def test_each_problem_is_a_sentence_of_its_own():
    found = ray_ports.problems(FIXED, 6000, 7000, OTHERS)
    assert len(found) == 3 and all(p.endswith(": move it or the range.") for p in found), found
