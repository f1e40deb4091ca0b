# Copyright: (c) 2026, llmops.serving maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Render the monitoring role's alert rules outside Ansible, the way its template task does.

Used by tests/unit/monitoring (metric names against the real engines' fixtures) and by
run_promtool.py (`promtool check rules` / `promtool test rules`). The collection's own data
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


def render(engine, version, **overrides):
    """Rendered rules text for engine/version; overrides replace role defaults."""
    with open(os.path.join(REPO, "roles", "serving_spec", "defaults", "main.yml"), encoding="utf-8") as handle:
        variables = dict(yaml.safe_load(handle))
    variables.update(_load("defaults", "main.yml"))
    variables.update(overrides)
    variables.update(serving_engine=engine, __monitoring_engine_version=version,
                     serving_spec_unit=_registry().engine_info(engine)["unit"],
                     __monitoring_metrics=metric_set(engine, version),
                     ansible_managed="Ansible managed (rendered by tests/monitoring/render_rules.py)")
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(os.path.join(ROLE, "templates")),
                             trim_blocks=True, undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    env.filters["comment"] = lambda text: "\n".join("# " + line for line in text.splitlines())
    env.filters["to_json"] = json.dumps
    return env.get_template("llmops-engine.rules.yml.j2").render(**variables)


def referenced_metrics(rules_text):
    """Engine and DCGM metric names the rules' expressions use."""
    names = set()
    for group in yaml.safe_load(rules_text)["groups"]:
        for rule in group["rules"]:
            names |= set(ENGINE_METRIC.findall(rule["expr"])) | set(DCGM_METRIC.findall(rule["expr"]))
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
