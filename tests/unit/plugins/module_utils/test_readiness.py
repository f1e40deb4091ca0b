"""readiness.wait_ready against a real HTTP server that behaves like a starting engine."""
import json
import threading
from http.server import ThreadingHTTPServer

import pytest

from ansible_collections.llmops.serving.plugins.module_utils import readiness
from json_http import JsonHandler


class FakeEngine(object):
    """Health fails for the first `warmup` polls; chat needs the key and returns `tokens` tokens."""

    def __init__(self, warmup=2, tokens=3, chat_status=200, sampled_status=200):
        self.warmup, self.tokens, self.chat_status = warmup, tokens, chat_status
        self.sampled_status = sampled_status
        self.health_calls, self.chat_bodies = 0, []
        engine = self

        class Handler(JsonHandler):
            def do_GET(self):
                engine.health_calls += 1
                self.reply(200 if engine.health_calls > engine.warmup else 503, {})

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                engine.chat_bodies.append(body)
                if self.headers.get("Authorization") != "Bearer key":
                    return self.reply(401, {"error": "bad key"})
                if engine.chat_status != 200:
                    return self.reply(engine.chat_status, {"error": "boom"})
                if body.get("temperature") and engine.sampled_status != 200:
                    return self.reply(engine.sampled_status, {"error": "EngineCore encountered an issue"})
                self.reply(200, {"model": body["model"], "choices": [{"finish_reason": "length"}],
                                 "usage": {"prompt_tokens": 5, "completion_tokens": engine.tokens}})

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = "http://127.0.0.1:%d" % self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()


@pytest.fixture
def engine(request):
    e = FakeEngine(**getattr(request, "param", {}))
    yield e
    e.close()


def test_ready_after_health_then_generation(engine):
    out = readiness.wait_ready(engine.url, "/health", "key", "m", "hi", 4, timeout=10, interval=0.01)
    assert engine.health_calls == 3  # two 503s, then 200
    assert out["usage"]["completion_tokens"] == 3
    assert out["model"] == "m"
    assert out["ready_after_s"] >= out["health_after_s"]
    assert engine.chat_bodies[-1]["max_tokens"] == 4
    # greedy first, then a sampled request (the engines' other decoding path)
    assert [b["temperature"] for b in engine.chat_bodies] == [0, 0.7]
    assert engine.chat_bodies[-1]["top_p"] == 0.8


class FakeClock(object):
    """Time that passes only in sleep(), so the number of polls does not depend on the host's speed."""

    def __init__(self):
        self.now, self.sleeps, self.reads = 0.0, [], 0

    def __call__(self):
        self.reads += 1
        assert self.reads < 100, "wait_ready polls without sleeping or past its timeout"
        return self.now

    def sleep(self, seconds):
        self.sleeps.append(seconds)
        self.now += seconds


def not_ready_after_three_rounds(engine, key="key"):
    """wait_ready with room for exactly three polls; returns its NotReady message."""
    clock = FakeClock()
    with pytest.raises(readiness.NotReady) as err:
        readiness.wait_ready(engine.url, "/health", key, "m", "hi", 4, timeout=3, interval=1,
                             clock=clock, sleep=clock.sleep)
    assert clock.sleeps == [1, 1, 1]
    assert engine.health_calls == 3  # two 503s, then 200 and the chat in the third round
    return str(err.value)


@pytest.mark.parametrize("engine", [{"sampled_status": 500}], indirect=True)
def test_engine_that_only_fails_sampling_is_not_ready(engine):
    message = not_ready_after_three_rounds(engine)
    assert message.startswith("not ready after 3s; last: ")
    assert "(temperature=0.7, top_p=0.8) answered HTTP 500" in message
    assert [b["temperature"] for b in engine.chat_bodies] == [0, 0.7]


def test_wrong_key_is_not_ready(engine):
    message = not_ready_after_three_rounds(engine, key="nope")
    assert message.startswith("not ready after 3s; last: ") and "HTTP 401" in message
    assert len(engine.chat_bodies) == 1


@pytest.mark.parametrize("engine", [{"tokens": 0}], indirect=True)
def test_generation_without_tokens_is_not_ready(engine):
    message = not_ready_after_three_rounds(engine)
    assert message.startswith("not ready after 3s; last: ") and "generated no tokens" in message
    assert len(engine.chat_bodies) == 1


def test_nothing_listening_times_out_with_last_error():
    with pytest.raises(readiness.NotReady, match="not ready after 0.3s; last: .*(URLError|Connection)"):
        readiness.wait_ready("http://127.0.0.1:9", "/health", "k", "m", "hi", 1, timeout=0.3, interval=0.05)


def test_alive_callback_stops_the_wait(engine):
    class Crashed(Exception):
        pass

    def alive():
        raise Crashed()

    with pytest.raises(Crashed):
        readiness.wait_ready(engine.url, "/health", "key", "m", "hi", 1, timeout=10, interval=0.01, alive=alive)


def test_report_is_called_after_each_attempt_that_did_not_prove_readiness(engine):
    reports = []
    readiness.wait_ready(engine.url, "/health", "key", "m", "hi", 4, timeout=10, interval=0.01, report=reports.append)
    # two 503s, then health and both generations in the third attempt: no report for that one
    assert [(r["phase"], r["last"], r["attempts"]) for r in reports] == [
        ("health", "/health answered HTTP 503", 1), ("health", "/health answered HTTP 503", 2)]
    assert 0 <= reports[0]["elapsed_s"] <= reports[1]["elapsed_s"]


@pytest.mark.parametrize("engine", [{"warmup": 0, "sampled_status": 500}], indirect=True)
def test_report_names_the_generation_once_health_passed(engine):
    reports = []
    with pytest.raises(readiness.NotReady):
        readiness.wait_ready(engine.url, "/health", "key", "m", "hi", 4, timeout=0.2, interval=0.05, report=reports.append)
    assert reports and {r["phase"] for r in reports} == {"generation"}
    assert "(temperature=0.7, top_p=0.8) answered HTTP 500" in reports[-1]["last"]


def test_progress_records_are_one_line_each():
    assert readiness.last_journal_line("a\nINFO loading\n\n  nanobind: leaked 3 instances!\n") == "INFO loading"
    assert readiness.last_journal_line("") is None
    record = readiness.progress_record({"phase": "health", "last": "x" * 500, "elapsed_s": 2.0, "attempts": 1},
                                       "/health", {"ActiveState": "activating", "SubState": "start"}, 2, "INFO\tloading")
    assert record["status"] == "unit activating (start), restarted 2 times, waiting for /health"
    assert record["detail"].startswith("last: xxx") and record["detail"].endswith("...; journal: INFO loading")
    assert len(record["detail"]) == len("last: ") + readiness.PROGRESS_TEXT_CHARS + len("; journal: INFO loading")
