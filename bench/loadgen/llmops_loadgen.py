#!/usr/bin/env python3
# Copyright: (c) 2026, llmops.serving maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A small, bounded asyncio load generator for OpenAI-compatible chat endpoints (vLLM, SGLang).

Python 3.9+ standard library only: it is copied to the engine host and run by the host's python3,
so it reaches the engine on loopback (the engine never listens beyond it).

    python3 llmops_loadgen.py run --url http://127.0.0.1:8000 --model NAME --api-key-env KEY \
        --requests 200 --concurrency 32 --sweep 1,8,32 --out results.json

Workload (the field report's mix): 50 % continue-chat (history, max_tokens 1024), 30 % new chat,
20 % summary of a 12,000-character Chinese document (max_tokens 300); temperature 0.7. Every
request streams, so the client sees time to first token (TTFT) and the gaps between tokens (ITL).
Bounded by request count and wall time; only loopback or addresses the caller allows.

`run` is closed-loop (N clients, each sending its next request when the last one ends). `open` is
open-loop: requests arrive at a target rate as a Poisson process (gamma intervals with a burstiness
shape, as `vllm bench serve --request-rate R --burstiness B`), or by a rate schedule, whatever the
responses do; that is the load users put on a service, and the only one that says what latency
they see at a given rate:

    python3 llmops_loadgen.py open --url ... --model NAME --rates 1,2,4 --requests-per-rate 64 \
        --sla ttft:p99:500ms,e2el:p99:10s --out open.json

Each rate reports goodput (requests per second that met every SLA bound), the TTFT / TPOT / ITL /
E2EL percentiles and the errors, also under `vllm bench serve`'s result names (`request_throughput`,
`request_goodput`, `p99_ttft_ms`, ...). `--workload-file` replaces the seed's mix with chat requests
from a JSONL file.

`judge` reads an `open` result again under another SLA, from the request records each phase keeps
(`--sla` decides which rates a run loads, so a result answers a new SLA only when it loaded every
rate or a rate it loaded misses that SLA; it prints the judged result and whether it answers):

    python3 llmops_loadgen.py judge --result open.json --sla ttft:p99:200ms
"""
import argparse
import asyncio
import ipaddress
import json
import math
import os
import random
import socket
import ssl
import sys
import time
from urllib.parse import urlsplit

MIX = (("continue_chat", 0.5), ("new_chat", 0.3), ("summary", 0.2))
MAX_TOKENS = {"continue_chat": 1024, "new_chat": 1024, "summary": 300}
DOCUMENT_CHARS = 12000
TEMPERATURE = 0.7

# Sentences the summary document is built from (ops prose, so the text is plausible Chinese).
_ZH_SENTENCES = (
    "推理服务上线之前，运维团队需要确认驱动版本、CUDA 版本和推理引擎的版本彼此匹配。",
    "模型权重应当以 safetensors 格式保存，并在加载前校验每个分片的完整性。",
    "当键值缓存的使用率长时间超过百分之九十时，新请求会开始排队，首个令牌的延迟随之上升。",
    "滚动升级一次只更换一台主机，在健康检查通过之后才继续下一台，失败时自动回滚。",
    "服务只监听本机回环地址，外部流量必须经过带有身份认证的网关。",
    "长文档摘要请求的提示词很长，预填充阶段占用大量计算，容易拖慢同一批次里的其他请求。",
    "压测时应当记录首令牌延迟、令牌间隔、端到端延迟的分位数，以及每秒输出的令牌数量。",
    "告警规则要跟随引擎版本，因为指标名称会在版本之间改变，旧名称最终会被删除。",
    "同一台服务器、同一个模型、同一份负载，才能公平地比较两个推理引擎。",
    "内存峰值来自服务所在控制组的统计，而不是某个时刻的进程驻留内存。",
    "聊天模板决定了特殊令牌的位置，模板错误会让模型输出无法停止。",
    "每天两百万次请求意味着平均每秒二十多次，高峰时段可能是平均值的三到五倍。",
)


def chinese_document(chars=DOCUMENT_CHARS, seed=0):
    """A deterministic Chinese document of exactly `chars` characters."""
    rng = random.Random(seed)
    parts, length = [], 0
    while length < chars:
        sentence = rng.choice(_ZH_SENTENCES)
        parts.append(sentence)
        length += len(sentence)
    text = "".join(parts)[:chars]
    return text[:-1] + "。" if chars > 1 else text


_NEW_CHAT = (
    "Explain in a few sentences what a KV cache is.",
    "用三句话介绍一下张量并行。",
    "Write a short checklist for upgrading an inference engine.",
    "什么是首个令牌延迟？为什么它对聊天体验很重要？",
    "Give two reasons to keep an engine on the loopback address.",
    "请解释连续批处理的基本思想。",
)
_HISTORY = (
    ("我们的服务每天有两百万次请求，应该怎样规划容量？",
     "先估算峰值并发，再根据每个请求的上下文长度计算键值缓存需要的显存。"),
    ("How do we roll out a new engine version safely?",
     "Build the new environment beside the old one, validate it, switch one host at a time and roll back on failure."),
    ("监控里最重要的指标是什么？", "首令牌延迟的 P99、排队请求数和键值缓存使用率。"),
)
_FOLLOW_UP = (
    "那么 P99 延迟应该怎么测量？", "Can you make that more concrete with numbers?",
    "请继续，给出具体步骤。", "What would you alert on first?",
)


def quotas(n, mix=MIX):
    """Exact request counts per kind for n requests (largest remainder)."""
    raw = [(kind, n * share) for kind, share in mix]
    counts = {kind: int(value) for kind, value in raw}
    rest = n - sum(counts.values())
    for kind, value in sorted(raw, key=lambda kv: kv[1] - int(kv[1]), reverse=True)[:rest]:
        counts[kind] += 1
    return counts


def build_workload(n, seed=0, max_tokens_cap=None, document_chars=DOCUMENT_CHARS, temperature=TEMPERATURE,
                   prefix=""):
    """n chat requests in the report's mix, shuffled with `seed` (same seed, same workload); `prefix`
    starts every request's first message."""
    rng = random.Random(seed)
    kinds = [kind for kind, count in quotas(n).items() for _ in range(count)]
    rng.shuffle(kinds)
    document = chinese_document(document_chars, seed)
    requests = []
    for index, kind in enumerate(kinds):
        if kind == "summary":
            messages = [{"role": "user", "content": "请用中文概括下面这篇文档的要点：\n\n" + document}]
        elif kind == "new_chat":
            messages = [{"role": "user", "content": rng.choice(_NEW_CHAT)}]
        else:
            messages = []
            for question, answer in rng.sample(_HISTORY, rng.randint(1, len(_HISTORY))):
                messages += [{"role": "user", "content": question}, {"role": "assistant", "content": answer}]
            messages.append({"role": "user", "content": rng.choice(_FOLLOW_UP)})
        if prefix:
            messages[0] = dict(messages[0], content=prefix + messages[0]["content"])
        max_tokens = MAX_TOKENS[kind] if not max_tokens_cap else min(MAX_TOKENS[kind], max_tokens_cap)
        requests.append({"index": index, "kind": kind, "messages": messages,
                         "max_tokens": max_tokens, "temperature": temperature})
    return requests


# ------------------------------------------------------------------------------------ statistics
def percentile(values, q):
    """q-th percentile (0-100), linear interpolation between closest ranks (numpy's default)."""
    if not values:
        return None
    data = sorted(values)
    if len(data) == 1:
        return float(data[0])
    pos = (len(data) - 1) * q / 100.0
    low = int(pos)
    high = min(low + 1, len(data) - 1)
    return float(data[low] + (data[high] - data[low]) * (pos - low))


def distribution(values):
    return {"p50": percentile(values, 50), "p95": percentile(values, 95), "p99": percentile(values, 99),
            "mean": (sum(values) / len(values)) if values else None, "n": len(values)}


def summarize(results, wall_s):
    """Aggregate per-request records into the figures the report compares."""
    ok = [r for r in results if r.get("ok")]
    itl = [gap for r in ok for gap in r.get("itl", [])]
    out_tokens = sum(r.get("output_tokens") or 0 for r in ok)
    return {
        "requests": len(results),
        "ok": len(ok),
        "errors": len(results) - len(ok),
        "error_samples": sorted({r.get("error", "")[:160] for r in results if not r.get("ok")})[:5],
        "wall_s": wall_s,
        "output_tokens": out_tokens,
        "output_tokens_per_s": (out_tokens / wall_s) if wall_s > 0 else None,
        "requests_per_s": (len(ok) / wall_s) if wall_s > 0 else None,
        "ttft_s": distribution([r["ttft_s"] for r in ok if r.get("ttft_s") is not None]),
        "itl_s": distribution(itl),
        "e2e_s": distribution([r["e2e_s"] for r in ok]),
    }


# ------------------------------------------------------------------------------------ HTTP client
def check_target(url, allow_hosts=()):
    """Only loopback, or hosts the caller names explicitly (test hosts)."""
    host = urlsplit(url).hostname or ""
    if host in allow_hosts or host == "localhost":
        return
    try:
        if ipaddress.ip_address(host).is_loopback:
            return
    except ValueError:
        pass
    raise SystemExit("refusing to load %s: only loopback or --allow-host addresses" % url)


async def _read_chunked(reader):
    while True:
        size_line = await reader.readline()
        if not size_line:
            return
        size = int(size_line.split(b";")[0].strip() or b"0", 16)
        if size == 0:
            return
        data = await reader.readexactly(size)
        await reader.readexactly(2)
        yield data


async def _read_plain(reader):
    while True:
        data = await reader.read(65536)
        if not data:
            return
        yield data


def tls_context(url, ca_file):
    """None for http://; for https:// a context that checks the engine's certificate against ca_file
    (the collection's CA; the system's CAs when empty)."""
    if urlsplit(url).scheme != "https":
        return None
    return ssl.create_default_context(cafile=ca_file or None)


async def chat_stream(url, model, api_key, request, timeout, tls=None):
    """POST one streamed chat completion; returns a per-request record."""
    parts = urlsplit(url)
    body = json.dumps({
        "model": model, "messages": request["messages"], "max_tokens": request["max_tokens"],
        "temperature": request["temperature"], "stream": True,
        "stream_options": {"include_usage": True},
    }).encode()
    path = (parts.path.rstrip("/") or "") + "/v1/chat/completions"
    head = ["POST %s HTTP/1.1" % path, "Host: %s" % parts.netloc, "Content-Type: application/json",
            "Accept: text/event-stream", "Content-Length: %d" % len(body), "Connection: close"]
    if api_key:
        head.append("Authorization: Bearer %s" % api_key)
    record = {"index": request["index"], "kind": request["kind"], "ok": False, "max_tokens": request["max_tokens"]}
    start = time.perf_counter()
    writer = None
    try:
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection(parts.hostname, parts.port or (443 if tls else 80), ssl=tls,
                                    server_hostname=parts.hostname if tls else None), timeout)
        writer.write(("\r\n".join(head) + "\r\n\r\n").encode() + body)
        await writer.drain()

        async def consume():
            status_line = await reader.readline()
            status = int(status_line.split()[1])
            headers = {}
            while True:
                line = await reader.readline()
                if line in (b"\r\n", b"\n", b""):
                    break
                key, _, value = line.decode("latin-1").partition(":")
                headers[key.strip().lower()] = value.strip()
            chunks = _read_chunked(reader) if "chunked" in headers.get("transfer-encoding", "") else _read_plain(reader)
            buffer, token_times, usage, text_parts = b"", [], None, []
            async for data in chunks:
                buffer += data
                while b"\n\n" in buffer:
                    event, buffer = buffer.split(b"\n\n", 1)
                    for line in event.splitlines():
                        if not line.startswith(b"data:"):
                            continue
                        payload = line[5:].strip()
                        if payload == b"[DONE]":
                            continue
                        message = json.loads(payload)
                        if status != 200 or "error" in message:
                            raise RuntimeError("HTTP %s: %s" % (status, json.dumps(message)[:300]))
                        if message.get("usage"):
                            usage = message["usage"]
                        for choice in message.get("choices") or []:
                            delta = choice.get("delta") or {}
                            piece = delta.get("content") or delta.get("reasoning_content") or ""
                            if piece:
                                token_times.append(time.perf_counter())
                                text_parts.append(piece)
            if status != 200:
                raise RuntimeError("HTTP %s: %s" % (status, buffer.decode("utf-8", "replace")[:300]))
            return token_times, usage

        token_times, usage = await asyncio.wait_for(consume(), timeout)
        end = time.perf_counter()
        record.update(ok=True, e2e_s=end - start,
                      ttft_s=(token_times[0] - start) if token_times else None,
                      itl=[b - a for a, b in zip(token_times, token_times[1:])],
                      output_tokens=(usage or {}).get("completion_tokens", len(token_times)),
                      prompt_tokens=(usage or {}).get("prompt_tokens"))
    except Exception as exc:  # a failed request is a result, not a crash
        record.update(e2e_s=time.perf_counter() - start, error="%s: %s" % (type(exc).__name__, exc))
    finally:
        if writer is not None:
            writer.close()
    return record


# ------------------------------------------------------------------------------------ memory
class MemorySampler:
    """Peak memory of the engine's cgroup: memory.peak when the kernel has it, else the highest
    sample of memory.current (cgroup v2) / memory.usage_in_bytes (v1), and the summed RSS of its
    processes."""

    def __init__(self, cgroup):
        self.cgroup = cgroup
        self.peak_current = 0
        self.peak_rss = 0

    def _read_int(self, *names):
        for name in names:
            try:
                with open(os.path.join(self.cgroup, name)) as handle:
                    return int(handle.read().split()[0])
            except (OSError, ValueError, IndexError):
                continue
        return None

    def rss(self):
        total = 0
        for name in ("cgroup.procs", "tasks"):
            try:
                with open(os.path.join(self.cgroup, name)) as handle:
                    pids = handle.read().split()
                break
            except OSError:
                pids = []
        for pid in set(pids):
            try:
                with open("/proc/%s/status" % pid) as handle:
                    for line in handle:
                        if line.startswith("VmRSS:"):
                            total += int(line.split()[1]) * 1024
            except OSError:
                continue
        return total

    def sample(self):
        if not self.cgroup:
            return
        current = self._read_int("memory.current", "memory.usage_in_bytes")
        self.peak_current = max(self.peak_current, current or 0)
        self.peak_rss = max(self.peak_rss, self.rss())

    def report(self):
        if not self.cgroup:
            return {}
        return {"cgroup": self.cgroup,
                "cgroup_peak_bytes": self._read_int("memory.peak", "memory.max_usage_in_bytes"),
                "sampled_peak_bytes": self.peak_current or None,
                "rss_peak_bytes": self.peak_rss or None}

    async def run(self, interval=0.5):
        while True:
            self.sample()
            await asyncio.sleep(interval)


# ------------------------------------------------------------------------------------ runs
async def run_phase(args, requests, concurrency, deadline):
    semaphore = asyncio.Semaphore(concurrency)
    tls = tls_context(args.url, getattr(args, "ca_file", ""))
    results = []

    async def one(request):
        async with semaphore:
            if time.monotonic() > deadline:
                return
            remaining = max(1.0, deadline - time.monotonic())
            results.append(await chat_stream(args.url, args.model, args.api_key, request,
                                             min(args.request_timeout, remaining), tls=tls))

    start = time.perf_counter()
    await asyncio.gather(*(one(r) for r in requests))
    wall = time.perf_counter() - start
    return {"concurrency": concurrency, "summary": summarize(results, wall),
            "by_kind": {kind: summarize([r for r in results if r["kind"] == kind], wall)
                        for kind, _ in MIX},
            "records": sorted(results, key=lambda r: r["index"])}


async def run_all(args):
    deadline = time.monotonic() + args.duration
    sampler = MemorySampler(args.cgroup)
    sampler_task = asyncio.ensure_future(sampler.run())
    try:
        if args.warmup_requests:
            # left out: a freshly started engine is slow on its first requests
            await run_phase(args, build_workload(args.warmup_requests, args.seed - 1, args.max_tokens_cap,
                                                 args.document_chars, prefix=args.run_prefix),
                            args.concurrency, deadline)
        # Each sample repeats the same mix; with --fresh-prefix each has prompts of its own, so that an
        # earlier sample has not warmed the prefix cache for it.
        samples = []
        for index in range(args.samples):
            prefix = "%s[sample %d] " % (args.run_prefix, index) if args.run_prefix and index else args.run_prefix
            workload = build_workload(args.requests, args.seed, args.max_tokens_cap, args.document_chars,
                                      prefix=prefix)
            samples.append(await run_phase(args, workload, args.concurrency, deadline))
        mixed = samples[0]
        sweep = []
        for level in args.sweep:
            levelled = build_workload(args.sweep_requests, args.seed + level, args.max_tokens_cap, args.document_chars,
                                      prefix=args.run_prefix)
            phase = await run_phase(args, levelled, level, deadline)
            phase.pop("records")
            sweep.append(phase)
    finally:
        sampler_task.cancel()
        sampler.sample()
    return {
        "schema": 1,
        "engine": args.engine, "engine_version": args.engine_version, "model": args.model,
        "host": args.label or socket.gethostname(),
        "config": {"requests": args.requests, "concurrency": args.concurrency, "seed": args.seed,
                   "fresh_prefix": args.fresh_prefix, "warmup_requests": args.warmup_requests,
                   "max_tokens_cap": args.max_tokens_cap, "document_chars": args.document_chars,
                   "samples": args.samples, "temperature": TEMPERATURE, "sweep": args.sweep, "sweep_requests": args.sweep_requests,
                   "duration_limit_s": args.duration, "mix": dict(MIX)},
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "context": args.run_context,
        "mixed": mixed, "sweep": sweep, "memory": sampler.report(),
        # every sample's summary, the first one (mixed) included
        "samples": [phase["summary"] for phase in samples],
    }


# ------------------------------------------------------------------------------------ open loop
# vLLM bench serve's metric names: time to first token, time per output token after the first,
# inter-token latency, end-to-end latency.
SLA_METRICS = ("ttft", "tpot", "itl", "e2el")
_UNITS_MS = (("ms", 1.0), ("s", 1000.0))


class BadOption(ValueError):
    """An option's value the load generator cannot use; the message names the option."""


def parse_bound_ms(text, option):
    """'500ms', '10s' or '500' (milliseconds) -> milliseconds, positive."""
    value = text.strip()
    scale = 1.0
    for unit, factor in _UNITS_MS:
        if value.endswith(unit):
            value, scale = value[:-len(unit)], factor
            break
    try:
        bound = float(value) * scale
    except ValueError:
        raise BadOption("%s: %r is not a time (write 500ms, 10s or 500)" % (option, text))
    if not bound > 0:
        raise BadOption("%s: %r must be above 0" % (option, text))
    return bound


def parse_sla(text):
    """'ttft:p99:500ms,e2el:p99:10s' -> [{metric, percentile, bound_ms}]; '' -> []."""
    criteria = []
    for item in [part.strip() for part in (text or "").split(",") if part.strip()]:
        pieces = item.split(":")
        if len(pieces) != 3:
            raise BadOption("--sla: %r is not METRIC:pPERCENTILE:BOUND (e.g. ttft:p99:500ms)" % item)
        metric, pct, bound = pieces
        if metric not in SLA_METRICS:
            raise BadOption("--sla: unknown metric %r in %r; use one of %s" % (metric, item, ", ".join(SLA_METRICS)))
        try:
            percentile_value = float(pct[1:]) if pct[:1] in ("p", "P") else float("nan")
        except ValueError:
            percentile_value = float("nan")
        if not 0 < percentile_value <= 100:
            raise BadOption("--sla: the percentile %r in %r must be p followed by a number in (0, 100], e.g. p99"
                            % (pct, item))
        criteria.append({"metric": metric, "percentile": percentile_value,
                         "bound_ms": parse_bound_ms(bound, "--sla %s" % item)})
    return criteria


def parse_rates(text):
    """'1,2,4' -> [1.0, 2.0, 4.0] (requests per second, each above 0)."""
    rates = []
    for item in [part.strip() for part in (text or "").split(",") if part.strip()]:
        try:
            rate = float(item)
        except ValueError:
            raise BadOption("--rates: %r is not a number of requests per second" % item)
        if not 0 < rate < float("inf"):
            raise BadOption("--rates: %r must be above 0 requests per second" % item)
        rates.append(rate)
    return rates


def parse_schedule(text):
    """'0:2,30:8,60:4' -> [(0.0, 2.0), (30.0, 8.0), (60.0, 4.0)]: from each offset (s) on, that rate."""
    steps = []
    for item in [part.strip() for part in (text or "").split(",") if part.strip()]:
        start, sep, rate = item.partition(":")
        try:
            step = (float(start), float(rate))
        except ValueError:
            step = None
        if not sep or step is None or not all(math.isfinite(v) for v in step):
            raise BadOption("--schedule: %r is not SECONDS:RATE (e.g. 0:2,30:8)" % item)
        if not step[1] > 0:
            raise BadOption("--schedule: the rate in %r must be above 0 requests per second" % item)
        steps.append(step)
    if steps and (steps[0][0] != 0 or any(b[0] <= a[0] for a, b in zip(steps, steps[1:]))):
        raise BadOption("--schedule: the offsets must start at 0 and increase (%s)" % text)
    return steps


def poisson_arrivals(rate, count, seed, burstiness=1.0, horizon_s=None):
    """Start offsets (s) of up to `count` requests arriving at `rate` per second: gamma intervals of
    shape `burstiness` (1: a Poisson process; below 1 burstier, above 1 more regular), mean 1/rate;
    only those before `horizon_s` when given."""
    rng = random.Random(seed)
    offsets, t = [], 0.0
    while len(offsets) < count:
        t += rng.gammavariate(burstiness, 1.0 / (rate * burstiness))
        if horizon_s is not None and t >= horizon_s:
            break
        offsets.append(t)
    return offsets


def schedule_arrivals(schedule, horizon_s, seed, burstiness=1.0, count=None):
    """Start offsets of a Poisson process whose rate follows `schedule` [(from_s, rate)] up to
    `horizon_s` (at most `count`). The process is memoryless, so each step starts afresh at its
    offset."""
    rng = random.Random(seed)
    offsets = []
    for index, (start, rate) in enumerate(schedule):
        end = schedule[index + 1][0] if index + 1 < len(schedule) else horizon_s
        t = start
        while True:
            t += rng.gammavariate(burstiness, 1.0 / (rate * burstiness))
            if t >= min(end, horizon_s) or (count is not None and len(offsets) >= count):
                break
            offsets.append(t)
    return offsets


def request_metrics(record):
    """{ttft, tpot, itl, e2el} in seconds of one successful request (vLLM bench serve's
    definitions: tpot = (e2el - ttft) / (output tokens - 1), 0 for a single token; itl, the mean
    gap between its streamed pieces)."""
    ttft = record.get("ttft_s")
    e2el = record["e2e_s"]
    tokens = record.get("output_tokens") or 0
    gaps = record.get("itl") or []
    return {"ttft": ttft if ttft is not None else e2el,
            "tpot": ((e2el - ttft) / (tokens - 1)) if ttft is not None and tokens > 1 else 0.0,
            "itl": (sum(gaps) / len(gaps)) if gaps else 0.0,
            "e2el": e2el}


def _sla_values(records, per_request, metric):
    """The values (ms) a criterion's percentile is taken over: one per request (TTFT, TPOT, E2EL),
    or every gap between streamed pieces for ITL (as vllm bench serve's percentiles); a failed
    request adds one +inf."""
    failed = [float("inf")] * sum(1 for m in per_request if m is None)
    if metric == "itl":
        return sorted([gap * 1000.0 for r in records if r.get("ok") for gap in r.get("itl") or []] + failed)
    return sorted([m[metric] * 1000.0 for m in per_request if m is not None] + failed)


def sla_report(records, sla, wall_s):
    """Whether the records meet every criterion (a failed request counts as one that missed every
    bound) and the goodput: requests per second whose TTFT, TPOT and E2EL each met their bounds
    (vllm bench serve's goodput; ITL is a property of the gaps, not of a request)."""
    per_request = [request_metrics(r) if r.get("ok") else None for r in records]
    criteria = []
    for criterion in sla:
        value = _percentile_with_failures(_sla_values(records, per_request, criterion["metric"]),
                                          criterion["percentile"])
        criteria.append(dict(criterion, value_ms=value, met=value is not None and value <= criterion["bound_ms"]))
    per_request_bounds = [c for c in sla if c["metric"] != "itl"]
    good = sum(1 for m in per_request
               if m is not None and all(m[c["metric"]] * 1000.0 <= c["bound_ms"] for c in per_request_bounds))
    return {"met": bool(records) and all(c["met"] for c in criteria), "criteria": criteria, "good": good,
            "goodput_rps": (good / wall_s) if wall_s > 0 else None}


def _percentile_with_failures(values, q):
    """percentile() over sorted values where failures are +inf: infinite once the rank reaches them."""
    if not values:
        return None
    pos = (len(values) - 1) * q / 100.0
    low = int(pos)
    high = min(low + 1, len(values) - 1)
    if pos == low:
        return float(values[low])
    if values[high] == float("inf"):
        return float("inf")
    return percentile(values, q)


def bench_serve_metrics(records, wall_s, percentiles=(50, 90, 95, 99), sla=()):
    """The figures under vllm bench serve's result names (ms, tokens, per second)."""
    ok = [r for r in records if r.get("ok")]
    per_request = [request_metrics(r) for r in ok]
    tokens_out = sum(r.get("output_tokens") or 0 for r in ok)
    tokens_in = sum(r.get("prompt_tokens") or 0 for r in ok)
    out = {"duration": wall_s, "completed": len(ok), "failed": len(records) - len(ok),
           "total_input_tokens": tokens_in, "total_output_tokens": tokens_out,
           "request_throughput": len(ok) / wall_s if wall_s > 0 else None,
           "request_goodput": sla_report(records, sla, wall_s)["goodput_rps"] if sla else None,
           "output_throughput": tokens_out / wall_s if wall_s > 0 else None,
           "total_token_throughput": (tokens_in + tokens_out) / wall_s if wall_s > 0 else None}
    series = {"ttft": [m["ttft"] for m in per_request],
              "tpot": [m["tpot"] for m, r in zip(per_request, ok) if (r.get("output_tokens") or 0) > 1],
              "itl": [gap for r in ok for gap in r.get("itl") or []],
              "e2el": [m["e2el"] for m in per_request]}
    for metric in SLA_METRICS:
        values = [v * 1000.0 for v in series[metric]]
        mean = sum(values) / len(values) if values else 0.0
        out["mean_%s_ms" % metric] = mean
        out["median_%s_ms" % metric] = percentile(values, 50) or 0.0
        out["std_%s_ms" % metric] = (sum((v - mean) ** 2 for v in values) / len(values)) ** 0.5 if values else 0.0
        for p in percentiles:
            word = str(int(p)) if int(p) == p else str(p)
            out["p%s_%s_ms" % (word, metric)] = percentile(values, p) or 0.0
    return out


def load_workload_file(path, max_tokens_cap=None, temperature=TEMPERATURE):
    """Chat requests from a JSONL file: one object a line with `messages` (a list of {role, content})
    and optionally `max_tokens` (or `max_completion_tokens`, default 256), `temperature` and `kind`
    (a label the results group by). Blank lines and lines starting with # are skipped."""
    requests = []
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            where = "--workload-file %s line %d" % (path, number)
            try:
                item = json.loads(line)
            except ValueError as exc:
                raise BadOption("%s: not JSON (%s)" % (where, exc))
            messages = item.get("messages") if isinstance(item, dict) else None
            if not isinstance(messages, list) or not messages or not all(
                    isinstance(m, dict) and isinstance(m.get("role"), str) and "content" in m for m in messages):
                raise BadOption("%s: needs \"messages\", a non-empty list of {\"role\", \"content\"}" % where)
            max_tokens = item.get("max_tokens", item.get("max_completion_tokens", 256))
            if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
                raise BadOption("%s: max_tokens must be a whole number above 0, not %r" % (where, max_tokens))
            if max_tokens_cap:
                max_tokens = min(max_tokens, max_tokens_cap)
            requests.append({"index": len(requests), "kind": str(item.get("kind") or "file"), "messages": messages,
                             "max_tokens": max_tokens, "temperature": item.get("temperature", temperature)})
    if not requests:
        raise BadOption("--workload-file %s holds no requests" % path)
    return requests


def take_requests(pool, count, offset=0):
    """`count` requests from `pool`, cycling from `offset`, re-indexed."""
    return [dict(pool[(offset + i) % len(pool)], index=i) for i in range(count)]


async def run_open_phase(args, requests, offsets, deadline):
    """Send requests[i] at offsets[i] seconds from now, whatever the earlier ones are doing."""
    tls = tls_context(args.url, getattr(args, "ca_file", ""))
    start = time.perf_counter()
    results, tasks = [], []

    async def one(request, lag):
        remaining = max(1.0, deadline - time.monotonic())
        record = await chat_stream(args.url, args.model, args.api_key, request,
                                   min(args.request_timeout, remaining), tls=tls)
        record.update(send_lag_s=lag, arrival_s=request["arrival_s"])
        results.append(record)

    for request, offset in zip(requests, offsets):
        delay = offset - (time.perf_counter() - start)
        if delay > 0:
            await asyncio.sleep(min(delay, max(0.0, deadline - time.monotonic())))
        if time.monotonic() >= deadline:
            break
        tasks.append(asyncio.ensure_future(one(dict(request, arrival_s=offset),
                                               max(0.0, time.perf_counter() - start - offset))))
    if tasks:
        await asyncio.gather(*tasks)
    return results, time.perf_counter() - start


# What an SLA verdict is made of (sla_report): each phase of an open-loop result keeps these fields of
# its requests, so that `judge` can hold the phase to another SLA without loading the engine again.
JUDGED_FIELDS = ("ok", "ttft_s", "e2e_s", "output_tokens", "itl")


def _open_phase_result(rate, records, wall, args, planned=None):
    records = sorted(records, key=lambda r: r["index"])
    sla = sla_report(records, args.sla, wall) if args.sla else None
    lags = [r.get("send_lag_s", 0.0) for r in records]
    # cut short by --duration: its figures are not those of the rate
    truncated = planned is not None and len(records) < planned
    return {"rate": rate, "requests": len(records), "truncated": truncated, "summary": summarize(records, wall),
            "sla": sla, "bench_serve": bench_serve_metrics(records, wall, args.percentiles, args.sla),
            "send_lag_p99_s": percentile(lags, 99),
            "by_kind": {kind: summarize([r for r in records if r["kind"] == kind], wall)
                        for kind in sorted(set(r["kind"] for r in records))},
            "wall_s": wall,
            "records": [dict((k, r[k]) for k in JUDGED_FIELDS if k in r) for r in records]}


def judge(result, sla):
    """An open-loop result held to `sla` (parsed) from its phases' records: each phase's verdict and
    goodput, the highest rate that meets it, the records left out. `complete` says whether the
    result answers `sla` as a run with it would have: it loaded every rate, or one of its phases
    misses `sla` or was cut short (such a run stops there). A result without records answers none."""
    phases = result.get("phases") or []
    if not phases or any("records" not in p or "wall_s" not in p for p in phases):
        return dict(result, complete=False)
    judged = []
    for phase in phases:
        verdict = sla_report(phase["records"], sla, phase["wall_s"])
        figures = dict(phase["bench_serve"], request_goodput=verdict["goodput_rps"])
        judged.append(dict([(k, v) for k, v in phase.items() if k != "records"], sla=verdict, bench_serve=figures))
    # a --schedule phase runs first and never stops the run: only the rates' phases decide
    rated = [p for p in judged if p["rate"] is not None]
    loaded_all = len(rated) >= len((result.get("config") or {}).get("rates") or [])
    stopped = any(not p["sla"]["met"] or p.get("truncated") for p in rated)
    return dict(result, config=dict(result.get("config") or {}, sla=sla), phases=judged,
                max_rate_meeting_sla=max_rate_meeting_sla(judged), complete=loaded_all or stopped)


async def run_open_all(args):
    deadline = time.monotonic() + args.duration
    pool = (load_workload_file(args.workload_file, args.max_tokens_cap) if args.workload_file
            else build_workload(max(args.requests_per_rate, 1), args.seed, args.max_tokens_cap, args.document_chars,
                                prefix=args.run_prefix))
    phases, warmup = [], None
    if args.warmup_requests:
        # a freshly started engine compiles and caches on its first requests: those are not the load
        rate = args.rates[0] if args.rates else args.schedule[0][1]
        offsets = poisson_arrivals(rate, args.warmup_requests, args.seed - 1, args.burstiness)
        # from the end of the pool: the first phase starts with its own requests, not these
        records, wall = await run_open_phase(args, take_requests(pool, len(offsets), len(pool) - len(offsets)),
                                             offsets, deadline)
        warmup = dict(rate=rate, summary=summarize(records, wall))
        warmup["summary"].pop("error_samples")
    if args.schedule:
        offsets = schedule_arrivals(args.schedule, args.rate_duration, args.seed, args.burstiness,
                                    count=args.requests_per_rate)
        records, wall = await run_open_phase(args, take_requests(pool, len(offsets)), offsets, deadline)
        phases.append(dict(_open_phase_result(None, records, wall, args, len(offsets)), schedule=args.schedule))
    for number, rate in enumerate(args.rates):
        if time.monotonic() > deadline:
            break
        offsets = poisson_arrivals(rate, args.requests_per_rate, args.seed + number, args.burstiness,
                                   horizon_s=args.rate_duration)
        # each rate its own stretch of the pool (a prefix cache would serve repeated prompts)
        records, wall = await run_open_phase(args, take_requests(pool, len(offsets), number * args.requests_per_rate),
                                             offsets, deadline)
        phases.append(_open_phase_result(rate, records, wall, args, len(offsets)))
        if args.sla and not phases[-1]["sla"]["met"] and not args.keep_going:
            break
    return {
        "schema": 1, "mode": "open",
        "engine": args.engine, "engine_version": args.engine_version, "model": args.model,
        "host": socket.gethostname(), "label": args.label,
        "config": {"rates": args.rates, "schedule": args.schedule, "burstiness": args.burstiness,
                   "requests_per_rate": args.requests_per_rate, "rate_duration_s": args.rate_duration,
                   "sla": args.sla, "seed": args.seed, "fresh_prefix": args.fresh_prefix, "max_tokens_cap": args.max_tokens_cap,
                   "workload": args.workload_file or "seed mix", "percentiles": list(args.percentiles),
                   "warmup_requests": args.warmup_requests,
                   "duration_limit_s": args.duration},
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "context": args.run_context,
        "warmup": warmup,
        "phases": phases,
        "max_rate_meeting_sla": max_rate_meeting_sla(phases),
    }


def max_rate_meeting_sla(phases):
    """The highest rate that met the SLA below the first rate that missed it (or was cut short),
    the rates taken from lowest; None when the lowest missed."""
    best = None
    for phase in sorted((p for p in phases if p["rate"] is not None), key=lambda p: p["rate"]):
        if not phase["sla"] or not phase["sla"]["met"] or phase.get("truncated"):
            break
        best = phase["rate"]
    return best


def key_from_env_file(path, name):
    """NAME's value in a systemd EnvironmentFile (NAME=value or NAME="value"); empty when absent."""
    with open(path) as handle:
        for line in handle:
            key, sep, value = line.strip().partition("=")
            if sep and key == name:
                value = value.strip()
                return value[1:-1] if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'" else value
    return ""


def read_run_context(path):
    """The --run-context file's JSON object ({} without one)."""
    if not path:
        return {}
    try:
        with open(path, encoding="utf-8") as handle:
            context = json.load(handle)
    except (OSError, ValueError) as exc:
        raise BadOption("--run-context %s: %s" % (path, exc))
    if not isinstance(context, dict):
        raise BadOption("--run-context %s must hold a JSON object" % path)
    return context


def _add_target_args(cmd):
    cmd.add_argument("--url", required=True)
    cmd.add_argument("--model", required=True)
    cmd.add_argument("--api-key-env", default="LLMOPS_API_KEY", help="environment variable holding the API key")
    cmd.add_argument("--ca-file", default="", help="CA file to check an https engine's certificate against")
    cmd.add_argument("--api-key-env-file", default="",
                     help="read --api-key-env from this KEY=\"value\" file (the engine's EnvironmentFile) instead "
                          "of the environment, so the key is on no command line and in no Ansible output")
    cmd.add_argument("--engine", default="unknown")
    cmd.add_argument("--engine-version", default="")
    cmd.add_argument("--label", default="")
    cmd.add_argument("--max-tokens-cap", type=int, default=0, help="cap every request's max_tokens (0: none)")
    cmd.add_argument("--document-chars", type=int, default=DOCUMENT_CHARS)
    cmd.add_argument("--seed", type=int, default=0)
    cmd.add_argument("--warmup-requests", type=int, default=0,
                     help="requests sent first (open: at the first rate) and left out of the results (a freshly "
                          "started engine is slow on its first ones)")
    cmd.add_argument("--fresh-prefix", action="store_true",
                     help="start every prompt of the seed mix with this run's own id, so that a prefix cache an "
                          "earlier run warmed serves none of it: runs compared with a baseline then do the same work")
    cmd.add_argument("--duration", type=float, default=600.0, help="wall-time bound of the whole run (s)")
    cmd.add_argument("--request-timeout", type=float, default=300.0)
    cmd.add_argument("--allow-host", action="append", default=[], help="a non-loopback host that may be loaded")
    cmd.add_argument("--run-context", default="",
                     help="a JSON file of what else decides the figures (engine flags, GPUs, the collection's "
                          "commit), kept in the result as its context")
    cmd.add_argument("--out", required=True)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run the mixed workload and the concurrency sweep (closed loop)")
    _add_target_args(run)
    run.add_argument("--requests", type=int, default=200)
    run.add_argument("--concurrency", type=int, default=32)
    run.add_argument("--samples", type=int, default=1,
                     help="run the mixed workload this many times (a comparison takes each figure's best sample)")
    run.add_argument("--sweep", default="1,8,32", help="comma-separated concurrency levels ('' for none)")
    run.add_argument("--sweep-requests", type=int, default=64)
    run.add_argument("--cgroup", default="", help="the engine unit's cgroup folder, for peak memory")
    opened = sub.add_parser("open", help="requests arriving at target rates, whatever the responses do (open loop)")
    _add_target_args(opened)
    opened.add_argument("--rates", default="", help="comma-separated request rates (requests/s), lowest first")
    opened.add_argument("--schedule", default="", help="a rate schedule SECONDS:RATE,... (from 0), run before --rates")
    opened.add_argument("--burstiness", type=float, default=1.0,
                        help="shape of the gamma intervals (1: Poisson; as vllm bench serve --burstiness)")
    opened.add_argument("--requests-per-rate", type=int, default=64,
                        help="most requests sent at each rate (in all, for --schedule)")
    opened.add_argument("--rate-duration", type=float, default=60.0,
                        help="seconds of arrivals at each rate (the whole schedule's, for --schedule)")
    opened.add_argument("--sla", default="", help="METRIC:pPERCENTILE:BOUND,... with METRIC in %s (e.g. "
                                                  "ttft:p99:500ms,e2el:p99:10s)" % ", ".join(SLA_METRICS))
    opened.add_argument("--keep-going", action="store_true", help="run the higher rates after one missed the SLA")
    opened.add_argument("--workload-file", default="", help="JSONL chat requests instead of the seed's mix")
    opened.add_argument("--percentiles", default="50,90,95,99", help="percentiles of the bench_serve figures")
    judged = sub.add_parser("judge", help="an open-loop result held to another SLA, from its own records")
    judged.add_argument("--result", required=True, help="the JSON an `open` run wrote")
    judged.add_argument("--sla", required=True, help="as for open")
    args = parser.parse_args(argv)
    if args.command == "judge":
        try:
            args.sla = parse_sla(args.sla)
        except BadOption as exc:
            parser.error(str(exc))
        if not args.sla:
            parser.error("--sla: give at least one bound (e.g. ttft:p99:500ms)")
        return args
    args.api_key = (key_from_env_file(args.api_key_env_file, args.api_key_env) if args.api_key_env_file
                    else os.environ.get(args.api_key_env, ""))
    try:
        args.run_context = read_run_context(args.run_context)
    except BadOption as exc:
        parser.error(str(exc))
    args.run_prefix = "[run %s] " % os.urandom(6).hex() if args.fresh_prefix else ""
    if args.warmup_requests < 0:
        parser.error("--warmup-requests must be 0 or more")
    if args.command == "run":
        args.sweep = [int(x) for x in args.sweep.split(",") if x.strip()]
        if args.requests < 1 or args.concurrency < 1 or args.samples < 1 or any(level < 1 for level in args.sweep):
            parser.error("--requests, --concurrency, --samples and --sweep levels must be positive")
        return args
    try:
        args.rates = parse_rates(args.rates)
        args.schedule = parse_schedule(args.schedule)
        args.sla = parse_sla(args.sla)
        args.percentiles = [float(p) for p in args.percentiles.split(",") if p.strip()]
    except BadOption as exc:
        parser.error(str(exc))
    except ValueError:
        parser.error("--percentiles: %r is not a list of numbers" % args.percentiles)
    if not args.rates and not args.schedule:
        parser.error("give --rates (e.g. 1,2,4) or --schedule (e.g. 0:2,30:8)")
    if not 0 < args.burstiness < float("inf"):
        parser.error("--burstiness must be above 0 (1 for a Poisson process)")
    if args.requests_per_rate < 1 or not 0 < args.rate_duration < float("inf"):
        parser.error("--requests-per-rate and --rate-duration must be above 0")
    if args.schedule and args.schedule[-1][0] >= args.rate_duration:
        parser.error("--schedule: its last step starts at %g s, after its arrivals end (--rate-duration %g s): "
                     "give a longer --rate-duration" % (args.schedule[-1][0], args.rate_duration))
    if not 0 < args.duration < float("inf") or args.max_tokens_cap < 0:
        parser.error("--duration must be above 0 seconds and --max-tokens-cap 0 (no cap) or more")
    if args.workload_file and not os.path.isfile(args.workload_file):
        parser.error("--workload-file %s: no such file" % args.workload_file)
    if any(not 0 < p <= 100 for p in args.percentiles):
        parser.error("--percentiles must each be in (0, 100]")
    return args


def _print_open(result):
    for phase in result["phases"]:
        sla = phase["sla"] or {}
        print(json.dumps({"rate": phase["rate"], "ok": phase["summary"]["ok"], "errors": phase["summary"]["errors"],
                          "goodput_rps": sla.get("goodput_rps"), "sla_met": sla.get("met"),
                          "p99_ttft_ms": phase["bench_serve"]["p99_ttft_ms"] if "p99_ttft_ms" in phase["bench_serve"]
                          else None, "error_samples": phase["summary"]["error_samples"]}))
    print(json.dumps({"max_rate_meeting_sla": result["max_rate_meeting_sla"]}))


def main(argv=None):
    args = parse_args(argv)
    if args.command == "judge":
        try:
            with open(args.result, encoding="utf-8") as handle:
                result = json.load(handle)
        except (OSError, ValueError) as exc:
            raise SystemExit("--result %s: %s" % (args.result, exc))
        if result.get("mode") != "open":
            raise SystemExit("--result %s is not the result of an open-loop run" % args.result)
        json.dump(judge(result, args.sla), sys.stdout, ensure_ascii=False)
        print()
        return 0
    check_target(args.url, tuple(args.allow_host))
    if args.command == "open":
        try:
            result = asyncio.run(run_open_all(args))
        except BadOption as exc:
            raise SystemExit(str(exc))
        ok = sum(p["summary"]["ok"] for p in result["phases"])
    else:
        result = asyncio.run(run_all(args))
        ok = sum(sample["ok"] for sample in result["samples"])
    with open(args.out, "w", encoding="utf-8") as handle:
        json.dump(result, handle, ensure_ascii=False, indent=1)
    if args.command == "open":
        _print_open(result)
        return 0 if ok else 1
    summary = result["mixed"]["summary"]
    print(json.dumps({"engine": args.engine, "ok": summary["ok"], "errors": summary["errors"],
                      "output_tokens_per_s": summary["output_tokens_per_s"],
                      "e2e_p99_s": summary["e2e_s"]["p99"], "ttft_p99_s": summary["ttft_s"]["p99"],
                      "error_samples": summary["error_samples"]}))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
