# Copyright: llmops.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Deselected tests are checks that did not run: each pytest run that writes a JUnit file also writes
the tests it deselected beside it (<junit>.deselected, a JSON list of 'test id [why]'), and the
summary of `make test` counts them like skips (tests/harness/summarise_results.py).

testinfra's ``podman://`` hosts run each command through the test hosts' namespaces where the
controller may (tests/harness/podman_enter.py), as the Ansible connection of the test hosts does."""
import json
import os
import sys

HARNESS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "harness")

_DESELECTED = []


def pytest_deselected(items):
    for item in items:
        why = "engine_independent" if item.get_closest_marker("engine_independent") is not None else "-k/-m"
        _DESELECTED.append("%s [%s]" % (junit_id(item), why))


def junit_id(item):
    """'classname::name' as the JUnit file names the test (module path with dots)."""
    path, dummy, name = item.nodeid.partition("::")
    module = path[:-3] if path.endswith(".py") else path
    return "%s::%s" % (module.replace("/", "."), name.replace("::", "."))


def pytest_sessionfinish(session):
    xmlpath = getattr(session.config.option, "xmlpath", None)
    if xmlpath:
        with open(xmlpath + ".deselected", "w") as handle:
            json.dump(sorted(set(_DESELECTED)), handle, indent=1)


def _enter_podman_hosts_directly():
    # (a copy of these hooks outside tests/, as tests/unit/harness makes, has no harness beside it)
    if not os.path.isdir(HARNESS):
        return
    sys.path.insert(0, HARNESS)
    try:
        import podman_enter
        from testinfra.backend import podman as backend
    except ImportError:
        return
    podman_exec = backend.PodmanBackend.run
    if getattr(podman_exec, "enters_namespaces", False):
        return

    def run(self, command, *args, **kwargs):
        pid = podman_enter.container_pid(self.name) if podman_enter.enabled(self.user) else None
        if not pid:
            return podman_exec(self, command, *args, **kwargs)
        cmd = self.get_command(command, *args)
        argv = podman_enter.command(pid, ["/bin/sh", "-c", cmd])
        out = self.run_local(" ".join(["%s"] * len(argv)), *argv)
        out.command = self.encode(cmd)
        return out

    run.enters_namespaces = True
    backend.PodmanBackend.run = run


_enter_podman_hosts_directly()
