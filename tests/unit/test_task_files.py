"""Task files stay small enough to read at once: every task file of a role or of the playbooks is at
most MAX_LINES lines, split by what it does (a static import costs a run nothing). An input_checks
task is data, a list of checks that one module call evaluates, and its lines are not counted:
splitting it would cost each host a task more per run."""
import glob
import os

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MAX_LINES = 110
CHECKS = "llmops.serving.input_checks"
TASK_FILES = sorted(os.path.relpath(p, ROOT) for pattern in ("roles/*/tasks/*.yml", "playbooks/tasks/*.yml")
                    for p in glob.glob(os.path.join(ROOT, pattern)))


def counted_lines(text):
    """The file's lines less those of its top-level input_checks tasks (YAML node marks, so a
    comment or blank line between tasks still counts)."""
    root = yaml.compose(text)
    data_lines = 0
    if isinstance(root, yaml.SequenceNode):
        for task in root.value:
            keys = [key.value for key, dummy in task.value] if isinstance(task, yaml.MappingNode) else []
            if CHECKS in keys:
                data_lines += task.end_mark.line - task.start_mark.line
    return len(text.splitlines()) - data_lines


def test_the_task_files_are_found():
    assert len(TASK_FILES) > 100
    assert "roles/rollout/tasks/roll.yml" in TASK_FILES


@pytest.mark.parametrize("path", TASK_FILES)
def test_a_task_file_reads_at_once(path):
    with open(os.path.join(ROOT, path), encoding="utf-8") as handle:
        lines = counted_lines(handle.read())
    assert lines <= MAX_LINES, (
        "%s has %d lines (input checks not counted), over %d: split it by what it does, with "
        "ansible.builtin.import_tasks (static: no task more per run)" % (path, lines, MAX_LINES))


def test_a_long_file_is_found_and_an_input_checks_list_is_not_counted():
    tasks = "\n".join("- name: Step %d\n  ansible.builtin.debug:\n    msg: step %d\n" % (i, i) for i in range(40))
    assert counted_lines("---\n" + tasks) > MAX_LINES
    checks = "\n".join("      - {name: check %d, that: true, msg: fix %d}" % (i, i) for i in range(200))
    text = "---\n- name: Check the inputs\n  %s:\n    checks:\n%s\n\n- name: Then\n  ansible.builtin.debug:\n" % (
        CHECKS, checks)
    assert len(text.splitlines()) > 200
    assert counted_lines(text) < 10
