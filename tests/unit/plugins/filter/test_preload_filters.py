# -*- coding: utf-8 -*-
# Copyright: llmops.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""preload_filters: its input back, and every filter file of the collection imported in the process
that templates it, under the name the plugin loader looks for, so a worker forked later finds them
loaded; a play whose hosts keyword uses it gives its workers that state."""
import json
import os
import subprocess
import sys

import pytest

from ansible_collections.llmops.serving.plugins.filter import preload_filters as plugin

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
PLAYBOOK = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")


def test_every_filter_file_is_imported_under_the_loaders_name_and_the_input_comes_back():
    names = plugin.filter_files()
    on_disk = sorted(f[:-3] for f in os.listdir(os.path.join(REPO, "plugins", "filter")) if f.endswith(".py"))
    assert names == on_disk and "instance_placement" in names and "systemd" in names
    for name in names:
        sys.modules.pop("%s.%s" % (plugin.PACKAGE, name), None)
    assert plugin.preload_filters("llm_servers") == "llm_servers"
    assert all("%s.%s" % (plugin.PACKAGE, name) in sys.modules for name in names)


# A test-only action: which of the collection's filter modules the task's worker process holds
# before its task templates anything.
PROBE_ACTION = """
import sys
from ansible.plugins.action import ActionBase


class ActionModule(ActionBase):
    def run(self, tmp=None, task_vars=None):
        prefix = "ansible_collections.llmops.serving.plugins.filter."
        return {"changed": False, "loaded": sorted(m[len(prefix):] for m in sys.modules if m.startswith(prefix))}
"""


def worker_loaded(tmp_path, hosts):
    (tmp_path / "action").mkdir(exist_ok=True)
    (tmp_path / "action" / "loaded_filters.py").write_text(PROBE_ACTION)
    play = [{"hosts": hosts, "gather_facts": False,
             "tasks": [{"name": "Report the worker's filter modules", "loaded_filters": {}, "register": "r"},
                       {"name": "Print them", "ansible.builtin.debug": {"msg": "LOADED [{{ r.loaded | join(' ') }}]"}}]}]
    (tmp_path / "play.yml").write_text(json.dumps(play))
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"), ANSIBLE_FORCE_COLOR="0",
               ANSIBLE_ACTION_PLUGINS=str(tmp_path / "action"), ANSIBLE_STDOUT_CALLBACK="ansible.builtin.default",
               ANSIBLE_LOCALHOST_WARNING="false", ANSIBLE_INVENTORY_UNPARSED_WARNING="false")
    res = subprocess.run([PLAYBOOK, "-i", "localhost,", "-c", "local", str(tmp_path / "play.yml")],
                         capture_output=True, text=True, env=env, timeout=120, check=False)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-2000:]
    line = [ln for ln in res.stdout.splitlines() if "LOADED [" in ln][0]
    return line.split("LOADED [", 1)[1].split("]", 1)[0].split()


@pytest.mark.skipif(not os.path.exists(PLAYBOOK), reason="needs the controller venv (make unit)")
def test_a_task_worker_starts_with_the_filters_loaded_by_the_plays_hosts_keyword(tmp_path):
    assert worker_loaded(tmp_path, "localhost") == []
    assert worker_loaded(tmp_path, "{{ 'localhost' | llmops.serving.preload_filters }}") == plugin.filter_files()
