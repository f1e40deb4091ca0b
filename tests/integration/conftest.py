# Copyright: llmops.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Tests marked engine_independent check what an engine switch leaves as it is (the weights role's
builds and their failures, proven against the engine serving at the time; the gateway's
certificate; the bad inputs refused before any host changes, whose checks read the spec, not the
engine that serves, and the one that names an engine sets it). A scenario run again on
the hosts its first leg converged, switched to another engine (`NAME@ENGINE` in
tests/harness/run-scenarios.sh, which sets LLMOPS_SWITCHED_LEG=1), does not repeat them: the first
leg ran them on the same hosts and the same model. They are deselected there, not skipped."""
import json
import os

import pytest


@pytest.fixture(scope="module")
def served_tokenizer(host):
    """The tokenizer.json of the model the scenario serves (LLMOPS_MODEL), read once per module."""
    path = "/var/lib/llmops/models/%s/tokenizer.json" % os.environ.get("LLMOPS_MODEL", "qwen3-tiny")
    return json.loads(host.file(path).content_string)


def pytest_configure(config):
    config.addinivalue_line("markers", "engine_independent: not repeated on a scenario's switched-engine leg")


def pytest_collection_modifyitems(config, items):
    if os.environ.get("LLMOPS_SWITCHED_LEG") != "1":
        return
    kept = [item for item in items if item.get_closest_marker("engine_independent") is None]
    if len(kept) < len(items):
        config.hook.pytest_deselected(items=[item for item in items if item not in kept])
        items[:] = kept
