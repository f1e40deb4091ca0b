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
    rc = lg.main(["run", "--url", engine, "--model", "m", "--api-key-env", "KEY", "--engine", "vllm",
                  "--requests", "10", "--concurrency", "4", "--sweep", "1,2", "--sweep-requests", "3",
                  "--max-tokens-cap", "4", "--document-chars", "50", "--out", str(out)])
    result = json.loads(out.read_text(encoding="utf-8"))
    assert rc == 0
    assert result["mixed"]["summary"]["ok"] == 10 and result["mixed"]["summary"]["output_tokens"] == 40
    assert [p["concurrency"] for p in result["sweep"]] == [1, 2]
    assert result["mixed"]["by_kind"]["summary"]["requests"] == 2


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
