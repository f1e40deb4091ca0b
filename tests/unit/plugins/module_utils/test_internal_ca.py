"""The internal CA: issued once, kept, issued again only for a reason, checked by openssl itself."""
import datetime
import os
import subprocess

import pytest
from cryptography import x509

from ansible_collections.llmops.serving.plugins.module_utils import internal_ca as ca

HOST = {"name": "gpu-01", "dns_names": ["gpu-01", "llmops-engine", "localhost"], "ip_addresses": ["127.0.0.1", "10.0.0.11"]}


def test_first_run_makes_the_ca_and_a_certificate_openssl_verifies(tmp_path):
    out = ca.issue(str(tmp_path), [HOST], 397, 30)
    assert out["changed"] and out["ca_changed"] and out["hosts"]["gpu-01"]["reason"] == "none issued yet"
    assert oct(os.stat(tmp_path / "ca.key").st_mode & 0o777) == "0o600"
    assert oct(os.stat(tmp_path / "issued" / "gpu-01.key").st_mode & 0o777) == "0o600"
    (tmp_path / "leaf.crt").write_text(out["hosts"]["gpu-01"]["certificate"])
    for name in ("llmops-engine", "gpu-01"):
        res = subprocess.run(["openssl", "verify", "-CAfile", str(tmp_path / "ca.crt"), "-purpose", "sslserver",
                              "-verify_hostname", name, str(tmp_path / "leaf.crt")], capture_output=True, text=True,
                             check=False)
        assert res.returncode == 0, res.stdout + res.stderr
    res = subprocess.run(["openssl", "verify", "-CAfile", str(tmp_path / "ca.crt"), "-verify_ip", "10.0.0.11",
                          str(tmp_path / "leaf.crt")], capture_output=True, text=True, check=False)
    assert res.returncode == 0, res.stdout + res.stderr


def test_a_second_run_changes_nothing(tmp_path):
    first = ca.issue(str(tmp_path), [HOST], 397, 30)
    second = ca.issue(str(tmp_path), [HOST], 397, 30)
    assert not second["changed"]
    assert second["hosts"]["gpu-01"]["certificate"] == first["hosts"]["gpu-01"]["certificate"]
    assert second["ca_certificate"] == first["ca_certificate"]


@pytest.mark.parametrize("change, reason", [
    ({"ip_addresses": ["127.0.0.1", "10.0.0.12"]}, "its names changed"),
    ({"dns_names": ["gpu-01"]}, "its names changed"),
])
def test_new_names_issue_again(tmp_path, change, reason):
    ca.issue(str(tmp_path), [HOST], 397, 30)
    out = ca.issue(str(tmp_path), [dict(HOST, **change)], 397, 30)
    assert out["changed"] and not out["ca_changed"] and out["hosts"]["gpu-01"]["reason"] == reason


def test_an_expiring_certificate_is_issued_again(tmp_path):
    ca.issue(str(tmp_path), [HOST], 20, 10)
    out = ca.issue(str(tmp_path), [HOST], 397, 30)
    assert out["hosts"]["gpu-01"]["reason"] == "expires within 30 days"
    cert = x509.load_pem_x509_certificate(out["hosts"]["gpu-01"]["certificate"].encode())
    assert ca._not_after(cert) > datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(days=390)


def test_a_new_ca_signs_every_host_again(tmp_path):
    ca.issue(str(tmp_path), [HOST], 397, 30)
    os.rename(tmp_path / "ca.key", tmp_path / "old.key")
    os.rename(tmp_path / "ca.crt", tmp_path / "old.crt")
    out = ca.issue(str(tmp_path), [HOST], 397, 30)
    assert out["ca_changed"] and out["hosts"]["gpu-01"]["reason"] == "signed by another CA"


def test_check_mode_writes_nothing(tmp_path):
    out = ca.issue(str(tmp_path / "ca"), [HOST], 397, 30, check_mode=True)
    assert out["changed"] and not (tmp_path / "ca").exists()


def test_a_mismatched_ca_pair_is_refused(tmp_path):
    ca.issue(str(tmp_path / "a"), [HOST], 397, 30)
    ca.issue(str(tmp_path / "b"), [HOST], 397, 30)
    os.replace(tmp_path / "b" / "ca.crt", tmp_path / "a" / "ca.crt")
    with pytest.raises(ca.CAError, match="does not belong"):
        ca.issue(str(tmp_path / "a"), [HOST], 397, 30)


def test_renew_days_must_be_below_days(tmp_path):
    with pytest.raises(ca.CAError, match="renew_days"):
        ca.issue(str(tmp_path), [HOST], 30, 30)


def test_readiness_reaches_an_https_engine_only_with_the_collections_ca(tmp_path):
    """A real TLS server with the issued certificate: the engine-side checks (readiness, drain) trust
    it through ca_path, and refuse it without."""
    import ssl
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from ansible_collections.llmops.serving.plugins.module_utils import readiness

    out = ca.issue(str(tmp_path / "ca"), [HOST], 397, 30)
    (tmp_path / "engine.crt").write_text(out["hosts"]["gpu-01"]["certificate"])
    (tmp_path / "engine.key").write_text(out["hosts"]["gpu-01"]["private_key"])

    class Health(BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(b'{"ok": true}')

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Health)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(str(tmp_path / "engine.crt"), str(tmp_path / "engine.key"))
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = "https://127.0.0.1:%d/health" % server.server_address[1]
    try:
        status, body, dummy = readiness.http("GET", url, ca_path=str(tmp_path / "ca" / "ca.crt"))
        assert status == 200 and body == {"ok": True}
        other = ca.issue(str(tmp_path / "other"), [HOST], 397, 30)
        assert other["ca_certificate"] != out["ca_certificate"]
        with pytest.raises(Exception) as err:
            readiness.http("GET", url, ca_path=str(tmp_path / "other" / "ca.crt"))
        assert "CERTIFICATE_VERIFY_FAILED" in str(err.value) or "certificate verify failed" in str(err.value)
    finally:
        server.shutdown()
