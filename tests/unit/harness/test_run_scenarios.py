# -*- coding: utf-8 -*-
# Copyright: llmops.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""tests/harness/run-scenarios.sh with a stand-in `molecule` (a shell script that records each call
and fails where told): the order of the steps, what runs in the background, and how a failure is
reported. BESIDE scenarios run one after the other in the background while the entries run; the
script waits for them after its entries and reports them then. A scenario's last destroy runs in the
background too, and the script ends only after it."""
import os
import subprocess

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
SCRIPT = os.path.join(REPO, "tests", "harness", "run-scenarios.sh")

# Records "ACTION SCENARIO" when the call ends, and fails the calls FAIL names ("test:fleet").
# SLOW names the scenario whose calls take a second each, or one call of it ("destroy:default").
FAKE_MOLECULE = """#!/bin/bash
action=$1; shift
scenario=$2
[[ "$scenario" == "$SLOW" || "$action:$scenario" == "$SLOW" ]] && sleep 1
echo "$action $scenario" >> "$CALLS"
for f in $FAIL; do [[ "$f" == "$action:$scenario" ]] && exit 3; done
exit 0
"""


def run(tmp_path, entries, beside, fail="", slow="", make="make", fail_make=""):
    fake = tmp_path / "molecule"
    fake.write_text(FAKE_MOLECULE)
    fake.chmod(0o755)
    calls = tmp_path / "calls"
    calls.write_text("")
    env = dict(os.environ, MOLECULE=str(fake), CALLS=str(calls), FAIL=fail, BESIDE=beside, SLOW=slow,
               MAKE=make, FAIL_MAKE=fail_make,
               LOG_DIR=str(tmp_path / "logs"), RESULTS_DIR=str(tmp_path / "results"), LLMOPS_CACHE=str(tmp_path),
               VERBOSE="none")
    res = subprocess.run(["bash", SCRIPT] + entries, env=env, capture_output=True, text=True, timeout=120,
                         check=False)
    return res, [line for line in calls.read_text().splitlines() if line]


def test_the_entries_do_not_wait_for_the_scenarios_beside(tmp_path):
    # the background scenario is slower than every entry: the entries all run before it ends, and the
    # script reports it only once it has ended
    res, calls = run(tmp_path, ["default", "default@sglang"], "offline fleet", slow="fleet")
    assert res.returncode == 0, res.stdout + res.stderr
    default = [c for c in calls if c.endswith(" default")]
    assert default == ["destroy default", "create default", "prepare default", "converge default",
                       "idempotence default", "verify default", "converge default", "idempotence default",
                       "verify default", "destroy default"], calls
    assert calls.index("destroy default", 1) < calls.index("test fleet"), calls
    # each scenario beside: leftovers destroyed, its test without the last destroy, then its teardown
    assert [c for c in calls if c.endswith(" fleet")] == ["destroy fleet", "test fleet", "destroy fleet"], calls
    assert calls.index("test offline") < calls.index("test fleet")
    out = res.stdout
    assert out.index("== scenario default@sglang:") < out.index("== waiting for the scenarios beside (offline fleet)") \
        < out.index("== scenario fleet (beside):"), out


def test_a_failed_scenario_beside_fails_the_run_and_is_named(tmp_path):
    res, calls = run(tmp_path, ["default"], "offline fleet", fail="test:fleet")
    assert res.returncode == 1, res.stdout + res.stderr
    # the failed scenario's hosts are removed too
    assert sorted(calls) == ["destroy default"] * 2 + ["destroy fleet"] * 2 + ["destroy offline"] * 2 + \
        ["test default", "test fleet", "test offline"], calls
    assert "== failed scenarios: fleet" in res.stdout, res.stdout


def test_a_failed_entry_skips_its_switched_leg_and_the_background_still_runs(tmp_path):
    res, calls = run(tmp_path, ["default", "default@sglang"], "fleet", fail="verify:default")
    assert res.returncode == 1
    assert "test fleet" in calls, calls
    # the first leg failed: its hosts are destroyed and the switched leg does not run on them
    assert calls.count("converge default") == 1 and calls[-1] != "converge default", calls
    assert "== scenario default@sglang: skipped, an earlier entry of default failed" in res.stdout
    assert "== failed scenarios: default default@sglang" in res.stdout, res.stdout


def test_the_next_entry_does_not_wait_for_a_teardown_and_the_run_ends_after_it(tmp_path):
    # default's last destroy takes a second: nvidia runs meanwhile, and the script still waits for it
    res, calls = run(tmp_path, ["default", "nvidia"], "", slow="destroy:default")
    assert res.returncode == 0, res.stdout + res.stderr
    assert calls[0] == "destroy default" and calls[-1] == "destroy default", calls
    assert calls.index("test nvidia") < len(calls) - 1, calls
    # the first destroy of a scenario (leftovers of an interrupted run) is waited for
    res, calls = run(tmp_path, ["nvidia"], "", slow="destroy:nvidia")
    assert calls == ["destroy nvidia", "test nvidia", "destroy nvidia"], calls


def test_a_make_entry_runs_in_order_and_its_failure_is_named(tmp_path):
    fake_make = tmp_path / "make"
    fake_make.write_text('#!/bin/bash\necho "make $2" >> "$CALLS"\n[[ "$2" == "$FAIL_MAKE" ]] && exit 2\nexit 0\n')
    fake_make.chmod(0o755)
    res, calls = run(tmp_path, ["nvidia", "make:test-demo", "make:checks"], "", make=str(fake_make),
                     fail_make="checks")
    assert res.returncode == 1, res.stdout + res.stderr
    assert calls[calls.index("test nvidia"):] in (["test nvidia", "make test-demo", "make checks", "destroy nvidia"],
                                                  ["test nvidia", "destroy nvidia", "make test-demo", "make checks"],
                                                  ["test nvidia", "make test-demo", "destroy nvidia", "make checks"]), calls
    assert "== failed scenarios: make:checks" in res.stdout, res.stdout
