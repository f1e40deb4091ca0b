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
"""
import argparse
import asyncio
import ipaddress
import json
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


def build_workload(n, seed=0, max_tokens_cap=None, document_chars=DOCUMENT_CHARS, temperature=TEMPERATURE):
    """n chat requests in the report's mix, shuffled with `seed` (same seed, same workload)."""
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
        workload = build_workload(args.requests, args.seed, args.max_tokens_cap, args.document_chars)
        mixed = await run_phase(args, workload, args.concurrency, deadline)
        sweep = []
        for level in args.sweep:
            levelled = build_workload(args.sweep_requests, args.seed + level, args.max_tokens_cap, args.document_chars)
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
                   "max_tokens_cap": args.max_tokens_cap, "document_chars": args.document_chars,
                   "temperature": TEMPERATURE, "sweep": args.sweep, "sweep_requests": args.sweep_requests,
                   "duration_limit_s": args.duration, "mix": dict(MIX)},
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "mixed": mixed, "sweep": sweep, "memory": sampler.report(),
    }


def key_from_env_file(path, name):
    """NAME's value in a systemd EnvironmentFile (NAME=value or NAME="value"); empty when absent."""
    with open(path) as handle:
        for line in handle:
            key, sep, value = line.strip().partition("=")
            if sep and key == name:
                value = value.strip()
                return value[1:-1] if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'" else value
    return ""


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run the mixed workload and the concurrency sweep")
    run.add_argument("--url", required=True)
    run.add_argument("--model", required=True)
    run.add_argument("--api-key-env", default="LLMOPS_API_KEY", help="environment variable holding the API key")
    run.add_argument("--ca-file", default="", help="CA file to check an https engine's certificate against")
    run.add_argument("--api-key-env-file", default="",
                     help="read --api-key-env from this KEY=\"value\" file (the engine's EnvironmentFile) instead "
                          "of the environment, so the key is on no command line and in no Ansible output")
    run.add_argument("--engine", default="unknown")
    run.add_argument("--engine-version", default="")
    run.add_argument("--label", default="")
    run.add_argument("--requests", type=int, default=200)
    run.add_argument("--concurrency", type=int, default=32)
    run.add_argument("--sweep", default="1,8,32", help="comma-separated concurrency levels ('' for none)")
    run.add_argument("--sweep-requests", type=int, default=64)
    run.add_argument("--max-tokens-cap", type=int, default=0, help="cap every request's max_tokens (0: none)")
    run.add_argument("--document-chars", type=int, default=DOCUMENT_CHARS)
    run.add_argument("--seed", type=int, default=0)
    run.add_argument("--duration", type=float, default=600.0, help="wall-time bound of the whole run (s)")
    run.add_argument("--request-timeout", type=float, default=300.0)
    run.add_argument("--cgroup", default="", help="the engine unit's cgroup folder, for peak memory")
    run.add_argument("--allow-host", action="append", default=[], help="a non-loopback host that may be loaded")
    run.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    args.sweep = [int(x) for x in args.sweep.split(",") if x.strip()]
    args.api_key = (key_from_env_file(args.api_key_env_file, args.api_key_env) if args.api_key_env_file
                    else os.environ.get(args.api_key_env, ""))
    if args.requests < 1 or args.concurrency < 1 or any(level < 1 for level in args.sweep):
        parser.error("--requests, --concurrency and --sweep levels must be positive")
    return args


def main(argv=None):
    args = parse_args(argv)
    check_target(args.url, tuple(args.allow_host))
    result = asyncio.run(run_all(args))
    with open(args.out, "w", encoding="utf-8") as handle:
        json.dump(result, handle, ensure_ascii=False, indent=1)
    summary = result["mixed"]["summary"]
    print(json.dumps({"engine": args.engine, "ok": summary["ok"], "errors": summary["errors"],
                      "output_tokens_per_s": summary["output_tokens_per_s"],
                      "e2e_p99_s": summary["e2e_s"]["p99"], "ttft_p99_s": summary["ttft_s"]["p99"],
                      "error_samples": summary["error_samples"]}))
    return 0 if summary["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
