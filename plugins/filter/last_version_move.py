# -*- coding: utf-8 -*-
# Copyright: llmops.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: last_version_move
short_description: The fleet's last version move, the one rollback.yml undoes
version_added: 0.1.0
author: llmops.serving maintainers (@llmops)
description:
  - Every rollout that moves a host to another venv records the id of its run (C(rollout_run_id)) and
    the venv the host left in the host's state file (C(serving.moved_by)).
  - From the state files of the fleet, names the newest move, the venv it moved hosts to and the hosts
    it moved that still serve that venv, and whether I(target) (the venv of the serving spec given to
    rollback.yml) is that venv.
  - With no move recorded on any host (state files written before moves had ids), every host that
    serves I(target) may roll back.
positional: _input, target
options:
  _input:
    description: The rollout state file of each host, by inventory name.
    type: dict
    required: true
  target:
    description: The venv of the serving spec given to rollback.yml (C(serving_spec_venv)).
    type: str
    required: true
"""

EXAMPLES = r"""
last_move: "{{ states | llmops.serving.last_version_move(serving_spec_venv) }}"
"""

RETURN = r"""
_value:
  description: The decision.
  type: dict
  contains:
    id: {description: The newest move's run id (null when no host recorded one)., type: str}
    to: {description: The venv that move put hosts on (null when none)., type: str}
    hosts: {description: The hosts that move put on I(to) which still serve it., type: list, elements: str}
    ok: {description: Whether I(target) is that move's venv (true when no move is recorded)., type: bool}
    msg: {description: Why not and what to do (empty when ok)., type: str}
"""

from ansible.errors import AnsibleFilterError
from ansible.module_utils.common.text.converters import to_native

from ansible_collections.llmops.serving.plugins.module_utils.rollout import last_version_move as _last_version_move


def last_version_move(states, target):
    try:
        return _last_version_move(dict(states), target)
    except (TypeError, ValueError) as e:
        raise AnsibleFilterError("last_version_move: %s" % to_native(e))


class FilterModule(object):
    def filters(self):
        return {"last_version_move": last_version_move}
