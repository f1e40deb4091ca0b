#!/usr/bin/env python3
"""What one site.yml run costs the controller and the wall clock, before and after a change.

    .venv/bin/python bench/converge/run.py [--hosts 1,2,4] [--before REV] [--reruns N] [--engine vllm]

For each tree (the checkout, and the commit REV checked out beside it when --before is given) the
benchmark starts max(--hosts) fresh systemd test hosts (podman, the demo's image and inventory:
the cpu stack, a synthetic Qwen3 model, the gateway and monitoring), then measures:

- ``first``: the first converge of every host;
- ``rerun``: a converged re-run of site.yml (changed=0 expected), on the first N hosts for each N;
- ``tags_engine``: ``--tags engine`` on the same hosts;
- ``bad_input``: one bad input (``monitoring_vllm_kv_cache_usage_max=1.5``), which must fail;
- ``reruns``: --reruns more converged re-runs on one host, in a row (the noise check: each must pass
  with changed=0).

Each figure comes from the collection's run_cost callback (tasks run, remote calls, wall seconds and
controller CPU seconds of ansible-playbook and everything it started). Runs go through the test
hosts' pipelined connection (tests/harness/connection_plugins), the path SSH fleets with pipelining
take. Results: bench/results/converge-<date>.json (every run) and .md (the table), printed too.
This is a benchmark, not a test: nothing here is part of make test.
"""
import argparse
import datetime
import json
import os
import shutil
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CACHE = os.environ.get("LLMOPS_CACHE", os.path.expanduser("~/.cache/llmops-serving"))
WORK = os.path.join(ROOT, ".cache", "bench-converge")
IMAGE = "localhost/llmops-testhost-debian12:latest"
PREFIX = "llmops-bench-"
# A value the monitoring role refuses: before this collection checked inputs on the controller, it
# failed only after preflight had read the host.
BAD_INPUT = {"monitoring_vllm_kv_cache_usage_max": 1.5}


def sh(argv, **kw):
    return subprocess.run(argv, check=True, **kw)


def podman(*args, check=True):
    env = dict(os.environ, CONTAINERS_CONF=os.path.join(CACHE, "containers.conf"))
    return subprocess.run(["podman"] + list(args), check=check, env=env, capture_output=True, text=True)


def host_names(count):
    suffix = os.environ.get("LLMOPS_HOST_SUFFIX", "")
    return ["%s%d%s" % (PREFIX, i, suffix) for i in range(1, count + 1)]


def apt_archive(i):
    """A .deb folder per host (apt locks its archive folder), hard links to the suite's shared .debs."""
    shared = os.path.join(CACHE, "apt-archives", "bookworm")
    own = os.path.join(CACHE, "apt-archives", "bookworm-bench%d" % i)
    os.makedirs(os.path.join(own, "partial"), exist_ok=True)
    os.makedirs(shared, exist_ok=True)
    for name in os.listdir(shared):
        if name.endswith(".deb") and not os.path.exists(os.path.join(own, name)):
            os.link(os.path.join(shared, name), os.path.join(own, name))
    return own


def fresh_hosts(names):
    for i, name in enumerate(names, 1):
        podman("rm", "-f", "-t", "5", name, check=False)
        podman("run", "-d", "--name", name, "--hostname", name, "--systemd", "always", "--cap-add", "SYS_ADMIN",
               "--shm-size", "2g",
               "-v", "%s/wheelhouse/cpu:/srv/llmops/wheelhouse:ro" % CACHE,
               "-v", "%s/uv:/var/cache/llmops/uv" % CACHE,
               "-v", "%s:/var/cache/apt/archives" % apt_archive(i),
               IMAGE, "/sbin/init")
    for name in names:
        for dummy in range(100):
            state = podman("exec", name, "systemctl", "is-system-running", check=False).stdout.strip()
            if state in ("running", "degraded"):
                break
            time.sleep(0.2)


def remove_hosts(names):
    for name in names:
        podman("rm", "-f", "-t", "5", name, check=False)


def inventory(tree, names):
    """The demo's inventory for these hosts, its relative paths made absolute for the tree."""
    inv = os.path.join(WORK, "inventory-%s" % os.path.basename(tree.rstrip("/")))
    shutil.rmtree(inv, ignore_errors=True)
    os.makedirs(os.path.join(inv, "group_vars", "llm_servers"))
    demo_vars = os.path.join(tree, "inventories", "demo", "group_vars", "llm_servers")
    for name in os.listdir(demo_vars):
        with open(os.path.join(demo_vars, name)) as src:
            group_vars = src.read().replace("{{ inventory_dir }}/../..", tree)
        with open(os.path.join(inv, "group_vars", "llm_servers", name), "w") as out:
            out.write(group_vars)
    hosts = dict((n, {"ansible_connection": "llmops_podman", "ansible_python_interpreter": "/usr/bin/python3"})
                 for n in names)
    with open(os.path.join(inv, "hosts.yml"), "w") as out:
        json.dump({"all": {"children": {"llm_servers": {"hosts": hosts}}}}, out, indent=1)
    return inv


def secrets():
    path = os.path.join(WORK, "secrets.json")
    if not os.path.exists(path):
        os.makedirs(WORK, exist_ok=True)
        with open(path, "w") as out:
            json.dump({"serving_api_key": os.urandom(24).hex(),
                       "gateway_api_keys": [{"name": "bench", "key": os.urandom(24).hex()}]}, out)
        os.chmod(path, 0o600)
    return path


def collections_path(tree):
    """A collections root whose llmops/serving is the tree, then the dependency collections."""
    root = os.path.join(WORK, "collections-%s" % os.path.basename(tree.rstrip("/")))
    link = os.path.join(root, "ansible_collections", "llmops", "serving")
    os.makedirs(os.path.dirname(link), exist_ok=True)
    if os.path.islink(link):
        os.unlink(link)
    os.symlink(tree, link)
    return "%s:%s" % (root, os.path.join(CACHE, "collections"))


def playbook(tree, inv, label, case, limit, extra_args=(), expect_fail=False, engine="vllm"):
    cost = os.path.join(WORK, "cost.jsonl")
    env = dict(os.environ,
               ENGINE=engine,
               ANSIBLE_CONFIG=os.path.join(tree, "ansible.cfg"),
               ANSIBLE_COLLECTIONS_PATH=collections_path(tree),
               ANSIBLE_CONNECTION_PLUGINS=os.path.join(ROOT, "tests", "harness", "connection_plugins"),
               # the checkout's callback measures both trees the same way
               ANSIBLE_CALLBACK_PLUGINS=os.path.join(ROOT, "plugins", "callback"),
               ANSIBLE_CALLBACKS_ENABLED="run_cost",
               LLMOPS_RUN_COST_FILE=cost,
               LLMOPS_RUN_COST_LABEL=json.dumps({"tree": label, "case": case, "hosts": len(limit)}),
               CONTAINERS_CONF=os.path.join(CACHE, "containers.conf"),
               # a podman exec per remote call, as the figures before were measured: entering the
               # hosts' namespaces (tests/harness/podman_enter.py) would make the modules on the
               # hosts the controller's own children, and their CPU the controller's
               LLMOPS_PODMAN_NSENTER="0",
               ANSIBLE_FORCE_COLOR="0",
               PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
    argv = [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", inv, os.path.join(tree, "playbooks", "site.yml"), "-e", "@" + secrets(),
            "--limit", ",".join(limit)] + list(extra_args)
    before = os.path.getsize(cost) if os.path.exists(cost) else 0
    run = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    log = os.path.join(WORK, "%s-%s-%d.log" % (label, case, len(limit)))
    with open(log, "w") as out:
        out.write(run.stdout + run.stderr)
    with open(cost) as handle:
        handle.seek(before)
        lines = [json.loads(line) for line in handle if line.strip()]
    figures = lines[-1] if lines else {}
    changed = figures.get("results", {}).get("changed")
    figures.update(tree=label, case=case, hosts=len(limit), rc=run.returncode, log=log)
    ok = (run.returncode != 0) if expect_fail else (run.returncode == 0)
    if not ok:
        figures["problem"] = "rc %d (expected %s)" % (run.returncode, "a failure" if expect_fail else "0")
    elif case in ("rerun", "tags_engine", "reruns") and changed:
        figures["problem"] = "changed=%s on a converged host" % changed
    print("%-8s %-12s %d host(s): %4s tasks, %4s remote, wall %6.1f s, CPU %6.1f s%s" % (
        label, case, len(limit), figures.get("tasks"), figures.get("remote"), figures.get("wall_s", 0),
        figures.get("cpu_s", 0), "  PROBLEM: " + figures["problem"] if "problem" in figures else ""), flush=True)
    return figures


def measure(tree, label, counts, reruns, engine):
    names = host_names(max(counts))
    fresh_hosts(names)
    inv = inventory(tree, names)
    runs = [playbook(tree, inv, label, "first", names, engine=engine)]
    if runs[0]["rc"] != 0:
        return runs
    for n in counts:
        hosts = names[:n]
        runs.append(playbook(tree, inv, label, "rerun", hosts, engine=engine))
        runs.append(playbook(tree, inv, label, "tags_engine", hosts, ["--tags", "engine"], engine=engine))
        runs.append(playbook(tree, inv, label, "bad_input", hosts, ["-e", json.dumps(BAD_INPUT)], expect_fail=True,
                             engine=engine))
    for dummy in range(reruns):
        runs.append(playbook(tree, inv, label, "reruns", names[:1], engine=engine))
    return runs


def worktree(rev):
    path = os.path.join(WORK, "tree-%s" % rev[:12])
    if not os.path.isdir(path):
        sh(["git", "-C", ROOT, "worktree", "add", "--detach", path, rev], capture_output=True)
    return path


def table(runs):
    rows = ["| tree | case | hosts | tasks | tasks/host | remote | wall s | CPU s | CPU s/host | rc |",
            "|---|---|---|---|---|---|---|---|---|---|"]
    for r in runs:
        n = max(r["hosts"], 1)
        rows.append("| %s | %s | %d | %s | %s | %s | %.1f | %.1f | %.1f | %s%s |" % (
            r["tree"], r["case"], r["hosts"], r.get("tasks"), (r.get("tasks") or 0) // n, r.get("remote"),
            r.get("wall_s", 0), r.get("cpu_s", 0), r.get("cpu_s", 0) / n, r["rc"],
            " (%s)" % r["problem"] if "problem" in r else ""))
    return "\n".join(rows)


def fit(points):
    """Least squares of y = fixed + per_host * hosts over [(hosts, y)]: (fixed, per_host)."""
    n = len(points)
    mean_x = sum(x for x, dummy in points) / float(n)
    mean_y = sum(y for dummy, y in points) / float(n)
    spread = sum((x - mean_x) ** 2 for x, dummy in points)
    per_host = sum((x - mean_x) * (y - mean_y) for x, y in points) / spread if spread else 0.0
    return mean_y - per_host * mean_x, per_host


def curve(runs, tree, case, fleet=1000, cores=2):
    """How a case's cost grows with the hosts of one run (all at once: forks >= hosts), and what a
    fleet of `fleet` hosts would cost the controller on that line. Controller CPU is the bound: a
    run cannot take less wall time than its CPU seconds over the controller's cores. None with
    fewer than two host counts."""
    points = sorted(((r["hosts"], r) for r in runs if r["tree"] == tree and r["case"] == case and "problem" not in r
                     and r.get("cpu_s") is not None), key=lambda point: point[0])
    if len(set(h for h, dummy in points)) < 2:
        return None
    cpu_fixed, cpu_per_host = fit([(h, r["cpu_s"]) for h, r in points])
    wall_fixed, wall_per_host = fit([(h, r["wall_s"]) for h, r in points])
    cpu = cpu_fixed + cpu_per_host * fleet
    return {"tree": tree, "case": case, "hosts": [h for h, dummy in points],
            "cpu_s_per_host": [round(r["cpu_s"] / h, 2) for h, r in points],
            "cpu_fixed_s": round(cpu_fixed, 2), "cpu_per_extra_host_s": round(cpu_per_host, 2),
            "wall_fixed_s": round(wall_fixed, 2), "wall_per_extra_host_s": round(wall_per_host, 2),
            "fleet": fleet, "fleet_cpu_s": round(cpu, 1), "fleet_cores": cores,
            "fleet_wall_floor_s": round(cpu / cores, 1)}


def curve_text(curves):
    rows = ["| tree | case | hosts | CPU s/host | CPU s fixed | CPU s per extra host | wall s per extra host "
            "| %s hosts: controller CPU s | wall floor on %s cores |" % (curves[0]["fleet"], curves[0]["fleet_cores"]),
            "|---|---|---|---|---|---|---|---|---|"]
    for c in curves:
        rows.append("| %s | %s | %s | %s | %.1f | %.2f | %.2f | %.0f | %.0f s (%.1f h) |" % (
            c["tree"], c["case"], ",".join(str(h) for h in c["hosts"]), ", ".join(str(x) for x in c["cpu_s_per_host"]),
            c["cpu_fixed_s"], c["cpu_per_extra_host_s"], c["wall_per_extra_host_s"], c["fleet_cpu_s"],
            c["fleet_wall_floor_s"], c["fleet_wall_floor_s"] / 3600.0))
    return "\n".join(rows)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--hosts", default="1", help="host counts, comma-separated (1,2,4)")
    parser.add_argument("--before", default="", help="a commit to measure first (checked out beside the checkout)")
    parser.add_argument("--after", default="", help="a commit to measure in place of the checkout (checked out beside it)")
    parser.add_argument("--skip-after", action="store_true", help="measure --before only")
    parser.add_argument("--reruns", type=int, default=0, help="converged re-runs in a row on one host")
    parser.add_argument("--engine", default="vllm", choices=["vllm", "sglang"])
    parser.add_argument("--out", default="", help="results name under bench/results (default converge-<date>)")
    parser.add_argument("--keep", action="store_true", help="keep the hosts at the end")
    args = parser.parse_args()
    counts = sorted(set(int(c) for c in args.hosts.split(",")))
    os.makedirs(WORK, exist_ok=True)
    trees = [(args.before[:12], worktree(args.before))] if args.before else []
    if not args.skip_after:
        trees.append((args.after[:12], worktree(args.after)) if args.after else ("checkout", ROOT))
    head = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short=12", "HEAD"], capture_output=True,
                          text=True, check=True).stdout.strip()
    dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"], capture_output=True,
                           text=True, check=True).stdout.strip()
    runs = []
    try:
        for label, tree in trees:
            runs += measure(tree, label, counts, args.reruns, args.engine)
    finally:
        if not args.keep:
            remove_hosts(host_names(max(counts)))
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%d")
    meta = {"date": stamp, "checkout": head + (" (with uncommitted changes)" if dirty else ""),
            "before": args.before, "after": args.after or "checkout", "engine": args.engine, "cores": os.cpu_count(),
            "command": " ".join([".venv/bin/python", "bench/converge/run.py"] + sys.argv[1:])}
    out = os.path.join(ROOT, "bench", "results", args.out or "converge-%s" % stamp)
    curves = [c for c in (curve(runs, label, case, cores=os.cpu_count()) for label, dummy in trees
                          for case in ("first", "rerun", "tags_engine", "bad_input")) if c]
    with open(out + ".json", "w") as handle:
        json.dump({"meta": meta, "runs": runs, "curves": curves}, handle, indent=1, sort_keys=True)
    text = "# site.yml run cost (%s)\n\n`%s` at %s, %d cores, engine %s.\n\n%s\n" % (
        stamp, meta["command"], meta["checkout"], meta["cores"], args.engine, table(runs))
    if curves:
        text += ("\n## Cost per host as the hosts grow (one run, forks >= hosts)\n\n%s\n\nA straight line through "
                 "each case's runs; the last columns extend it to a fleet. The controller's CPU bounds a run from "
                 "below: its CPU seconds over the controller's cores.\n" % curve_text(curves))
    with open(out + ".md", "w") as handle:
        handle.write(text)
    print(text)
    return 1 if any("problem" in r for r in runs) else 0


if __name__ == "__main__":
    sys.exit(main())
