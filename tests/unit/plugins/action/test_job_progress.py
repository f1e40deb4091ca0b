# -*- coding: utf-8 -*-
# Copyright: llmops.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""llmops.serving.job_progress run by ansible-playbook on localhost against real async jobs."""
import json
import os
import re
import subprocess
import sys
import textwrap

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
PLAYBOOK = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")

pytestmark = pytest.mark.skipif(not os.path.exists(PLAYBOOK), reason="needs the controller venv (make unit)")


def run_play(tmp_path, tasks):
    play = [{"hosts": "localhost", "gather_facts": False, "tasks": tasks}]
    path = tmp_path / "play.yml"
    path.write_text(json.dumps(play))
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"),
               ANSIBLE_LOCALHOST_WARNING="false", ANSIBLE_INVENTORY_UNPARSED_WARNING="false")
    cmd = [PLAYBOOK, "-i", "localhost,", "-c", "local", "-e", "ansible_python_interpreter=" + sys.executable, str(path)]
    res = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=180, check=False)
    return res.returncode, res.stdout + res.stderr


def test_follows_a_job_with_its_progress_file_and_returns_its_result(tmp_path):
    progress = tmp_path / "progress.json"
    writer = textwrap.dedent("""
        import json, sys, time
        for i in range(1, 13):
            json.dump({"phase": "download", "done": i * 2 ** 28, "total": 3 * 2 ** 30, "rate": 2 ** 30,
                       "eta_s": (12 - i) / 4, "state": "running"}, open(sys.argv[1], "w"))
            time.sleep(1)
        print("fetched")
    """)
    rc, out = run_play(tmp_path, [
        {"name": "start", "ansible.builtin.command": {"argv": [sys.executable, "-c", writer, str(progress)]},
         "async": 120, "poll": 0, "register": "job"},
        {"name": "follow", "llmops.serving.job_progress": {
            "jid": "{{ job.ansible_job_id }}", "label": "qwen3 download", "timeout": 60, "interval": 1,
            "progress_file": str(progress)}, "register": "followed"},
        {"ansible.builtin.assert": {"that": [
            "followed.finished", "followed.rc == 0", "followed.stdout == 'fetched'",
            "followed.rounds >= 1", "followed.followed_s >= 1"]}},
    ])
    assert rc == 0, out
    # One line per round the job was still running (at least one: the job lasts 12 s, starting it
    # takes a few even on a loaded machine); the loop itself is counted in test_job_follow.py.
    lines = [line for line in out.splitlines() if line.startswith("[localhost] qwen3 download: ")]
    assert len(lines) >= 1, out
    assert any(" of 3.0 GiB (" in line and "1.0 GiB/s" in line and "s elapsed)" in line for line in lines), lines


def test_follows_a_build_log_and_returns_a_failed_job(tmp_path):
    log = tmp_path / "build.log"
    # Twelve seconds of build: the follower sees it running even when starting the job took seconds.
    build = "for i in $(seq 12); do echo \"[$i/20] Building CXX object k$i.o\" >> %s; sleep 1; done; exit 3" % log
    rc, out = run_play(tmp_path, [
        {"name": "start", "ansible.builtin.shell": build, "async": 120, "poll": 0, "register": "job"},
        {"name": "follow", "llmops.serving.job_progress": {
            "jid": "{{ job.ansible_job_id }}", "label": "sgl-kernel", "timeout": 60, "interval": 1,
            "log_file": str(log)}, "register": "followed", "failed_when": False},
        {"ansible.builtin.assert": {"that": ["followed.finished", "followed.rc == 3"]}},
    ])
    assert rc == 0, out
    assert "/20 objects compiled (" in out, out


def test_follows_the_size_of_a_folder_being_filled(tmp_path):
    venv = tmp_path / "venv"
    fill = "mkdir -p %s; for i in $(seq 12); do head -c 1048576 /dev/zero > %s/f$i; sleep 1; done" % (venv, venv)
    rc, out = run_play(tmp_path, [
        {"name": "start", "ansible.builtin.shell": fill, "async": 120, "poll": 0, "register": "job"},
        {"name": "follow", "llmops.serving.job_progress": {
            "jid": "{{ job.ansible_job_id }}", "label": "venv", "timeout": 60, "interval": 1,
            "size_of": str(venv)}},
    ])
    assert rc == 0, out
    assert re.search(r"\[localhost\] venv: \d+\.0 MiB in %s \(\d+s elapsed\)" % re.escape(str(venv)), out), out


def test_a_job_past_the_timeout_fails_and_says_so(tmp_path):
    rc, out = run_play(tmp_path, [
        {"name": "start", "ansible.builtin.command": "sleep 30", "async": 120, "poll": 0, "register": "job"},
        {"name": "follow", "llmops.serving.job_progress": {
            "jid": "{{ job.ansible_job_id }}", "label": "slow step", "timeout": 2, "interval": 1}},
    ])
    assert rc != 0 and re.search(r"slow step: the job \S+ is still running after [2-9]s \(timeout 2 s\)", out), out


def test_bad_interval_is_refused(tmp_path):
    rc, out = run_play(tmp_path, [
        {"name": "follow", "llmops.serving.job_progress": {"jid": "j1", "label": "x", "timeout": 10, "interval": 0}},
    ])
    assert rc != 0 and "interval and timeout must be whole seconds above 0 (got 0 and 10)" in out, out
