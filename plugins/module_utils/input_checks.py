# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The order and shape of llmops.serving.input_checks: which check fails first, and what a check is."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

CHECK_KEYS = frozenset(("name", "that", "msg", "when"))


def as_list(value):
    return value if isinstance(value, list) else [value]


def shape_problem(checks, other_args=(), has_spec=False):
    """A sentence saying what is wrong with the task's arguments, or None."""
    if other_args:
        return ("unknown argument(s) %s: it takes checks, and argument_spec or role_entry_point"
                % ", ".join(sorted(other_args)))
    if not isinstance(checks, list) or not (checks or has_spec):
        return "checks must be a list of {name, that, msg, when}, not empty without an argument_spec"
    for i, check in enumerate(checks, 1):
        if not isinstance(check, dict):
            return "check %d must be a mapping of name, that, msg and when" % i
        unknown = set(check) - CHECK_KEYS
        if unknown:
            return "check %d (%s) has unknown key(s) %s" % (i, check.get("name", "unnamed"), ", ".join(sorted(unknown)))
        for key in ("that", "msg"):
            if key not in check:
                return "check %d (%s) has no %s" % (i, check.get("name", "unnamed"), key)
        for key in ("that", "when"):
            items = as_list(check[key]) if key in check else [True]
            if not items or any(not isinstance(item, (str, bool)) for item in items):
                return "check %d (%s): %s must be a condition or a list of them" % (i, check.get("name", "unnamed"), key)
    return None


def entry_point_options(specs, entry_point, where):
    """The options of `entry_point` in a role's parsed meta/argument_specs.yml (`specs`), or a
    ValueError naming what is missing (`where` names the file)."""
    entry = ((specs or {}).get("argument_specs") or {}).get(entry_point) if isinstance(specs, dict) else None
    if not isinstance(entry, dict):
        raise ValueError("%s has no entry point %s" % (where, entry_point))
    options = entry.get("options") or {}
    if not isinstance(options, dict):
        raise ValueError("the options of entry point %s in %s are not a mapping" % (entry_point, where))
    return options


def first_failure(checks, evaluate):
    """(index, check, condition) of the first condition that is false, in order, among the checks
    whose every `when` condition holds; (index, check, None) when all hold. `evaluate` evaluates one
    condition (the templar's evaluate_conditional)."""
    for index, check in enumerate(checks):
        if not all(evaluate(conditional=cond) for cond in as_list(check.get("when", []))):
            continue
        for cond in as_list(check["that"]):
            if not evaluate(conditional=cond):
                return index, check, cond
    return len(checks), None, None
