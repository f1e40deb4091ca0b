"""drain: in-flight counts from an engine's Prometheus text, and the wait until they reach zero."""
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from ansible_collections.llmops.serving.plugins.module_utils import drain, engines
from ansible_collections.llmops.serving.plugins.modules import engine_drain_wait

# The shape of vLLM's exposition (one sample per engine core and model) and SGLang's.
VLLM_TEXT = """# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="qwen3-tiny"} %s
vllm:num_requests_running{engine="1",model_name="qwen3-tiny"} %s
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="qwen3-tiny"} %s
vllm:num_requests_waiting_by_reason{engine="0",model_name="qwen3-tiny",reason="capacity"} 7.0
"""
SGLANG_TEXT = """sglang:num_running_reqs{engine_type="unified",model_name="a {b} c",tp_rank="0"} %s
sglang:num_queue_reqs{engine_type="unified",model_name="a {b} c",tp_rank="0"} %s 1700000000000
"""


def vllm(run0, run1, wait):
    return VLLM_TEXT % (run0, run1, wait)


def test_sums_add_label_sets_and_ignore_prefixed_names():
    counts = drain.sums(vllm("2.0", "1.0", "4.0"), ["vllm:num_requests_running", "vllm:num_requests_waiting"])
    assert counts == {"vllm:num_requests_running": 3.0, "vllm:num_requests_waiting": 4.0}


def test_in_flight_reads_the_registry_names_of_each_engine():
    v = engines.engine_info("vllm", "0.32.0")["metrics"]
    s = engines.engine_info("sglang", "0.5.23")["metrics"]
    assert drain.in_flight(vllm("1.0", "0.0", "2.0"), v["running"], v["waiting"]) == (1, 2)
    assert drain.in_flight(SGLANG_TEXT % ("5.0", "0.0"), s["running"], s["waiting"]) == (5, 0)


def test_in_flight_refuses_a_scrape_without_the_metrics():
    with pytest.raises(drain.MetricsMissing, match="neither vllm:num_requests_running"):
        drain.in_flight("process_cpu_seconds_total 3.0\n", "vllm:num_requests_running", "vllm:num_requests_waiting")


class Clock(object):
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t

    def sleep(self, s):
        self.t += s


def test_wait_idle_polls_until_both_counts_are_zero():
    texts = iter([vllm("2.0", "1.0", "1.0"), vllm("1.0", "0.0", "0.0"), vllm("0.0", "0.0", "0.0")])
    clock = Clock()
    res = drain.wait_idle(lambda: next(texts), "vllm:num_requests_running", "vllm:num_requests_waiting",
                          timeout=30, interval=2, clock=clock, sleep=clock.sleep)
    assert res["idle"] and res["polls"] == 3 and res["waited_s"] == 4.0
    assert (res["running_at_start"], res["waiting_at_start"]) == (3, 1)


def test_wait_idle_gives_up_at_the_timeout_with_what_is_left():
    clock = Clock()
    res = drain.wait_idle(lambda: vllm("1.0", "0.0", "2.0"), "vllm:num_requests_running",
                          "vllm:num_requests_waiting", timeout=5, interval=2, clock=clock, sleep=clock.sleep)
    assert not res["idle"] and res["waited_s"] == 5.0
    assert (res["running_left"], res["waiting_left"]) == (1, 2)


def test_an_engine_that_does_not_answer_has_nothing_in_flight():
    res = drain.wait_idle(lambda: None, "a", "b", timeout=5, interval=1)
    assert res["idle"] and not res["reachable"] and res["polls"] == 1


@pytest.fixture
def metrics_server():
    """A real HTTP server whose in-flight count drops by one each scrape."""
    state = {"left": 2}

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):
            raw = (vllm(str(float(state["left"])), "0", "0") if self.path == "/metrics" else "").encode()
            state["left"] = max(0, state["left"] - 1)
            self.send_response(200 if self.path == "/metrics" else 404)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield "http://127.0.0.1:%d" % server.server_address[1]
    server.shutdown()


def test_module_scraper_reads_a_real_http_metrics_route(metrics_server):
    res = drain.wait_idle(engine_drain_wait.scraper(metrics_server, None), "vllm:num_requests_running",
                          "vllm:num_requests_waiting", timeout=10, interval=0.05)
    assert res["idle"] and res["running_at_start"] == 2 and res["polls"] == 3


def test_module_scraper_says_none_when_nothing_listens():
    assert engine_drain_wait.scraper("http://127.0.0.1:9", None)() is None
