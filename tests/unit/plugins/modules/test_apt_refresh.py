# -*- coding: utf-8 -*-
# Copyright: llmops.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""apt_refresh as Ansible runs it (AnsibleModule, exit/fail JSON), apt-get patched."""
import json
import os

import pytest

from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args

from ansible_collections.llmops.serving.plugins.modules import apt_refresh

LIST = "deb.debian.org_debian_dists_trixie_main_binary-amd64_Packages"


def run_module(args, capsys):
    with patch_module_args(args):
        with pytest.raises(SystemExit):
            apt_refresh.main()
    return json.loads(capsys.readouterr().out)


@pytest.fixture
def apt_host(tmp_path, monkeypatch):
    lists = tmp_path / "lists"
    lists.mkdir()
    calls = []

    def run_command(self, argv, **_kw):
        calls.append(argv)
        (lists / LIST).write_text("Package: python3-venv\n")
        return 0, "", ""

    monkeypatch.setattr(basic.AnsibleModule, "run_command", run_command)
    monkeypatch.setattr(basic.AnsibleModule, "get_bin_path",
                        lambda self, name, *a, **k: "/usr/bin/" + name)
    sources = tmp_path / "sources.list"
    sources.write_text("deb http://deb.debian.org/debian trixie main\n")
    args = {"lists_dir": str(lists), "sources": [str(sources)],
            "record_path": str(tmp_path / "record.json")}
    return args, calls


def test_fresh_image_refreshes_then_second_run_is_unchanged(apt_host, capsys):
    args, calls = apt_host
    first = run_module(args, capsys)
    assert first["changed"] and first["refreshed"] and first["package_lists"] == 1
    second = run_module(args, capsys)
    assert not second["changed"] and len(calls) == 1


def test_check_mode_reports_the_refresh_it_would_make(apt_host, capsys):
    args, calls = apt_host
    result = run_module(dict(args, _ansible_check_mode=True), capsys)
    assert result["changed"] and not result["refreshed"] and calls == []


def test_force_refreshes_trusted_lists(apt_host, capsys):
    args, calls = apt_host
    run_module(args, capsys)
    assert run_module(dict(args, force=True), capsys)["reason"] == "forced"
    assert len(calls) == 2


def test_host_without_apt_gets_a_clear_error(apt_host, capsys, monkeypatch):
    monkeypatch.setattr(basic.AnsibleModule, "get_bin_path", lambda self, name, *a, **k: None)
    result = run_module(apt_host[0], capsys)
    assert result["failed"] and "os_family == 'Debian'" in result["msg"]


def test_negative_valid_time_is_refused(apt_host, capsys):
    result = run_module(dict(apt_host[0], valid_time=-1), capsys)
    assert result["failed"] and "valid_time" in result["msg"]
    assert not os.path.exists(apt_host[0]["record_path"])
