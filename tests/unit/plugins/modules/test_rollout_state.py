# -*- coding: utf-8 -*-
"""rollout_state run as Ansible runs it: a drain writes the state and the drain metrics for
node_exporter's textfile collector (where its folder exists), reports only the state as a change,
and check mode writes neither."""
import json
import time

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
    """A stand-in engine's HTTP port on loopback: /health answers `status`. With status None it is
    wedged as a stopped process is: the kernel takes connections into the backlog, and nothing
    ever reads them."""

    def __init__(self, status):
        import socket
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 (http.server's name)
                self.send_response(status if self.path == "/health" else 404)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = None
        if status is None:
            self.sock = socket.socket()
            self.sock.bind(("127.0.0.1", 0))
            self.sock.listen(16)
            port = self.sock.getsockname()[1]
        else:
            self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
            self.server.daemon_threads = True
            port = self.server.server_address[1]
            threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.address = "127.0.0.1:%d" % port

    def close(self):
        if self.server is None:
            self.sock.close()
        else:
            self.server.shutdown()
            self.server.server_close()


def self_signed_ca():
    """A CA certificate's PEM (the collection's own CA stands where the engine serves TLS)."""
    import datetime
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "llmops test CA")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now)
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True).sign(key, hashes.SHA256()))
    return cert.public_bytes(serialization.Encoding.PEM)


def _health(monkeypatch, tmp_path, address, active=True, ca_path=None, paths=None):
    def run_command(self, argv, **kwargs):
        return (0 if active else 3), "", ""
    args = dict(path=str(tmp_path / "state.json"), current_link=str(tmp_path / "current"),
                model_path=str(tmp_path / "model"), chat_template=str(tmp_path / "template.jinja"),
                units={"vllm": "llmops-vllm.service"}, health_address=address,
                health_paths=paths or {"vllm": "/health", "sglang": "/health_generate"}, health_timeout=1.0)
    if ca_path:
        args["ca_path"] = ca_path
    began = time.monotonic()
    dummy, result = run_module(monkeypatch, rollout_state, args, run_command, failed_key=True)
    return dict(result, took=time.monotonic() - began)


def test_an_active_engine_counts_as_healthy_only_when_its_health_path_answers_200(monkeypatch, tmp_path):
    """What the pool budget counts as serving: an active unit whose engine answers its health path,
    over http where the host has no CA file (a loopback engine) and over http after https where it
    has one (a member whose TLS the run changes)."""
    ca = tmp_path / "ca.crt"
    ca.write_bytes(self_signed_ca())
    engines = dict((name, Engine(status)) for name, status in (("ok", 200), ("loading", 503), ("wedged", None)))
    try:
        seen = dict((name, _health(monkeypatch, tmp_path, e.address)) for name, e in engines.items())
        no_ca_file = _health(monkeypatch, tmp_path, engines["ok"].address, ca_path=str(tmp_path / "missing.crt"))
        with_ca = _health(monkeypatch, tmp_path, engines["ok"].address, ca_path=str(ca))
        wedged_ca = _health(monkeypatch, tmp_path, engines["wedged"].address, ca_path=str(ca))
        stopped = _health(monkeypatch, tmp_path, engines["ok"].address, active=False)
        no_path = _health(monkeypatch, tmp_path, engines["ok"].address, paths={"sglang": "/health_generate"})
    finally:
        for e in engines.values():
            e.close()
    closed = _health(monkeypatch, tmp_path, engines["ok"].address)  # nothing listens there now
    assert seen["ok"]["healthy"] is True and seen["ok"]["health_error"] == "" and seen["ok"]["running_engine"] == "vllm"
    assert seen["loading"]["healthy"] is False and seen["loading"]["health_error"].endswith("/health answered 503")
    assert seen["wedged"]["healthy"] is False and "timed out" in seen["wedged"]["health_error"]
    assert no_ca_file["healthy"] is True and with_ca["healthy"] is True, (no_ca_file, with_ca)
    # a wedged engine costs one timeout, not one per scheme
    assert wedged_ca["healthy"] is False and wedged_ca["health_error"].count("timed out") == 1, wedged_ca
    assert wedged_ca["took"] < 1.9, wedged_ca
    assert closed["healthy"] is False and "refused" in closed["health_error"].lower(), closed
    assert stopped["healthy"] is False and stopped["health_error"] == "no engine unit is active"
    assert no_path["healthy"] is False and no_path["health_error"] == "no health path is given for vllm"
    assert not any(r.get("failed") for r in list(seen.values()) + [closed, stopped, no_ca_file, with_ca])
    # without a health address nothing is asked, and healthy says so
    assert _run(monkeypatch, tmp_path)["healthy"] is None
    import yaml
    assert set(seen["ok"]) - {"changed", "invocation", "took"} == set(yaml.safe_load(rollout_state.RETURN))
