#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: llmops.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: input_checks
short_description: Check a role's inputs in one task, each check with its own message
version_added: "0.1.0"
description:
  - Evaluates a list of checks in order, on the controller, and fails on the first condition that is
    false with that check's message. Each check is what one M(ansible.builtin.assert) task would be
    (a condition or a list of them, and the message that says what to do), with an optional C(when).
  - One task for a role's checks instead of one task per check. Every task costs a converged run
    the same controller time whether it passes, fails or is skipped, and each role checks its inputs
    on every host in every run.
  - The checks are not templated before they run. A check's message is templated only when that
    check fails, so it may read what only a bad input makes defined; a later check runs only when the
    checks before it passed, so it may rely on them (as a task after an assert does).
  - This module is an action; it runs on the controller and contacts no host.
author:
  - llmops.serving maintainers (@llmops)
options:
  checks:
    description: The checks, in the order they are evaluated.
    type: list
    elements: dict
    default: []
    suboptions:
      name:
        description: What the check checks; returned as RV(check) when it fails.
        type: str
      that:
        description: A condition (a Jinja expression, as in M(ansible.builtin.assert)'s C(that)) or a list of them, all of which must be true.
        type: raw
        required: true
      msg:
        description: What is wrong and what to do, templated when the check fails.
        type: str
        required: true
      when:
        description: A condition or a list of them; the check runs only when all are true.
        type: raw
  argument_spec:
    description:
      - A role argument spec's options (C(argument_specs.main.options) of its C(meta/argument_specs.yml)).
      - When every check passed, the variables it names are checked against it as
        M(ansible.builtin.validate_argument_spec) checks them (their types, choices and elements), with
        that module's message; a role's own checks come first, since their messages say what to do.
    type: dict
  role_entry_point:
    description:
      - The entry point of the calling role's C(meta/argument_specs.yml) whose options are checked, as
        O(argument_spec) checks them; the file is read on the controller. Mutually exclusive with
        O(argument_spec); the task must belong to a role.
    type: str
  spec_first:
    description:
      - Check the argument spec (O(argument_spec) or O(role_entry_point)) before the checks rather than
        after them, for checks written for inputs of the right types.
    type: bool
    default: false
attributes:
  check_mode:
    description: It only reads variables.
    support: full
  diff_mode:
    description: Nothing to compare.
    support: none
  action:
    description: Runs on the controller.
    support: full
notes:
  - The task's result carries no variable's value, only the failing condition as written and its
    message, so checks of secrets need no C(no_log) unless their message names a secret.
seealso:
  - module: ansible.builtin.assert
  - module: ansible.builtin.validate_argument_spec
"""

EXAMPLES = r"""
- name: Check the gateway's inputs
  llmops.serving.input_checks:
    checks:
      - name: the listen address
        that:
          - gateway_listen is match('^[0-9A-Za-z.-]+:\d{1,5}$')
          - gateway_listen != serving_listen
        msg: gateway_listen must be HOST:PORT and differ from serving_listen, got {{ gateway_listen | to_json }}.
      - name: the user's certificate and key
        when: gateway_tls_certificate | length > 0
        that: gateway_tls_private_key is search('-----BEGIN [A-Z ]*PRIVATE KEY-----')
        msg: gateway_tls_certificate and gateway_tls_private_key go together.
    role_entry_point: main
"""

RETURN = r"""
checked:
  description: How many checks passed before the first failure (all of them when none failed).
  returned: always
  type: int
  sample: 12
check:
  description: The name of the check that failed.
  returned: failure
  type: str
  sample: the listen address
assertion:
  description: The condition that was false, as written.
  returned: failure
  type: str
  sample: gateway_listen != serving_listen
evaluated_to:
  description: What the condition evaluated to (false).
  returned: failure
  type: bool
  sample: false
argument_errors:
  description: What the argument spec found wrong, one line per variable.
  returned: when a variable does not match O(argument_spec)
  type: list
  elements: str
  sample: ["value of python_env_interpreter must be one of: auto, system, os-package, standalone, got: conda"]
msg:
  description: The failing check's message, or how many checks passed.
  returned: always
  type: str
  sample: All 12 checks passed
"""
