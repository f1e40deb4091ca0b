# -*- coding: utf-8 -*-
# Copyright: llmops.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every play that restarts engines batches them the same way.

The fleet scenario proves the rollout under load through upgrade.yml (three hosts, one at a time,
killed and run again) and rollback.yml; site.yml rolls a changed spec with a play of its own. These
tests hold each such play to the same batching, so that what the fleet proves for one holds for
the others: the hosts in instance order, serial batches of serving_rollout_serial instances (an
instance's ranks together), and the play stopped at its first failed batch.
"""
import os

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BATCH = "{{ (serving_rollout_serial | default(1) | int) * (serving_pipeline_parallel | default(1) | int) }}"
PLAYBOOKS = ("site.yml", "upgrade.yml", "rollback.yml")


def roll_plays(playbook):
    with open(os.path.join(ROOT, "playbooks", playbook), encoding="utf-8") as handle:
        plays = yaml.safe_load(handle)
    return [play for play in plays if play.get("name", "").startswith("Roll the engines")]


def rollout_role_of(play):
    """The role name the play's rollout step uses (as a role, an import or an include)."""
    names = [role.get("role") if isinstance(role, dict) else role for role in play.get("roles", [])]
    for task in play.get("tasks", []):
        for key in ("ansible.builtin.import_role", "ansible.builtin.include_role"):
            if key in task:
                names.append(task[key]["name"])
    return names


@pytest.mark.parametrize("playbook", PLAYBOOKS)
def test_each_play_that_restarts_engines_batches_and_stops_like_the_others(playbook):
    plays = roll_plays(playbook)
    assert len(plays) == 1, "%s: expected one play named 'Roll the engines ...', found %d" % (playbook, len(plays))
    play = plays[0]
    assert play["hosts"] == "llmops_rollout_order", play["hosts"]
    assert play["serial"] == BATCH, play["serial"]
    assert play["max_fail_percentage"] == 0
    assert rollout_role_of(play) == ["llmops.serving.rollout"], rollout_role_of(play)


@pytest.mark.parametrize("playbook", PLAYBOOKS)
def test_the_hosts_are_put_in_instance_order_before_the_roll(playbook):
    with open(os.path.join(ROOT, "playbooks", playbook), encoding="utf-8") as handle:
        plays = yaml.safe_load(handle)
    names = [play.get("name", "") for play in plays]
    order = [i for i, play in enumerate(plays) if play.get("ansible.builtin.import_playbook") == "rollout_order.yml"]
    roll = [i for i, name in enumerate(names) if name.startswith("Roll the engines")]
    assert order and roll and order[-1] < roll[0], names
