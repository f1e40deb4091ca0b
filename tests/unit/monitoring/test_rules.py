# Copyright: (c) 2026, llmops.serving maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The monitoring role's alert rules: metric names follow the engine version, and every name a rule
uses exists in the metrics the real engine exported (tests/fixtures/metrics, scraped from the CPU
engines), for each engine version a stack profile installs."""
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
    exported = rr.fixture_names("%s-%s" % (engine, version)) | rr.fixture_names("dcgm-exporter")
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
    assert rules["GPUXidError"]["expr"] == "max_over_time(DCGM_FI_DEV_XID_ERRORS[5m]) > 0"
    assert set(rules) == {"LLMEngineDown", "LLMKVCachePressure", "LLMQueueGrowing", "LLMTTFTP99OverSLO", "GPUXidError"}


def test_sglang_rules_use_the_token_usage():
    rules = _rules(rr.render("sglang", "0.5.23", monitoring_ttft_p99_slo_seconds=0.3))
    assert rules["LLMKVCachePressure"]["expr"] == "sglang:token_usage > 0.88"
    assert "sglang:num_queue_reqs" in rules["LLMQueueGrowing"]["expr"]
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
