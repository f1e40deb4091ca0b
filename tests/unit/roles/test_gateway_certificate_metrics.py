# -*- coding: utf-8 -*-
# Copyright: llmops.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The gateway's certificate end date for node_exporter's textfile collector (tls_metrics.yml), run
by ansible-playbook on localhost against certificates openssl makes here, and read back with
Prometheus's own text parser (prometheus_client) as node_exporter would serve it."""
import json
import os
import shutil
import ssl
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
PLAYBOOK = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
METRIC = "llmops_gateway_certificate_expiry_timestamp_seconds"

pytestmark = [pytest.mark.skipif(not os.path.exists(PLAYBOOK), reason="needs the controller venv (make unit)"),
              pytest.mark.skipif(not shutil.which("openssl"), reason="needs openssl")]


def certificate(where, days):
    """A self-signed certificate that ends in DAYS days, as the role makes one; its notAfter in epoch seconds."""
    where.mkdir(parents=True, exist_ok=True)
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                    "-days", str(days), "-subj", "/CN=gw", "-keyout", str(where / "gateway.key"),
                    "-out", str(where / "gateway.crt")], check=True, capture_output=True)
    end = subprocess.run(["openssl", "x509", "-noout", "-enddate", "-in", str(where / "gateway.crt")],
                         check=True, capture_output=True, text=True).stdout.strip().split("=", 1)[1]
    return ssl.cert_time_to_seconds(end)


def run(tmp_path, metrics_file, check=False, tz="UTC"):
    play = [{"hosts": "localhost", "gather_facts": False,
             "vars": {"gateway_config_dir": str(tmp_path / "gateway"), "gateway_certificate_metrics_file": metrics_file},
             # the task file alone: the role's dependencies want a whole serving spec
             "tasks": [{"ansible.builtin.include_tasks": os.path.join(REPO, "roles", "gateway", "tasks", "tls_metrics.yml")}]}]
    (tmp_path / "play.yml").write_text(json.dumps(play))
    # the controller's own time zone must not move the recorded end
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"), ANSIBLE_FORCE_COLOR="0", TZ=tz,
               ANSIBLE_LOCALHOST_WARNING="false", ANSIBLE_INVENTORY_UNPARSED_WARNING="false")
    res = subprocess.run([PLAYBOOK, "-i", "localhost,", "-c", "local", "-e", "ansible_python_interpreter=" + sys.executable,
                          str(tmp_path / "play.yml")] + (["--check", "--diff"] if check else []),
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, timeout=300, check=False)
    return res.returncode, res.stdout


PARSE = """
import json, sys
from prometheus_client.parser import text_string_to_metric_families
family = {f.name: f for f in text_string_to_metric_families(open(sys.argv[1]).read())}[sys.argv[2]]
print(json.dumps({"type": family.type, "samples": {s.labels["path"]: s.value for s in family.samples}}))
"""


def served(path):
    """{path label: value} of the gauge, parsed by prometheus_client's text parser (the engine venv's)."""
    python = os.environ.get("LLMOPS_TEST_VENV_PYTHON")
    if not python:
        pytest.skip("needs LLMOPS_TEST_VENV_PYTHON (make unit sets it)")
    family = json.loads(subprocess.run([python, "-c", PARSE, str(path), METRIC], check=True,
                                       capture_output=True, text=True).stdout)
    assert family["type"] == "gauge", family
    return family["samples"]


def test_the_end_date_is_written_in_utc_and_a_new_certificate_rewrites_it(tmp_path):
    textfile = tmp_path / "node-exporter"
    textfile.mkdir()
    metrics = textfile / "llmops-gateway.prom"
    ends = certificate(tmp_path / "gateway", 20)
    rc, out = run(tmp_path, str(metrics), tz="America/New_York")
    assert rc == 0, out[-3000:]
    assert served(metrics) == {str(tmp_path / "gateway" / "gateway.crt"): ends}
    # the same certificate: nothing changes (and check mode predicts so)
    rc, out = run(tmp_path, str(metrics), check=True)
    assert rc == 0 and "changed=0" in out, out[-3000:]
    # a renewed certificate: check mode predicts the change and writes nothing, the run writes it
    renewed = certificate(tmp_path / "gateway", 825)
    rc, out = run(tmp_path, str(metrics), check=True, tz="Asia/Tokyo")
    assert rc == 0 and "changed=1" in out and served(metrics) == {str(tmp_path / "gateway" / "gateway.crt"): ends}, out[-3000:]
    rc, out = run(tmp_path, str(metrics), tz="Asia/Tokyo")
    assert rc == 0 and "changed=1" in out, out[-3000:]
    assert served(metrics) == {str(tmp_path / "gateway" / "gateway.crt"): renewed}


def test_nothing_is_written_without_the_textfile_folder_or_a_certificate(tmp_path):
    # no node_exporter textfile folder on the host
    certificate(tmp_path / "gateway", 20)
    rc, out = run(tmp_path, str(tmp_path / "absent" / "llmops-gateway.prom"))
    assert rc == 0 and "changed=0" in out, out[-3000:]
    assert not (tmp_path / "absent").exists()
    # a new host in check mode: the folder is there, the certificate is not made yet
    (tmp_path / "gateway" / "gateway.crt").unlink()
    (tmp_path / "node-exporter").mkdir()
    rc, out = run(tmp_path, str(tmp_path / "node-exporter" / "llmops-gateway.prom"), check=True)
    assert rc == 0 and "changed=0" in out, out[-3000:]
    assert list((tmp_path / "node-exporter").iterdir()) == []
