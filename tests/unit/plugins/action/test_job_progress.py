# -*- coding: utf-8 -*-
# Copyright: llmops.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""llmops.serving.job_progress run by ansible-playbook on localhost against real async jobs."""
import json
import os
import re
import socket
import subprocess
import sys
import textwrap
import threading
import time
import importlib.util
from http.server import ThreadingHTTPServer

import pytest

# The checkout: its ansible.cfg, and the roles whose task files the tests below run.
REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
PLAYBOOK = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")

pytestmark = pytest.mark.skipif(not os.path.exists(PLAYBOOK), reason="needs the controller venv (make unit)")


def _json_handler():
    """The fake engines' request handler (tests/unit/plugins/module_utils/json_http.py), loaded from
    its file: that folder is no package."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "module_utils", "json_http.py")
    spec = importlib.util.spec_from_file_location("json_http", path)
    helper = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(helper)
    return helper.JsonHandler


JsonHandler = _json_handler()


def run_play(tmp_path, tasks, path_first=None, extra_args=()):
    """ansible-playbook of `tasks` on localhost; path_first: a folder put first on PATH (fake commands)."""
    play = [{"hosts": "localhost", "gather_facts": False, "tasks": tasks}]
    path = tmp_path / "play.yml"
    path.write_text(json.dumps(play))
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"),
               ANSIBLE_LOCALHOST_WARNING="false", ANSIBLE_INVENTORY_UNPARSED_WARNING="false")
    if path_first:
        env["PATH"] = "%s:%s" % (path_first, env.get("PATH", "/usr/bin:/bin"))
    cmd = [PLAYBOOK, "-i", "localhost,", "-c", "local", "-e", "ansible_python_interpreter=" + sys.executable]
    cmd += list(extra_args) + [str(path)]
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


# ------------------------------------------------------------------------------ the roles' task files
def task_states(out):
    """{task name: its status on localhost} from the default callback's output (the last run of each name)."""
    states = {}
    for block in out.split("TASK [")[1:]:
        name, rest = block.split("]", 1)
        found = re.search(r"^(ok|changed|skipping|failed|fatal): \[localhost\]", rest, re.M)
        states[name] = found.group(1) if found else None
    return states


def recap(out):
    found = re.search(r"localhost\s*: ok=(\d+)\s+changed=(\d+)\s+unreachable=\d+\s+failed=(\d+)\s+skipped=(\d+)", out)
    assert found, out
    return dict(zip(("ok", "changed", "failed", "skipped"), map(int, found.groups())))


def fake_commands(tmp_path, scripts):
    """A folder of executable shell scripts {name: body}, for path_first."""
    folder = tmp_path / "bin"
    folder.mkdir()
    for name, body in scripts.items():
        (folder / name).write_text("#!/bin/sh\n" + body)
        (folder / name).chmod(0o755)
    return str(folder)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def systemctl(tmp_path, crash_after=None, active="activating", sub="start"):
    """systemctl show of a unit that is `active`/`sub`, failed from the (crash_after + 1)th call on."""
    count = tmp_path / "systemctl-calls"
    crash = "" if crash_after is None else 'if [ "$n" -gt %d ]; then a=failed; s=failed; fi\n' % crash_after
    return ('n=$(($(cat %s 2>/dev/null || echo 0) + 1)); echo "$n" > %s\na=%s; s=%s\n%s'
            'printf "ActiveState=%%s\\nSubState=%%s\\nNRestarts=0\\nExecMainStartTimestampMonotonic=0\\n" "$a" "$s"\n'
            % (count, count, active, sub, crash))


CRASH = "RuntimeError: ('Could not load logging config. File does not exist: %s', '/nonexistent/logging.json')"
JOURNALCTL = "printf '%s\\n' 'INFO 12-01 07:45:01 [loader.py:80] Loading weights' 'Traceback (most recent call last):' \"" \
    + CRASH + "\"\n"


def ready_play(tmp_path, url, timeout=60, after=()):
    """roles/engine/tasks/ready.yml as the engine role runs it, on localhost, then `after`."""
    return [{"name": "ready", "ansible.builtin.include_tasks": os.path.join(REPO, "roles", "engine", "tasks", "ready.yml"),
             "vars": {"serving_spec_engine_url": url, "serving_model": {"name": "qwen3-4b"}, "serving_api_key": "key",
                      "serving_spec_health_path": "/health", "engine_readiness_prompt": "Reply with one word.",
                      "engine_readiness_timeout": timeout, "serving_spec_unit": "llmops-test.service",
                      "engine_home": str(tmp_path / "home"), "serving_engine": "vllm",
                      "engine_readiness_progress_interval": 1, "serving_spec_engine_version": "0.32.0",
                      "serving_listen": url, "serving_spec_engine_tls": False,
                      "serving_spec_engine_ca": "", "serving_spec_serves_api": True,
                      "serving_spec_nodes": None}}] + list(after)


def test_the_readiness_wait_of_a_crashing_unit_prints_its_state_and_fails_with_the_modules_message(tmp_path):
    # The unit starts for ~8 s (engine_ready polls every 2 s), then exits with the engine's exception.
    bin_dir = fake_commands(tmp_path, {"systemctl": systemctl(tmp_path, crash_after=5), "journalctl": JOURNALCTL})
    rc, out = run_play(tmp_path, ready_play(tmp_path, "http://127.0.0.1:%d" % free_port()), path_first=bin_dir)
    assert rc != 0
    assert task_states(out)["Wait for a real generation"] == "fatal", out
    # the failure is engine_ready's own, as the rollout role and the fleet test read it
    assert re.search(r"llmops-test.service exited while starting: RuntimeError: \('Could not load logging config", out), out
    lines = [line for line in out.splitlines() if line.startswith("[localhost] qwen3-4b readiness: ")]
    assert lines, out
    assert re.match(r"\[localhost\] qwen3-4b readiness: unit activating \(start\), waiting for /health; "
                    r"last: URLError: .*; journal: RuntimeError: \('Could not load logging config.* \(\d+s elapsed\)$",
                    lines[0]), lines
    assert json.loads((tmp_path / "home" / ".progress" / "vllm-ready.json").read_text())["state"] == "failed"


class StartingEngine(object):
    """An OpenAI-compatible engine whose /health answers 503 for `warmup_s` seconds from its first
    /health request, then 200: counted from the first request, not from the start, so a play that
    starts late on a loaded machine still sees the warm-up."""

    def __init__(self, warmup_s):
        ready_at = []

        class Handler(JsonHandler):
            def do_GET(self):
                if not ready_at:
                    ready_at.append(time.monotonic() + warmup_s)
                self.reply(200 if time.monotonic() >= ready_at[0] else 503, {})

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                self.reply(200, {"model": body["model"], "choices": [{"finish_reason": "length"}],
                                 "usage": {"prompt_tokens": 5, "completion_tokens": 8}})

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = "http://127.0.0.1:%d" % self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()


def test_the_readiness_wait_of_an_engine_that_warms_up_prints_its_state_and_registers_the_result(tmp_path):
    engine = StartingEngine(warmup_s=8)
    try:
        bin_dir = fake_commands(tmp_path, {"systemctl": systemctl(tmp_path, active="active", sub="running"),
                                           "journalctl": "echo 'INFO Capturing CUDA graphs'\n"})
        rc, out = run_play(tmp_path, ready_play(tmp_path, engine.url, after=[
            {"ansible.builtin.assert": {"that": [
                "engine_readiness.ready", "engine_readiness.usage.completion_tokens == 8",
                "engine_readiness.health_after_s > 0", "engine_readiness.rounds >= 1",
                "not engine_readiness.changed"]}}]), path_first=bin_dir)
    finally:
        engine.close()
    assert rc == 0, out
    states = task_states(out)
    assert states["Start the wait for a real generation (runs in the background)"] == "ok"
    assert states["Wait for a real generation"] == "ok" and states["Record the wait's result"] == "skipping"
    assert "serves qwen3-4b on %s: probe completion " % engine.url in out, out
    assert re.search(r"^\[localhost\] qwen3-4b readiness: unit active \(running\), waiting for /health; "
                     r"last: /health answered HTTP 503; journal: INFO Capturing CUDA graphs \(\d+s elapsed\)$", out, re.M), out
    assert recap(out)["changed"] == 0


def test_the_readiness_check_in_check_mode_runs_in_the_foreground_and_writes_nothing(tmp_path):
    # A new host: the unit was never started (systemd reports it inactive).
    bin_dir = fake_commands(tmp_path, {"systemctl": systemctl(tmp_path, active="inactive", sub="dead"),
                                       "journalctl": "true\n"})
    rc, out = run_play(tmp_path, ready_play(tmp_path, "http://127.0.0.1:%d" % free_port(), after=[
        {"ansible.builtin.assert": {"that": ["not engine_readiness.ready",
                                             "engine_readiness.msg == 'llmops-test.service is not running'"]}}]),
        path_first=bin_dir, extra_args=["--check"])
    assert rc == 0, out
    states = task_states(out)
    assert states["Wait for a real generation"] == "skipping" and states["Record the wait's result"] == "ok", out
    assert "readiness: " not in out and not (tmp_path / "home").exists()


def venv_play(tmp_path, venv_name="json-1.0-0123456789ab"):
    """roles/python_env/tasks/venv.yml as the role runs it, with a fake installer that fills the venv
    for 6 s and fails unless the install environment reached it, and a fake python<version>."""
    venvs = tmp_path / "venvs"
    venv = venvs / venv_name
    lock = tmp_path / "lock.txt"
    lock.write_text("json==1.0 --hash=sha256:00\n")
    install = ('[ "$LLMOPS_TEST_INSTALL_ENV" = yes ] || { echo "no install environment" >&2; exit 7; }\n'
               'for i in 1 2 3 4 5 6; do head -c 1048576 /dev/zero > "$1/f$i"; sleep 1; done\n')
    return [{"name": "venv", "ansible.builtin.include_tasks": os.path.join(REPO, "roles", "python_env", "tasks", "venv.yml"),
             "vars": {"serving_venvs_root": str(venvs), "__python_env_lock": str(lock),
                      "__python_env_lock_on_host": str(venvs / ".locks" / "json.txt"),
                      "serving_spec_venv": str(venv), "serving_spec_python": str(venv / "bin" / "python"),
                      "serving_spec_lock_digest": "0123456789abcdef", "serving_spec_ray_lock": "",
                      "python_env_installer": "pip",
                      "python_env_tools_dir": str(tmp_path / "tools"),
                      "serving_spec_profile": {"python": "-llmops-test"}, "serving_spec_engine_profile": {},
                      "python_env_interpreter_choice": {"source": "system", "interpreter": "python-llmops-test"},
                      "serving_engine": "json", "serving_spec_engine": {"serving_modules": ["json", "json.decoder"]},
                      "__python_env_install_argv": ["/bin/sh", "-c", install, "install", str(venv)],
                      "__python_env_install_env": {"LLMOPS_TEST_INSTALL_ENV": "yes"},
                      "python_env_install_timeout": 120, "python_env_progress_interval": 1}}]


# `python-llmops-test -m venv <venv>`: a venv whose python is this interpreter, without ensurepip's seconds of CPU.
FAKE_PYTHON = 'mkdir -p "$3/bin" && ln -sf %s "$3/bin/python"\n' % sys.executable

INSTALL = "Install the locked requirement set (hash-checked)"
LAUNCH = "Start the install of the locked requirement set (runs in the background)"


def test_the_venv_install_prints_the_venv_growing_changes_once_and_is_idempotent(tmp_path):
    bin_dir = fake_commands(tmp_path, {"python-llmops-test": FAKE_PYTHON})
    rc, out = run_play(tmp_path, venv_play(tmp_path), path_first=bin_dir)
    assert rc == 0, out
    states = task_states(out)
    # one changed task for the install, as when it ran in the foreground
    assert states[LAUNCH] == "ok" and states[INSTALL] == "changed", out
    assert states["Record the lock the venv is synced to"] == "changed"
    venv = re.escape(str(tmp_path / "venvs" / "json-1.0-0123456789ab"))
    assert re.search(r"^\[localhost\] json-1.0-0123456789ab install \(pip\): \d+\.\d (KiB|MiB) in %s \(\d+s elapsed\)$"
                     % venv, out, re.M), out
    assert recap(out)["changed"] == 5  # the .locks folder, the lock, the venv, the install, the stamp
    # the second run with the same lock changes nothing and installs nothing
    rc, out = run_play(tmp_path, venv_play(tmp_path), path_first=bin_dir)
    assert rc == 0 and recap(out)["changed"] == 0, out
    assert task_states(out)[INSTALL] == "skipping" and " install (pip): " not in out


def test_the_venv_install_in_check_mode_runs_nothing_in_the_background_and_predicts_the_change(tmp_path):
    bin_dir = fake_commands(tmp_path, {"python-llmops-test": FAKE_PYTHON})
    rc, out = run_play(tmp_path, venv_play(tmp_path), path_first=bin_dir, extra_args=["--check"])
    assert rc == 0, out
    states = task_states(out)
    assert states[LAUNCH] == "skipping" and states[INSTALL] == "skipping", out
    assert states["Record the lock the venv is synced to"] == "changed"
    assert not (tmp_path / "venvs").exists()


def test_a_failed_venv_install_fails_its_task_with_the_installers_output(tmp_path):
    bin_dir = fake_commands(tmp_path, {"python-llmops-test": FAKE_PYTHON})
    tasks = venv_play(tmp_path)
    tasks[0]["vars"]["__python_env_install_env"] = {}
    rc, out = run_play(tmp_path, tasks, path_first=bin_dir)
    assert rc != 0
    assert task_states(out)[INSTALL] == "fatal" and "no install environment" in out and '"rc": 7' in out, out
    assert "Record the lock the venv is synced to" not in task_states(out)
