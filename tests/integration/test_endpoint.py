"""Behaviour of a converged engine host, seen from inside it (testinfra, podman backend).

Shared by the engine scenarios; each sets LLMOPS_ENGINE / LLMOPS_MODEL / LLMOPS_LISTEN /
LLMOPS_API_KEY in its verifier env to say what it deployed.
"""
import json
import os
import re
import shlex
import sys
import time
import uuid

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "harness"))
import golden_units  # noqa: E402  pylint: disable=wrong-import-position

ENGINE = os.environ.get("LLMOPS_ENGINE", "vllm")
MODEL = os.environ.get("LLMOPS_MODEL", "qwen3-tiny")
# the LoRA adapters served by name (vLLM leg of the default scenario), in /v1/models order
ADAPTERS = sorted(n for n in os.environ.get("LLMOPS_LORA_ADAPTERS", "").split(",") if n) if ENGINE == "vllm" else []
LISTEN = os.environ.get("LLMOPS_LISTEN", "127.0.0.1:8000")
API_KEY = os.environ["LLMOPS_API_KEY"]
UNIT = "llmops-%s.service" % ENGINE
OTHER_UNIT = "llmops-%s.service" % ("sglang" if ENGINE == "vllm" else "vllm")
BASE = "http://%s" % LISTEN


def timed_request(host, method, path, body=None, key=API_KEY):
    """curl inside the host; returns (status, parsed body or text, seconds the request took)."""
    cmd = ["curl", "-s", "-m", "120", "-o", "/tmp/resp", "-w", "%{http_code} %{time_total}", "-X", method, BASE + path]
    if key:
        cmd += ["-H", "Authorization: Bearer %s" % key]
    if body is not None:
        cmd += ["-H", "Content-Type: application/json", "-d", json.dumps(body)]
    status, seconds = host.check_output(" ".join(shlex.quote(c) for c in cmd)).split()
    text = host.file("/tmp/resp").content_string
    try:
        return int(status), json.loads(text), float(seconds)
    except ValueError:
        return int(status), text, float(seconds)


def request(host, method, path, body=None, key=API_KEY):
    """curl inside the host; returns (status, parsed body or text)."""
    return timed_request(host, method, path, body, key)[:2]


def special_ids(tokenizer):
    """The special tokens' ids of the served folder's tokenizer.json."""
    return dict((t["content"], t["id"]) for t in tokenizer["added_tokens"])


GOLDEN = os.path.join(os.path.dirname(__file__), "..", "fixtures", "golden", "engine-units")


@pytest.mark.parametrize("path", ["/etc/systemd/system/%s" % UNIT, "/etc/llmops/%s.env" % ENGINE],
                         ids=["unit", "env-file"])
def test_the_unit_and_env_file_are_those_the_same_inventory_got_before(host, path):
    """The engine's unit and environment file, byte for byte those of the same inventory before the
    translation point returned its final product (tests/fixtures/golden/engine-units/README.md),
    secrets and the host's own addresses masked."""
    with open(os.path.join(GOLDEN, os.path.basename(path)), encoding="utf-8") as handle:
        expected = handle.read()
    got = golden_units.normalized(host.file(path).content_string)
    assert got.splitlines() == expected.splitlines()


def test_unit_active_and_enabled(host):
    svc = host.service(UNIT)
    assert svc.is_running
    assert svc.is_enabled


def test_only_one_engine_runs(host):
    """After a switch of engines too: the other engine's unit is stopped and disabled, and no other
    llmops-* unit runs."""
    assert not host.service(OTHER_UNIT).is_running
    # disabled, or never installed on this host
    assert host.run("systemctl is-enabled %s" % OTHER_UNIT).rc != 0
    running = host.check_output("systemctl list-units 'llmops-*' --state=running --no-legend --plain | awk '{print $1}'")
    assert running.split() == [UNIT]


def test_runs_as_dedicated_user_without_key_on_command_line(host):
    pid = host.check_output("systemctl show -p MainPID --value %s" % UNIT)
    assert host.check_output("ps -o user= -p %s" % pid).strip() == "llmops"
    cmdline = host.file("/proc/%s/cmdline" % pid).content_string
    assert API_KEY not in cmdline
    assert "--api-key" not in cmdline


def test_environment_file_is_private(host):
    env = host.file("/etc/llmops/%s.env" % ENGINE)
    assert env.mode == 0o640
    assert env.user == "root" and env.group == "llmops"
    assert API_KEY in env.content_string


def test_listens_on_loopback_only(host):
    port = LISTEN.rsplit(":", 1)[1]
    listeners = host.check_output("ss -Hltn 'sport = :%s'" % port).splitlines()
    addresses = {line.split()[3].rsplit(":", 1)[0] for line in listeners}
    assert addresses == {"127.0.0.1"}, listeners


def test_models_lists_served_names(host):
    """The engine itself lists the model and the LoRA adapters it serves by name (vLLM leg; the
    SGLang leg serves none on the CPU host), each adapter from the served build."""
    status, body = request(host, "GET", "/v1/models")
    assert status == 200
    assert [m["id"] for m in body["data"]] == [MODEL] + ADAPTERS
    for m in body["data"][1:]:
        assert m["parent"] == MODEL and "/.builds/" in m["root"] and m["root"].endswith("/adapters/" + m["id"]), m


def test_chat_completion_returns_usage(host):
    status, body = request(host, "POST", "/v1/chat/completions", {
        "model": MODEL, "messages": [{"role": "user", "content": "Hello, who are you?"}],
        "max_tokens": 12, "temperature": 0})
    assert status == 200, body
    assert body["model"] == MODEL
    assert body["usage"]["completion_tokens"] > 0
    assert body["usage"]["prompt_tokens"] > 0
    assert body["choices"][0]["finish_reason"] in ("length", "stop")
    # The engine answering is the one deployed: vLLM fingerprints its responses, SGLang does not.
    assert ("vllm" in (body.get("system_fingerprint") or "")) == (ENGINE == "vllm"), body


# The engine's own count of prompt tokens served from its prefix cache.
PREFIX_HITS = {"vllm": "vllm:prefix_cache_hits_total", "sglang": "sglang:cached_tokens_total"}


def engine_metrics(host):
    """The engine's own /metrics page, read inside the host."""
    return host.check_output("curl -s -m 20 %s/metrics" % BASE)


def prefix_hits(host):
    page = engine_metrics(host)
    return sum(float(v) for v in re.findall(r"^%s(?:\{[^}]*\})? (\S+)$" % re.escape(PREFIX_HITS[ENGINE]), page, re.M))


def test_a_repeated_prompt_prefix_is_served_from_the_prefix_cache(host):
    """serving_enable_prefix_caching (on by default) in effect in the running engine, read from its own
    /metrics: a long prefix no request sent before is not counted as a hit the first time, and the
    second request that repeats it reuses at least a block of it. Without the flag (vLLM), or with
    --disable-radix-cache (SGLang), the second request hits nothing."""
    # about 700 tokens with the scenario's small vocabulary: several of vLLM's 128-token blocks, inside
    # the 1024 positions of the weights journey's model
    prefix = "Reference %s. %s" % (uuid.uuid4().hex, " ".join("item%d" % i for i in range(150)))

    def ask(question):
        status, body = request(host, "POST", "/v1/chat/completions", {
            "model": MODEL, "max_tokens": 1, "temperature": 0,
            "messages": [{"role": "system", "content": prefix}, {"role": "user", "content": question}]})
        assert status == 200, body
        return body["usage"]["prompt_tokens"]

    # the engine publishes its counters per step, a moment after the answer: read them after a pause,
    # and wait (bounded) for the second request's hits
    before = prefix_hits(host)
    prompt_tokens = ask("first")
    time.sleep(2)
    first = prefix_hits(host)
    ask("second")
    deadline = time.time() + 15
    while True:
        second = prefix_hits(host)
        if second - first >= 16 or time.time() > deadline:
            break
        time.sleep(1)
    assert 256 < prompt_tokens < 1000, prompt_tokens
    # the uuid's block is new: at most the chat template's opening tokens were cached before
    assert first - before < 32, (before, first)
    assert second - first >= 16, (before, first, second, prompt_tokens)


# The scheduler and cache knobs the default scenario sets away from each engine's defaults
# (molecule/default/molecule.yml), as the running engine reports them: vLLM's cache config in its
# /metrics (vllm:cache_config_info) and its scheduler's line in the journal, SGLang's server
# arguments as /server_info answers them.
VLLM_CACHE_CONFIG = {"block_size": "32", "cache_dtype": "fp8_e5m2", "enable_prefix_caching": "True"}
VLLM_SCHEDULER_LINE = "Chunked prefill is enabled with max_num_batched_tokens=1024."
SGLANG_SERVER_ARGS = {"max_prefill_tokens": 1024, "chunked_prefill_size": 1024, "enable_priority_scheduling": True}


def test_the_scheduler_and_cache_knobs_take_effect_in_the_running_engine(host):
    """serving_block_size, serving_kv_cache_dtype, serving_max_batched_tokens and
    serving_chunked_prefill's chunk, read back from the engine that serves (not from its argv): a flag
    the translation point dropped leaves the engine's own default there, and this fails."""
    if ENGINE == "vllm":
        page = engine_metrics(host)
        info = re.search(r"^vllm:cache_config_info\{([^}]*)\}", page, re.M)
        assert info, "no vllm:cache_config_info in /metrics"
        labels = dict(re.findall(r'(\w+)="([^"]*)"', info.group(1)))
        assert {k: labels.get(k) for k in VLLM_CACHE_CONFIG} == VLLM_CACHE_CONFIG, labels
        # the journal of this start of the engine only (a restart logs its own)
        since = host.check_output("systemctl show -p ActiveEnterTimestamp --value %s" % UNIT)
        log = host.check_output("journalctl -u %s -o cat --no-pager --since %s" % (UNIT, shlex.quote(since)))
        assert VLLM_SCHEDULER_LINE in log, [line for line in log.splitlines() if "max_num_batched_tokens" in line]
        return
    # the server arguments as SGLang resolved them at start (its /server_info)
    status, info = request(host, "GET", "/server_info")
    assert status == 200, info
    assert {k: info.get(k) for k in SGLANG_SERVER_ARGS} == SGLANG_SERVER_ARGS, sorted(info)


# Run inside the engine host. LOWS streamed requests of the low priority, each of LENGTH tokens, fill
# the engine's SLOTS running slots and queue the rest. Once every running one has streamed a token and
# the engine's /metrics counts the others waiting, one request of the high priority is sent; once the
# engine counts it waiting too, the client closes the stream of one running low, which the engine
# aborts: a slot frees at a moment the probe chooses, with every competitor already queued. First come,
# first served gives it to the oldest queued low; priority to the high one. Printed: whether each state
# was reached, how many lows were queued, and how many of those had a token before the high one got its
# first. Every stream is closed at the end (the engine aborts them).
PRIORITY_PROBE = r"""
import http.client, json, re, socket, sys, threading, time
host, port, key, model, low, high, waiting_metric = sys.argv[1:8]
lows = ["low%d" % i for i in range(int(sys.argv[8]))]
slots, length = int(sys.argv[9]), int(sys.argv[10])
first = {}
conns = {}
def stream(name, priority, max_tokens):
    conn = http.client.HTTPConnection(host, int(port), timeout=300)
    conns[name] = conn
    body = {"model": model, "stream": True, "max_tokens": max_tokens, "ignore_eos": True, "temperature": 0,
            "priority": int(priority), "messages": [{"role": "user", "content": "Write a long story, %s." % name}]}
    try:
        conn.request("POST", "/v1/chat/completions", json.dumps(body),
                     {"Authorization": "Bearer " + key, "Content-Type": "application/json"})
        for line in conn.getresponse():
            if line.startswith(b"data: {") and name not in first:
                first[name] = time.monotonic()
    except Exception:
        pass
def waiting():
    conn = http.client.HTTPConnection(host, int(port), timeout=20)
    conn.request("GET", "/metrics")
    text = conn.getresponse().read().decode()
    return sum(float(v) for v in re.findall(r"^%s(?:\{[^}]*\})? (\S+)$" % re.escape(waiting_metric), text, re.M))
def until(condition, seconds):
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.05)
    return condition()
for name in lows:
    threading.Thread(target=stream, args=(name, low, length), daemon=True).start()
full = until(lambda: len(first) >= slots and waiting() >= len(lows) - slots, 120)
queued = [n for n in lows if n not in first]
threading.Thread(target=stream, args=("high", high, 8), daemon=True).start()
high_queued = until(lambda: "high" in first or waiting() >= len(queued) + 1, 60)
running = [n for n in lows if n in first]
if running:
    conns[min(running, key=first.get)].sock.shutdown(socket.SHUT_RDWR)
until(lambda: "high" in first, 60)
ahead = [n for n in queued if n in first and first[n] < first.get("high", float("inf"))]
print(json.dumps({"full": full, "high_queued": high_queued, "queued": len(queued), "ahead_of_high": len(ahead),
                  "high_served": "high" in first}))
for conn in conns.values():
    try:
        conn.sock.shutdown(socket.SHUT_RDWR)
    except Exception:
        pass
"""


def test_priority_scheduling_serves_a_high_priority_request_before_those_queued_ahead_of_it(host):
    """serving_priority_scheduling in the running engine: with every running slot taken and requests
    of a low priority queued, a request of a high priority (vLLM: a lower value, SGLang: a higher one)
    gets the next free slot, before any of those queued before it. First come, first served (the flag
    dropped) gives that slot to the oldest queued low."""
    low, high = (10, 0) if ENGINE == "vllm" else (0, 10)
    waiting = {"vllm": "vllm:num_requests_waiting", "sglang": "sglang:num_queue_reqs"}[ENGINE]
    # Eight running (the scenario's serving_max_concurrency) and four queued. The running ones must
    # outlast the probe's steps: as long as the scenarios' context of 1024 tokens lets them
    # (serving_max_model_len, .config/molecule/config.yml) on vLLM; on SGLang the eight share the CPU
    # profile's KV pool of 4096 tokens (stacks/profiles.yml, max-total-tokens), so 440 each.
    length = 960 if ENGINE == "vllm" else 440
    host.run("cat > /tmp/priority_probe.py <<'EOF'\n%s\nEOF" % PRIORITY_PROBE)
    hostname, port = LISTEN.rsplit(":", 1)
    out = host.check_output("python3 /tmp/priority_probe.py %s" % " ".join(
        shlex.quote(str(a)) for a in (hostname, port, API_KEY, MODEL, low, high, waiting, 12, 8, length)))
    result = json.loads(out.splitlines()[-1])
    print("priority probe (%s): %s" % (ENGINE, result))
    assert result["full"] and result["queued"] >= 2, ("the running slots never filled with lows queued", result)
    assert result["high_queued"], ("the engine never counted the high-priority request waiting", result)
    assert result["high_served"] and result["ahead_of_high"] == 0, result


@pytest.mark.parametrize("key", [None, "wrong-key-0123456789"])
def test_chat_without_valid_key_is_refused(host, key):
    status, dummy = request(host, "POST", "/v1/chat/completions", {
        "model": MODEL, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 1}, key=key)
    assert status == 401


def test_engine_applies_chatml_template(host, served_tokenizer):
    """The prompt the engine tokenises starts with <|im_start|> as one special token, and the
    special tokens written in a prompt are the tokenizer's ids."""
    ids = special_ids(served_tokenizer)
    status, body = request(host, "POST", "/tokenize", {
        "model": MODEL, "messages": [{"role": "user", "content": "hi"}], "add_generation_prompt": True})
    assert status == 200, body
    tokens = body["tokens"]
    assert tokens[0] == ids["<|im_start|>"]
    assert tokens.count(ids["<|im_start|>"]) == 2  # user turn + assistant generation prompt
    assert tokens.count(ids["<|im_end|>"]) == 1
    status, body = request(host, "POST", "/tokenize", {"model": MODEL, "prompt": "<|im_start|><|im_end|>"})
    assert status == 200, body
    assert body["tokens"][-2:] == [ids["<|im_start|>"], ids["<|im_end|>"]]
