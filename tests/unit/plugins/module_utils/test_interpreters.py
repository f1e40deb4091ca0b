# -*- coding: utf-8 -*-
# Copyright: llmops.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Where a host gets its stack profile's Python (module_utils/interpreters.py, the filter over it),
and docs/stack-profiles.md's matrix of OS × profile, which must say what the code picks."""
import os
import re

import pytest
import yaml

from ansible_collections.llmops.serving.plugins.filter.interpreter_choice import interpreter_choice
from ansible_collections.llmops.serving.plugins.module_utils import interpreters as I

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
with open(os.path.join(REPO, "stacks", "profiles.yml")) as _f:
    PROFILES = yaml.safe_load(_f)["serving_stack_profiles"]
with open(os.path.join(REPO, "roles", "python_env", "defaults", "main.yml")) as _f:
    DEFAULTS = yaml.safe_load(_f)
BUILDS = DEFAULTS["python_env_interpreter_builds"]
MIRROR = DEFAULTS["python_env_interpreter_mirror"]
# Ansible's facts for one host of each OS of the matrix: (os_family, distribution, major version).
HOSTS = {
    "debian12": ("Debian", "Debian", "12"),
    "debian13": ("Debian", "Debian", "13"),
    "ubuntu22": ("Debian", "Ubuntu", "22"),
    "ubuntu24": ("Debian", "Ubuntu", "24"),
    "rhel9": ("RedHat", "Rocky", "9"),
}


def choose(python, key, present="", mode="auto", arch="x86_64", builds=None):
    return I.resolve(python, mode, key, present, arch, BUILDS if builds is None else builds, MIRROR,
                     profile_name="p", profiles=PROFILES, host="h1")


@pytest.mark.parametrize("facts,key", [
    (("Debian", "Debian", "12"), "debian12"), (("Debian", "Debian", "13"), "debian13"),
    (("Debian", "Ubuntu", "22"), "ubuntu22"), (("Debian", "Ubuntu", "24"), "ubuntu24"),
    (("RedHat", "RedHat", "9"), "rhel9"), (("RedHat", "AlmaLinux", "9"), "rhel9"),
    (("RedHat", "CentOS", "9"), "rhel9"),
    # a supported family, a release outside the matrix: no OS packages known, the host's or standalone
    (("Debian", "Debian", "14"), None), (("RedHat", "Rocky", "8"), None),
])
def test_os_key_from_ansible_facts(facts, key):
    assert I.os_key(*facts) == key


@pytest.mark.parametrize("family,distribution", [("Suse", "openSUSE Leap"), ("Archlinux", "Archlinux"), ("Alpine", "Alpine")])
def test_an_unsupported_os_family_is_named(family, distribution):
    with pytest.raises(I.InterpreterError) as err:
        I.os_key(family, distribution, "15")
    assert "%s 15 (os_family %s) is not a supported OS family" % (distribution, family) in str(err.value)
    assert "RHEL 9 family" in str(err.value)


def test_the_os_package_comes_first_also_where_it_is_installed():
    # the same choice before and after the first run installs it
    for present in ("", "Python 3.11.2"):
        choice = choose("3.11", "debian12", present=present)
        assert (choice["source"], choice["interpreter"]) == ("os-package", "python3.11")
        assert choice["packages"] == ["python3.11", "python3.11-venv"]
    choice = choose("3.12", "rhel9")
    assert (choice["source"], choice["packages"]) == ("os-package", ["python3.12"])
    assert choice["summary"] == "python3.12 from RHEL 9 family's packages (python3.12)"


def test_a_python_the_site_installed_is_used_where_the_os_has_no_package():
    choice = choose("3.11", "debian13", present="Python 3.11.9")
    assert (choice["source"], choice["interpreter"], choice["packages"]) == ("system", "python3.11", [])
    assert choice["summary"] == "the host's own python 3.11.9"
    # outside the matrix too (a newer Debian): no OS table, the host's own interpreter
    assert choose("3.11", None, present="Python 3.11.9")["source"] == "system"


def test_debian13_gets_the_pinned_standalone_build_from_the_release_mirror():
    choice = choose("3.11", "debian13", present="")
    build = choice["build"]
    assert choice["source"] == "standalone"
    # the very URL and checksum of uv's download metadata for this build
    assert build["url"] == ("https://github.com/astral-sh/python-build-standalone/releases/download/20260814/"
                            "cpython-3.11.16%2B20260814-x86_64-unknown-linux-gnu-install_only_stripped.tar.gz")
    assert build["sha256"] == "3b437f08720d3ddd9c1904532476ec9fb373e800d1598c72c907dd6d5f29b79b"
    assert build["filename"] == "cpython-3.11.16+20260814-x86_64-unknown-linux-gnu-install_only_stripped.tar.gz"
    assert choice["interpreter"] == "/opt/llmops/python/cpython-3.11.16+20260814/bin/python3.11"
    assert choose("3.12", "ubuntu22", arch="aarch64")["build"]["sha256"].startswith("2d8e17df")


def test_standalone_is_taken_even_where_the_os_has_the_python_when_asked():
    assert choose("3.11", "debian12", present="Python 3.11.2", mode="standalone")["source"] == "standalone"


def test_system_never_downloads_and_says_what_to_do():
    with pytest.raises(I.InterpreterError) as err:
        choose("3.11", "debian13", mode="system")
    msg = str(err.value)
    assert "Stack profile 'p' needs Python 3.11" in msg and "python_env_interpreter is system" in msg
    assert "h1 has no python3.11" in msg and "Debian 13's packages do not provide it" in msg
    assert "python_env_interpreter_builds['3.11']" in msg and "python_env_interpreter to auto or standalone" in msg


def test_no_build_for_the_architecture_lists_the_options():
    builds = {"3.12": {"version": "3.12.14", "release": "20260814", "sha256": {"x86_64": "ab" * 32}}}
    with pytest.raises(I.InterpreterError) as err:
        choose("3.12", "debian13", arch="aarch64", builds=builds)
    msg = str(err.value)
    assert "python_env_interpreter_builds has no 3.12 build for aarch64" in msg
    assert "install python3.12 on the host yourself and set python_env_interpreter: system" in msg
    # Ubuntu 24.04 ships 3.12: the profiles built for it are named as a way out
    with pytest.raises(I.InterpreterError) as err:
        choose("3.11", "ubuntu24", builds={})
    assert "choose a serving_stack whose Python Ubuntu 24.04 ships (cuda12.8, cuda13.0)" in str(err.value)


def test_the_profile_limits_the_sources():
    # a profile whose locks were only proven on the OS's own interpreters never downloads one
    with pytest.raises(I.InterpreterError) as err:
        I.resolve("3.11", "auto", "debian13", "", "x86_64", BUILDS, MIRROR, profile_name="cpu", allowed=["system", "os-package"])
    assert "stack profile 'cpu' leaves standalone builds out (python_sources: system, os-package)" in str(err.value)
    with pytest.raises(I.InterpreterError, match="python_env_interpreter is standalone, and stack profile 'cpu' allows only system"):
        I.resolve("3.11", "standalone", "debian12", "", "x86_64", BUILDS, MIRROR, profile_name="cpu", allowed=["system"])
    with pytest.raises(I.InterpreterError, match="python_sources names conda"):
        I.resolve("3.11", "auto", "debian12", "", "x86_64", BUILDS, MIRROR, profile_name="cpu", allowed=["conda"])
    # standalone only: even a host that has the Python gets the build
    assert I.resolve("3.11", "auto", "debian12", "Python 3.11.2", "x86_64", BUILDS, MIRROR,
                     allowed=["standalone"])["source"] == "standalone"
    # system only: the host's own, not its OS's package
    assert I.resolve("3.11", "auto", "debian12", "Python 3.11.2", "x86_64", BUILDS, MIRROR,
                     allowed=["system"])["source"] == "system"


def test_a_mode_outside_the_choices_is_refused():
    with pytest.raises(I.InterpreterError, match="python_env_interpreter is 'conda': use one of auto, system, os-package, standalone"):
        choose("3.11", "debian12", mode="conda")


def test_the_filter_returns_the_error_instead_of_raising():
    out = interpreter_choice({"python": "3.11", "mode": "auto", "os_family": "Suse", "distribution": "SLES",
                              "major_version": "15", "builds": BUILDS, "mirror": MIRROR})
    assert list(out) == ["error"] and "SLES 15 (os_family Suse)" in out["error"]
    ok = interpreter_choice({"python": "3.12", "mode": "auto", "os_family": "Debian", "distribution": "Ubuntu",
                             "major_version": 24, "present": "Python 3.12.3", "builds": BUILDS, "mirror": MIRROR})
    assert ok["source"] == "os-package" and ok["python"] == "3.12"


def test_every_profile_resolves_an_interpreter_and_its_locks_on_every_os():
    rows = I.matrix(PROFILES, BUILDS)
    assert len(rows) == len(I.OS_PYTHONS) * len(PROFILES)
    for (key, name), source in rows.items():
        assert source in I.SOURCES
        # and the profile has a lock for each engine, for the Python the interpreter has
        for engine in PROFILES[name]["engines"].values():
            assert os.path.isfile(os.path.join(REPO, "stacks", "locks", engine["lock"])), (key, name, engine["lock"])
        # every architecture the builds carry resolves too where the OS lacks the Python
        for arch in ("x86_64", "aarch64"):
            facts = HOSTS[key]
            assert "error" not in interpreter_choice({"python": PROFILES[name]["python"], "os_family": facts[0],
                                                      "distribution": facts[1], "major_version": facts[2],
                                                      "arch": arch, "builds": BUILDS, "mirror": MIRROR})


def _readme_matrix():
    with open(os.path.join(REPO, "docs", "stack-profiles.md")) as f:
        text = f.read()
    section = text.split("## Operating systems × stack profiles", 1)[1].split("\n## ", 1)[0]
    lines = [l for l in section.splitlines() if l.startswith("| ")]
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    columns = [re.findall(r"`([^`]+)`", c) for c in header[2:]]
    table = {}
    for line in lines[1:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        table[cells[0]] = dict(zip(range(len(columns)), cells[2:]))
    return columns, table


def test_readme_matrix_says_what_the_code_picks():
    columns, table = _readme_matrix()
    names = {v[0]: k for k, v in I.OS_PYTHONS.items()}
    assert set(table) == set(names), "one row of docs/stack-profiles.md per OS of OS_PYTHONS"
    assert sorted(p for c in columns for p in c) == sorted(PROFILES), "every profile in exactly one column"
    rows = I.matrix(PROFILES, BUILDS)
    for os_name, cells in table.items():
        for i, profiles in enumerate(columns):
            source, tested = re.match(r"([a-z-]+): ([a-z-]+)", cells[i]).groups()
            assert tested in ("real", "stand-in", "unit", "untested"), (os_name, cells[i])
            for profile in profiles:
                assert rows[(names[os_name], profile)] == source, (os_name, profile, source)
