# Copyright: (c) 2026, llmops.serving maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The monitoring role's alert rules: metric names follow the engine version, and every name a rule
uses exists in the metrics the real engine exported (tests/fixtures/metrics, scraped from the CPU
engines), for each engine version a stack profile installs. And the alerts' way out: Prometheus
sends them to the Alertmanager beside it, which routes them to the receivers configured."""
import json
import os
import sys

import pytest
import yaml

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "monitoring"))
import render_rules as rr  # noqa: E402
import run_promtool  # noqa: E402

PROFILES = os.path.join(rr.REPO, "stacks", "profiles.yml")


def _installed_versions():
    with open(PROFILES, encoding="utf-8") as handle:
        profiles = yaml.safe_load(handle)["serving_stack_profiles"]
    return sorted({(profile, engine, str(spec["version"])) for profile, data in profiles.items()
                   for engine, spec in data.get("engines", {}).items() if engine in ("vllm", "sglang")})


def _cpu_profiles():
    """Profiles without CUDA: their engines run in the Molecule scenarios, so a scrape can be recorded."""
    with open(PROFILES, encoding="utf-8") as handle:
        profiles = yaml.safe_load(handle)["serving_stack_profiles"]
    return {name for name, data in profiles.items() if data.get("cuda") is None}


def _rules(text):
    return {rule["alert"]: rule for group in yaml.safe_load(text)["groups"] for rule in group["rules"]}


@pytest.mark.parametrize("engine, version", rr.fixtures())
def test_rules_use_only_metrics_the_engine_exports(engine, version):
    exported = (rr.fixture_names("%s-%s" % (engine, version)) | rr.fixture_names("dcgm-exporter")
                | rr.fixture_names("node-exporter"))
    used = rr.referenced_metrics(rr.render(engine, version))
    assert used, "no metric found in the rules"
    missing = sorted(used - exported)
    assert not missing, "rules for %s %s use metrics it does not export: %s" % (engine, version, missing)


@pytest.mark.parametrize("profile, engine, version", _installed_versions())
def test_installed_versions_have_a_fixture(profile, engine, version):
    if (engine, version) in rr.fixtures():
        return
    if profile in _cpu_profiles():
        pytest.fail("stack profile %s installs %s %s but tests/fixtures/metrics/%s-%s.txt is missing: scrape "
                    "its /metrics (see tests/fixtures/metrics/README.md)" % (profile, engine, version, engine, version))
    pytest.skip("no metrics fixture for %s %s (profile %s): it needs a GPU host to scrape" % (engine, version, profile))


def test_vllm_metric_names_follow_the_version():
    old, new = rr.render("vllm", "0.9.2"), rr.render("vllm", "0.32.0")
    assert "vllm:gpu_cache_usage_perc" in rr.referenced_metrics(old)
    assert "vllm:kv_cache_usage_perc" not in rr.referenced_metrics(old)
    assert "vllm:kv_cache_usage_perc" in rr.referenced_metrics(new)
    assert "vllm:gpu_cache_usage_perc" not in rr.referenced_metrics(new)
    assert rr.metric_set("vllm", "0.10.0")["kv_usage"] == "vllm:kv_cache_usage_perc"
    assert rr.metric_set("vllm", "0.10.0rc1+cpu")["kv_usage"] == "vllm:kv_cache_usage_perc"


def test_promtool_series_are_checked_only_against_a_scrape():
    scraped = run_promtool.exported_names("vllm", "0.32.0")
    assert "vllm:kv_cache_usage_perc" in scraped and "vllm:gpu_cache_usage_perc" not in scraped
    # no scrape of 0.9.2: nothing stands in for one (the role's own metric table would pass the
    # test series whatever the engine exports)
    assert run_promtool.exported_names("vllm", "0.9.2") is None


def test_removed_vllm_name_is_absent_from_the_installed_engine():
    if ("vllm", "0.32.0") not in rr.fixtures():
        pytest.skip("no vllm 0.32.0 fixture")
    names = rr.fixture_names("vllm-0.32.0")
    assert "vllm:kv_cache_usage_perc" in names and "vllm:gpu_cache_usage_perc" not in names


def test_vllm_thresholds_render_from_the_spec():
    rules = _rules(rr.render("vllm", "0.32.0", serving_max_concurrency=256, monitoring_ttft_p99_slo_seconds=0.5))
    kv = rules["LLMKVCachePressure"]["expr"]
    assert "vllm:kv_cache_usage_perc > 0.92" in kv and "vllm:num_requests_running > 204.8" in kv
    assert "and on (instance)" in kv
    assert rules["LLMTTFTP99OverSLO"]["expr"].endswith("> 0.5")
    assert "histogram_quantile(0.99" in rules["LLMTTFTP99OverSLO"]["expr"]
    assert rules["LLMKVCachePreempting"]["expr"] == \
        "sum by (instance) (increase(vllm:num_preemptions_total[5m])) > 0"
    assert set(rules) == {"LLMEngineDown", "LLMKVCachePressure", "LLMKVCachePreempting", "LLMQueueWaitHigh",
                          "LLMTTFTP99OverSLO", "LLME2ELatencyP99OverSLO", "LLMErrorRateHigh", "GPUXidCritical",
                          "GPUXidApplication", "LLMHostDiskLow", "LLMHostDrainedLong", "LLMGatewayCertificateExpiring",
                          "LLMWatchdog", "LLMEngineHostDown"}


def test_sglang_rules_use_the_token_usage():
    rules = _rules(rr.render("sglang", "0.5.23", monitoring_ttft_p99_slo_seconds=0.3))
    assert rules["LLMKVCachePressure"]["expr"] == "sglang:token_usage > 0.88"
    assert "sglang:num_queue_reqs" in rules["LLMQueueWaitHigh"]["expr"]
    assert "sglang:queue_time_seconds_bucket" in rules["LLMQueueWaitHigh"]["expr"]
    # SGLang reports the requests retracted at its last report (a gauge), not a count
    assert rules["LLMKVCachePreempting"]["expr"] == "sum by (instance) (max_over_time(sglang:num_retracted_reqs[5m])) > 0"
    assert rules["LLMTTFTP99OverSLO"]["expr"].endswith("> 0.3")
    assert "vllm:" not in rr.render("sglang", "0.5.23")


def test_prometheus_templates_survive_jinja():
    text = rr.render("vllm", "0.32.0")
    assert "{{ $labels.instance }}" in text and "{{ $value | humanizePercentage }}" in text


def test_dashboard_queries_known_metrics():
    path = os.path.join(rr.ROLE, "files", "llmops-engines.dashboard.json")
    with open(path, encoding="utf-8") as handle:
        dashboard = json.load(handle)
    exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    assert exprs
    exported = set()
    for engine, version in rr.fixtures():
        exported |= rr.fixture_names("%s-%s" % (engine, version))
    exported |= rr.fixture_names("dcgm-exporter") | {"vllm:gpu_cache_usage_perc"}
    used = set()
    for expr in exprs:
        used |= set(rr.ENGINE_METRIC.findall(expr)) | set(rr.DCGM_METRIC.findall(expr))
    assert used and not sorted(used - exported)


@pytest.mark.parametrize("engine, version", rr.fixtures() + [("vllm", "0.9.2")])
def test_error_and_latency_rules_use_the_versions_selectors(engine, version):
    metrics = rr.metric_set(engine, version)
    rules = _rules(rr.render(engine, version))
    error = rules["LLMErrorRateHigh"]["expr"]
    assert "rate(%s[5m])" % metrics["errors_total"] in error
    assert "/ sum by (instance) (rate(%s[5m]))" % metrics["requests_total"] in error
    assert error.endswith("> 0.05")
    e2e = rules["LLME2ELatencyP99OverSLO"]["expr"]
    assert "rate(%s[5m])" % metrics["e2e_bucket"] in e2e and e2e.endswith("> 10")
    assert metrics["e2e_bucket"].endswith("e2e_request_latency_seconds_bucket")


def test_error_selectors_count_server_errors_only():
    vllm, sglang = rr.metric_set("vllm", "0.32.0"), rr.metric_set("sglang", "0.5.23")
    # every finished request counts under its finished_reason; "error" is the engine's own failure
    assert vllm["errors_total"] == vllm["requests_total"] + '{finished_reason="error"}'
    # Prometheus' scrapes and the health probes are neither requests nor errors of the users
    assert 'status_code=~"5.."' in sglang["errors_total"] and "status_code" not in sglang["requests_total"]
    for selector in (sglang["errors_total"], sglang["requests_total"]):
        assert selector.startswith("sglang:http_responses_total{") and 'endpoint!~"/metrics|/health.*"' in selector


def test_thresholds_of_the_new_alerts_render_from_the_variables():
    rules = _rules(rr.render("sglang", "0.5.23", monitoring_error_rate_max=0.01, monitoring_e2e_p99_slo_seconds=30,
                             monitoring_rate_window="10m"))
    assert rules["LLMErrorRateHigh"]["expr"].endswith("> 0.01") and "[10m]" in rules["LLMErrorRateHigh"]["expr"]
    assert rules["LLME2ELatencyP99OverSLO"]["expr"].endswith("> 30")


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_engine_down_also_fires_without_the_series(engine):
    rules = _rules(rr.render(engine, "0.32.0" if engine == "vllm" else "0.5.23", serving_listen="127.0.0.1:8100",
                             monitoring_engine_down_for="1m"))
    down = rules["LLMEngineDown"]
    assert down["expr"].startswith('(up{job="llmops-engine"} == 0 or absent(')
    # absent() keeps the equality matchers: the labels a failed scrape of this host's engine carries
    assert 'absent(up{job="llmops-engine", instance="127.0.0.1:8100", serving_engine="%s"}))' % engine in down["expr"]
    # a planned restart (its host drained by the rollout role) or a cordoned host's maintenance pages
    # no one (promtool proves each alone: tests/monitoring/rules)
    assert down["expr"].endswith(") unless on () (llmops_host_drained == 1 or llmops_host_cordoned == 1)")
    assert down["for"] == "1m"


def _alertmanager(**overrides):
    return yaml.safe_load(rr.render_alertmanager(**overrides))


def test_alertmanager_without_a_webhook_has_a_receiver_without_integrations():
    config = _alertmanager()
    assert config["receivers"] == [{"name": "llmops"}]
    assert config["route"]["receiver"] == "llmops" and "routes" not in config["route"]
    assert (config["route"]["group_wait"], config["route"]["group_interval"], config["route"]["repeat_interval"]) == \
        ("30s", "5m", "4h")


def test_alertmanager_posts_to_the_webhook():
    url = "https://alerts.example.com/hook?token=s3cr%C3%A9t&x=1"
    config = _alertmanager(monitoring_alert_webhook_url=url, monitoring_alert_group_wait="5s")
    assert config["receivers"] == [{"name": "llmops", "webhook_configs": [{"url": url, "send_resolved": True}]}]
    assert config["route"]["group_wait"] == "5s"
    assert "llmops_host" in config["route"]["group_by"] and "alertname" in config["route"]["group_by"]


def test_alertmanager_receivers_replace_the_webhook_and_each_gets_every_alert():
    receivers = [{"name": "ops", "webhook_configs": [{"url": "http://127.0.0.1:9099/alerts"}]},
                 {"name": "mail", "email_configs": [{"to": "ops@example.com"}]}]
    config = _alertmanager(monitoring_alert_receivers=receivers, monitoring_alert_webhook_url="http://ignored/")
    assert config["receivers"] == receivers
    assert config["route"]["receiver"] == "ops"
    assert config["route"]["routes"] == [{"receiver": "ops", "continue": True}, {"receiver": "mail", "continue": True}]
    single = _alertmanager(monitoring_alert_receivers=receivers[:1])
    assert single["receivers"] == receivers[:1] and "routes" not in single["route"]


@pytest.mark.parametrize("listen, target", [("127.0.0.1:9093", "127.0.0.1:9093"), ("0.0.0.0:9193", "127.0.0.1:9193")])
def test_prometheus_sends_its_alerts_to_the_alertmanager(listen, target):
    config = yaml.safe_load(rr.render_prometheus("vllm", "0.32.0", monitoring_alertmanager_listen=listen))
    assert config["alerting"] == {"alertmanagers": [{"static_configs": [{"targets": [target]}]}]}


def test_an_engine_serving_tls_is_scraped_over_https_with_the_collections_ca():
    plain = yaml.safe_load(rr.render_prometheus("vllm", "0.32.0"))
    job = [j for j in plain["scrape_configs"] if j["job_name"] == "llmops-engine"][0]
    assert "scheme" not in job and "tls_config" not in job
    tls = yaml.safe_load(rr.render_prometheus("vllm", "0.32.0", serving_spec_engine_tls=True))
    job = [j for j in tls["scrape_configs"] if j["job_name"] == "llmops-engine"][0]
    assert job["scheme"] == "https"
    assert job["tls_config"] == {"ca_file": "/etc/llmops/tls/ca.crt", "server_name": "llmops-engine"}


def test_alertmanager_service_arguments_keep_it_on_loopback_without_a_cluster_port():
    text = rr._template("prometheus-alertmanager.default.j2", rr._variables({}))
    args = [line for line in text.splitlines() if line.startswith("ARGS=")]
    assert len(args) == 1
    words = args[0][len('ARGS="'):-1].split()
    assert "--web.listen-address=127.0.0.1:9093" in words
    assert "--config.file=/etc/prometheus/alertmanager.yml" in words
    # empty: no HA gossip, which listens on 0.0.0.0:9094 by default
    assert "--cluster.listen-address=" in words
    assert any(w.startswith("--storage.path=") for w in words)


def test_a_rank_above_0_scrapes_no_engine_and_alerts_on_no_absent_series():
    # an instance that spans hosts serves /metrics on rank 0 only: the other ranks' Prometheus has no
    # engine job, and LLMEngineDown there does not fire for the series that never exists
    worker = rr.render("vllm", "0.32.0", serving_spec_serves_api=False)
    assert "absent(up{" not in worker and 'up{job="llmops-engine"} == 0' in worker
    assert "absent(up{" in rr.render("vllm", "0.32.0")
    config = yaml.safe_load(rr.render_prometheus("vllm", "0.32.0", serving_spec_serves_api=False))
    assert "llmops-engine" not in [job["job_name"] for job in config["scrape_configs"]]
    config = yaml.safe_load(rr.render_prometheus("vllm", "0.32.0"))
    assert "llmops-engine" in [job["job_name"] for job in config["scrape_configs"]]


def test_xid_alerts_by_class_fire_only_on_a_recent_change_and_an_empty_class_is_off():
    rules = _rules(rr.render("vllm", "0.32.0", monitoring_xid_critical=[79, 119], monitoring_xid_warning=[],
                             monitoring_xid_recent="30m"))
    assert "GPUXidApplication" not in rules
    critical = rules["GPUXidCritical"]
    assert critical["labels"]["severity"] == "critical"
    assert critical["expr"] == ("(DCGM_FI_DEV_XID_ERRORS == 79 or DCGM_FI_DEV_XID_ERRORS == 119) "
                                "and changes(DCGM_FI_DEV_XID_ERRORS[30m]) > 0")


def test_queue_alert_reads_the_wait_percentile_and_a_held_queue():
    rules = _rules(rr.render("vllm", "0.32.0", monitoring_queue_time_p90_max_seconds=2.5, monitoring_queue_waiting_min=50))
    expr = rules["LLMQueueWaitHigh"]["expr"]
    assert "histogram_quantile(0.9, sum by (instance, le) (rate(vllm:request_queue_time_seconds_bucket[5m])))" in expr
    assert "> 2.5" in expr and expr.endswith("sum by (instance) (min_over_time(vllm:num_requests_waiting[5m])) >= 50")
    assert "deriv(" not in expr
