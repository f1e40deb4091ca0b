# -*- coding: utf-8 -*-
# Copyright: llmops.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Waits until the Ray cluster at ADDRESS has NODES alive nodes (and GPUS GPUs), or TIMEOUT seconds
pass, and prints what it has as one JSON line: {"nodes": [{"address", "cpus", "gpus"}], "error"}.
Runs in the engine's venv on the head host (Ray's driver needs the host's own raylet), as the
cluster's user, so that the session files it writes stay that user's.

  ray_nodes.py --address 10.0.0.11:6379 --nodes 2 [--gpus 16] [--timeout 300]
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


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--address", required=True)
    parser.add_argument("--nodes", type=int, required=True)
    parser.add_argument("--gpus", type=float, default=0)
    parser.add_argument("--timeout", type=float, default=0)
    args = parser.parse_args()
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    import ray

    deadline = time.time() + args.timeout
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
        gpus = sum(n["gpus"] for n in nodes)
        if (len(nodes) >= args.nodes and gpus >= args.gpus) or time.time() >= deadline:
            break
        time.sleep(2)
    print(json.dumps({"nodes": nodes, "error": error}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
