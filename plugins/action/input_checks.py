# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action for llmops.serving.input_checks: a role's input checks in one task, on the controller."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.module_utils.parsing.convert_bool import boolean
from ansible.plugins.action import ActionBase
from ansible_collections.llmops.serving.plugins.module_utils import input_checks


class ActionModule(ActionBase):
    """Evaluates each check's conditions in order and fails on the first false one with that check's
    own message. A condition is an expression, as in ansible.builtin.assert; a message is templated
    only when its check fails, so it may name what only a failing input makes true."""

    TRANSFERS_FILES = False
    _requires_connection = False

    @classmethod
    def finalize_task_arg(cls, name, value, templar, context):
        # The checks stay as written: their conditions are evaluated one by one and a message is
        # templated only for the check that fails (templating every message first would fail on
        # the very inputs the earlier checks refuse).
        if name == "checks":
            return value
        return super(ActionModule, cls).finalize_task_arg(name, value, templar, context)

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        del tmp
        checks = self._task.args.get("checks", [])
        spec = self._task.args.get("argument_spec")
        entry_point = self._task.args.get("role_entry_point")
        problem = input_checks.shape_problem(checks, set(self._task.args) - {"checks", "argument_spec", "role_entry_point", "spec_first"},
                                             spec is not None or entry_point is not None)
        if not problem and spec is not None and entry_point is not None:
            problem = "argument_spec and role_entry_point are mutually exclusive"
        if not problem and spec is not None and not isinstance(spec, dict):
            problem = "argument_spec must be a role argument spec's options (a mapping), got %s" % type(spec).__name__
        if not problem and entry_point is not None:
            spec, problem = self.role_spec(entry_point)
        if problem:
            result.update(failed=True, msg="llmops.serving.input_checks: %s" % problem)
            return result
        result["changed"] = False
        # A spec whose checks rely on its types being right is checked first (spec_first).
        spec_first = boolean(self._task.args.get("spec_first", False), strict=False)
        if spec and spec_first and self.refuse_arguments(result, spec, task_vars):
            result["checked"] = 0
            return result
        evaluate = self._templar.evaluate_conditional
        index, check, failed = input_checks.first_failure(checks, evaluate)
        result["checked"] = index if failed is not None else len(checks)
        if failed is None:
            if spec and not spec_first and self.refuse_arguments(result, spec, task_vars):
                return result
            result["msg"] = "All %d checks passed%s" % (len(checks), ", and the argument spec" if spec else "")
            return result
        result.update(failed=True, check=check.get("name", "check %d" % (index + 1)), assertion=failed,
                      evaluated_to=False, msg=self._templar.template(check["msg"]))
        return result

    def refuse_arguments(self, result, spec, task_vars):
        """Fail `result` with the argument spec's errors, worded as ansible.builtin.validate_argument_spec
        words them; False when there are none."""
        errors = self.argument_errors(spec, task_vars or {})
        if errors:
            result.update(failed=True, argument_errors=errors, msg="Validation of arguments failed:\n%s" % "\n".join(errors))
        return bool(errors)

    def role_spec(self, entry_point):
        """(options, None) of the calling role's entry point, or (None, why not). The file is read
        through the loader, which parses each file once per run."""
        role = self._task._role
        if role is None:
            return None, "role_entry_point needs a task of a role"
        path = os.path.join(role._role_path, "meta", "argument_specs.yml")
        try:
            return input_checks.entry_point_options(self._loader.load_from_file(path), str(entry_point), path), None
        except (OSError, ValueError) as exc:
            return None, str(exc)
        except Exception as exc:  # the loader's own errors (a missing or unparsable file)
            return None, "%s: %s" % (path, exc)

    def argument_errors(self, spec, task_vars):
        """The argument spec's errors for the variables it names, as ansible.builtin.validate_argument_spec
        finds them (the role's variables, templated)."""
        provided = self._templar.template(dict((name, task_vars[name]) for name in spec if name in task_vars))
        return ArgumentSpecValidator(spec).validate(provided, validate_role_argument_spec=True).error_messages
