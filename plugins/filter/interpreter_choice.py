# -*- coding: utf-8 -*-
# Copyright: llmops.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: interpreter_choice
short_description: Where a host's engine venvs get the stack profile's Python from
version_added: 0.1.0
author: llmops.serving maintainers (@llmops)
description:
  - Picks the interpreter source for one host, in this order under C(auto) -
    C(os-package) (its OS's repositories carry it, installed or not), C(system) (the host has C(pythonX.Y)
    although its OS packages none), C(standalone) (a checksum-pinned python-build-standalone archive
    from a mirror or the wheelhouse).
  - Never fails; a host that no source fits gets C(error), which names the variables to change.
positional: _input
options:
  _input:
    description:
      - C(python) (the profile's Python), C(mode) (C(python_env_interpreter)), C(os_family), C(distribution),
        C(major_version), C(present) (what C(pythonX.Y --version) printed, empty when missing), C(arch),
        C(builds) (C(python_env_interpreter_builds)), C(mirror), C(root), C(profile_name), C(profiles), C(host),
        C(allowed) (the profile's C(python_sources); all three when empty).
    type: dict
    required: true
"""

EXAMPLES = r"""
choice: "{{ {'python': '3.11', 'mode': 'auto', 'os_family': 'Debian', 'distribution': 'Debian',
             'major_version': '13', 'present': '', 'arch': 'x86_64', 'builds': python_env_interpreter_builds,
             'mirror': python_env_interpreter_mirror, 'root': '/opt/llmops/python'} | llmops.serving.interpreter_choice }}"
"""

RETURN = r"""
_value:
  description: The choice, or C(error) alone when no source fits.
  type: dict
  contains:
    source:
      description: C(system), C(os-package) or C(standalone).
      type: str
    python:
      description: The profile's Python version.
      type: str
    interpreter:
      description: What the venvs are created from (C(python3.11), or the standalone build's binary).
      type: str
    packages:
      description: OS packages to install (C(os-package)).
      type: list
      elements: str
    build:
      description: The standalone build (version, release, arch, filename, sha256, url, home, interpreter); empty otherwise.
      type: dict
    summary:
      description: One line for the preflight summary.
      type: str
    error:
      description: Why no source fits and the options, when none does.
      type: str
"""

from ansible_collections.llmops.serving.plugins.module_utils.interpreters import InterpreterError, os_key, resolve


def interpreter_choice(params):
    try:
        key = os_key(params.get("os_family"), params.get("distribution"), str(params.get("major_version")))
        return resolve(params.get("python"), params.get("mode", "auto"), key, params.get("present") or "",
                       params.get("arch") or "x86_64", params.get("builds") or {}, params.get("mirror") or "",
                       params.get("root") or "/opt/llmops/python", params.get("profile_name") or "",
                       params.get("profiles") or {}, params.get("host") or "", params.get("allowed") or None)
    except InterpreterError as exc:
        return {"error": str(exc)}


class FilterModule(object):
    def filters(self):
        return {"interpreter_choice": interpreter_choice}
