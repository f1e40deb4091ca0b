"""The playbook commands of README.md and docs/*.md, and each documented tag alone, against the
converged host.

- Every ansible-playbook command of their ```sh blocks runs here with the scenario's
  inventory in place of the one the README names (on a switched-engine leg, `site --check --diff`
  and `validate` only), in check mode where it would change hosts
  (tests/unit/test_readme.py runs the install commands and resolves the same commands from the
  installed tarball): each passes and predicts no change. A command that another one runs with
  --diff added runs once, as that one.
- Each tag README.md lists for site.yml runs alone in check mode: each passes with changed=0
  (what each tag selects is tests/unit/test_tags.py, from --list-tasks).
  A tag alone that dropped a flag of the full run, lost a fact another role set, or notified a
  handler it does not have would change the unit (or fail) here. upgrade.yml's
  `prebuild` and `upgrade` run alone in check mode; `rollback` needs a previous venv, and the fleet
  scenario runs it (tests/integration/fleet/test_fleet.py). ray_cluster.yml's tags run alone in normal
  mode (this host is in no Ray instance: changed=0).
Enabled by LLMOPS_RERUN=1 in the scenario's verifier env.
"""
import concurrent.futures
import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "harness"))
import readme_commands  # noqa: E402  pylint: disable=wrong-import-position

pytestmark = pytest.mark.skipif(os.environ.get("LLMOPS_RERUN") != "1", reason="scenario does not re-run site.yml")

CHANGING = ("llmops.serving.site", "llmops.serving.upgrade", "llmops.serving.rollback")
# Runs at once: each is an ansible-playbook of its own, and the test machine has two cores.
WORKERS = 4
# Runs in normal mode at once (they may change the host if something is wrong).
NORMAL_WORKERS = 2


def inventory():
    return os.path.dirname(os.environ["MOLECULE_INVENTORY_FILE"])


def run(argv):
    res = subprocess.run(argv, capture_output=True, text=True, timeout=900, check=False,
                         env=dict(os.environ, ANSIBLE_FORCE_COLOR="0"))
    return res.returncode, res.stdout + res.stderr


def changed(out):
    """The PLAY RECAP's changed= count of each host."""
    return dict(re.findall(r"^(\S+)\s+: ok=\d+\s+changed=(\d+)", out, re.M))


def as_here(argv):
    """The README command with this scenario's inventory, in check mode where it changes hosts."""
    out = list(argv)
    if "-i" in out:
        out[out.index("-i") + 1] = inventory()
    if any(w in CHANGING for w in out) and "--check" not in out:
        out.append("--check")
    return out


def failures(results):
    bad = []
    for what, (rc, out) in results.items():
        counts = changed(out)
        if rc != 0 or not counts or any(c != "0" for c in counts.values()):
            bad.append("%s: rc %s, changed %s\n%s" % (what, rc, counts, out[-2500:]))
    return bad


def distinct(cmds):
    """The commands less those another one runs in full: a command with --diff added is the same
    check-mode run that also prints its diff (the README's `site`, run here in check mode, is its
    `site --check --diff` without the diff)."""
    runs = [c for dummy, c in cmds]
    return [(n, c) for n, c in cmds
            if "--diff" in c or not any(sorted(c + ["--diff"]) == sorted(other) for other in runs)]


def whole_flow_check(argv):
    return "llmops.serving.site" in argv and "--check" in argv and "--diff" in argv and "--tags" not in argv


def test_readme_playbook_commands_pass_and_predict_no_change():
    cmds = distinct([(n, as_here(argv)) for n, argv in readme_commands.commands() if argv[0] == "ansible-playbook"])
    assert any(whole_flow_check(c) for dummy, c in cmds), (
        "README.md shows no `site --check --diff`: the check-mode test of the whole flow is this one")
    if os.environ.get("LLMOPS_SWITCHED_LEG") == "1":
        # The switched leg repeats what depends on the serving engine: the whole flow in check mode
        # and validate; the first leg ran the rest on the same hosts.
        cmds = [(n, c) for n, c in cmds if whole_flow_check(c) or "llmops.serving.validate" in c]
    with concurrent.futures.ThreadPoolExecutor(max_workers=WORKERS) as pool:
        futures = dict(("%s: %s" % (n, " ".join(c[1:])), pool.submit(run, c)) for n, c in cmds)
        results = dict((k, f.result()) for k, f in futures.items())
    bad = failures(results)
    assert not bad, "\n\n".join(bad)


@pytest.mark.engine_independent
def test_each_documented_tag_alone_predicts_no_change():
    tags = readme_commands.tags()
    assert set(tags) == {"site", "upgrade", "ray_cluster"} and len(tags["site"]) >= 10, tags
    site = os.path.join(ROOT, "playbooks", "site.yml")
    upgrade = os.path.join(ROOT, "playbooks", "upgrade.yml")
    every = dict(("site.yml --tags %s" % t, ["ansible-playbook", "-i", inventory(), site, "--tags", t])
                 for t in tags["site"])
    checks = dict((k + " --check", v + ["--check"]) for k, v in every.items())
    # Each tag alone in check mode: a tag that lost a fact another role sets, dropped a flag of the
    # full run or notified a handler it does not have predicts a change here. What each tag selects
    # is tests/unit/test_tags.py (--list-tasks); the hand-edit test (test_rerun.py) runs the changing
    # branches in normal mode.
    normal = {}
    # This host is in no instance on a Ray cluster: ray_cluster.yml's tags leave it as it is, which
    # one normal run each shows (the offline scenario runs the playbook on a cluster's hosts).
    normal.update(("ray_cluster.yml --tags %s" % t,
                   ["ansible-playbook", "-i", inventory(), os.path.join(ROOT, "playbooks", "ray_cluster.yml"), "--tags", t])
                  for t in tags["ray_cluster"])
    checks.update(("upgrade.yml --tags %s --check" % t, ["ansible-playbook", "-i", inventory(), upgrade, "--tags", t,
                                                         "--check"]) for t in tags["upgrade"] if t != "rollback")
    # Normal runs two at a time (each may restart what it owns if it is wrong, so fewer at once keeps
    # a wrong one's failure its own; apt waits for a lock another run holds); check runs four at once.
    with concurrent.futures.ThreadPoolExecutor(max_workers=NORMAL_WORKERS) as pool:
        futures = dict((k, pool.submit(run, v)) for k, v in normal.items())
        results = dict((k, f.result()) for k, f in futures.items())
    with concurrent.futures.ThreadPoolExecutor(max_workers=WORKERS) as pool:
        futures = dict((k, pool.submit(run, v)) for k, v in checks.items())
        results.update((k, f.result()) for k, f in futures.items())
    bad = failures(results)
    assert not bad, "\n\n".join(bad)
