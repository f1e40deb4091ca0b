# Copyright: llmops.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""testinfra runs every test once per host of --hosts; a test marked on_host(NAME) checks that host
only and is not collected for the others. That is a deselection, not a skip: in `make test` a skip
means a check that could not run, and only the allow-list (tests/skips-allowed.txt) may have them."""


def pytest_configure(config):
    config.addinivalue_line("markers", "on_host(name): the test checks this test host only")


def pytest_collection_modifyitems(config, items):
    kept, other_hosts = [], []
    for item in items:
        mark = item.get_closest_marker("on_host")
        host = item.callspec.params.get("_testinfra_host") if hasattr(item, "callspec") else None
        if mark is not None and host is not None and host.backend.get_hostname() != mark.args[0]:
            other_hosts.append(item)
        else:
            kept.append(item)
    if other_hosts:
        config.hook.pytest_deselected(items=other_hosts)
        items[:] = kept
