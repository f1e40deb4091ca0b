# -*- coding: utf-8 -*-
# Copyright: llmops.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""ray_nodes.py's verdict on a cluster: what the head's readiness and rank 0's engine unit (before vLLM
starts) print when a host or GPU is missing. The offline scenario runs it against a live cluster."""
import importlib.util
import os

import pytest

SCRIPT = os.path.join(os.path.dirname(__file__), "..", "..", "..", "roles", "ray_cluster", "files", "ray_nodes.py")
spec = importlib.util.spec_from_file_location("ray_nodes", SCRIPT)
ray_nodes = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ray_nodes)

EXPECTED = [("gpu-a", "10.0.0.11"), ("gpu-b", "10.0.0.12"), ("gpu-c", "10.0.0.13")]


def node(address, gpus=8):
    return {"address": address, "cpus": 96, "gpus": gpus}


def test_a_whole_cluster_has_no_message():
    nodes = [node("10.0.0.11"), node("10.0.0.12"), node("10.0.0.13")]
    assert ray_nodes.shortfall(nodes, EXPECTED, 3, 24, "big", 4.2) == ([], "")


def test_the_hosts_that_have_not_joined_are_named_with_their_rank():
    missing, message = ray_nodes.shortfall([node("10.0.0.11")], EXPECTED, 3, 24, "big", 300,
                                           "GetTimeoutError: timed out")
    assert [m["host"] for m in missing] == ["gpu-b", "gpu-c"]
    assert message == ("Ray cluster of instance big: 1 of 3 nodes joined after 300 s (8 of 24 GPUs). gpu-b "
                       "(10.0.0.12, rank 1), gpu-c (10.0.0.13, rank 2) have not joined: GetTimeoutError: timed out.")


def test_every_host_joined_but_short_of_gpus_says_so():
    nodes = [node("10.0.0.11"), node("10.0.0.12", gpus=4), node("10.0.0.13")]
    missing, message = ray_nodes.shortfall(nodes, EXPECTED, 3, 24, "big", 300)
    assert missing == [] and "(20 of 24 GPUs). Every host joined, short of GPUs" in message


def test_an_unexpected_node_does_not_stand_in_for_a_missing_host():
    nodes = [node("10.0.0.11"), node("10.0.0.99"), node("10.0.0.13")]
    missing, message = ray_nodes.shortfall(nodes, EXPECTED, 3, 24, "big", 10)
    assert [m["host"] for m in missing] == ["gpu-b"] and "gpu-b (10.0.0.12, rank 1) has not joined." in message


@pytest.mark.parametrize("pair", ["gpu-a", "=10.0.0.1", "gpu-a="])
def test_expect_takes_host_equals_address(pair):
    with pytest.raises(ValueError, match="--expect takes HOST=ADDRESS"):
        ray_nodes.expected_hosts([pair])


def test_expect_keeps_rank_order():
    assert ray_nodes.expected_hosts(["b=10.0.0.2", "a=10.0.0.1"]) == [("b", "10.0.0.2"), ("a", "10.0.0.1")]
