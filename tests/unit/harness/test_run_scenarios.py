# -*- coding: utf-8 -*-
# Copyright: llmops.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""tests/harness/run-scenarios.sh with a stand-in `molecule` (a shell script that records each call
and fails where told): the order of the steps, what runs in the background, and how a failure is
reported. NAME:converge in BESIDE converges NAME's hosts in the background; the entry NAME then
only verifies and destroys them, after the background is done."""
import os
import subprocess

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
SCRIPT = os.path.join(REPO, "tests", "harness", "run-scenarios.sh")

# Records "ACTION SCENARIO" (and the time it ended) and fails the calls FAIL names ("converge:fleet").
FAKE_MOLECULE = """#!/bin/bash
action=$1; shift
scenario=$2
case "$action:$scenario" in
  converge:*) sleep "${SLOW_CONVERGE:-0}" ;;
esac
echo "$action $scenario" >> "$CALLS"
for f in $FAIL; do [[ "$f" == "$action:$scenario" ]] && exit 3; done
exit 0
"""


def run(tmp_path, entries, beside, fail="", slow_converge="0"):
    fake = tmp_path / "molecule"
    fake.write_text(FAKE_MOLECULE)
    fake.chmod(0o755)
    calls = tmp_path / "calls"
    calls.write_text("")
    env = dict(os.environ, MOLECULE=str(fake), CALLS=str(calls), FAIL=fail, BESIDE=beside,
               SLOW_CONVERGE=slow_converge, LOG_DIR=str(tmp_path / "logs"), RESULTS_DIR=str(tmp_path / "results"),
               LLMOPS_CACHE=str(tmp_path), VERBOSE="none")
    res = subprocess.run(["bash", SCRIPT] + entries, env=env, capture_output=True, text=True, timeout=120,
                         check=False)
    return res, [line for line in calls.read_text().splitlines() if line]


def test_a_scenario_converged_beside_only_verifies_and_destroys_after_the_background(tmp_path):
    # the background converge is slower than the entry before it: the entry must wait for it
    res, calls = run(tmp_path, ["default", "fleet"], "offline fleet:converge", slow_converge="2")
    assert res.returncode == 0, res.stdout + res.stderr
    fleet = [c for c in calls if c.endswith(" fleet")]
    assert fleet == ["destroy fleet", "create fleet", "converge fleet", "verify fleet", "destroy fleet"], calls
    assert calls.index("converge fleet") < calls.index("verify fleet")
    assert "test offline" in calls and "test default" in calls
    assert "== scenario fleet:converge (beside):" in res.stdout


def test_a_failed_converge_beside_fails_its_entry_without_verifying(tmp_path):
    res, calls = run(tmp_path, ["default", "fleet"], "fleet:converge", fail="converge:fleet")
    assert res.returncode == 1, res.stdout + res.stderr
    assert "verify fleet" not in calls and calls[-1] == "destroy fleet", calls
    assert "its converge beside failed" in res.stdout
    assert "== failed scenarios: fleet:converge fleet" in res.stdout, res.stdout


def test_without_converge_beside_the_scenario_runs_whole(tmp_path):
    res, calls = run(tmp_path, ["default", "fleet"], "offline")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "test fleet" in calls and "verify fleet" not in calls, calls


def test_a_failed_entry_is_reported_and_the_others_still_run(tmp_path):
    res, calls = run(tmp_path, ["default", "fleet"], "offline fleet:converge", fail="test:default")
    assert res.returncode == 1
    assert "verify fleet" in calls, calls
    assert "== failed scenarios: default" in res.stdout, res.stdout
