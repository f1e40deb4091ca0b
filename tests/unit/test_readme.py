# -*- coding: utf-8 -*-
# Copyright: llmops.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The command blocks of README.md and docs/*.md, run on the controller as a user runs them: the
collection built and installed from its tarball (its community.general dependency from a local
stand-in of the user's mirror: the cached copy, as a directory source), every ansible-playbook
command resolved and syntax-checked from the installed copy (```console blocks too, whose values
are examples), every make command's target dry-run. Against a
converged host the ansible-playbook commands run for real in tests/integration/test_readme.py;
`make test` is CI's own command and `make demo` / `make demo-down` are run by hand (their
recipes are dry-run here, so a renamed or broken target fails)."""
import glob
import os
import shlex
import subprocess
import sys
import tarfile

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "harness"))
import readme_commands  # noqa: E402  pylint: disable=wrong-import-position

COMMANDS = readme_commands.commands()
# with the ```console blocks: upgrade.yml, rollback.yml and tune.yml as a user gives them
EXAMPLES = readme_commands.commands(langs=("sh", "console"))
BIN = os.path.dirname(sys.executable)
CACHE = os.environ.get("LLMOPS_CACHE", os.path.expanduser("~/.cache/llmops-serving"))
KINDS = ("ansible-galaxy", "ansible-playbook", "make")


def program(argv):
    return [w for w in argv if "=" not in w or w.startswith("-")][0]


def test_every_readme_command_is_run_by_a_test():
    assert COMMANDS, "README.md has no ```sh block"
    unclaimed = ["%s: %s" % (where, " ".join(argv)) for where, argv in EXAMPLES if program(argv) not in KINDS]
    assert not unclaimed, "no test runs these README commands: %s" % unclaimed


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """The README's install commands, in order, in an empty folder: (folder, environment)."""
    work = tmp_path_factory.mktemp("readme-install")
    with open(os.path.join(ROOT, "galaxy.yml")) as f:
        galaxy = yaml.safe_load(f)
    requirements = yaml.safe_load(readme_commands.yaml_block("# requirements.yml"))
    # the user's Galaxy or mirror: here the copy the Makefile installed, as a directory source
    source = glob.glob(os.path.join(CACHE, "collections", "ansible_collections", "community", "general"))
    assert source, "no cached community.general under %s" % CACHE
    for entry in requirements["collections"]:
        if entry["name"] == "community.general":
            entry.update(name=source[0], type="dir")
            entry.pop("version", None)
    with open(os.path.join(str(work), "requirements.yml"), "w") as f:
        yaml.safe_dump(requirements, f)
    # a user's controller: no developer ansible.cfg, only the collections just installed
    with open(os.path.join(str(work), "ansible.cfg"), "w") as f:
        f.write("[defaults]\n")
    env = dict(os.environ, PATH=BIN + os.pathsep + os.environ["PATH"], ANSIBLE_COLLECTIONS_PATH=str(work / "collections"),
               ANSIBLE_CONFIG=os.path.join(str(work), "ansible.cfg"))
    # The controller already has community.general, from the user's Galaxy or mirror (here the
    # stand-in): without Galaxy, the tarball's own install resolves its dependency from it.
    res = subprocess.run(["ansible-galaxy", "collection", "install", "--offline", "-p", "./collections", source[0]],
                         cwd=str(work), env=env, capture_output=True, text=True, check=False)
    assert res.returncode == 0, res.stdout + res.stderr
    runs = []
    for where, argv in COMMANDS:
        if program(argv) != "ansible-galaxy":
            continue
        # "in a checkout": the checkout is the repository; the README's '.' is it
        argv = [ROOT if w == "." else w for w in argv]
        if "install" in argv:
            argv = argv + ["--offline"]
        res = subprocess.run(" ".join(shlex.quote(w) if "*" not in w else w for w in argv), shell=True,
                             cwd=str(work), env=env, capture_output=True, text=True, check=False)
        assert res.returncode == 0, "%s: %s\n%s" % (where, " ".join(argv), res.stdout + res.stderr)
        runs.append(argv)
    assert any("build" in a for a in runs) and any("-r" in a for a in runs), runs
    tarball = os.path.join(str(work), "dist", "%s-%s-%s.tar.gz" % (galaxy["namespace"], galaxy["name"], galaxy["version"]))
    assert requirements["collections"][0]["name"] == os.path.relpath(tarball, str(work)), (
        "README's requirements.yml names %s; the build writes %s" % (requirements["collections"][0]["name"], tarball))
    return work, env, tarball


def test_the_tarball_carries_what_users_run_and_no_test_scaffolding(installed):
    dummy, dummy_env, tarball = installed
    with tarfile.open(tarball) as t:
        names = [m.name for m in t.getmembers() if m.isfile()]
    tops = sorted(set(n.split("/")[0] for n in names))
    assert {"roles", "plugins", "playbooks", "stacks", "templates", "meta", "README.md", "COPYING"} <= set(tops), tops
    assert not [n for n in names if n.split("/")[0] in ("tests", "molecule", ".cache", ".venv", ".ansible")
                or "__pycache__" in n or n.startswith("inventories/demo")], tops
    # playbooks/benchmark.yml runs the load generator from the collection
    assert "bench/loadgen/llmops_loadgen.py" in names and not [n for n in names if n.startswith("bench/results")]


@pytest.mark.parametrize("where, argv", [c for c in EXAMPLES if program(c[1]) == "ansible-playbook"],
                         ids=[c[0] for c in EXAMPLES if program(c[1]) == "ansible-playbook"])
def test_each_playbook_command_resolves_from_the_installed_collection(installed, where, argv):
    work, env, dummy = installed
    # the inventory the README names is the repository's (it ships in the tarball too)
    argv = [os.path.join(ROOT, w) if w.startswith("inventories/") else w for w in argv]
    res = subprocess.run(argv + ["--syntax-check"], cwd=str(work), env=env, capture_output=True, text=True,
                         check=False)
    assert res.returncode == 0, "%s: %s\n%s" % (where, " ".join(argv), res.stdout + res.stderr)
    book = [w for w in argv if w.startswith("llmops.serving.")][0]
    assert os.path.isfile(os.path.join(str(work), "collections", "ansible_collections", "llmops", "serving",
                                       "playbooks", book.split(".")[-1] + ".yml")), book


@pytest.mark.parametrize("where, argv", [c for c in COMMANDS if program(c[1]) == "make"],
                         ids=[c[0] for c in COMMANDS if program(c[1]) == "make"])
def test_each_make_command_has_a_target_whose_recipe_resolves(where, argv):
    env = dict(os.environ)
    words = list(argv)
    while "=" in words[0]:
        key, value = words.pop(0).split("=", 1)
        env[key] = value
    # -n: the recipe is printed, not run; -q alone would only say whether it is up to date
    res = subprocess.run(words[:1] + ["-n"] + words[1:], cwd=ROOT, env=env, capture_output=True, text=True,
                         check=False)
    assert res.returncode == 0, "%s: %s\n%s" % (where, " ".join(argv), res.stdout + res.stderr)
    assert res.stdout.strip(), "%s: make -n %s printed no recipe" % (where, " ".join(words[1:]))
