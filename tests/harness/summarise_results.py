#!/usr/bin/env python3
# Copyright: llmops.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The last step of `make test`: passed / failed / skipped for each stage and scenario, read from
the JUnit files its pytest runs wrote (one file a stage: unit.xml, molecule-<entry>.xml), and a
failure for every skip that the allow-list does not name.

Each failed test is named with where it failed and the first line of its message, just above the
summary line: CI keeps the end of the output.

A skip in `make test` is a check that did not run, and so is a deselected test that no other stage
ran (pytest's -k or -m left it out: tests/conftest.py writes them beside the JUnit file as
<stage>.xml.deselected); a test that one scenario deselects because another runs it is no gap. The allow-list (tests/skips-allowed.txt) names
the ones that cannot run on a machine without a GPU, each with a pattern of test ids and a comment
that says why; anything else that skipped fails the run, named.

  summarise_results.py RESULTS_DIR ALLOW_LIST
"""
import collections
import fnmatch
import glob
import json
import os
import re
import sys
import xml.etree.ElementTree as ET


def read_allow_list(path):
    """[(stage glob, compiled test-id regex, line number)] from lines 'STAGE_GLOB TEST_ID_REGEX'."""
    entries = []
    with open(path) as f:
        for number, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            parts = line.split(None, 1)
            if len(parts) != 2:
                raise ValueError("%s:%d: expected 'STAGE_GLOB TEST_ID_REGEX', got %r" % (path, number, line))
            entries.append((parts[0], re.compile(parts[1]), number))
    return entries


# pytest's traceback names the failing line as 'path/to/test_x.py:123: AssertionError'
FAILED_AT = re.compile(r"^(\S+\.py:\d+): \w+", re.M)
MESSAGE_CHARS = 300


def where_and_why(child):
    """'test_x.py:123: first line of the message' of a JUnit failure or error element."""
    found = FAILED_AT.findall(child.text or "")
    first = (child.get("message", "").strip().splitlines() or [""])[0]
    return "%s: %s" % (os.path.basename(found[-1]) if found else child.tag, first[:MESSAGE_CHARS])


def cases(path):
    """(test id, outcome, message) of each test case of a JUnit file; outcome is passed, failed or
    skipped, the test id is 'classname::name' as pytest writes them. A failure's message is where
    it failed and the first line of what it said."""
    root = ET.parse(path).getroot()
    for case in root.iter("testcase"):
        test_id = "%s::%s" % (case.get("classname", ""), case.get("name", ""))
        outcome, message = "passed", ""
        for child in case:
            if child.tag in ("failure", "error"):
                outcome, message = "failed", where_and_why(child)
                break
            if child.tag == "skipped":
                outcome, message = "skipped", child.get("message", "")
        yield test_id, outcome, message


def allowed(stage, test_id, entries):
    return any(fnmatch.fnmatch(stage, glob_) and regex.search(test_id) for glob_, regex, dummy in entries)


def short_id(test_id):
    """'module::name' of a test id, whatever package path its stage's pytest gave the module."""
    module, dummy, name = test_id.partition("::")
    return "%s::%s" % (module.rsplit(".", 1)[-1], name)


def summarise(results_dir, entries):
    """(per-stage lines, totals, [unexpected skips], [failures]) for the JUnit files of results_dir."""
    lines, unexpected, failures = [], [], []
    ran = set()
    for path in glob.glob(os.path.join(results_dir, "*.xml")):
        ran.update(short_id(test_id) for test_id, outcome, dummy in cases(path) if outcome != "skipped")
    totals = {"passed": 0, "failed": 0, "skipped": 0, "deselected": 0}
    for path in sorted(glob.glob(os.path.join(results_dir, "*.xml"))):
        stage = os.path.basename(path)[:-len(".xml")]
        counts = {"passed": 0, "failed": 0, "skipped": 0, "deselected": 0}
        for test_id, outcome, message in cases(path):
            counts[outcome] += 1
            if outcome == "skipped" and not allowed(stage, test_id, entries):
                unexpected.append("%s: %s (%s)" % (stage, test_id, message))
            if outcome == "failed":
                failures.append("%s: %s at %s" % (stage, test_id, message))
        for test_id in deselected(path):
            if short_id(test_id.rsplit(" [", 1)[0]) in ran:
                continue
            counts["deselected"] += 1
            if not allowed(stage, test_id, entries):
                unexpected.append("%s: %s (deselected)" % (stage, test_id))
        for k in totals:
            totals[k] += counts[k]
        lines.append("%-28s %d passed, %d failed, %d skipped, %d deselected"
                     % (stage, counts["passed"], counts["failed"], counts["skipped"], counts["deselected"]))
    return lines, totals, unexpected, failures


def deselected(junit_path):
    """The test ids pytest deselected in the run that wrote junit_path."""
    try:
        with open(junit_path + ".deselected") as f:
            return json.load(f)
    except (OSError, ValueError):
        return []


def run_costs(results_dir, top=12):
    """Lines on what the suite's ansible-playbook runs cost (run_cost callback, run-cost.jsonl)."""
    path = os.path.join(results_dir, "run-cost.jsonl")
    try:
        with open(path) as f:
            runs = [json.loads(line) for line in f if line.strip()]
    except (OSError, ValueError):
        return []
    by_scenario = collections.defaultdict(lambda: [0, 0.0, 0.0, 0])
    by_label = collections.defaultdict(lambda: [0, 0.0, 0.0, 0])
    for run in runs:
        for key, table in ((run.get("scenario") or "-", by_scenario), (run.get("label") or "-", by_label)):
            row = table[key]
            row[0] += 1
            row[1] += run.get("wall_s", 0)
            row[2] += run.get("cpu_s", 0)
            row[3] += run.get("tasks", 0)
    lines = ["== ansible-playbook runs (run_cost): %d runs, controller CPU %.0f s, wall %.0f s (summed over parallel runs)"
             % (len(runs), sum(r.get("cpu_s", 0) for r in runs), sum(r.get("wall_s", 0) for r in runs))]
    for name, (n, wall, cpu, tasks) in sorted(by_scenario.items()):
        lines.append("  scenario %-20s %4d runs  CPU %6.0f s  wall %6.0f s  %7d tasks" % (name, n, cpu, wall, tasks))
    lines.append("  the %d tests whose runs cost the controller most:" % top)
    for name, (n, wall, cpu, tasks) in sorted(by_label.items(), key=lambda kv: -kv[1][2])[:top]:
        lines.append("  %4d runs  CPU %6.0f s  wall %6.0f s  %s" % (n, cpu, wall, name))
    return lines


def main(argv):
    if len(argv) != 3:
        sys.stderr.write(__doc__)
        return 2
    results_dir, allow_list = argv[1], argv[2]
    try:
        entries = read_allow_list(allow_list)
    except (OSError, ValueError) as e:
        sys.stderr.write("test summary: %s\n" % e)
        return 2
    lines, totals, unexpected, failures = summarise(results_dir, entries)
    if not lines:
        print("test summary: no JUnit file in %s: no stage wrote its results" % results_dir)
        return 1
    for line in run_costs(results_dir):
        print(line)
    print("== test summary (stage or scenario: passed, failed, skipped, deselected)")
    for line in lines:
        print("  " + line)
    for item in failures:
        print("FAILED %s" % item)
    for item in unexpected:
        print("UNEXPECTED SKIP %s" % item)
    if unexpected:
        print("%d skip(s) or deselected test(s) not on the allow-list %s: make the test run here, or add it there with the reason"
              % (len(unexpected), allow_list))
    print("summary: %d passed, %d failed, %d skipped" % (totals["passed"], totals["failed"],
                                                         totals["skipped"] + totals["deselected"]))
    return 1 if unexpected or totals["failed"] else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
