# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action for llmops.serving.input_checks: a role's input checks in one task, on the controller."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
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
        problem = input_checks.shape_problem(checks, set(self._task.args) - {"checks", "argument_spec"}, spec is not None)
        if not problem and spec is not None and not isinstance(spec, dict):
            problem = "argument_spec must be a role argument spec's options (a mapping), got %s" % type(spec).__name__
        if problem:
            result.update(failed=True, msg="llmops.serving.input_checks: %s" % problem)
            return result
        evaluate = self._templar.evaluate_conditional
        index, check, failed = input_checks.first_failure(checks, evaluate)
        result["changed"] = False
        result["checked"] = index if failed is not None else len(checks)
        if failed is None:
            errors = self.argument_errors(spec, task_vars or {}) if spec else []
            if errors:
                # as ansible.builtin.validate_argument_spec words it
                result.update(failed=True, argument_errors=errors,
                              msg="Validation of arguments failed:\n%s" % "\n".join(errors))
                return result
            result["msg"] = "All %d checks passed%s" % (len(checks), ", and the argument spec" if spec else "")
            return result
        result.update(failed=True, check=check.get("name", "check %d" % (index + 1)), assertion=failed,
                      evaluated_to=False, msg=self._templar.template(check["msg"]))
        return result

    def argument_errors(self, spec, task_vars):
        """The argument spec's errors for the variables it names, as ansible.builtin.validate_argument_spec
        finds them (the role's variables, templated)."""
        provided = self._templar.template(dict((name, task_vars[name]) for name in spec if name in task_vars))
        return ArgumentSpecValidator(spec).validate(provided, validate_role_argument_spec=True).error_messages
