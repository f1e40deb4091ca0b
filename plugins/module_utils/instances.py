# -*- coding: utf-8 -*-
# Copyright: llmops.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Model instances that span hosts (serving_instances, serving_pipeline_parallel).

An instance is one model served by several hosts, one pipeline stage per host: the first host of
its list is rank 0, the only one serving the API (the gateway's upstream for the instance); the
others are workers. A host that no instance lists is an instance of its own. Pure functions: the
checks run in the serving_spec role before anything changes, and the rollout batches by instance.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type


def placement(instances, host):
    """(instance name, its hosts, this host's rank); a host no instance lists is its own instance."""
    for name, hosts in sorted((instances or {}).items()):
        if isinstance(hosts, list) and host in hosts:
            return name, list(hosts), hosts.index(host)
    return "", [host], 0


def problems(instances, pipeline_parallel, inventory_hosts, engine_hosts, host=None, launcher_problem=None,
             distributed_port=None, listen_port=None):
    """What is wrong with the instance layout, one message per problem, each naming the variable
    and the fix. inventory_hosts: every host of the inventory; engine_hosts: the hosts that serve
    (the play's); host: the host being checked (its own port clash and placement)."""
    out = []
    try:
        stages = int(pipeline_parallel)
    except (TypeError, ValueError):
        stages = 0
    if isinstance(pipeline_parallel, bool) or stages < 1:
        return ["serving_pipeline_parallel must be an integer >= 1 (hosts per model instance), got %r"
                % (pipeline_parallel,)]
    if instances is None:
        instances = {}
    if not isinstance(instances, dict) or not all(isinstance(v, list) for v in instances.values()):
        return ["serving_instances must map an instance name to the list of its inventory hosts, rank 0 first "
                "({qwen3-235b-a: [gpu-01, gpu-02]}), got %r" % (instances,)]
    if instances and stages == 1:
        return ["serving_instances is set and serving_pipeline_parallel is 1: set serving_pipeline_parallel to "
                "the hosts per instance, or leave serving_instances empty (every host its own instance)"]
    known = set(inventory_hosts or [])
    seen = {}
    for name in sorted(instances):
        hosts = instances[name]
        missing = [h for h in hosts if h not in known]
        if missing:
            out.append("serving_instances.%s lists %s, not in the inventory: add the host(s) to the inventory or "
                       "correct the name(s)" % (name, ", ".join(str(h) for h in missing)))
        if len(hosts) != stages:
            out.append("serving_instances.%s has %d host(s) and serving_pipeline_parallel is %d: every instance needs "
                       "exactly one host per pipeline stage (list %d hosts, or set serving_pipeline_parallel: %d)" % (
                           name, len(hosts), stages, stages, len(hosts)))
        doubles = sorted(set(h for h in hosts if hosts.count(h) > 1))
        if doubles:
            out.append("serving_instances.%s lists %s more than once: one stage per host" % (name, ", ".join(doubles)))
        for h in set(hosts):
            if h in seen:
                out.append("serving_instances: %s is in both %s and %s: a host serves one instance"
                           % (h, seen[h], name))
            seen[h] = name
    if stages > 1:
        alone = [h for h in engine_hosts or [] if h not in seen]
        if alone:
            out.append("serving_pipeline_parallel is %d and %s %s in no instance of serving_instances: list every "
                       "serving host in an instance of %d hosts" % (
                           stages, ", ".join(alone), "is" if len(alone) == 1 else "are", stages))
        if launcher_problem:
            out.append(launcher_problem)
        if host is not None and distributed_port is not None and listen_port is not None and \
                str(distributed_port) == str(listen_port):
            out.append("serving_distributed_port %s is the engine's own port (serving_listen): pick another port "
                       "for the ranks' rendezvous (29500 by default)" % distributed_port)
    return out


def rollout_order(instances, hosts):
    """The hosts, each instance's hosts next to each other in rank order, so that batches of a
    multiple of the instance size never split an instance."""
    out = []
    for h in hosts:
        if h in out:
            continue
        members = placement(instances, h)[1]
        out.extend(m for m in members if m in hosts and m not in out)
    return out
