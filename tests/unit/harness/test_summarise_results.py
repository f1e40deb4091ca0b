# -*- coding: utf-8 -*-
# Copyright: llmops.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""tests/harness/summarise_results.py: counts per stage from real pytest JUnit files, and a skip that
the allow-list does not name fails `make test`."""
import json
import os
import re
import subprocess
import sys
import textwrap

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
SCRIPT = os.path.join(REPO, "tests", "harness", "summarise_results.py")

TESTS = textwrap.dedent('''
    import pytest

    def test_ok():
        pass

    def test_broken():
        assert False

    @pytest.mark.parametrize("profile", ["cpu", "cuda12.4"])
    def test_fixture(profile):
        if profile != "cpu":
            pytest.skip("needs a GPU host to scrape")

    def test_forgotten():
        pytest.skip("set SOME_VENV to run")
''')


@pytest.fixture
def results(tmp_path):
    """A results folder with the JUnit file of a real pytest run (stage 'unit')."""
    (tmp_path / "test_sample.py").write_text(TESTS)
    out = tmp_path / "results"
    out.mkdir()
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path / "test_sample.py"),
                    "--junitxml=%s" % (out / "unit.xml")], cwd=str(tmp_path), capture_output=True, check=False)
    return out


def summarise(results, allow):
    allow_list = results.parent / "skips-allowed.txt"
    allow_list.write_text(allow)
    return subprocess.run([sys.executable, SCRIPT, str(results), str(allow_list)], capture_output=True, text=True,
                          check=False)


def test_counts_each_stage_and_fails_on_an_unlisted_skip(results):
    res = summarise(results, "# GPU only\nunit test_fixture\\[cuda\n")
    assert res.returncode == 1
    assert "unit                         2 passed, 1 failed, 2 skipped, 0 deselected" in res.stdout
    assert "UNEXPECTED SKIP unit: test_sample::test_forgotten (set SOME_VENV to run)" in res.stdout
    assert "test_fixture" not in res.stdout.split("UNEXPECTED")[1]
    assert res.stdout.rstrip().endswith("summary: 2 passed, 1 failed, 2 skipped")


def test_passes_when_every_skip_is_listed_and_nothing_failed(results):
    (results / "molecule-default.xml").write_text(
        '<testsuites><testsuite><testcase classname="test_endpoint" name="test_health"/></testsuite></testsuites>')
    os.unlink(str(results / "unit.xml"))
    res = summarise(results, "")
    assert res.returncode == 0, res.stdout
    assert "molecule-default             1 passed, 0 failed, 0 skipped" in res.stdout


def test_an_allow_entry_is_scoped_to_its_stage(results):
    res = summarise(results, "molecule-* test_forgotten\nunit test_fixture\n")
    assert "UNEXPECTED SKIP unit: test_sample::test_forgotten" in res.stdout


def test_no_results_is_a_failure(tmp_path):
    res = summarise(tmp_path, "")
    assert res.returncode == 1 and "no JUnit file" in res.stdout


def test_a_malformed_allow_line_is_named(results):
    res = summarise(results, "unit\n")
    assert res.returncode == 2 and "skips-allowed.txt:1: expected 'STAGE_GLOB TEST_ID_REGEX'" in res.stderr


def test_a_failure_is_named_with_its_line_and_message_above_the_summary(results):
    res = summarise(results, "unit test_fixture\nunit test_forgotten\n")
    lines = res.stdout.rstrip().splitlines()
    assert res.returncode == 1
    assert lines[-2] == "FAILED unit: test_sample::test_broken at test_sample.py:8: assert False", lines


def test_a_test_deselected_everywhere_counts_like_a_skip_and_one_run_elsewhere_does_not(tmp_path):
    """Two stages of one test file, each with a -k, through the real conftest hook (tests/conftest.py):
    test_ok runs in stage b, so a's deselecting it is no gap; test_other runs nowhere."""
    (tmp_path / "conftest.py").write_text(open(os.path.join(REPO, "tests", "conftest.py")).read())
    (tmp_path / "test_pair.py").write_text("def test_ok():\n    pass\n\n\ndef test_other():\n    pass\n")
    out = tmp_path / "results"
    out.mkdir()
    for stage, expr in (("a", "not test_ok and not test_other"), ("b", "test_ok")):
        subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_pair.py", "-k", expr,
                        "--junitxml=%s" % (out / ("%s.xml" % stage))], cwd=str(tmp_path), capture_output=True, check=False)
    res = summarise(out, "")
    assert res.returncode == 1, res.stdout
    assert "UNEXPECTED SKIP a: test_pair::test_other [-k/-m] (deselected)" in res.stdout
    assert "test_ok [" not in res.stdout
    assert "UNEXPECTED SKIP b: test_pair::test_other [-k/-m] (deselected)" in res.stdout
    assert res.stdout.rstrip().endswith("summary: 1 passed, 0 failed, 2 skipped")
    assert summarise(out, "* test_pair::test_other \\[-k/-m\\]$\n").returncode == 0


def test_the_cost_of_the_suites_playbook_runs_is_summed_by_scenario_and_test(results):
    lines = [{"scenario": "default", "label": "test_rerun.py::test_x", "wall_s": 10, "cpu_s": 4, "tasks": 100},
             {"scenario": "default", "label": "test_rerun.py::test_x", "wall_s": 6, "cpu_s": 2, "tasks": 50},
             {"scenario": "offline", "label": "offline", "wall_s": 30, "cpu_s": 9, "tasks": 400}]
    (results / "run-cost.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    res = summarise(results, "unit test_fixture\\[cuda\nunit test_forgotten\n")
    assert "3 runs, controller CPU 15 s, wall 46 s" in res.stdout
    assert re.search(r"scenario default\s+2 runs\s+CPU\s+6 s\s+wall\s+16 s\s+150 tasks", res.stdout), res.stdout
    assert re.search(r"1 runs\s+CPU\s+9 s.*offline\n\s+2 runs\s+CPU\s+6 s.*test_rerun.py::test_x", res.stdout), res.stdout
