# -*- coding: utf-8 -*-
# Copyright: llmops.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The monitoring role's own input checks (validate.yml), run by ansible-playbook on localhost: a
limit under which an alert could never fire is refused with the variable's name."""
import json
import os
import subprocess
import sys

import pytest
import yaml

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
PLAYBOOK = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")

pytestmark = pytest.mark.skipif(not os.path.exists(PLAYBOOK), reason="needs the controller venv (make unit)")


def check(tmp_path, **variables):
    inventory = {"all": {"vars": dict({
        "serving_model": {"name": "qwen3-0.6b", "source": "/srv/models/qwen3-0.6b", "lora": None},
        "monitoring_alerts_undelivered": True}, **variables),
        "children": {"llm_servers": {"hosts": {"h1": {"ansible_connection": "local",
                                                      "ansible_python_interpreter": sys.executable}}}}}}
    (tmp_path / "inventory.yml").write_text(yaml.safe_dump(inventory))
    play = [{"hosts": "llm_servers", "gather_facts": False, "tasks": [
        {"ansible.builtin.include_role": {"name": "llmops.serving.monitoring", "tasks_from": "validate.yml"}}]}]
    (tmp_path / "play.yml").write_text(json.dumps(play))
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"), ANSIBLE_FORCE_COLOR="0")
    res = subprocess.run([PLAYBOOK, "-i", str(tmp_path / "inventory.yml"), str(tmp_path / "play.yml")],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, timeout=300, check=False)
    return res.returncode, res.stdout


def test_the_defaults_pass(tmp_path):
    rc, out = check(tmp_path)
    assert rc == 0, out[-3000:]


@pytest.mark.parametrize("variables, words", [
    ({"monitoring_certificate_expiry_days": 0}, "got 3600 and 0"),
    ({"monitoring_drained_max_seconds": -60}, "got -60 and 21"),
])
def test_a_host_alert_that_could_never_fire_is_refused(tmp_path, variables, words):
    rc, out = check(tmp_path, **variables)
    assert rc != 0, out[-3000:]
    assert "monitoring_drained_max_seconds and monitoring_certificate_expiry_days must be positive" in out and words in out, \
        out[-3000:]


@pytest.mark.parametrize("variables, words", [
    ({"monitoring_alertmanager_listen": "0.0.0.0:9093"}, "monitoring_alertmanager_listen (0.0.0.0:9093) listens beyond"),
    ({"monitoring_prometheus_listen": "10.0.0.5:9090"}, "monitoring_prometheus_listen (10.0.0.5:9090) listens beyond"),
])
def test_prometheus_or_alertmanager_beyond_loopback_needs_the_opt_in(tmp_path, variables, words):
    """Neither asks who calls: an open Alertmanager lets anyone silence the alerts."""
    rc, out = check(tmp_path, **variables)
    assert rc != 0 and words in out and "monitoring_allow_open_network: true" in out, out[-3000:]
    rc, out = check(tmp_path, monitoring_allow_open_network=True, **variables)
    assert rc == 0, out[-3000:]
