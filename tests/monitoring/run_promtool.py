#!/usr/bin/env python3
# Copyright: (c) 2026, llmops.serving maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""`make monitoring-rules`: render the monitoring role's rules per engine version, then
`promtool check rules` and `promtool test rules` on them; `amtool check-config` on its Alertmanager
configuration where an amtool is at hand.

Each tests/monitoring/rules/<engine>-<version>.test.yml is run against the rules rendered for that
engine and version (rule_files: [llmops-engine.yml]). Before promtool runs, every series name the
test feeds in must exist in tests/fixtures/metrics/<engine>-<version>.txt (scraped from the real
engine), so the tests exercise the names the engine really exports. A version without a scrape
has its names reported as unchecked: the role's own metric table is what the rules are rendered
from, so checking against it would pass whatever the engine exports.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import render_rules  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
# What the test files assume about the deployment: a:8000 is the engine's scrape target.
TEST_VARS = {"serving_max_concurrency": 10, "monitoring_ttft_p99_slo_seconds": 0.5,
             "monitoring_e2e_p99_slo_seconds": 10, "monitoring_error_rate_max": 0.05,
             "__monitoring_engine_target": "a:8000"}
# The Alertmanager configurations amtool checks: the role's default (no integration), a webhook, and
# receivers of the user's own (each gets every alert).
ALERTMANAGER_CASES = {
    "no receiver": {},
    "webhook": {"monitoring_alert_webhook_url": "https://alerts.example.com/hook?token=x"},
    "receivers": {"monitoring_alert_receivers": [
        {"name": "ops-webhook", "webhook_configs": [{"url": "http://127.0.0.1:9099/alerts"}]},
        {"name": "ops-mail", "email_configs": [
            {"to": "ops@example.com", "from": "am@example.com", "smarthost": "127.0.0.1:25"}]}]},
}


def _tool(name):
    candidates = [os.environ.get(name.upper()), shutil.which(name),
                  os.path.join(os.environ.get("LLMOPS_CACHE", os.path.expanduser("~/.cache/llmops-serving")), "bin", name)]
    for path in candidates:
        if path and os.access(path, os.X_OK):
            return path
    return None


def promtool():
    return _tool("promtool") or sys.exit("promtool not found: run `make promtool` (or set PROMTOOL)")


def check_alertmanager():
    """`amtool check-config` (Debian's prometheus-alertmanager) on the role's Alertmanager
    configurations; a note, not a failure, where no amtool is at hand (AMTOOL, PATH or the cache's
    bin/amtool): the hosts' own amtool checks it before it is written."""
    tool = _tool("amtool")
    if tool is None:
        print("note alertmanager.yml: not checked, no amtool (set AMTOOL, or unpack /usr/bin/amtool of "
              "Debian's prometheus-alertmanager into the cache's bin/)")
        return 0
    failures = 0
    work = tempfile.mkdtemp(prefix="llmops-alertmanager-")
    try:
        for case, overrides in sorted(ALERTMANAGER_CASES.items()):
            with open(os.path.join(work, "alertmanager.yml"), "w", encoding="utf-8") as handle:
                handle.write(render_rules.render_alertmanager(**overrides))
            proc = subprocess.run([tool, "check-config", "alertmanager.yml"], cwd=work, capture_output=True, text=True,
                                  check=False)
            print("%s alertmanager.yml (%s) check-config: %s" % ("ok  " if proc.returncode == 0 else "FAIL", case,
                                                                 (proc.stdout + proc.stderr).strip().replace("\n", "\n    ")))
            failures += proc.returncode != 0
    finally:
        shutil.rmtree(work)
    return failures


def check_watcher(tool):
    """The rules and scrape configuration of a host that runs no engine and watches a dedicated
    gateway's engines (site.yml's watcher): promtool accepts both, and nothing there expects an engine
    of its own (LLMEngineDown's absent() would fire on a gateway for ever)."""
    watcher = {"monitoring_scrape_engine": False, "monitoring_upstream_target_files": ["targets/*.yml"],
               "__monitoring_upstream_ca": "engine-ca.crt"}
    work = tempfile.mkdtemp(prefix="llmops-watcher-")
    failures = 0
    try:
        rules = render_rules.render("vllm", "0.32.0", **dict(TEST_VARS, **watcher))
        config = render_rules.render_prometheus("vllm", "0.32.0", **watcher)
        for name, text in (("llmops-engine.yml", rules), ("prometheus.yml", config)):
            with open(os.path.join(work, name), "w", encoding="utf-8") as handle:
                handle.write(text)
        loaded = yaml.safe_load(config)
        jobs = [job["job_name"] for job in loaded["scrape_configs"]]
        if "LLMEngineDown" in rules or "llmops-engine" in jobs or "llmops-upstreams" not in jobs \
                or "LLMEngineHostDown" not in rules:
            print("FAIL watcher: engine rules or job present, or the upstream job or its rule missing (jobs %s)" % jobs)
            failures += 1
        for argv in ([tool, "check", "rules", "llmops-engine.yml"],
                     [tool, "check", "config", "--syntax-only", "prometheus.yml"]):
            proc = subprocess.run(argv, cwd=work, capture_output=True, text=True, check=False)
            print("%s watcher %s: %s" % ("ok  " if proc.returncode == 0 else "FAIL", " ".join(argv[1:3]),
                                         (proc.stdout + proc.stderr).strip().replace("\n", "\n    ")))
            failures += proc.returncode != 0
    finally:
        shutil.rmtree(work)
    return failures


def series_names(test_file):
    with open(test_file, encoding="utf-8") as handle:
        doc = yaml.safe_load(handle)
    names = set()
    for case in doc["tests"]:
        for item in case.get("input_series", []):
            names.add(re.match(r"^[A-Za-z_:][A-Za-z0-9_:]*", item["series"]).group(0))
    return names


def exported_names(engine, version):
    """Sample names a scrape of the real engine recorded, or None when none was recorded."""
    fixture = "%s-%s" % (engine, version)
    if not os.path.exists(os.path.join(render_rules.FIXTURES, fixture + ".txt")):
        return None
    return render_rules.fixture_names(fixture)


def main():
    tool = promtool()
    failures = 0
    dcgm = render_rules.fixture_names("dcgm-exporter") | render_rules.fixture_names("node-exporter")
    for name in sorted(os.listdir(os.path.join(HERE, "rules"))):
        match = re.match(r"^(vllm|sglang)-(\d+(?:\.\d+)*)\.test\.yml$", name)
        if not match:
            continue
        engine, version = match.groups()
        test_file = os.path.join(HERE, "rules", name)
        known = exported_names(engine, version)
        unknown = {n for n in series_names(test_file) if n != "up" and n not in (known or set()) | dcgm}
        if known is None:
            print("note %s: series names unchecked: no scrape of %s %s in tests/fixtures/metrics (%s)"
                  % (name, engine, version, ", ".join(sorted(unknown))))
        elif unknown:
            print("FAIL %s: series not exported by %s %s: %s" % (name, engine, version, ", ".join(sorted(unknown))))
            failures += 1
            continue
        work = tempfile.mkdtemp(prefix="llmops-rules-")
        try:
            with open(os.path.join(work, "llmops-engine.yml"), "w", encoding="utf-8") as handle:
                handle.write(render_rules.render(engine, version, **TEST_VARS))
            with open(os.path.join(work, "prometheus.yml"), "w", encoding="utf-8") as handle:
                handle.write(render_rules.render_prometheus(engine, version))
            shutil.copy(test_file, os.path.join(work, "test.yml"))
            for argv in ([tool, "check", "rules", "llmops-engine.yml"], [tool, "test", "rules", "test.yml"],
                         [tool, "check", "config", "--syntax-only", "prometheus.yml"]):
                proc = subprocess.run(argv, cwd=work, capture_output=True, text=True)
                print("%s %s %s: %s" % ("ok  " if proc.returncode == 0 else "FAIL", name, " ".join(argv[1:3]),
                                        (proc.stdout + proc.stderr).strip().replace("\n", "\n    ")))
                failures += proc.returncode != 0
        finally:
            shutil.rmtree(work)
    failures += check_watcher(tool)
    failures += check_alertmanager()
    print("monitoring rules: %s" % ("%d failure(s)" % failures if failures else "all passed"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
