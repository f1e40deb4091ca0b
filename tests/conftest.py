# Copyright: llmops.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Deselected tests are checks that did not run: each pytest run that writes a JUnit file also writes
the tests it deselected beside it (<junit>.deselected, a JSON list of 'test id [why]'), and the
summary of `make test` counts them like skips (tests/harness/summarise_results.py)."""
import json

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
