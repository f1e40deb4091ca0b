"""What each documented tag of site.yml selects, read from ansible-playbook --list-tasks (no host is
contacted). A tag runs the input and host checks of the roles it runs and of no other role, and its
own tasks belong to those roles: `--tags T` validates only what T changes. The integration test runs
each tag alone, in check mode, on a converged host (tests/integration/test_readme.py)."""
import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "harness"))
import readme_commands  # noqa: E402  pylint: disable=wrong-import-position

# The roles each documented tag runs (the site.yml plays read by a reader of README.md's tag table).
ROLES = {
    "preflight": {"preflight"},
    "driver": {"nvidia_driver"},
    "cuda": {"cuda_toolkit"},
    "venv": {"python_env"},
    "kernels": {"sglang_kernels"},
    "weights": {"model_weights"},
    "tokenizer": {"tokenizer"},
    "engine": {"engine", "ray_cluster", "rollout"},
    "rollout": {"engine", "ray_cluster", "rollout"},
    "monitoring": {"monitoring"},
    "gateway": {"gateway"},
    "validate": {"validate"},
}
# Roles whose tasks every tag may list: the spec every role depends on.
SHARED = {"serving_spec"}


def list_tasks(*args):
    run = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", os.path.join(ROOT, "inventories", "demo"),
                          os.path.join(ROOT, "playbooks", "site.yml"), "--list-tasks"] + list(args),
                         capture_output=True, text=True, check=False, env=dict(os.environ, ANSIBLE_FORCE_COLOR="0"))
    assert run.returncode == 0, run.stdout + run.stderr
    return [line.strip() for line in run.stdout.splitlines() if "\tTAGS: [" in line]


# The plays of site.yml that check every role's inputs, then the host state the roles depend on.
CHECK_PLAYS = {"inputs": "Check the inputs before any host is contacted",
               "host": "Check the state of each host the roles depend on (read-only)"}


def checks_of(tasks, kind):
    """The roles with a task of their own listed in the play that checks `kind` (inputs or host)."""
    roles, play = set(), None
    for line in tasks:
        if line.startswith("play #"):
            play = line.split(": ", 1)[1].split("\t", 1)[0]
            continue
        m = re.match(r"^llmops\.serving\.(\w+) : ", line)
        if play == CHECK_PLAYS[kind] and m and m.group(1) not in SHARED:
            roles.add(m.group(1))
    return roles


def task_lines(tasks):
    """The listed tasks, without the play lines; a dependency Ansible runs once per play (the spec
    role, named by each role of the play) counts once per play."""
    out, play, seen = [], None, set()
    for line in tasks:
        if line.startswith("play #"):
            play = line
            continue
        if line.startswith("llmops.serving.serving_spec : "):
            if (play, line) in seen:
                continue
            seen.add((play, line))
        out.append(line)
    return out


def roles_with_own_tasks(tasks, tag):
    """Roles with a task listed for the tag itself (not only through `always`)."""
    out = set()
    for task in tasks:
        name, dummy, tags = task.rpartition("\tTAGS: ")
        m = re.match(r"^llmops\.serving\.(\w+) : ", name)
        if m and tag in tags and "Validating arguments" not in name:
            out.add(m.group(1))
    return out


def test_the_documented_tags_are_the_ones_checked_here():
    assert set(readme_commands.tags()["site"]) == set(ROLES)


@pytest.mark.parametrize("tag", sorted(ROLES))
def test_a_tag_checks_and_runs_only_its_roles(tag):
    tasks = list_tasks("--tags", tag)
    expected = ROLES[tag]
    inputs = checks_of(tasks, "inputs")
    assert inputs <= expected, "--tags %s checks the inputs of roles it does not run: %s" % (tag, sorted(inputs - expected))
    assert inputs or tag in ("preflight", "tokenizer"), "--tags %s checks no role's inputs" % tag
    assert checks_of(tasks, "host") <= expected
    own = roles_with_own_tasks(task_lines(tasks), tag)
    assert own, "--tags %s lists no task of its roles" % tag
    assert own <= expected | SHARED, "--tags %s runs tasks of %s" % (tag, sorted(own - expected - SHARED))


def test_a_tag_that_matches_nothing_runs_almost_nothing():
    """Only the always-tagged skeleton (the inventory check, the spec and each role's fact resolution).
    The watcher's play runs on dedicated gateway hosts alone (llm_gateways but not engine hosts): its
    skeleton is counted apart, as no engine host runs it."""
    tasks = list_tasks("--tags", "no-such-tag")
    assert not checks_of(tasks, "inputs") and not checks_of(tasks, "host")
    watcher, rest, play = [], [], None
    for line in tasks:
        if line.startswith("play #"):
            play = line
            rest.append(line)
            continue
        (watcher if "(llm_gateways:!" in play else rest).append(line)
    assert len(task_lines(rest)) < 80, "%d tasks listed for a tag that matches nothing" % len(task_lines(rest))
    assert len(watcher) <= 6, "the watcher's play lists %d tasks for a tag that matches nothing" % len(watcher)
