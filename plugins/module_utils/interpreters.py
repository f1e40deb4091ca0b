# -*- coding: utf-8 -*-
# Copyright: llmops.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which interpreter a host's engine venvs are built on.

A stack profile's locks are compiled for one Python (its ``python``). A host gets that Python in one
of three ways, tried in this order under ``python_env_interpreter: auto``:

- ``os-package``: the OS's own repositories carry it (``python3.11`` on Debian 12, ``python3.11`` and
  ``python3.12`` in RHEL 9's AppStream): python_env installs those packages (a no-op where they are);
- ``system``: the host has ``pythonX.Y`` on its PATH although its OS does not package it (built or
  installed by the site);
- ``standalone``: a relocatable CPython build (python-build-standalone's ``install_only_stripped``
  archives, the ones uv installs) from ``python_env_interpreter_mirror`` or the wheelhouse,
  checksum-pinned per version and architecture, unpacked under ``python_env_interpreter_root``.

The OS table below is the support matrix's: docs/stack-profiles.md's matrix is checked against ``matrix()``.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

try:
    from urllib.parse import quote
except ImportError:  # pragma: no cover - Python 2 is not a target
    from urllib import quote

SOURCES = ("system", "os-package", "standalone")
MODES = ("auto",) + SOURCES

# Operating systems the collection serves on: key -> (name, {python: OS packages that provide it}).
# The first Python listed is the OS's default python3. Debian's venv module is a package of its own.
OS_PYTHONS = {
    "debian12": ("Debian 12", {"3.11": ["python3.11", "python3.11-venv"]}),
    "debian13": ("Debian 13", {"3.13": ["python3.13", "python3.13-venv"]}),
    "ubuntu22": ("Ubuntu 22.04", {"3.10": ["python3.10", "python3.10-venv"]}),
    "ubuntu24": ("Ubuntu 24.04", {"3.12": ["python3.12", "python3.12-venv"]}),
    "rhel9": ("RHEL 9 family", {"3.9": ["python3"], "3.11": ["python3.11"], "3.12": ["python3.12"]}),
}
# Ansible's os_family values the roles have paths for.
OS_FAMILIES = ("Debian", "RedHat")


class InterpreterError(Exception):
    """No source can give the host the profile's Python; the message says what to change."""


def os_key(os_family, distribution, major_version):
    """The OS_PYTHONS key of a host from its Ansible facts; None for a version outside the matrix.

    Raises InterpreterError for an OS family the roles have no path for.
    """
    if os_family not in OS_FAMILIES:
        raise InterpreterError(
            "%s %s (os_family %s) is not a supported OS family: serving hosts run Debian 12/13, "
            "Ubuntu 22.04/24.04 or the RHEL 9 family (RHEL, Rocky, AlmaLinux, CentOS Stream)."
            % (distribution, major_version, os_family))
    if os_family == "RedHat":
        key = "rhel%s" % major_version
    else:
        key = "%s%s" % (str(distribution).lower(), major_version)
    return key if key in OS_PYTHONS else None


def build_filename(build, arch):
    return "cpython-%s+%s-%s-unknown-linux-gnu-install_only_stripped.tar.gz" % (build["version"], build["release"], arch)


def standalone_build(python, builds, arch, mirror, root):
    """The standalone build of `python` for `arch`, or None when `builds` has none."""
    build = (builds or {}).get(python)
    if not build or not (build.get("sha256") or {}).get(arch):
        return None
    filename = build_filename(build, arch)
    home = "%s/cpython-%s+%s" % (root.rstrip("/"), build["version"], build["release"])
    return {
        "version": build["version"],
        "release": build["release"],
        "arch": arch,
        "filename": filename,
        "sha256": build["sha256"][arch],
        # the mirror's layout is the release assets': <mirror>/<release>/<filename>, '+' quoted
        "url": "%s/%s/%s" % (mirror.rstrip("/"), quote(str(build["release"]), safe=""), quote(filename, safe="")),
        "home": home,
        "interpreter": "%s/bin/python%s" % (home, python),
    }


def _options(python, key, profiles):
    """What the user can do instead, for the error message."""
    options = ["set python_env_interpreter_builds['%s'] to a python-build-standalone release "
               "(version, release, sha256 per architecture) and python_env_interpreter to auto or standalone" % python]
    if key and profiles:
        shipped = OS_PYTHONS[key][1]
        fitting = sorted(name for name, p in profiles.items() if str(p.get("python")) in shipped)
        if fitting:
            options.append("choose a serving_stack whose Python %s ships (%s)" % (OS_PYTHONS[key][0], ", ".join(fitting)))
    options.append("install python%s on the host yourself and set python_env_interpreter: system" % python)
    return options


def resolve(python, mode="auto", key=None, present="", arch="x86_64", builds=None, mirror="", root="/opt/llmops/python",
            profile_name="", profiles=None, host="", allowed=SOURCES):
    """Pick the interpreter source for one host.

    python: the profile's Python ("3.11"); present: what ``pythonX.Y --version`` printed on the host
    ("" when it has none); key: os_key() of the host (None outside the matrix); allowed: the
    profile's ``python_sources`` (the sources its locks are known to work with).
    Returns {source, python, interpreter, packages, build, summary}; raises InterpreterError.
    """
    python = str(python)
    if mode not in MODES:
        raise InterpreterError("python_env_interpreter is %r: use one of %s." % (mode, ", ".join(MODES)))
    allowed = list(allowed or SOURCES)
    unknown = [a for a in allowed if a not in SOURCES]
    if unknown:
        raise InterpreterError("Stack profile '%s' python_sources names %s: use %s." % (
            profile_name, ", ".join(unknown), ", ".join(SOURCES)))
    if mode != "auto" and mode not in allowed and not (mode == "system" and "os-package" in allowed):
        raise InterpreterError("python_env_interpreter is %s, and stack profile '%s' allows only %s (its python_sources)." % (
            mode, profile_name, ", ".join(allowed)))
    present = present if "system" in allowed else ""
    packages = (OS_PYTHONS[key][1].get(python) if key else None) if "os-package" in allowed else None
    build = standalone_build(python, builds, arch, mirror, root) if "standalone" in allowed else None
    os_name = OS_PYTHONS[key][0] if key else "this OS"
    choice = None
    # The OS's package first, installed or not: the choice then stays the same after the first run.
    if packages and mode in ("auto", "os-package", "system"):
        choice = {"source": "os-package", "interpreter": "python" + python, "packages": packages, "build": {},
                  "summary": "python%s from %s's packages (%s)" % (python, os_name, ", ".join(packages))}
    elif present and mode in ("auto", "system"):
        choice = {"source": "system", "interpreter": "python" + python, "packages": [], "build": {},
                  "summary": "the host's own %s" % present.replace("Python ", "python ").strip()}
    elif build and mode in ("auto", "standalone"):
        choice = {"source": "standalone", "interpreter": build["interpreter"], "packages": [], "build": build,
                  "summary": "standalone CPython %s (%s) from %s" % (build["version"], build["release"], mirror or "the wheelhouse")}
    if choice is None:
        reasons = []
        if "system" not in allowed:
            reasons.append("stack profile '%s' leaves the host's own python%s out" % (profile_name, python))
        elif not present:
            reasons.append("%s has no python%s" % (host or "the host", python))
        if not packages and mode != "standalone":
            reasons.append("%s's packages do not provide it" % os_name)
        if "standalone" not in allowed:
            reasons.append("stack profile '%s' leaves standalone builds out (python_sources: %s)" % (
                profile_name, ", ".join(allowed)))
        elif not build and mode != "system":
            reasons.append("python_env_interpreter_builds has no %s build for %s" % (python, arch))
        raise InterpreterError(
            "Stack profile '%s' needs Python %s (its locks are compiled for it) and python_env_interpreter "
            "is %s: %s. Options: %s." % (profile_name, python, mode, "; ".join(reasons) or "no source fits",
                                         "; or ".join(_options(python, key, profiles))))
    choice["python"] = python
    return choice


def matrix(profiles, builds, arch="x86_64"):
    """Per OS key and profile: the source `auto` picks on a host that has only what the OS ships."""
    rows = {}
    for key, (_name, shipped) in sorted(OS_PYTHONS.items()):
        for name, profile in sorted(profiles.items()):
            python = str(profile["python"])
            default = next(iter(shipped))
            present = "Python %s" % python if python == default else ""
            rows[(key, name)] = resolve(python, "auto", key, present, arch, builds, "mirror", profile_name=name,
                                        allowed=profile.get("python_sources"))["source"]
    return rows
