"""rollout: what a host serves, its state file, and why it must restart."""
import json
import os

import pytest

from ansible_collections.llmops.serving.plugins.filter.rollout_reasons import rollout_reasons
from ansible_collections.llmops.serving.plugins.module_utils import rollout

UNITS = {"vllm": "llmops-vllm.service", "sglang": "llmops-sglang.service"}


@pytest.fixture
def host(tmp_path):
    """A host laid out as the roles leave it: venvs, the current link, a weights build, a template."""
    venvs, models = tmp_path / "venvs", tmp_path / "models"
    for v in ("vllm-0.31.0-aaaaaaaaaaaa", "vllm-0.32.0-bbbbbbbbbbbb"):
        (venvs / v).mkdir(parents=True)
    os.symlink(str(venvs / "vllm-0.31.0-aaaaaaaaaaaa"), str(venvs / "vllm-current"))
    (models / ".builds" / "qwen" / "b1").mkdir(parents=True)
    os.symlink(".builds/qwen/b1", str(models / "qwen"))
    (tmp_path / "qwen3.jinja").write_text("{{ messages }}")
    return tmp_path


def observe(host, active=("llmops-vllm.service",)):
    return rollout.observe(str(host / "state" / "state.json"), str(host / "venvs" / "vllm-current"),
                           str(host / "models" / "qwen"), str(host / "qwen3.jinja"), UNITS, lambda u: u in active)


def desired(host, seen, venv="vllm-0.31.0-aaaaaaaaaaaa"):
    return {"engine": "vllm", "venv": str(host / "venvs" / venv), "model": seen["model_build"],
            "chat_template": seen["chat_template_sha256"]}


def test_observe_reads_links_template_and_the_active_unit(host):
    seen = observe(host)
    assert seen["current"].endswith("/venvs/vllm-0.31.0-aaaaaaaaaaaa")
    assert seen["model_build"].endswith("/models/.builds/qwen/b1")
    assert len(seen["chat_template_sha256"]) == 64 and seen["running_engine"] == "vllm" and seen["state"] == {}
    assert observe(host, active=())["running_engine"] == ""


def test_write_state_is_atomic_private_and_reports_change(host):
    path = str(host / "state" / "state.json")
    assert rollout.write_state(path, {"drained": True})
    assert not rollout.write_state(path, {"drained": True})
    assert oct(os.stat(path).st_mode & 0o777) == "0o600" and oct(os.stat(os.path.dirname(path)).st_mode & 0o777) == "0o700"
    assert rollout.read_state(path) == {"drained": True}
    assert [n for n in os.listdir(os.path.dirname(path)) if n != "state.json"] == []
    assert rollout.merge({"drained": True, "serving": {"v": 1}}, {"drained": False}) == {"drained": False, "serving": {"v": 1}}


def test_a_damaged_state_file_is_named(host):
    path = host / "state.json"
    path.write_text("{half")
    with pytest.raises(ValueError, match="state.json is not JSON"):
        rollout.read_state(str(path))


def test_a_host_serving_the_spec_needs_nothing(host):
    seen = observe(host)
    want = desired(host, seen)
    seen["state"] = {"serving": {"model": want["model"], "chat_template": want["chat_template"]}}
    assert rollout.reasons(seen, want, False) == []


def test_each_difference_is_a_reason(host):
    seen = observe(host, active=())
    want = desired(host, seen, venv="vllm-0.32.0-bbbbbbbbbbbb")
    seen["state"] = {"serving": {"model": "/elsewhere/b0", "chat_template": "0" * 64}, "drained": True}
    assert rollout.reasons(seen, want, True) == [
        "engine stopped -> vllm", "vllm-0.31.0-aaaaaaaaaaaa -> vllm-0.32.0-bbbbbbbbbbbb",
        "unit, environment or launcher", "weights build b1", "chat template", "left drained by an interrupted run"]


def test_a_host_without_a_record_is_judged_by_what_runs(host):
    seen = observe(host)
    assert rollout.reasons(seen, desired(host, seen), False) == []


def test_the_filter_wraps_the_same_logic_and_names_bad_input(host):
    from ansible.errors import AnsibleFilterError
    seen = observe(host)
    assert rollout_reasons(seen, desired(host, seen), False) == []
    with pytest.raises(AnsibleFilterError, match="rollout_reasons"):
        rollout_reasons(seen, {"engine": "vllm"}, False)


def test_the_module_documents_what_it_returns():
    import yaml
    from ansible_collections.llmops.serving.plugins.modules import rollout_state
    returns = yaml.safe_load(rollout_state.RETURN)
    seen_keys = {"state", "current", "model_build", "chat_template_sha256", "running_engine", "healthy", "health_error",
                 "metrics_written"}
    assert set(returns) == seen_keys
    doc = yaml.safe_load(rollout_state.DOCUMENTATION)
    assert set(doc["options"]) == {"path", "current_link", "model_path", "chat_template", "units", "update", "metrics_file", "cordoned",
                                   "health_address", "health_paths", "ca_path", "health_timeout"}
    json.dumps(yaml.safe_load(rollout_state.EXAMPLES))


# ---------------------------------------------------------------------------- rollback's target
A, B = "/opt/llmops/venvs/vllm-0.31.0-aaaaaaaaaaaa", "/opt/llmops/venvs/vllm-0.32.0-bbbbbbbbbbbb"


def serving(venv, move_id=None, came_from=None):
    record = {"venv": venv, "since": "2026-12-07T06:00:00+00:00"}
    if move_id:
        record["moved_by"] = {"id": move_id, "from": came_from}
    return {"serving": record}


def test_rollback_undoes_only_the_last_move_of_an_upgrade_that_stopped():
    """Upgrade A->B moved all three hosts (run 1); upgrade B->A moved host 1 and stopped at host 2
    (run 2). Only host 1 rolls back, and only when rollback.yml is given A: given B, hosts 2 and 3
    (never moved by run 2) would go back a version, so it is refused, naming the move."""
    states = {"h1": serving(A, "20261207T060500Z-2", B), "h2": serving(B, "20261207T060000Z-1", A),
              "h3": serving(B, "20261207T060000Z-1", A)}
    move = rollout.last_version_move(states, A)
    assert move == dict(id="20261207T060500Z-2", to=A, hosts=["h1"], ok=True, msg="")
    refused = rollout.last_version_move(states, B)
    assert not refused["ok"] and refused["hosts"] == ["h1"]
    assert "20261207T060500Z-2" in refused["msg"] and "put h1 on vllm-0.31.0-aaaaaaaaaaaa" in refused["msg"]
    assert "given a serving spec whose venv is vllm-0.32.0-bbbbbbbbbbbb" in refused["msg"]


def test_a_rollback_is_a_move_the_next_rollback_undoes():
    """rollback.yml records its own move: after it, the last move is the rollback's (back to B on
    host 1), so a second rollback needs B and rolls host 1 forward to A again."""
    states = {"h1": serving(B, "20261207T061000Z-3", A), "h2": serving(B, "20261207T060000Z-1", A)}
    assert rollout.last_version_move(states, B)["hosts"] == ["h1"]
    assert not rollout.last_version_move(states, A)["ok"]


def test_hosts_without_recorded_moves_keep_the_old_rule():
    """State files from before moves had ids (or a fleet that never moved): no move is known, so
    every host on the target may roll back, as before."""
    states = {"h1": serving(A), "h2": {}, "h3": {"serving": {}}}
    assert rollout.last_version_move(states, A) == dict(id=None, to=None, hosts=[], ok=True, msg="")


def test_one_move_recorded_on_two_venvs_is_named():
    """One run moves every host to one venv: a move id recorded with two venvs is a damaged state file."""
    with pytest.raises(ValueError, match="move r2 recorded different venvs"):
        rollout.last_version_move({"h1": serving(A, "r2", B), "h2": serving(B, "r2", A)}, A)


# ---------------------------------------------------------------------------- drain state for Prometheus
def test_a_drain_records_when_it_began_and_an_undrain_forgets_it():
    drained = rollout.merge({"serving": {"venv": A}}, {"drained": True}, now=1000)
    assert drained["drained_since"] == 1000.0
    assert rollout.merge(drained, {"drained": True}, now=5000)["drained_since"] == 1000.0  # still the first drain
    assert "drained_since" not in rollout.merge(drained, {"drained": False}, now=6000)
    assert "drained_since" not in rollout.merge({}, {"serving": {"venv": A}}, now=1)


def test_drain_metrics_say_drained_and_since_only_while_drained(tmp_path):
    text = rollout.drain_metrics(rollout.merge({}, {"drained": True}, now=1765090000))

    def samples(t):
        return [line for line in t.splitlines() if not line.startswith("#")]
    assert samples(text) == ["llmops_host_drained 1", "llmops_host_cordoned 0",
                             "llmops_host_drained_since_timestamp_seconds 1765090000.000"]
    assert "llmops_host_drained 0" in rollout.drain_metrics({"drained": False}).splitlines()
    assert "since" not in rollout.drain_metrics({})
    # a cordon (serving_cordoned) is its own gauge, whatever the drain state
    assert "llmops_host_cordoned 0" in samples(rollout.drain_metrics({"drained": True}))
    assert samples(rollout.drain_metrics({}, cordoned=True)) == ["llmops_host_drained 0", "llmops_host_cordoned 1"]
    path = str(tmp_path / "llmops-rollout.prom")
    assert rollout.write_text(path, text) and not rollout.write_text(path, text)
    assert open(path).read() == text and oct(os.stat(path).st_mode & 0o777) == "0o644"
