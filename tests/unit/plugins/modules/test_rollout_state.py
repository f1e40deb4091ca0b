# -*- coding: utf-8 -*-
"""rollout_state run as Ansible runs it: a drain writes the state and the drain metrics for
node_exporter's textfile collector (where its folder exists), reports only the state as a change,
and check mode writes neither."""
import json

from ansible_collections.llmops.serving.plugins.modules import rollout_state

from .module_harness import run_module


def _run(monkeypatch, tmp_path, update=None, metrics_dir="textfile", check_mode=False, cordoned=None):
    def run_command(self, argv, **kwargs):
        return 3, "", ""  # systemctl is-active: no engine unit runs
    args = dict(path=str(tmp_path / "state" / "state.json"), current_link=str(tmp_path / "current"),
                model_path=str(tmp_path / "model"), chat_template=str(tmp_path / "template.jinja"),
                units={"vllm": "llmops-vllm.service"}, metrics_file=str(tmp_path / metrics_dir / "llmops-rollout.prom"))
    if update is not None:
        args["update"] = update
    if cordoned is not None:
        args["cordoned"] = cordoned
    dummy, result = run_module(monkeypatch, rollout_state, args, run_command, check_mode, failed_key=True)
    return result


def test_a_drain_writes_state_and_metrics_and_an_undrain_clears_them(monkeypatch, tmp_path):
    (tmp_path / "textfile").mkdir()
    prom = tmp_path / "textfile" / "llmops-rollout.prom"
    checked = _run(monkeypatch, tmp_path, {"drained": True}, check_mode=True)
    assert checked["changed"] and not checked["metrics_written"] and not prom.exists()
    drained = _run(monkeypatch, tmp_path, {"drained": True})
    assert drained["changed"] and drained["metrics_written"], drained
    since = json.load(open(tmp_path / "state" / "state.json"))["drained_since"]
    assert "llmops_host_drained 1\n" in prom.read_text()
    assert "llmops_host_drained_since_timestamp_seconds %.3f\n" % since in prom.read_text()
    again = _run(monkeypatch, tmp_path)
    assert not again["changed"] and not again["metrics_written"]
    undrained = _run(monkeypatch, tmp_path, {"drained": False})
    assert undrained["changed"] and undrained["metrics_written"]
    assert "llmops_host_drained 0\n" in prom.read_text() and "since" not in prom.read_text()
    assert "llmops_host_cordoned 0\n" in prom.read_text()
    # a cordon (serving_cordoned) is telemetry too: the file says so, and nothing is reported changed
    cordoned = _run(monkeypatch, tmp_path, cordoned=True)
    assert not cordoned["changed"] and cordoned["metrics_written"]
    assert "llmops_host_cordoned 1\n" in prom.read_text() and "llmops_host_drained 0\n" in prom.read_text()


def test_no_textfile_folder_no_metrics(monkeypatch, tmp_path):
    result = _run(monkeypatch, tmp_path, {"drained": True}, metrics_dir="absent")
    assert result["changed"] and not result["metrics_written"] and not (tmp_path / "absent").exists()
