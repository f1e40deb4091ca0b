# Copyright: (c) 2026, llmops.serving maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""bench/loadgen: percentile math, the workload mix, the Chinese document, the target guard, and a
real streamed exchange against a local HTTP server speaking the engines' SSE format."""
import asyncio
import json
import os
import sys
import threading
import unicodedata
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "bench", "loadgen"))
import llmops_loadgen as lg  # noqa: E402


@pytest.mark.parametrize("q, expected", [(0, 1.0), (50, 5.5), (95, 9.55), (99, 9.91), (100, 10.0)])
def test_percentile_interpolates_like_numpy(q, expected):
    assert lg.percentile(list(range(10, 0, -1)), q) == pytest.approx(expected)


def test_percentile_edge_cases():
    assert lg.percentile([], 99) is None
    assert lg.percentile([0.25], 99) == 0.25
    assert lg.percentile([1, 1, 1, 100], 50) == 1.0


def test_distribution_and_summary():
    records = [{"ok": True, "kind": "new_chat", "ttft_s": 0.1 * i, "e2e_s": 1.0 * i, "itl": [0.01, 0.03],
                "output_tokens": 10} for i in range(1, 5)]
    records.append({"ok": False, "kind": "summary", "e2e_s": 0.2, "error": "RuntimeError: HTTP 400: too long"})
    s = lg.summarize(records, wall_s=2.0)
    assert (s["requests"], s["ok"], s["errors"]) == (5, 4, 1)
    assert s["output_tokens_per_s"] == 20.0
    assert s["e2e_s"]["p50"] == 2.5 and s["e2e_s"]["n"] == 4
    assert s["itl_s"]["n"] == 8 and s["itl_s"]["p50"] == pytest.approx(0.02)
    assert s["error_samples"] == ["RuntimeError: HTTP 400: too long"]


@pytest.mark.parametrize("n", [10, 24, 200, 1000])
def test_mix_proportions_are_exact(n):
    work = lg.build_workload(n, seed=7)
    counts = {k: sum(1 for r in work if r["kind"] == k) for k in ("continue_chat", "new_chat", "summary")}
    assert sum(counts.values()) == n
    for kind, share in lg.MIX:
        assert abs(counts[kind] - n * share) < 1


def test_workload_is_seeded_and_shaped():
    a, b, c = lg.build_workload(50, seed=1), lg.build_workload(50, seed=1), lg.build_workload(50, seed=2)
    assert a == b
    assert [r["kind"] for r in a] != [r["kind"] for r in c]
    for r in a:
        assert r["temperature"] == 0.7
        assert r["max_tokens"] == {"continue_chat": 1024, "new_chat": 1024, "summary": 300}[r["kind"]]
        if r["kind"] == "continue_chat":
            roles = [m["role"] for m in r["messages"]]
            assert roles[-1] == "user" and "assistant" in roles and len(roles) >= 3
        elif r["kind"] == "new_chat":
            assert len(r["messages"]) == 1
        else:
            assert len(r["messages"][0]["content"]) > 12000


def test_a_fresh_prefix_gives_each_run_prompts_no_earlier_run_cached():
    # validate's benchmark compares a run with a baseline: a prefix cache warmed by the baseline's
    # identical prompts made the second run prefill one token a request (SGLang on the H200: TTFT
    # P50 +52 %, bench/results/h200-sglang-20261203)
    def run_args(*more):
        return lg.parse_args(["run", "--url", "http://127.0.0.1:1", "--model", "m", "--out", "o.json"] + list(more))
    first, second, plain = run_args("--fresh-prefix"), run_args("--fresh-prefix"), run_args()
    assert plain.run_prefix == "" and first.run_prefix != second.run_prefix
    a, b = (lg.build_workload(20, seed=1, prefix=x.run_prefix) for x in (first, second))
    base = lg.build_workload(20, seed=1)
    for ra, rb, r in zip(a, b, base):
        # the same work, but for a different first few tokens
        assert ra["messages"][0]["content"] == first.run_prefix + r["messages"][0]["content"]
        assert rb["messages"][0]["content"] == second.run_prefix + r["messages"][0]["content"]
        assert ra["messages"][1:] == r["messages"][1:] and ra["kind"] == r["kind"]


def test_warmup_requests_go_first_and_are_left_out_of_a_closed_loop_run(tmp_path, monkeypatch):
    sent = []

    async def phase(args, workload, concurrency, deadline):
        sent.append([r["messages"][0]["content"] for r in workload])
        return {"summary": {}, "records": []}

    monkeypatch.setattr(lg, "run_phase", phase)
    args = lg.parse_args(["run", "--url", "http://127.0.0.1:1", "--model", "m", "--out", str(tmp_path / "o.json"),
                          "--requests", "6", "--sweep", "", "--warmup-requests", "3", "--fresh-prefix"])
    result = asyncio.run(lg.run_all(args))
    assert [len(p) for p in sent] == [3, 6] and result["mixed"]["records"] == []
    assert all(content.startswith(args.run_prefix) for p in sent for content in p)
    assert result["config"]["warmup_requests"] == 3 and result["config"]["fresh_prefix"] is True
    with pytest.raises(SystemExit):
        lg.parse_args(["run", "--url", "http://127.0.0.1:1", "--model", "m", "--out", "o", "--warmup-requests", "-1"])


def test_samples_repeat_the_measured_load_each_with_prompts_no_earlier_sample_cached(tmp_path, monkeypatch):
    sent = []

    async def phase(args, workload, concurrency, deadline):
        sent.append([r["messages"][0]["content"] for r in workload])
        return {"summary": {"ok": len(workload), "run": len(sent)}, "records": []}

    monkeypatch.setattr(lg, "run_phase", phase)
    args = lg.parse_args(["run", "--url", "http://127.0.0.1:1", "--model", "m", "--out", str(tmp_path / "o.json"),
                          "--requests", "5", "--sweep", "", "--warmup-requests", "2", "--samples", "3", "--fresh-prefix"])
    result = asyncio.run(lg.run_all(args))
    assert [len(p) for p in sent] == [2, 5, 5, 5]
    # the first sample is the mixed phase; every sample's summary is kept, in order
    assert result["mixed"]["summary"]["run"] == 2 and [x["run"] for x in result["samples"]] == [2, 3, 4]
    assert result["config"]["samples"] == 3
    first, second, third = sent[1:]
    # the same work, each sample's prompts starting apart from the others' and the warm-up's
    assert len(set(first) | set(second) | set(third)) == 15
    assert [c.split("] ", 2)[-1] for c in second] == [c.split("] ", 1)[-1] for c in first]
    assert all(c.startswith(args.run_prefix) for p in sent for c in p)
    with pytest.raises(SystemExit):
        lg.parse_args(["run", "--url", "http://127.0.0.1:1", "--model", "m", "--out", "o", "--samples", "0"])


def test_max_tokens_cap():
    assert {r["max_tokens"] for r in lg.build_workload(20, max_tokens_cap=32)} == {32}


def test_chinese_document_is_12000_chinese_characters():
    doc = lg.chinese_document()
    assert len(doc) == 12000 == lg.DOCUMENT_CHARS
    assert doc.endswith("。")
    han = sum(1 for ch in doc if "CJK UNIFIED" in unicodedata.name(ch, ""))
    assert han / len(doc) > 0.8
    assert lg.chinese_document(seed=3) == lg.chinese_document(seed=3) != doc
    assert len(lg.chinese_document(400)) == 400


@pytest.mark.parametrize("url", ["http://127.0.0.1:8000", "http://localhost:8000", "http://[::1]:8000"])
def test_loopback_targets_allowed(url):
    lg.check_target(url)


def test_other_targets_refused_unless_allowed():
    with pytest.raises(SystemExit, match="only loopback"):
        lg.check_target("http://10.1.2.3:8000")
    with pytest.raises(SystemExit):
        lg.check_target("https://api.example.com")
    lg.check_target("http://10.1.2.3:8000", allow_hosts=("10.1.2.3",))


class _Engine(BaseHTTPRequestHandler):
    """Streams like vLLM/SGLang: chunked SSE, usage in the last chunk, 400 on an empty prompt."""
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if self.headers.get("Authorization") != "Bearer k" or body["messages"][0]["content"] == "":
            payload = b'{"error": {"message": "bad request"}}'
            self.send_response(400)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        events = [{"choices": [{"delta": {"role": "assistant"}}]}]
        events += [{"choices": [{"delta": {"content": "字%d" % i}}]} for i in range(body["max_tokens"])]
        events += [{"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": body["max_tokens"]}}]
        for event in events:
            data = ("data: %s\n\n" % json.dumps(event)).encode()
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.write(b"12\r\ndata: [DONE]\n\n\r\n0\r\n\r\n")


@pytest.fixture()
def engine():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Engine)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield "http://127.0.0.1:%d" % server.server_address[1]
    server.shutdown()


def test_streamed_request_records_tokens_and_latencies(engine):
    request = {"index": 0, "kind": "new_chat", "messages": [{"role": "user", "content": "hi"}],
               "max_tokens": 6, "temperature": 0.7}
    record = asyncio.run(lg.chat_stream(engine, "m", "k", request, 10))
    assert record["ok"], record
    assert record["output_tokens"] == 6 and len(record["itl"]) == 5
    assert 0 < record["ttft_s"] <= record["e2e_s"]


def test_http_errors_are_recorded(engine):
    request = {"index": 1, "kind": "summary", "messages": [{"role": "user", "content": ""}],
               "max_tokens": 3, "temperature": 0.7}
    record = asyncio.run(lg.chat_stream(engine, "m", "k", request, 10))
    assert not record["ok"] and "HTTP 400" in record["error"]


def test_full_run_writes_results(engine, tmp_path, monkeypatch):
    monkeypatch.setenv("KEY", "k")
    out = tmp_path / "r.json"
    context = {"flags": ["--max-num-seqs", "8"], "gpus": "none", "collection": "commit 0123abcd"}
    (tmp_path / "context.json").write_text(json.dumps(context), encoding="utf-8")
    rc = lg.main(["run", "--url", engine, "--model", "m", "--api-key-env", "KEY", "--engine", "vllm",
                  "--requests", "10", "--concurrency", "4", "--sweep", "1,2", "--sweep-requests", "3",
                  "--max-tokens-cap", "4", "--document-chars", "50", "--run-context", str(tmp_path / "context.json"),
                  "--out", str(out)])
    result = json.loads(out.read_text(encoding="utf-8"))
    assert rc == 0 and result["context"] == context
    assert result["mixed"]["summary"]["ok"] == 10 and result["mixed"]["summary"]["output_tokens"] == 40
    assert [p["concurrency"] for p in result["sweep"]] == [1, 2]
    assert result["mixed"]["by_kind"]["summary"]["requests"] == 2
    assert result["samples"] == [result["mixed"]["summary"]]


def test_the_key_is_read_from_the_engines_environment_file(tmp_path, monkeypatch):
    env_file = tmp_path / "vllm.env"
    env_file.write_text('# managed\nVLLM_API_KEY="k-0123456789abcdef"\nHF_HUB_OFFLINE="1"\nOTHER=plain\n')
    monkeypatch.delenv("VLLM_API_KEY", raising=False)
    args = lg.parse_args(["run", "--url", "http://127.0.0.1:1", "--model", "m", "--out", str(tmp_path / "o.json"),
                          "--api-key-env", "VLLM_API_KEY", "--api-key-env-file", str(env_file)])
    assert args.api_key == "k-0123456789abcdef"
    assert lg.key_from_env_file(str(env_file), "OTHER") == "plain"
    assert lg.key_from_env_file(str(env_file), "MISSING") == ""


def test_an_https_engine_is_reached_with_the_given_ca(tmp_path):
    import ssl
    assert lg.tls_context("http://127.0.0.1:8000", "") is None
    ctx = lg.tls_context("https://127.0.0.1:8000", "")
    assert isinstance(ctx, ssl.SSLContext) and ctx.verify_mode == ssl.CERT_REQUIRED and ctx.check_hostname


# ------------------------------------------------------------------------------------ open loop
def _intervals(offsets):
    return [b - a for a, b in zip([0.0] + offsets, offsets)]


def _mean_and_cv(values):
    mean = sum(values) / len(values)
    std = (sum((v - mean) ** 2 for v in values) / len(values)) ** 0.5
    return mean, std / mean


@pytest.mark.parametrize("rate", [0.5, 4.0, 50.0])
def test_poisson_arrivals_have_the_target_rate_and_exponential_gaps(rate):
    offsets = lg.poisson_arrivals(rate, 4000, seed=7)
    assert offsets == sorted(offsets) and len(offsets) == 4000
    mean, cv = _mean_and_cv(_intervals(offsets))
    # the mean of 4000 exponential gaps is within 5 % of 1/rate (its standard error is 1.6 %)
    assert abs(mean * rate - 1) < 0.05, mean * rate
    assert abs(cv - 1) < 0.06, cv  # exponential: standard deviation = mean
    # the same seed, the same arrivals; another seed, others
    assert lg.poisson_arrivals(rate, 4000, seed=7) == offsets != lg.poisson_arrivals(rate, 4000, seed=8)


def test_burstiness_shapes_the_gaps_and_a_horizon_bounds_them():
    regular = lg.poisson_arrivals(10.0, 4000, seed=1, burstiness=4.0)
    bursty = lg.poisson_arrivals(10.0, 4000, seed=1, burstiness=0.25)
    for offsets, cv in ((regular, 0.5), (bursty, 2.0)):  # gamma of shape k: cv = 1/sqrt(k)
        mean, got = _mean_and_cv(_intervals(offsets))
        assert abs(mean * 10 - 1) < 0.1 and abs(got - cv) < 0.15 * cv, (mean, got)
    bounded = lg.poisson_arrivals(10.0, 10000, seed=3, horizon_s=30.0)
    assert bounded[-1] < 30.0 and abs(len(bounded) - 300) < 60


def test_a_rate_schedule_follows_its_steps():
    offsets = lg.schedule_arrivals([(0.0, 2.0), (100.0, 20.0), (150.0, 5.0)], 250.0, seed=5)
    counts = [len([t for t in offsets if a <= t < b]) for a, b in ((0, 100), (100, 150), (150, 250))]
    for got, expected in zip(counts, (200, 1000, 500)):
        assert abs(got - expected) < 4 * expected ** 0.5, counts
    assert offsets == sorted(offsets) and offsets[-1] < 250.0
    assert len(lg.schedule_arrivals([(0.0, 20.0)], 250.0, seed=5, count=40)) == 40


def test_sla_and_rates_are_parsed_with_their_units():
    assert lg.parse_sla("ttft:p99:500ms, e2el:p99.9:10s,tpot:P50:20") == [
        {"metric": "ttft", "percentile": 99.0, "bound_ms": 500.0},
        {"metric": "e2el", "percentile": 99.9, "bound_ms": 10000.0},
        {"metric": "tpot", "percentile": 50.0, "bound_ms": 20.0}]
    assert lg.parse_sla("") == [] and lg.parse_rates("0.5,2, 8") == [0.5, 2.0, 8.0]
    assert lg.parse_schedule("0:2,30:8") == [(0.0, 2.0), (30.0, 8.0)]


@pytest.mark.parametrize("parse,text,message", [
    (lg.parse_sla, "latency:p99:500ms", "unknown metric 'latency' in 'latency:p99:500ms'; use one of ttft, tpot, itl, e2el"),
    (lg.parse_sla, "ttft:p0:500ms", "the percentile 'p0' in 'ttft:p0:500ms' must be p followed by a number in (0, 100]"),
    (lg.parse_sla, "ttft:p101:500ms", "must be p followed by a number in (0, 100]"),
    (lg.parse_sla, "ttft:99:500ms", "the percentile '99'"),
    (lg.parse_sla, "ttft:p99:0ms", "'0ms' must be above 0"),
    (lg.parse_sla, "ttft:p99:fast", "'fast' is not a time (write 500ms, 10s or 500)"),
    (lg.parse_sla, "ttft<500", "is not METRIC:pPERCENTILE:BOUND"),
    (lg.parse_rates, "2,0", "--rates: '0' must be above 0 requests per second"),
    (lg.parse_rates, "-1", "must be above 0"),
    (lg.parse_rates, "fast", "'fast' is not a number"),
    (lg.parse_schedule, "10:2", "the offsets must start at 0 and increase"),
    (lg.parse_schedule, "0:2,0:3", "the offsets must start at 0 and increase"),
    (lg.parse_schedule, "0:0", "the rate in '0:0' must be above 0"),
])
def test_bad_sla_rates_and_schedules_are_named(parse, text, message):
    with pytest.raises(lg.BadOption) as err:
        parse(text)
    assert message in str(err.value), str(err.value)


@pytest.mark.parametrize("argv,message", [
    ([], "give --rates (e.g. 1,2,4) or --schedule"),
    (["--rates", "1", "--burstiness", "0"], "--burstiness must be above 0"),
    (["--rates", "1", "--rate-duration", "0"], "--requests-per-rate and --rate-duration must be above 0"),
    (["--rates", "1", "--percentiles", "50,120"], "--percentiles must each be in (0, 100]"),
    (["--rates", "1", "--sla", "queue:p99:1s"], "unknown metric 'queue'"),
    (["--rates", "1", "--warmup-requests", "-1"], "--warmup-requests must be 0 or more"),
    (["--schedule", "0:2,30:8,60:4"], "its last step starts at 60 s, after its arrivals end (--rate-duration 60 s)"),
    (["--schedule", "0:inf"], "--schedule: '0:inf' is not SECONDS:RATE"),
    (["--rates", "1", "--duration", "0"], "--duration must be above 0 seconds"),
    (["--rates", "1", "--max-tokens-cap", "-5"], "--max-tokens-cap 0 (no cap) or more"),
    (["--rates", "1", "--workload-file", "/nonexistent/w.jsonl"], "--workload-file /nonexistent/w.jsonl: no such file"),
    (["--rates", "1", "--run-context", "/nonexistent/c.json"], "--run-context /nonexistent/c.json: [Errno 2]"),
])
def test_bad_open_loop_options_stop_before_any_request(argv, message, capsys, tmp_path):
    with pytest.raises(SystemExit) as err:
        lg.main(["open", "--url", "http://127.0.0.1:1", "--model", "m", "--out", str(tmp_path / "o.json")] + argv)
    assert err.value.code == 2 and message in capsys.readouterr().err
    assert not (tmp_path / "o.json").exists()


def _record(index, ttft, e2e, tokens=11, ok=True):
    if not ok:
        return {"index": index, "kind": "new_chat", "ok": False, "e2e_s": e2e, "error": "HTTP 503: busy"}
    gaps = [(e2e - ttft) / (tokens - 1)] * (tokens - 1) if tokens > 1 else []
    return {"index": index, "kind": "new_chat", "ok": True, "ttft_s": ttft, "e2e_s": e2e, "itl": gaps,
            "output_tokens": tokens, "prompt_tokens": 20}


def test_the_sla_holds_on_the_percentile_and_goodput_counts_requests_within_every_bound():
    # 100 requests: TTFT 0.1 s .. 1.09 s (one per 10 ms), each 1 s longer end to end
    records = [_record(i, 0.1 + i * 0.01, 1.1 + i * 0.01) for i in range(100)]
    sla = lg.parse_sla("ttft:p50:700ms,e2el:p99:3s")
    report = lg.sla_report(records, sla, wall_s=10.0)
    assert report["met"] and [round(c["value_ms"], 3) for c in report["criteria"]] == [595.0, 2080.1]
    # the requests with TTFT <= 700 ms (0.1 .. 0.7): 61, in 10 s
    assert report["good"] == 61 and report["goodput_rps"] == pytest.approx(6.1)
    assert not lg.sla_report(records, lg.parse_sla("ttft:p50:500ms"), 10.0)["met"]
    # two failed requests in 100 are past any bound: P99 is infinite, P95 still holds
    failed = records[:98] + [_record(98, 0, 0.5, ok=False), _record(99, 0, 0.5, ok=False)]
    assert lg.sla_report(failed, lg.parse_sla("e2el:p99:3s"), 10.0)["criteria"][0]["value_ms"] == float("inf")
    assert lg.sla_report(failed, lg.parse_sla("e2el:p95:3s"), 10.0)["met"]
    assert not lg.sla_report([], sla, 10.0)["met"]


def test_a_percentile_that_lands_on_the_last_success_is_that_value_not_nan():
    # 100 successes and 1 failure: P99's rank is exactly the last success
    records = [_record(i, 0.1, 1.0 + i * 0.001) for i in range(100)] + [_record(100, 0, 1.0, ok=False)]
    value = lg.sla_report(records, lg.parse_sla("e2el:p99:5s"), 10.0)["criteria"][0]["value_ms"]
    assert value == pytest.approx(1099.0) and lg.sla_report(records, lg.parse_sla("e2el:p99:5s"), 10.0)["met"]
    json.dumps(lg.sla_report(records, lg.parse_sla("e2el:p99:5s"), 10.0), allow_nan=False)


def test_the_itl_bound_holds_for_every_gap_as_vllm_bench_serve_counts_them():
    # one request stalls 2 s once among 99 gaps of 10 ms: its mean gap is 30 ms, its worst 2 s
    stalled = dict(_record(0, 0.1, 0.1 + 99 * 0.01 + 2.0, tokens=101), itl=[0.01] * 98 + [2.0])
    records = [stalled] + [_record(i, 0.1, 1.1, tokens=101) for i in range(1, 3)]
    report = lg.sla_report(records, lg.parse_sla("itl:p99.9:50ms"), 10.0)
    assert not report["met"] and report["criteria"][0]["value_ms"] > 50
    assert lg.bench_serve_metrics(records, 10.0, percentiles=(99.9,))["p99.9_itl_ms"] == pytest.approx(
        report["criteria"][0]["value_ms"])
    # ITL is no per-request goodput bound (vllm bench serve's goodput takes TTFT, TPOT, E2EL)
    assert report["good"] == 3


def test_the_highest_rate_is_below_the_first_miss_and_a_cut_phase_does_not_count():
    def phase(rate, met, truncated=False):
        return {"rate": rate, "truncated": truncated, "sla": {"met": met}}
    assert lg.max_rate_meeting_sla([phase(2, True), phase(4, False), phase(8, True)]) == 2
    assert lg.max_rate_meeting_sla([phase(2, True), phase(4, True, truncated=True)]) == 2
    assert lg.max_rate_meeting_sla([phase(2, False)]) is None and lg.max_rate_meeting_sla([]) is None


def test_the_open_loop_run_reports_each_rate_and_stops_after_the_sla_is_missed(engine, tmp_path, monkeypatch):
    monkeypatch.setenv("KEY", "k")
    workload = tmp_path / "chats.jsonl"
    workload.write_text("# two chats\n" + "\n".join(json.dumps(line) for line in (
        {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 3, "kind": "short"},
        {"messages": [{"role": "user", "content": "tell more"}], "max_completion_tokens": 5})) + "\n\n")
    out = tmp_path / "open.json"
    # the local engine answers in milliseconds: 10 s holds at both rates, 0.001 ms at none
    rc = lg.main(["open", "--url", engine, "--model", "m", "--api-key-env", "KEY", "--rates", "20,40",
                  "--requests-per-rate", "12", "--rate-duration", "5", "--sla", "e2el:p99:10s,ttft:p90:5s",
                  "--workload-file", str(workload), "--out", str(out)])
    result = json.loads(out.read_text(encoding="utf-8"))
    assert rc == 0 and result["mode"] == "open" and [p["rate"] for p in result["phases"]] == [20.0, 40.0]
    assert result["label"] == "" and not any(p["truncated"] for p in result["phases"])
    first = result["phases"][0]
    assert first["summary"]["ok"] == 12 and first["sla"]["met"] and first["sla"]["good"] == 12
    assert sorted(first["by_kind"]) == ["file", "short"] and first["by_kind"]["short"]["output_tokens"] == 6 * 3
    assert first["bench_serve"]["completed"] == 12 and first["bench_serve"]["total_output_tokens"] == 6 * 3 + 6 * 5
    assert {"request_throughput", "request_goodput", "output_throughput", "p99_ttft_ms", "median_e2el_ms",
            "std_itl_ms", "p50_tpot_ms"} <= set(first["bench_serve"])
    assert result["max_rate_meeting_sla"] == 40.0
    assert result["warmup"] is None
    rc = lg.main(["open", "--url", engine, "--model", "m", "--api-key-env", "KEY", "--rates", "20,40",
                  "--requests-per-rate", "6", "--rate-duration", "5", "--sla", "e2el:p99:0.001ms",
                  "--warmup-requests", "5", "--out", str(out)])
    result = json.loads(out.read_text(encoding="utf-8"))
    assert rc == 0 and [p["rate"] for p in result["phases"]] == [20.0]  # stopped after the miss
    assert result["max_rate_meeting_sla"] is None and result["phases"][0]["sla"]["good"] == 0
    # the warm-up requests went first, at the first rate, and are not in the phase's figures
    assert result["warmup"]["rate"] == 20.0 and result["warmup"]["summary"]["ok"] == 5
    assert result["phases"][0]["requests"] == 6 and result["config"]["warmup_requests"] == 5


def test_a_result_is_judged_again_under_another_sla_from_its_own_records(engine, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("KEY", "k")
    out = tmp_path / "open.json"
    # measured under a loose SLA: both rates loaded, both met
    assert lg.main(["open", "--url", engine, "--model", "m", "--api-key-env", "KEY", "--rates", "20,40",
                    "--requests-per-rate", "8", "--rate-duration", "5", "--sla", "e2el:p99:10s",
                    "--max-tokens-cap", "4", "--out", str(out)]) == 0
    measured = json.loads(out.read_text(encoding="utf-8"))
    records = measured["phases"][0]["records"]
    assert len(records) == 8 and set(records[0]) == set(lg.JUDGED_FIELDS)
    # held to a bound no request meets: judged from the records, no request is sent
    strict = lg.judge(measured, lg.parse_sla("e2el:p99:0.001ms"))
    assert strict["complete"] and strict["max_rate_meeting_sla"] is None
    assert [p["sla"]["met"] for p in strict["phases"]] == [False, False]
    assert strict["phases"][0]["sla"]["good"] == 0 and strict["phases"][0]["bench_serve"]["request_goodput"] == 0
    assert strict["config"]["sla"] == lg.parse_sla("e2el:p99:0.001ms") and "records" not in strict["phases"][0]
    # the verdict is the one a run measured with that SLA reaches on the same records
    assert lg.judge(measured, lg.parse_sla("e2el:p99:10s"))["phases"][1]["sla"] == measured["phases"][1]["sla"]
    # measured under the strict SLA, the run stopped at the first rate: a looser SLA that the first
    # rate meets cannot say how the second would have done
    assert lg.main(["open", "--url", engine, "--model", "m", "--api-key-env", "KEY", "--rates", "20,40",
                    "--requests-per-rate", "8", "--rate-duration", "5", "--sla", "e2el:p99:0.001ms",
                    "--max-tokens-cap", "4", "--out", str(out)]) == 0
    capsys.readouterr()
    stopped = json.loads(out.read_text(encoding="utf-8"))
    assert [p["rate"] for p in stopped["phases"]] == [20.0]
    assert not lg.judge(stopped, lg.parse_sla("e2el:p99:10s"))["complete"]
    assert lg.judge(stopped, lg.parse_sla("ttft:p99:0.001ms"))["complete"]
    # from the command line: the judged result on stdout; a result without records answers nothing
    assert lg.main(["judge", "--result", str(out), "--sla", "ttft:p99:0.001ms"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["complete"] and printed["phases"][0]["sla"]["criteria"][0]["metric"] == "ttft"
    # a --schedule phase (no rate) is judged too and kept, but never stops the run
    scheduled = dict(stopped, phases=[dict(stopped["phases"][0], rate=None, schedule=[[0, 20.0]])] + stopped["phases"])
    kept = lg.judge(scheduled, lg.parse_sla("e2el:p99:10s"))
    assert [p["rate"] for p in kept["phases"]] == [None, 20.0] and kept["phases"][0]["sla"]["met"]
    assert not kept["complete"]
    for phase in stopped["phases"]:
        del phase["records"]
    assert not lg.judge(stopped, lg.parse_sla("ttft:p99:0.001ms"))["complete"]


@pytest.mark.parametrize("argv, message", [
    (["--result", "/nonexistent/o.json", "--sla", "ttft:p99:1s"], "--result /nonexistent/o.json: [Errno 2]"),
    (["--result", "RESULT", "--sla", ""], "--sla: give at least one bound"),
    (["--result", "RESULT", "--sla", "ttfb:p99:1s"], "unknown metric 'ttfb'"),
])
def test_a_judge_of_a_missing_result_or_without_an_sla_is_refused(argv, message, tmp_path, capsys):
    closed = tmp_path / "closed.json"
    closed.write_text(json.dumps({"mode": "closed"}))
    with pytest.raises(SystemExit) as err:
        lg.main(["judge"] + [str(closed) if a == "RESULT" else a for a in argv])
    assert message in str(err.value.code) + capsys.readouterr().err
    with pytest.raises(SystemExit) as err:
        lg.main(["judge", "--result", str(closed), "--sla", "ttft:p99:1s"])
    assert "is not the result of an open-loop run" in str(err.value.code)


def test_open_loop_requests_are_sent_at_their_arrival_times(engine, monkeypatch):
    monkeypatch.setenv("KEY", "k")
    args = lg.parse_args(["open", "--url", engine, "--model", "m", "--api-key-env", "KEY", "--rates", "1",
                          "--out", "/dev/null"])
    offsets = [0.05, 0.3, 0.31, 0.6]
    requests = lg.take_requests(lg.build_workload(4, max_tokens_cap=2, document_chars=20), 4)
    import time
    records, wall = asyncio.run(lg.run_open_phase(args, requests, offsets, time.monotonic() + 30))
    assert sorted(r["arrival_s"] for r in records) == offsets and all(r["ok"] for r in records)
    assert all(r["send_lag_s"] < 0.1 for r in records) and 0.6 <= wall < 5


@pytest.mark.parametrize("line,message", [
    ("not json", "line 2: not JSON"),
    ('{"prompt": "hi"}', 'line 2: needs "messages", a non-empty list of {"role", "content"}'),
    ('{"messages": [{"role": "user", "content": "x"}], "max_tokens": 0}', "line 2: max_tokens must be a whole number above 0"),
])
def test_a_bad_workload_line_is_named(tmp_path, line, message):
    path = tmp_path / "w.jsonl"
    path.write_text('{"messages": [{"role": "user", "content": "ok"}]}\n' + line + "\n")
    with pytest.raises(lg.BadOption) as err:
        lg.load_workload_file(str(path))
    assert message in str(err.value) and str(path) in str(err.value)
    (tmp_path / "empty.jsonl").write_text("# nothing\n")
    with pytest.raises(lg.BadOption, match="holds no requests"):
        lg.load_workload_file(str(tmp_path / "empty.jsonl"))


VLLM_PY = os.environ.get("LLMOPS_TEST_VLLM_PYTHON")
VLLM_METRICS = r'''
import json, sys
from vllm.benchmarks.serve import calculate_metrics
from vllm.benchmarks.lib.endpoint_request_func import RequestFuncOutput
req = json.loads(sys.stdin.read())
outputs = [RequestFuncOutput(success=r["ok"], latency=r["e2e_s"], ttft=r.get("ttft_s") or 0.0, itl=r.get("itl") or [],
                             output_tokens=r.get("output_tokens") or 0, prompt_len=r.get("prompt_tokens") or 0)
           for r in req["records"]]
metrics, dummy = calculate_metrics([None] * len(outputs), outputs, req["wall"], None, req["percentiles"], req["goodput"])
out = {k: v for k, v in vars(metrics).items() if isinstance(v, (int, float))}
for key, value in vars(metrics).items():
    if key.startswith("percentiles_"):
        out.update(("p%d_%s" % (p, key[len("percentiles_"):]), v) for p, v in value)
print("@@" + json.dumps(out))
'''


@pytest.mark.skipif(not VLLM_PY, reason="set LLMOPS_TEST_VLLM_PYTHON to a vLLM venv's python (make unit does)")
def test_the_bench_serve_figures_are_vllm_bench_serves_own():
    """vLLM's own calculate_metrics (vllm/benchmarks/serve.py) on the same requests gives the same
    figures under the same names."""
    import subprocess
    records = [_record(i, 0.05 + (i % 7) * 0.03, 0.4 + (i % 5) * 0.2, tokens=2 + i % 9) for i in range(40)]
    records += [_record(40, 0, 1.0, ok=False), _record(41, 0.2, 0.2, tokens=1)]
    sla = lg.parse_sla("ttft:p99:200ms,tpot:p99:60ms,e2el:p99:1s")
    ours = lg.bench_serve_metrics(records, 12.5, percentiles=(50, 99), sla=sla)
    proc = subprocess.run([VLLM_PY, "-c", VLLM_METRICS], capture_output=True, text=True, timeout=600, check=False, input=json.dumps(
        {"records": records, "wall": 12.5, "percentiles": [50, 99], "goodput": {"ttft": 200, "tpot": 60, "e2el": 1000}}))
    lines = [line for line in proc.stdout.splitlines() if line.startswith("@@")]
    assert lines, proc.stdout[-2000:] + proc.stderr[-3000:]
    theirs = json.loads(lines[-1][2:])
    compared = ["completed", "failed", "request_throughput", "request_goodput", "output_throughput",
                "total_token_throughput"] + ["%s_%s_ms" % (stat, metric) for metric in lg.SLA_METRICS
                                             for stat in ("mean", "median", "std", "p50", "p99")]
    for name in compared:
        assert ours[name] == pytest.approx(theirs[name], rel=1e-9, abs=1e-9), name
    assert ours["total_input_tokens"] == theirs["total_input"] and ours["total_output_tokens"] == theirs["total_output"]
