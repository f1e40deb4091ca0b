# -*- coding: utf-8 -*-
# Copyright: llmops.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every apt package-list refresh goes through llmops.serving.apt_refresh.

``ansible.builtin.apt``'s ``update_cache`` / ``cache_valid_time`` judge the lists by the lists
folder's modification time, which a freshly imaged host (lists dropped at build time) makes look
new while it holds nothing. This walks every YAML file of the collection and its test plays.
"""
import os

import pytest
import yaml

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
SCANNED = ("roles", "playbooks", "molecule", "inventories", "tests", "bench")
APT_MODULES = ("apt", "ansible.builtin.apt", "ansible.legacy.apt")
AGE_KEYS = ("update_cache", "update-cache", "cache_valid_time")
SKIPPED_DIRS = {".molecule", ".cache", "fixtures", "__pycache__"}


def yaml_files():
    for top in SCANNED:
        for dirpath, dirs, files in os.walk(os.path.join(REPO, top)):
            dirs[:] = [d for d in dirs if d not in SKIPPED_DIRS]
            for name in files:
                if name.endswith((".yml", ".yaml")):
                    yield os.path.join(dirpath, name)


def age_trusting_apt_tasks(node):
    """(task name, key) of each apt task that refreshes by the lists folder's age."""
    if isinstance(node, list):
        for item in node:
            yield from age_trusting_apt_tasks(item)
    elif isinstance(node, dict):
        for module in APT_MODULES:
            args = node.get(module)
            if isinstance(args, dict):
                for key in AGE_KEYS:
                    if key in args:
                        yield node.get("name", "<unnamed>"), key
        for value in node.values():
            yield from age_trusting_apt_tasks(value)


def load_all(path):
    with open(path) as handle:
        try:
            return list(yaml.safe_load_all(handle))
        except yaml.YAMLError:
            return []  # Jinja-templated YAML (group_vars with tags) is not a task file


def test_the_guard_sees_the_pattern_that_broke_fresh_hosts():
    task = yaml.safe_load("""
- name: Install nginx
  ansible.builtin.apt:
    name: nginx
    update_cache: true
    cache_valid_time: 3600
- name: Refresh
  llmops.serving.apt_refresh:
    valid_time: 3600
- block:
    - apt: {name: curl, cache_valid_time: 60}
""")
    assert sorted(age_trusting_apt_tasks(task)) == [
        ("<unnamed>", "cache_valid_time"), ("Install nginx", "cache_valid_time"),
        ("Install nginx", "update_cache")]


@pytest.mark.parametrize("path", sorted(yaml_files()), ids=lambda p: os.path.relpath(p, REPO))
def test_no_apt_task_trusts_the_lists_by_age(path):
    hits = [hit for doc in load_all(path) for hit in age_trusting_apt_tasks(doc)]
    assert not hits, (
        "%s: %s. Refresh with llmops.serving.apt_refresh before the apt task instead (it never "
        "trusts an empty lists folder)" % (os.path.relpath(path, REPO), ", ".join(
            "task %r sets %s" % hit for hit in hits)))
