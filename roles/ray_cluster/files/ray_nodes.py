# -*- coding: utf-8 -*-
# Copyright: llmops.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Waits until the Ray cluster at ADDRESS has NODES alive nodes (and GPUS GPUs), or TIMEOUT seconds
pass, and prints what it has as one JSON line: {"nodes": [{"address", "cpus", "gpus"}], "error",
"missing": [{"host", "address", "rank"}], "message"}. Runs in the engine's venv on the head host (Ray's
driver needs the host's own raylet), as the cluster's user, so that the session files it writes stay
that user's. Each --expect HOST=ADDRESS (in rank order) names a host the cluster must hold; with
--require, a cluster short of a node or GPU exits 1 with the message (what the engine's unit on rank 0
runs before vLLM starts, so that its journal names the host that has not joined).

  ray_nodes.py --address 10.0.0.11:6379 --nodes 2 [--gpus 16] [--timeout 300]
               [--instance NAME] [--expect gpu-a=10.0.0.11 --expect gpu-b=10.0.0.12] [--require]
"""
import argparse
import json
import os
import sys
import time


def alive_nodes(ray):
    out = []
    for node in ray.nodes():
        if node.get("Alive"):
            resources = node.get("Resources") or {}
            out.append({"address": node.get("NodeManagerAddress"), "cpus": resources.get("CPU", 0),
                        "gpus": resources.get("GPU", 0)})
    return sorted(out, key=lambda n: n["address"] or "")


def expected_hosts(pairs):
    """[(host, address)] from HOST=ADDRESS strings, in the order given (rank order)."""
    out = []
    for pair in pairs:
        host, sep, address = pair.partition("=")
        if not sep or not host or not address:
            raise ValueError("--expect takes HOST=ADDRESS, not %r" % pair)
        out.append((host, address))
    return out


def shortfall(nodes, expected, want_nodes, want_gpus, instance, waited_s, error=""):
    """The expected hosts that have no alive node, and a message when the cluster is short of a node
    or a GPU ("" when it is whole)."""
    joined = set(n["address"] for n in nodes)
    missing = [{"host": h, "address": a, "rank": r} for r, (h, a) in enumerate(expected) if a not in joined]
    gpus = sum(n["gpus"] for n in nodes)
    if len(nodes) >= want_nodes and gpus >= want_gpus and not missing:
        return missing, ""
    names = ", ".join("%s (%s, rank %d)" % (m["host"], m["address"], m["rank"]) for m in missing)
    message = "Ray cluster of instance %s: %d of %d nodes joined after %.0f s (%g of %g GPUs)." % (
        instance, len(nodes), want_nodes, waited_s, gpus, want_gpus)
    if names:
        message += " %s %s not joined" % (names, "has" if len(missing) == 1 else "have")
    elif gpus < want_gpus:
        message += " Every host joined, short of GPUs: check each host's GPUs with nvidia-smi"
    if error:
        message += ": %s" % error
    return missing, message + "."


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--address", required=True)
    parser.add_argument("--nodes", type=int, required=True)
    parser.add_argument("--gpus", type=float, default=0)
    parser.add_argument("--timeout", type=float, default=0)
    parser.add_argument("--instance", default="?")
    parser.add_argument("--expect", action="append", default=[], metavar="HOST=ADDRESS")
    parser.add_argument("--require", action="store_true")
    args = parser.parse_args()
    try:
        expected = expected_hosts(args.expect)
    except ValueError as exc:
        parser.error(str(exc))
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    import ray

    start = time.time()
    nodes, error = [], ""
    while True:
        try:
            if not ray.is_initialized():
                ray.init(address=args.address, log_to_driver=False, logging_level="ERROR")
            nodes, error = alive_nodes(ray), ""
        except Exception as exc:  # the head not up yet, or gone: say so, and try again until the deadline
            nodes, error = [], "%s: %s" % (type(exc).__name__, str(exc).strip().splitlines()[0] if str(exc).strip() else "")
            if ray.is_initialized():
                ray.shutdown()
        missing, message = shortfall(nodes, expected, args.nodes, args.gpus, args.instance,
                                     min(time.time() - start, args.timeout), error)
        if not message or time.time() >= start + args.timeout:
            break
        time.sleep(2)
    print(json.dumps({"nodes": nodes, "error": error, "missing": missing, "message": message}))
    if message and args.require:
        sys.stderr.write(message + "\n")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
