# -*- coding: utf-8 -*-
# Copyright: llmops.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The gateway's routing by model over several pools of engine hosts, and its client priorities.

The gateway role's own input checks (validate.yml, with its resolve.yml) run by ansible-playbook on a dedicated
gateway (localhost) with three engine hosts in the inventory: two serve one base model and its
adapter (a pool), the third another model (the field report's long-context pool). The role's
templates are rendered from the facts, and the rendered gateway.js runs under Node with a stand-in
for nginx's request object (the default scenario runs it in nginx's njs, one pool)."""
import json
import os
import shutil
import subprocess
import sys

import pytest
import yaml

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
PLAYBOOK = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
NODE = shutil.which("node") or shutil.which("nodejs")

pytestmark = pytest.mark.skipif(not os.path.exists(PLAYBOOK), reason="needs the controller venv (make unit)")

ENGINES = {
    "e1": {"ansible_host": "10.0.0.1"},
    "e2": {"ansible_host": "10.0.0.2"},
    "e3": {"ansible_host": "10.0.0.3", "serving_engine": "sglang", "serving_lora_adapters": {},
           "serving_model": {"name": "qwen36-long", "source": "/srv/models/long", "lora": None}},
}
CLIENTS = [{"name": "team-a", "key": "0a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d", "priority": 10},
           {"name": "team-b", "key": "1a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d"}]

RUNNER = r"""
import gw from './gateway.mjs';
const out = [];
for (const c of JSON.parse(process.argv[2])) {
    const r = {requestText: c.body, variables: {llmops_client: c.client}, headersIn: {}, headersOut: {},
               return(status, body) { this.returned = [status, JSON.parse(body)]; },
               internalRedirect(where) { this.redirect = where; }};
    gw.route(r);
    out.push({pool: r.variables.llmops_pool, body: r.variables.llmops_body, priority: r.variables.llmops_priority,
              model: r.variables.llmops_model, returned: r.returned, redirect: r.redirect});
}
console.log(JSON.stringify(out));
"""


def render(tmp_path, engines=None, clients=None, group_vars=None, balance="least_conn", gateway_vars=None,
           server_lines=False, more_tasks=()):
    """(rc, output) of the play; the rendered upstream.conf and gateway.mjs land in tmp_path. With
    server_lines, the role's upstreams.yml writes each engine's server line in gateway_config_dir, and
    the hosts its drained.yml finds held down go to tmp_path/drained.json."""
    hosts = dict((name, dict(vars_)) for name, vars_ in (engines or ENGINES).items())
    inventory = {"all": {
        "vars": {"serving_engine": "vllm", "serving_listen": "0.0.0.0:8000", "serving_engine_tls": "auto",
                 "serving_engine_extra_args": {}, "serving_priority_scheduling": True,
                 "serving_api_key": "9f8e7d6c5b4a39281706f5e4d3c2b1a0",
                 "serving_model": {"name": "qwen36", "source": "/srv/models/qwen36", "lora": None},
                 "serving_lora_adapters": {"support": "/srv/adapters/support"},
                 "gateway_api_keys": clients if clients is not None else CLIENTS},
        "children": {
            "llm_gateways": {"hosts": {"gw": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}}},
            "llm_servers": {"hosts": hosts, "vars": group_vars or {}}}}}
    (tmp_path / "inventory.yml").write_text(yaml.safe_dump(inventory))
    templates = os.path.join(REPO, "roles", "gateway", "templates")
    play_vars = dict({"gateway_config_dir": "/etc/nginx/llmops", "gateway_balance": balance}, **(gateway_vars or {}))
    play = [{"hosts": "gw", "gather_facts": False, "vars": play_vars, "tasks": [
        {"ansible.builtin.include_role": {"name": "llmops.serving.gateway", "tasks_from": "validate.yml"}},
        {"ansible.builtin.template": {"src": os.path.join(templates, "upstream.conf.j2"),
                                      "dest": str(tmp_path / "upstream.conf"), "mode": "0644"}},
        {"ansible.builtin.template": {"src": os.path.join(templates, "gateway.js.j2"),
                                      "dest": str(tmp_path / "gateway.mjs"), "mode": "0644"}},
    ] + ([
        {"ansible.builtin.include_role": {"name": "llmops.serving.gateway", "tasks_from": "upstreams.yml"}},
        {"ansible.builtin.include_role": {"name": "llmops.serving.gateway", "tasks_from": "drained.yml"}},
        {"ansible.builtin.copy": {"content": "{{ gateway_drained_hosts | to_json }}", "dest": str(tmp_path / "drained.json"),
                                  "mode": "0644"}},
    ] if server_lines else []) + list(more_tasks)}]
    (tmp_path / "play.yml").write_text(json.dumps(play))
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"), ANSIBLE_FORCE_COLOR="0")
    res = subprocess.run([PLAYBOOK, "-i", str(tmp_path / "inventory.yml"), str(tmp_path / "play.yml")],
                         capture_output=True, text=True, env=env, timeout=300, check=False)
    return res.returncode, res.stdout + res.stderr


def route(tmp_path, cases):
    (tmp_path / "run.mjs").write_text(RUNNER)
    res = subprocess.run([NODE, str(tmp_path / "run.mjs"), json.dumps(cases)], capture_output=True, text=True,
                         timeout=60, check=False)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


def test_each_name_goes_to_the_pool_that_serves_it_with_the_clients_priority(tmp_path):
    rc, out = render(tmp_path)
    assert rc == 0, out[-3000:]
    upstream = (tmp_path / "upstream.conf").read_text()
    # one upstream per pool, each with its own engines' server files (a drain rewrites one file)
    blocks = dict((b.split("{")[0].strip(), b) for b in upstream.split("\nupstream ")[1:])
    assert sorted(blocks) == ["llmops_engines", "llmops_engines_1"], upstream
    assert "upstream.d/e1.conf" in blocks["llmops_engines"] and "upstream.d/e2.conf" in blocks["llmops_engines"]
    assert "upstream.d/e3.conf" in blocks["llmops_engines_1"] and "e1.conf" not in blocks["llmops_engines_1"]
    # each pool sends a request to its engine with the fewest open requests (streams hold one each)
    assert all("    least_conn;\n" in block for block in blocks.values()), upstream
    assert NODE, "node is needed to run the rendered gateway.js"
    chat = {"messages": [{"role": "user", "content": "hi"}], "seed": 12345678901234567890, "priority": "urgent"}
    cases = [
        dict(client="team-a", body=json.dumps(dict(chat, model="support"))),
        dict(client="team-a", body=json.dumps(dict(chat, model="qwen36-long"))),
        dict(client="team-b", body=json.dumps(dict(chat, model="qwen36"))),
        dict(client="team-a", body=json.dumps(dict(chat, model="qwen36-short"))),
        dict(client="team-a", body=json.dumps({"messages": []})),
        dict(client="team-b", body="not json"),
        dict(client="team-a", body="{}"),
        # bodies an engine's JSON parser may accept with the client's own priority in them
        dict(client="team-b", body="\ufeff" + json.dumps(dict(chat, model="qwen36"))),
        dict(client="team-b", body=json.dumps(dict(chat, model="qwen36", priority=float("nan")))),
        dict(client="team-b", body='[{"model": "qwen36"}]'),
    ]
    got = route(tmp_path, cases)
    support, long_, base, unknown, no_model, garbage, empty, bom, nan, array = got
    # the adapter goes with its base model's pool; vLLM there: the priority negated (lower is sooner)
    assert (support["pool"], support["model"], support["redirect"]) == ("llmops_engines", "support", "@llmops_upstream")
    assert json.loads(support["body"])["priority"] == -10 and support["priority"] == "10"
    # the client's own numbers are sent byte for byte (JSON would round this seed), its own priority overridden
    assert support["body"].startswith(cases[0]["body"][:-1]) and "12345678901234567890" in support["body"]
    assert long_["pool"] == "llmops_engines_1" and json.loads(long_["body"])["priority"] == 10  # SGLang: higher first
    assert base["pool"] == "llmops_engines" and json.loads(base["body"])["priority"] == 0 and base["priority"] == "0"
    assert unknown["returned"][0] == 404 and unknown.get("redirect") is None and unknown.get("pool") is None
    assert unknown["returned"][1]["error"]["code"] == "model_not_found"
    assert "qwen36-short" in unknown["returned"][1]["error"]["message"]
    assert no_model["pool"] == "llmops_engines" and json.loads(no_model["body"]) == {"messages": [], "priority": -10}
    assert json.loads(empty["body"]) == {"priority": -10}
    # what is not a JSON object the gateway reads is answered here, never forwarded with its own priority
    for refused in (garbage, bom, nan, array):
        assert refused["returned"][0] == 400 and refused.get("redirect") is None and refused.get("pool") is None, refused
        assert refused["returned"][1]["error"]["code"] == "invalid_json"


def test_a_pool_without_priority_scheduling_gets_priority_0_whatever_the_client_sent(tmp_path):
    """0 is every engine's default; the client's own value would reach a host that a rollout has
    just switched to priority scheduling, before the gateway's file is rewritten."""
    engines = dict(ENGINES, e3=dict(ENGINES["e3"], serving_priority_scheduling=False))
    rc, out = render(tmp_path, engines=engines)
    assert rc == 0, out[-3000:]
    body = json.dumps({"model": "qwen36-long", "messages": [], "priority": 3})
    routed = route(tmp_path, [dict(client="team-a", body=body)])[0]
    assert routed["pool"] == "llmops_engines_1" and routed["body"] == body[:-1] + ',"priority":0}', routed
    assert json.loads(routed["body"])["priority"] == 0 and routed["priority"] == "0"


def test_sglang_beside_vllm_in_one_pool_schedules_lower_values_first_with_its_flag(tmp_path):
    sglang = dict(ENGINES["e2"], serving_engine="sglang",
                  serving_engine_extra_args={"schedule-low-priority-values-first": True})
    rc, out = render(tmp_path, engines=dict(ENGINES, e2=sglang))
    assert rc == 0, out[-3000:]
    body = json.dumps({"model": "qwen36", "messages": []})
    assert json.loads(route(tmp_path, [dict(client="team-a", body=body)])[0]["body"])["priority"] == -10


@pytest.mark.parametrize("engines, clients, group_vars, words", [
    # an adapter named like another pool's model
    (dict(ENGINES, e3=dict(ENGINES["e3"], serving_lora_adapters={"support": "/srv/adapters/support"})), None, None,
     '["support"] would be served by engines of different base models'),
    # two hosts of one pool with different adapters
    (dict(ENGINES, e2=dict(ENGINES["e2"], serving_lora_adapters={})), None, None,
     "list different LoRA adapters (e1 [\"qwen36\", \"support\"]; e2 [\"qwen36\"])"),
    # one host of a pool that schedules by priority and one that does not: the client's own value
    # would reach the second, whichever the gateway wrote for the first
    (dict(ENGINES, e2=dict(ENGINES["e2"], serving_priority_scheduling=False)), None, None,
     "schedule by priority differently (e1: priority, lower values first; e2: no priority)"),
    # SGLang beside vLLM in one pool, each in its own order: one value would mean opposite things
    (dict(ENGINES, e2=dict(ENGINES["e2"], serving_engine="sglang")), None, None,
     "(e1: priority, lower values first; e2: priority, higher values first)"),
    # an SGLang that aborts any request with a priority, behind a gateway that writes one into each
    (dict(ENGINES, e3=dict(ENGINES["e3"], serving_priority_scheduling=False,
                           serving_engine_extra_args={"abort-on-priority-when-disabled": True})), None, None,
     "abort-on-priority-when-disabled on e3 would abort every request"),
    # client priorities, and no engine that schedules by them
    (dict((h, dict(v, serving_priority_scheduling=False)) for h, v in ENGINES.items()), None, None,
     "no engine behind this gateway schedules by priority"),
])
def test_routing_the_gateway_cannot_do_is_refused(tmp_path, engines, clients, group_vars, words):
    rc, out = render(tmp_path, engines=engines, clients=clients, group_vars=group_vars)
    assert rc != 0 and words in out, out[-3000:]
    assert not (tmp_path / "upstream.conf").exists()


@pytest.mark.parametrize("path", ["llmops-gateway.prom", "/var/lib/prometheus/node-exporter/llmops-gateway.txt"])
def test_a_certificate_metrics_file_node_exporter_would_not_read_is_refused(tmp_path, path):
    rc, out = render(tmp_path, gateway_vars={"gateway_certificate_metrics_file": path})
    assert rc != 0 and "gateway_certificate_metrics_file must be an absolute path that ends in .prom" in out, out[-3000:]
    assert not (tmp_path / "upstream.conf").exists()


def server_lines(conf):
    return dict((path.stem, path.read_text().splitlines()[-1]) for path in sorted((conf / "upstream.d").iterdir()))


def scrape_targets(folder):
    """{engine: (address, labels)} of the gateway's Prometheus file_sd targets."""
    out = {}
    for path in sorted(folder.iterdir()):
        groups = yaml.safe_load(path.read_text())
        assert len(groups) == 1 and len(groups[0]["targets"]) == 1, groups
        out[path.stem] = (groups[0]["targets"][0], groups[0]["labels"])
    return out


def test_a_cordoned_engine_is_held_down_and_comes_back_when_uncordoned_while_a_drain_is_kept(tmp_path):
    conf, targets = tmp_path / "gw", tmp_path / "targets"
    (conf / "upstream.d").mkdir(parents=True)
    # e2 was drained by a rollout before this run: its line is down, without a cordon
    (conf / "upstream.d" / "e2.conf").write_text("server 10.0.0.2:8000 max_fails=3 fail_timeout=10s down;  # e2\n")
    cordoned = dict(ENGINES, e1=dict(ENGINES["e1"], serving_cordoned=True))
    where = {"gateway_config_dir": str(conf), "gateway_targets_dir": str(targets)}
    rc, out = render(tmp_path, engines=cordoned, gateway_vars=where, server_lines=True)
    assert rc == 0, out[-3000:]
    lines = server_lines(conf)
    assert lines["e1"].endswith(" down;  # e1 (cordoned)") and lines["e2"].endswith(" down;  # e2"), lines
    assert " down;" not in lines["e3"], lines
    # the pool budgets count both as out of the gateways
    assert json.loads((tmp_path / "drained.json").read_text()) == ["e1", "e2"]
    # a Prometheus beside the gateway sees the same: where each engine answers (TLS beyond loopback),
    # and what holds it out of rotation

    def labels(cordon, drain):
        return {"__scheme__": "https", "llmops_cordoned": cordon, "llmops_drained": drain}
    seen = dict((h, (addr, dict((k, v) for k, v in lab.items() if k != "llmops_upstream")))
                for h, (addr, lab) in scrape_targets(targets).items())
    assert seen == {"e1": ("10.0.0.1:8000", labels("true", "false")), "e2": ("10.0.0.2:8000", labels("false", "true")),
                    "e3": ("10.0.0.3:8000", labels("false", "false"))}, seen
    assert set(lab["llmops_upstream"] for addr, lab in scrape_targets(targets).values()) == {"e1", "e2", "e3"}
    # a rollout that restarts the cordoned e1 puts it back as it ends (the gateway's drain.yml, active):
    # its cordon keeps it out, and the line is not even rewritten
    undrain = {"ansible.builtin.include_role": {"name": "llmops.serving.gateway", "tasks_from": "drain.yml"},
               "vars": {"gateway_drain_host": "e1", "gateway_drain_state": "active"}}
    rc, out = render(tmp_path, engines=cordoned, gateway_vars=where, more_tasks=[undrain])
    assert rc == 0 and "e1 is active, and held out by its cordon (serving_cordoned)" in out, out[-3000:]
    assert server_lines(conf)["e1"].endswith(" down;  # e1 (cordoned)"), server_lines(conf)
    # the cordon lifted: e1 serves again, the drain still holds e2
    rc, out = render(tmp_path, gateway_vars=where, server_lines=True)
    assert rc == 0, out[-3000:]
    lines = server_lines(conf)
    assert " down;" not in lines["e1"] and "cordoned" not in lines["e1"] and lines["e2"].endswith(" down;  # e2"), lines
    assert json.loads((tmp_path / "drained.json").read_text()) == ["e2"]
    assert scrape_targets(targets)["e1"][1]["llmops_cordoned"] == "false"
    assert scrape_targets(targets)["e2"][1]["llmops_drained"] == "true"


@pytest.mark.parametrize("cordon, min_available, words", [
    # the one server of the long-context pool
    (["e3"], None, "serving_cordoned on e3 would leave pool qwen36-long 0 of its 1 servers in the gateways, and "
                   "serving_rollout_min_available is 1. Uncordon another host of the pool first"),
    # both servers of the pool qwen36, with a budget of one
    (["e1", "e2"], None, "serving_cordoned on e1, e2 would leave pool qwen36 0 of its 2 servers"),
    # one of two with a budget of two
    (["e1"], 2, "serving_cordoned on e1 would leave pool qwen36 1 of its 2 servers in the gateways, and "
                "serving_rollout_min_available is 2"),
])
def test_a_cordon_that_breaks_a_pools_budget_is_refused(tmp_path, cordon, min_available, words):
    engines = dict((h, dict(v, serving_cordoned=h in cordon)) for h, v in ENGINES.items())
    rc, out = render(tmp_path, engines=engines,
                     gateway_vars={} if min_available is None else {"serving_rollout_min_available": min_available})
    assert rc != 0 and words in " ".join(out.split()), out[-3000:]
    # allowed when the budget is 0 (the pool may stop serving), or when the pool keeps enough
    rc, out = render(tmp_path, engines=engines, gateway_vars={"serving_rollout_min_available": 0})
    assert rc == 0, out[-3000:]


def test_an_instance_that_spans_hosts_is_one_upstream_its_rank_0(tmp_path):
    # e1 and e2 form one instance (two pipeline stages): only e1, rank 0, serves the API
    rc, out = render(tmp_path, group_vars={"serving_pipeline_parallel": 2,
                                           "serving_instances": {"qwen36-a": ["e1", "e2"]}}, balance="round_robin")
    assert rc == 0, out[-3000:]
    upstream = (tmp_path / "upstream.conf").read_text()
    blocks = dict((b.split("{")[0].strip(), b) for b in upstream.split("\nupstream ")[1:])
    assert "upstream.d/e1.conf" in blocks["llmops_engines"] and "e2.conf" not in upstream, upstream
    # round_robin is nginx's default: no directive
    assert "least_conn" not in upstream
