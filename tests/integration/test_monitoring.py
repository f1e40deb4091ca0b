# Copyright: (c) 2026, llmops.serving maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Monitoring on a converged host (testinfra, podman backend; the default scenario, on each engine).

Prometheus from Debian runs on loopback, loads the rules written for the engine that runs now and
scrapes its /metrics.
"""
import json
import os
import re
import shlex
import time

import pytest

PROM = "http://127.0.0.1:9090"
LISTEN = os.environ.get("LLMOPS_LISTEN", "127.0.0.1:8000")
MODEL = os.environ.get("LLMOPS_MODEL", "qwen3-tiny")
ENGINE_KEY = os.environ.get("LLMOPS_API_KEY", "")
# Live scrapes are kept here, so that tests/fixtures/metrics can be refreshed from a real engine.
SCRAPE_DIR = os.environ.get("LLMOPS_METRICS_SCRAPE_DIR", "")


def active_engine(host):
    for engine in ("vllm", "sglang"):
        if host.service("llmops-%s.service" % engine).is_running:
            return engine
    pytest.fail("no engine unit runs")


def api(host, path):
    return json.loads(host.check_output("curl -sf -m 20 %s" % (PROM + path)))["data"]


def live_names(host):
    scrape = host.check_output("curl -sf -m 20 http://%s/metrics" % LISTEN)
    return {re.split(r"[{ ]", line, 1)[0] for line in scrape.splitlines() if line and not line.startswith("#")}


def complete(host):
    """One chat completion of this test's own, so the engine's request counters and latency
    histograms have samples whatever ran before."""
    body = json.dumps({"model": MODEL, "messages": [{"role": "user", "content": "metrics probe"}], "max_tokens": 4})
    auth = shlex.quote("Authorization: Bearer " + ENGINE_KEY)
    host.check_output("curl -sf -m 60 -H %s -H 'Content-Type: application/json' --data-binary %s "
                      "http://%s/v1/chat/completions" % (auth, shlex.quote(body), LISTEN))


def test_prometheus_runs_on_loopback_only(host):
    assert host.service("prometheus").is_running and host.service("prometheus").is_enabled
    listeners = host.check_output("ss -Hltn 'sport = :9090'").splitlines()
    assert {line.split()[3].rsplit(":", 1)[0] for line in listeners} == {"127.0.0.1"}, listeners


def test_rules_pass_promtool_on_the_host(host):
    out = host.check_output("promtool check rules /etc/prometheus/rules.d/llmops-engine.yml")
    assert "SUCCESS: 5 rules found" in out
    host.check_output("promtool check config /etc/prometheus/prometheus.yml")


def test_loaded_rules_use_the_running_engines_names(host):
    engine = active_engine(host)
    rules = {r["name"]: r for g in api(host, "/api/v1/rules")["groups"] for r in g["rules"]}
    assert {"LLMEngineDown", "LLMKVCachePressure", "LLMQueueGrowing", "LLMTTFTP99OverSLO", "GPUXidError"} <= set(rules)
    kv = rules["LLMKVCachePressure"]["query"]
    if engine == "vllm":
        assert "vllm:kv_cache_usage_perc" in kv and "gpu_cache_usage_perc" not in kv
    else:
        assert "sglang:token_usage" in kv


def test_engine_is_scraped_and_its_rule_metrics_exist(host):
    engine = active_engine(host)
    wanted = {"vllm": ["vllm:kv_cache_usage_perc", "vllm:num_requests_running", "vllm:num_requests_waiting",
                       "vllm:time_to_first_token_seconds_bucket"],
              "sglang": ["sglang:token_usage", "sglang:num_queue_reqs", "sglang:time_to_first_token_seconds_bucket"]}[engine]
    complete(host)
    # Prometheus scrapes on its interval: wait for a scrape that carries every wanted series.
    deadline = time.time() + 90
    while True:
        up = api(host, '/api/v1/query?query=up%7Bjob%3D%22llmops-engine%22%7D')["result"]
        missing = [n for n in wanted if not api(host, "/api/v1/query?query=" + n.replace(":", "%3A"))["result"]]
        if (up and up[0]["value"][1] == "1" and not missing) or time.time() > deadline:
            break
        time.sleep(5)
    targets = [t for t in api(host, "/api/v1/targets")["activeTargets"] if t["labels"].get("job") == "llmops-engine"]
    assert up and up[0]["value"][1] == "1", (up, targets)
    assert up[0]["metric"]["serving_engine"] == engine
    assert not missing, (missing, targets)


def test_every_engine_metric_of_the_rules_is_in_the_live_scrape(host):
    """The rules on the host name only series the running engine exports now (after a completion of
    this test's own, so histograms and counters exist): a renamed metric fails here."""
    engine = active_engine(host)
    rules = host.file("/etc/prometheus/rules.d/llmops-engine.yml").content_string
    used = set(re.findall(r"\b(?:vllm|sglang):[a-z0-9_]+", rules))
    assert used and all(n.startswith(engine + ":") for n in used), used
    complete(host)
    live = live_names(host)
    if SCRAPE_DIR:
        # <engine>-<version>-<lock digest>
        version = host.check_output("readlink -f /opt/llmops/venvs/%s-current" % engine).rsplit("-", 2)[-2]
        os.makedirs(SCRAPE_DIR, exist_ok=True)
        with open(os.path.join(SCRAPE_DIR, "%s-%s.txt" % (engine, version)), "w", encoding="utf-8") as out:
            out.write("".join(n + "\n" for n in sorted(live)))
    assert not sorted(used - live), "rule metrics missing from %s's /metrics" % engine


def test_dashboard_queries_parse_and_show_the_running_engine(host):
    """Every panel's query is valid PromQL to the host's Prometheus, and every panel about the
    engine names at least one series the running engine exports (the dashboard serves both
    engines and several versions through `or`)."""
    engine = active_engine(host)
    dashboard = json.loads(host.file("/etc/llmops/grafana/llmops-engines.json").content_string)
    assert dashboard["uid"] == "llmops-engines"
    exprs = [[t["expr"] for t in panel.get("targets", [])] for panel in dashboard["panels"]]
    assert sum(map(len, exprs)) >= 10, exprs
    complete(host)
    live = live_names(host)
    for panel, panel_exprs in zip(dashboard["panels"], exprs):
        for expr in panel_exprs:
            query = expr.replace("$__rate_interval", "1m")
            res = json.loads(host.check_output("curl -s -m 20 -G --data-urlencode %s %s/api/v1/query"
                                               % (shlex.quote("query=" + query), PROM)))
            assert res["status"] == "success", (panel["title"], expr, res)
        names = set(re.findall(r"\b(?:vllm|sglang):[a-z0-9_]+", " ".join(panel_exprs)))
        if names:
            assert {n for n in names if n.startswith(engine + ":")} & live, (panel["title"], names)
