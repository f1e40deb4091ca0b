# -*- coding: utf-8 -*-
# Copyright: llmops.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The order and shape rules of llmops.serving.input_checks (module_utils/input_checks.py)."""
import pytest

from ansible_collections.llmops.serving.plugins.module_utils import input_checks


def evaluator(values, seen):
    """A stand-in for the templar's evaluate_conditional: a condition is a name in `values`; an
    unknown name raises, as an undefined variable would."""
    def evaluate(conditional):
        seen.append(conditional)
        return values[conditional]
    return evaluate


def test_the_first_false_condition_in_order_fails_and_nothing_after_it_is_evaluated():
    checks = [{"name": "a", "that": ["a1", "a2"], "msg": "A"},
              {"name": "b", "that": ["b1", "b2"], "msg": "B"},
              {"name": "c", "that": "never-evaluated", "msg": "C"}]
    seen = []
    index, check, cond = input_checks.first_failure(checks, evaluator({"a1": True, "a2": True, "b1": True, "b2": False}, seen))
    assert (index, check["name"], cond) == (1, "b", "b2")
    assert seen == ["a1", "a2", "b1", "b2"]


def test_a_check_whose_when_is_false_is_skipped_whole():
    checks = [{"name": "gpu only", "when": ["gpu", "source"], "that": "undefined-on-cpu", "msg": "x"},
              {"name": "b", "that": "b", "msg": "B"}]
    seen = []
    assert input_checks.first_failure(checks, evaluator({"gpu": True, "source": False, "b": True}, seen)) == (2, None, None)
    assert "undefined-on-cpu" not in seen and seen == ["gpu", "source", "b"]


def test_all_passing_returns_the_number_of_checks():
    checks = [{"that": "a", "msg": "A"}, {"that": ["a", "a"], "msg": "A"}]
    assert input_checks.first_failure(checks, evaluator({"a": True}, [])) == (2, None, None)


@pytest.mark.parametrize("checks, others, has_spec, words", [
    ([], (), False, "not empty without an argument_spec"),
    ("a", (), False, "checks must be a list"),
    ([{"that": "a", "msg": "m"}], ("fail_msg",), False, "unknown argument(s) fail_msg"),
    (["a"], (), False, "check 1 must be a mapping"),
    ([{"that": "a", "msg": "m"}, {"name": "two", "that": "b"}], (), False, "check 2 (two) has no msg"),
    ([{"that": "a", "msg": "m", "fail_msg": "x"}], (), False, "unknown key(s) fail_msg"),
    ([{"name": "w", "that": "a", "msg": "m", "when": [{"x": 1}]}], (), False, "when must be a condition"),
    ([{"name": "t", "that": [], "msg": "m"}], (), False, "that must be a condition"),
])
def test_a_malformed_task_is_named(checks, others, has_spec, words):
    problem = input_checks.shape_problem(checks, others, has_spec)
    assert problem and words in problem, problem


def test_well_formed_tasks_pass_the_shape_check():
    assert input_checks.shape_problem([], (), True) is None
    assert input_checks.shape_problem([{"name": "n", "that": ["a", True], "msg": "m", "when": "w"}]) is None


def test_entry_point_options_name_what_is_missing():
    specs = {"argument_specs": {"main": {"options": {"a": {"type": "int"}}}, "bare": {"short_description": "x"}}}
    assert input_checks.entry_point_options(specs, "main", "f.yml") == {"a": {"type": "int"}}
    assert input_checks.entry_point_options(specs, "bare", "f.yml") == {}
    for bad, entry in ((specs, "spec"), ({}, "main"), (None, "main"), ("text", "main")):
        with pytest.raises(ValueError, match="f.yml has no entry point %s" % entry):
            input_checks.entry_point_options(bad, entry, "f.yml")
