# Copyright: (c) 2026, llmops.serving maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Monitoring on a converged host (testinfra, podman backend; the default scenario, on each engine).

Prometheus from Debian runs on loopback, loads the rules written for the engine that runs now and
scrapes its /metrics; Alertmanager from Debian runs beside it on loopback and delivers the firing
alerts: the last test stops the engine and waits for the LLMEngineDown notification at a webhook.
"""
import json
import os
import re
import shlex
import time

import pytest

from alert_hook import HOOK_CODE, firing

PROM = "http://127.0.0.1:9090"
LISTEN = os.environ.get("LLMOPS_LISTEN", "127.0.0.1:8000")
MODEL = os.environ.get("LLMOPS_MODEL", "qwen3-tiny")
ENGINE_KEY = os.environ.get("LLMOPS_API_KEY", "")
# Live scrapes are kept here, so that tests/fixtures/metrics can be refreshed from a real engine.
SCRAPE_DIR = os.environ.get("LLMOPS_METRICS_SCRAPE_DIR", "")
ALERTMANAGER = "http://127.0.0.1:9093"
# The scenario's monitoring_alert_webhook_url (molecule/default/molecule.yml): the test's receiver.
HOOK_PORT = 9099
# outside the llmops-* names, which test_endpoint counts as the collection's own units
HOOK_UNIT = "alert-webhook-test"
HOOK_SCRIPT = "/tmp/llmops-test-webhook.py"
HOOK_LOG = "/tmp/llmops-test-webhook.jsonl"
# Bounds: the scenario's 5 s scrapes and evaluations, 10 s engine_down_for and 5 s group_wait make
# the notification arrive in about half a minute; the engine's own start is slower.
DELIVERY_TIMEOUT = 150
ENGINE_START_TIMEOUT = 300


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
    path = "/etc/prometheus/rules.d/llmops-engine.yml"
    out = host.check_output("promtool check rules %s" % path)
    # every rule the role wrote, the engine's and the host's (LLMWatchdog, disk, drain) among them
    written = re.findall(r"^\s+- alert: (\S+)$", host.file(path).content_string, re.M)
    assert {"LLMEngineDown", "LLMWatchdog", "LLMHostDiskLow", "LLMHostDrainedLong"} <= set(written), written
    assert "SUCCESS: %d rules found" % len(written) in out, out
    host.check_output("promtool check config /etc/prometheus/prometheus.yml")
    host.check_output("amtool check-config /etc/prometheus/alertmanager.yml")


def test_alertmanager_runs_on_loopback_only_and_prometheus_sends_to_it(host):
    alertmanager = host.service("prometheus-alertmanager")
    assert alertmanager.is_running and alertmanager.is_enabled
    # its web port on loopback only, and no cluster (gossip) port, which would be 0.0.0.0:9094 (TCP
    # and UDP). Sockets by port: ss cannot name the process of every unit (its /proc is not always
    # readable), and the port scan from another host (test_gateway.py) covers the rest.
    listen_port = ALERTMANAGER.rsplit(":", 1)[1]
    listeners = [line.split() for line in host.check_output("ss -Hlntu 'sport = :%s'" % listen_port).splitlines()]
    assert [(fields[0], fields[4]) for fields in listeners] == [("tcp", "127.0.0.1:%s" % listen_port)], listeners
    assert host.run("ss -Hlntu 'sport = :9094'").stdout.strip() == ""
    status = json.loads(host.check_output("curl -sf -m 20 %s/api/v2/status" % ALERTMANAGER))
    assert status["cluster"]["status"] == "disabled", status["cluster"]
    # Prometheus picks the Alertmanager up at its configuration load: bounded wait for it.
    deadline = time.time() + 60
    while True:
        active = [a["url"] for a in api(host, "/api/v1/alertmanagers")["activeAlertmanagers"]]
        if active or time.time() > deadline:
            break
        time.sleep(2)
    assert len(active) == 1 and active[0].startswith(ALERTMANAGER + "/api/"), active


def test_loaded_rules_use_the_running_engines_names(host):
    engine = active_engine(host)
    rules = {r["name"]: r for g in api(host, "/api/v1/rules")["groups"] for r in g["rules"]}
    assert {"LLMEngineDown", "LLMKVCachePressure", "LLMKVCachePreempting", "LLMQueueWaitHigh", "LLMTTFTP99OverSLO", "LLME2ELatencyP99OverSLO",
            "LLMErrorRateHigh", "GPUXidCritical", "GPUXidApplication"} <= set(rules)
    kv = rules["LLMKVCachePressure"]["query"]
    if engine == "vllm":
        assert "vllm:kv_cache_usage_perc" in kv and "gpu_cache_usage_perc" not in kv
    else:
        assert "sglang:token_usage" in kv


def test_engine_is_scraped_and_its_rule_metrics_exist(host):
    engine = active_engine(host)
    wanted = {"vllm": ["vllm:kv_cache_usage_perc", "vllm:num_requests_running", "vllm:num_requests_waiting",
                       "vllm:time_to_first_token_seconds_bucket", "vllm:e2e_request_latency_seconds_bucket",
                       "vllm:request_success_total"],
              "sglang": ["sglang:token_usage", "sglang:num_queue_reqs", "sglang:time_to_first_token_seconds_bucket",
                         "sglang:e2e_request_latency_seconds_bucket", "sglang:http_responses_total"]}[engine]
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


def _health(host):
    return host.run("curl -s -o /dev/null -w '%%{http_code}' -m 5 http://%s/health" % LISTEN).stdout.strip()


def test_an_engine_exit_reaches_the_webhook_and_the_unit_restarts_itself(host):
    """Delivery end to end: the engine's main process exits on its own (SIGTERM: a clean exit, status
    0, as vLLM's API server exits when its engine core dies), Prometheus' LLMEngineDown fires,
    Alertmanager POSTs it to the scenario's webhook (a receiver of this test's own on the host). The
    unit then starts the engine again by itself (Restart=always), healthy before the test ends."""
    unit = "llmops-%s.service" % active_engine(host)
    host.run("systemctl stop %s; systemctl reset-failed %s" % (HOOK_UNIT, HOOK_UNIT))
    host.check_output("printf '%%s' %s > %s && rm -f %s" % (shlex.quote(HOOK_CODE), HOOK_SCRIPT, HOOK_LOG))
    host.check_output("systemd-run --unit %s /usr/bin/python3 %s %s %d" % (HOOK_UNIT, HOOK_SCRIPT, HOOK_LOG, HOOK_PORT))
    delivered, watchdog, waited, stopped, restarts = None, None, None, False, 0
    try:
        listening = host.run("for i in $(seq 100); do ss -Hltn 'sport = :%d' | grep -q . && exit 0; sleep 0.1; done; "
                             "exit 1" % HOOK_PORT)
        assert listening.rc == 0, "the test's webhook never listened on %d" % HOOK_PORT
        since = float(host.check_output("date +%s.%N"))
        restarts = int(host.check_output("systemctl show -p NRestarts --value %s" % unit))
        stopped = True
        host.check_output("systemctl kill --kill-whom=main --signal=SIGTERM %s" % unit)
        while True:
            lines = host.run("cat %s 2>/dev/null" % HOOK_LOG).stdout.splitlines()
            delivered, watchdog = firing(lines, "LLMEngineDown", since), firing(lines, "LLMWatchdog")
            waited = float(host.check_output("date +%s.%N")) - since
            if (delivered and watchdog) or waited > DELIVERY_TIMEOUT:
                break
            time.sleep(2)
    finally:
        healthy, started, restarted = "", time.time(), None
        if stopped:
            while time.time() - started < ENGINE_START_TIMEOUT:
                healthy = _health(host)
                if healthy == "200":
                    break
                time.sleep(3)
            restarted = int(host.check_output("systemctl show -p NRestarts --value %s" % unit)) - restarts
            if healthy != "200":
                # leave the host serving for the tests after this one
                host.run("systemctl start %s" % unit)
        host.run("systemctl stop %s; systemctl reset-failed %s; rm -f %s %s" % (HOOK_UNIT, HOOK_UNIT, HOOK_SCRIPT, HOOK_LOG))
    print("LLMEngineDown reached the webhook %.1f s after the engine of %s exited; the unit restarted it by itself and "
          "it answered /health %.0f s after the alert" % (waited, unit, time.time() - started))
    assert restarted == 1 and healthy == "200", "the unit did not start the engine again by itself (%s restarts, " \
        "/health %s)" % (restarted, healthy)
    assert delivered, "no LLMEngineDown firing at the webhook within %d s of stopping %s; it got: %s; alerts: %s" % (
        DELIVERY_TIMEOUT, unit, lines[-3:], host.run("curl -s -m 10 %s/api/v2/alerts" % ALERTMANAGER).stdout[-1500:])
    assert delivered["receiver"] == "llmops" and delivered["status"] == "firing", delivered
    down = [a for a in delivered["alerts"] if a["labels"]["alertname"] == "LLMEngineDown"]
    assert down[0]["labels"]["job"] == "llmops-engine" and down[0]["labels"]["severity"] == "critical", down
    # the always-firing watchdog reached the same receiver: the alert path a dead man's switch watches
    assert watchdog and watchdog["receiver"] == "llmops", "no LLMWatchdog at the webhook: %s" % lines[-3:]
    assert healthy == "200", "%s did not answer /health with 200 within %d s of its start (last: %r)" % (
        unit, ENGINE_START_TIMEOUT, healthy)
