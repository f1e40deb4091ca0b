# -*- coding: utf-8 -*-
# Copyright: llmops.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ports a Ray node listens on, checked against each other and the host's other services."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type


def _port(value):
    try:
        port = int(str(value))
    except (TypeError, ValueError):
        return None
    return port if 1 <= port <= 65535 else None


def problems(fixed, min_worker, max_worker, others):
    """What is wrong with a node's ports, one message each, naming the variables.

    fixed: {variable: port} of the node's own ports; min_worker/max_worker: the range Ray's worker
    processes listen in (ray_cluster_min_worker_port / ray_cluster_max_worker_port); others:
    {description: port} of services on the same host that Ray must not take."""
    out = []
    ports = {}
    for name in sorted(fixed):
        port = _port(fixed[name])
        if port is None:
            out.append("%s must be a port number 1-65535, not %r" % (name, fixed[name]))
        else:
            ports[name] = port
    low, high = _port(min_worker), _port(max_worker)
    if low is None or high is None or low > high:
        out.append("ray_cluster_min_worker_port (%r) and ray_cluster_max_worker_port (%r) must be ports 1-65535, "
                   "the first no higher than the second" % (min_worker, max_worker))
        low = high = None
    seen = {}
    for name in sorted(ports, key=lambda n: (ports[n], n)):
        if ports[name] in seen:
            out.append("%s and %s are both port %d: give each its own" % (seen[ports[name]], name, ports[name]))
        else:
            seen[ports[name]] = name
        if low is not None and low <= ports[name] <= high:
            out.append("%s (%s) is inside the worker port range %s-%s (ray_cluster_min_worker_port.."
                       "ray_cluster_max_worker_port): move it or the range" % (name, ports[name], low, high))
    for what in sorted(others):
        port = _port(others[what])
        if port is None:
            continue
        if port in seen:
            out.append("%s is %s's port %s as well: give Ray another" % (seen[port], what, port))
        if low is not None and low <= port <= high:
            out.append("the Ray worker port range %s-%s (ray_cluster_min_worker_port..ray_cluster_max_worker_port) "
                       "takes %s's port %s: move the range" % (low, high, what, port))
    # each a sentence: the role joins them into one message
    return [p + "." for p in out]
