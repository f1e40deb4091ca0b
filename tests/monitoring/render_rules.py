# Copyright: (c) 2026, llmops.serving maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Render the monitoring role's alert rules outside Ansible, the way its template task does.

Used by tests/unit/monitoring (metric names against the real engines' fixtures) and by
run_promtool.py (`promtool check rules` / `promtool test rules`, `amtool check-config` on the
Alertmanager configuration). The collection's own data
decides: the role's defaults/main.yml and templates/*.rules.yml.j2, and the metric names by engine
version from the engine registry (plugins/module_utils/engines.py), as the role reads them.
"""
import importlib.util
import json
import os
import re

import jinja2
import yaml

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ROLE = os.path.join(REPO, "roles", "monitoring")
FIXTURES = os.path.join(REPO, "tests", "fixtures", "metrics")
ENGINE_METRIC = re.compile(r"\b(?:vllm|sglang):[A-Za-z0-9_:]+")
DCGM_METRIC = re.compile(r"\bDCGM_FI_[A-Z0-9_]+")
# node_exporter's own names and the llmops_ text files its textfile collector exports
NODE_METRIC = re.compile(r"\b(?:node|llmops)_[a-z0-9_]+")


def _load(*parts):
    with open(os.path.join(ROLE, *parts), encoding="utf-8") as handle:
        return yaml.safe_load(handle)


def version_tuple(version):
    return tuple(int(x) for x in re.match(r"^\d+(?:\.\d+)*", str(version)).group(0).split("."))


def _registry():
    spec = importlib.util.spec_from_file_location(
        "llmops_engines", os.path.join(REPO, "plugins", "module_utils", "engines.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def metric_set(engine, version):
    """The role's choice: the engine registry's metric names at that version."""
    return _registry().engine_info(engine, version)["metrics"]


def _variables(overrides):
    """The serving spec's and the role's defaults, overrides on top."""
    with open(os.path.join(REPO, "roles", "serving_spec", "defaults", "main.yml"), encoding="utf-8") as handle:
        variables = dict(yaml.safe_load(handle))
    variables.update(_load("defaults", "main.yml"))
    # the serving_spec role's derived fact: a host of its own (or rank 0) serves the API
    variables["serving_spec_serves_api"] = True
    variables.update(overrides)
    variables["ansible_managed"] = "Ansible managed (rendered by tests/monitoring/render_rules.py)"
    return variables


def _template(name, variables):
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(os.path.join(ROLE, "templates")),
                             trim_blocks=True, undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    env.filters["comment"] = lambda text: "\n".join("# " + line for line in text.splitlines())
    env.filters["to_json"] = json.dumps
    env.filters["bool"] = lambda value: value is True or str(value).lower() in ("true", "yes", "1")
    env.filters["llmops.serving.engine_names"] = lambda _engine: sorted(_registry().REGISTRY)
    # as Ansible's to_nice_yaml (block style, keys sorted)
    env.filters["to_nice_yaml"] = lambda data, indent=4: yaml.safe_dump(
        data, indent=indent, default_flow_style=False, allow_unicode=True)
    return env.get_template(name).render(**variables)


def render(engine, version, **overrides):
    """Rendered rules text for engine/version; overrides replace role defaults (the engine's scrape
    target, __monitoring_engine_target, is serving_listen unless given)."""
    variables = _variables(overrides)
    variables.setdefault("__monitoring_engine_target", variables["serving_listen"])
    variables.update(serving_engine=engine, __monitoring_engine_version=version,
                     serving_spec_unit=_registry().engine_info(engine)["unit"],
                     serving_spec_engine=_registry().engine_info(engine, version),
                     __monitoring_metrics=metric_set(engine, version))
    return _template("llmops-engine.rules.yml.j2", variables)


def render_alertmanager(**overrides):
    """Rendered alertmanager.yml text; overrides replace role defaults."""
    return _template("alertmanager.yml.j2", _variables(overrides))


def render_prometheus(engine, version, **overrides):
    """Rendered prometheus.yml text for one engine host (the role's resolve.yml facts worked out here
    the same way); overrides replace role defaults."""
    variables = _variables(overrides)
    variables.setdefault("__monitoring_engine_target", variables["serving_listen"])
    variables.setdefault("__monitoring_alertmanager_target",
                         re.sub(r"^0\.0\.0\.0:", "127.0.0.1:", variables["monitoring_alertmanager_listen"]))
    variables.setdefault("__monitoring_exporters", [])
    variables.setdefault("inventory_hostname", "llmops-test")
    variables.setdefault("serving_model", {"name": "qwen3-tiny"})
    # the serving spec's facts about the engine's TLS (serving_spec vars/main.yml)
    variables.setdefault("serving_spec_engine_tls", False)
    variables.setdefault("serving_spec_engine_ca", "/etc/llmops/tls/ca.crt")
    variables.setdefault("serving_spec_engine_tls_name", "llmops-engine")
    variables.update(serving_engine=engine, __monitoring_engine_version=version)
    return _template("prometheus.yml.j2", variables)


def referenced_metrics(rules_text):
    """Engine, DCGM and node_exporter metric names the rules' expressions use."""
    names = set()
    for group in yaml.safe_load(rules_text)["groups"]:
        for rule in group["rules"]:
            # label matchers name labels (llmops_drained="false"), not metrics
            expr = re.sub(r"\{[^}]*\}", "", rule["expr"])
            names |= (set(ENGINE_METRIC.findall(expr)) | set(DCGM_METRIC.findall(expr))
                      | set(NODE_METRIC.findall(expr)))
    return names


def fixture_names(name):
    """Metric (sample) names recorded in tests/fixtures/metrics/<name>.txt."""
    with open(os.path.join(FIXTURES, name + ".txt"), encoding="utf-8") as handle:
        return {line.strip() for line in handle if line.strip() and not line.startswith("#")}


def fixtures():
    """(engine, version) of every engine fixture."""
    found = []
    for name in sorted(os.listdir(FIXTURES)):
        match = re.match(r"^(vllm|sglang)-(\d+(?:\.\d+)*)\.txt$", name)
        if match:
            found.append((match.group(1), match.group(2)))
    return found
