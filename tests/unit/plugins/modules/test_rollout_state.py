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


class Engine(object):
    """A stand-in engine's HTTP port on loopback: /health answers `status`, or never answers (a
    wedged engine) when status is None."""

    def __init__(self, status):
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        answer = status

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 (http.server's name)
                if answer is None:
                    self.server.release.wait(10)
                    return
                self.send_response(answer if self.path == "/health" else 404)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.release = threading.Event()
        self.server.daemon_threads = True
        self.url = "http://127.0.0.1:%d" % self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.release.set()
        self.server.shutdown()
        self.server.server_close()


def _health(monkeypatch, tmp_path, url, active=True):
    def run_command(self, argv, **kwargs):
        return (0 if active else 3), "", ""
    args = dict(path=str(tmp_path / "state.json"), current_link=str(tmp_path / "current"),
                model_path=str(tmp_path / "model"), chat_template=str(tmp_path / "template.jinja"),
                units={"vllm": "llmops-vllm.service"}, health_url=url, health_timeout=1.0)
    dummy, result = run_module(monkeypatch, rollout_state, args, run_command, failed_key=True)
    return result


def test_an_active_engine_counts_as_healthy_only_when_its_health_url_answers_200(monkeypatch, tmp_path):
    """What the pool budget counts as serving: an active unit whose engine answers its health URL."""
    engines = dict((name, Engine(status)) for name, status in (("ok", 200), ("loading", 503), ("wedged", None)))
    try:
        seen = dict((name, _health(monkeypatch, tmp_path, e.url + "/health")) for name, e in engines.items())
        stopped = _health(monkeypatch, tmp_path, engines["ok"].url + "/health", active=False)
    finally:
        for e in engines.values():
            e.close()
    closed = _health(monkeypatch, tmp_path, engines["ok"].url + "/health")  # nothing listens there now
    assert seen["ok"]["healthy"] is True and seen["ok"]["health_error"] == "" and seen["ok"]["running_engine"] == "vllm"
    assert seen["loading"]["healthy"] is False and seen["loading"]["health_error"].endswith("answered 503")
    assert seen["wedged"]["healthy"] is False and "timed out" in seen["wedged"]["health_error"]
    assert closed["healthy"] is False and "refused" in closed["health_error"].lower(), closed
    assert stopped["healthy"] is False and stopped["health_error"] == "no engine unit is active"
    assert not any(r["failed"] for r in list(seen.values()) + [closed, stopped] if "failed" in r)
    # without a health URL nothing is asked, and healthy says so
    assert _run(monkeypatch, tmp_path)["healthy"] is None
    import yaml
    assert set(seen["ok"]) - {"changed", "invocation"} == set(yaml.safe_load(rollout_state.RETURN))
