# -*- coding: utf-8 -*-
# Copyright: llmops.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""llmops.serving.input_checks run by ansible-playbook on localhost: the first false condition fails
with its own message, templated only then; the argument spec is checked after the checks."""
import json
import os
import subprocess
import sys

import pytest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
PLAYBOOK = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")

pytestmark = pytest.mark.skipif(not os.path.exists(PLAYBOOK), reason="needs the controller venv (make unit)")

SPEC = {"demo_port": {"type": "int"}, "demo_mode": {"type": "str", "choices": ["a", "b"]}}


def run_play(tmp_path, task, play_vars):
    play = [{"hosts": "localhost", "gather_facts": False, "vars": play_vars,
             "tasks": [dict(task, name="Check the demo inputs"),
                       {"name": "After the checks", "ansible.builtin.debug": {"msg": "reached"}}]}]
    (tmp_path / "play.yml").write_text(json.dumps(play))
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"), ANSIBLE_FORCE_COLOR="0",
               ANSIBLE_STDOUT_CALLBACK="ansible.builtin.default", ANSIBLE_CALLBACK_RESULT_FORMAT="json",
               ANSIBLE_LOCALHOST_WARNING="false", ANSIBLE_INVENTORY_UNPARSED_WARNING="false")
    res = subprocess.run([PLAYBOOK, "-i", "localhost,", "-c", "local", str(tmp_path / "play.yml"), "-v"],
                         capture_output=True, text=True, env=env, timeout=120, check=False)
    return res.returncode, res.stdout + res.stderr


def result_of(out):
    """The checks task's result as the callback printed it (-v prints passing results too)."""
    line = [ln for ln in out.splitlines() if ln.startswith(("ok: [localhost] =>", "fatal: [localhost]: FAILED! =>"))][0]
    return json.loads(line.split("=>", 1)[1])


CHECKS = [
    {"name": "the port", "that": ["demo_port | int > 0", "demo_port | int < 65536"],
     "msg": "demo_port must be 1..65535, got {{ demo_port | to_json }}"},
    # its message reads a variable that exists only for a bad input: templated only when it fails
    {"name": "the secret's problems", "that": "__problems | length == 0", "msg": "{{ __problems | join('; ') }}"},
    # never evaluated when its guard is false: undefined_thing would fail the task
    {"name": "gpu only", "when": "demo_gpu | bool", "that": "undefined_thing.count > 0", "msg": "{{ undefined_thing }}"},
]


def test_passing_checks_and_argument_spec_let_the_play_go_on(tmp_path):
    rc, out = run_play(tmp_path, {"llmops.serving.input_checks": {"checks": CHECKS, "argument_spec": SPEC}},
                       {"demo_port": 8000, "demo_mode": "a", "demo_gpu": False, "__problems": []})
    assert rc == 0, out[-3000:]
    res = result_of(out)
    assert res["checked"] == 3 and res["changed"] is False and res["msg"] == "All 3 checks passed, and the argument spec"
    assert "reached" in out


@pytest.mark.parametrize("play_vars, check, msg", [
    ({"demo_port": 70000}, "the port", "demo_port must be 1..65535, got 70000"),
    ({"__problems": ["serving_api_key is shorter than 16 characters"]}, "the secret's problems",
     "serving_api_key is shorter than 16 characters"),
])
def test_the_first_failing_check_stops_the_play_with_its_own_message(tmp_path, play_vars, check, msg):
    base = {"demo_port": 8000, "demo_mode": "a", "demo_gpu": True, "__problems": []}
    rc, out = run_play(tmp_path, {"llmops.serving.input_checks": {"checks": CHECKS, "argument_spec": SPEC}},
                       dict(base, **play_vars))
    assert rc == 2, out[-3000:]
    res = result_of(out)
    assert (res["check"], res["msg"], res["evaluated_to"]) == (check, msg, False), res
    assert "reached" not in out


def test_the_argument_spec_is_checked_after_the_checks_in_validate_argument_spec_words(tmp_path):
    rc, out = run_play(tmp_path, {"llmops.serving.input_checks": {"checks": CHECKS[:2], "argument_spec": SPEC}},
                       {"demo_port": 8000, "demo_mode": "c", "__problems": []})
    assert rc == 2, out[-3000:]
    res = result_of(out)
    assert res["argument_errors"] == ["value of demo_mode must be one of: a, b, got: c"], res
    assert res["msg"].startswith("Validation of arguments failed:\n")


def test_a_malformed_task_says_what_is_wrong(tmp_path):
    rc, out = run_play(tmp_path, {"llmops.serving.input_checks": {"checks": [{"name": "x", "that": "true"}]}}, {})
    assert rc == 2 and "llmops.serving.input_checks: check 1 (x) has no msg" in out, out[-3000:]


def run_role(tmp_path, task_args, play_vars):
    """A play that runs the role `demo` (in tmp_path), whose only task is input_checks with
    `task_args`; its meta/argument_specs.yml has the entry points main and spec, both SPEC."""
    role = tmp_path / "roles" / "demo"
    (role / "tasks").mkdir(parents=True, exist_ok=True)
    (role / "meta").mkdir(exist_ok=True)
    (role / "tasks" / "checks.yml").write_text(json.dumps([{"name": "Check the demo inputs",
                                                           "llmops.serving.input_checks": task_args}]))
    (role / "meta" / "argument_specs.yml").write_text(json.dumps(
        {"argument_specs": {"main": {"short_description": "x", "options": SPEC},
                            "spec": {"short_description": "x", "options": SPEC}}}))
    task = {"ansible.builtin.include_role": {"name": "demo", "tasks_from": "checks.yml"}}
    os.environ["ANSIBLE_ROLES_PATH"] = str(tmp_path / "roles")
    try:
        return run_play(tmp_path, task, play_vars)
    finally:
        del os.environ["ANSIBLE_ROLES_PATH"]


def test_the_roles_own_entry_point_is_read_as_its_argument_spec(tmp_path):
    rc, out = run_role(tmp_path, {"checks": CHECKS[:1], "role_entry_point": "spec"}, {"demo_port": 8000, "demo_mode": "c"})
    assert rc == 2, out[-3000:]
    assert "value of demo_mode must be one of: a, b, got: c" in out, out[-3000:]
    rc, out = run_role(tmp_path, {"checks": CHECKS[:1], "role_entry_point": "spec"}, {"demo_port": 8000, "demo_mode": "a"})
    assert rc == 0 and "reached" in out, out[-3000:]
    rc, out = run_role(tmp_path, {"checks": CHECKS[:1], "role_entry_point": "nope"}, {"demo_port": 8000})
    assert rc == 2 and "has no entry point nope" in out, out[-3000:]


def test_spec_first_refuses_a_wrong_type_before_checks_that_assume_it(tmp_path):
    # demo_port "lots" fails the port check too; spec_first gives the argument spec's message.
    bad = {"demo_port": "lots", "demo_mode": "a"}
    rc, out = run_role(tmp_path, {"checks": CHECKS[:1], "role_entry_point": "main"}, bad)
    assert rc == 2 and result_of(out)["check"] == "the port", out[-3000:]
    rc, out = run_role(tmp_path, {"checks": CHECKS[:1], "role_entry_point": "main", "spec_first": True}, bad)
    assert rc == 2, out[-3000:]
    res = result_of(out)
    assert res["checked"] == 0 and "argument 'demo_port' is of type str" in res["msg"], res
