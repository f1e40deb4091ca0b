# -*- coding: utf-8 -*-
# Copyright: llmops.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""When apt's package lists are trusted, and the refresh itself with apt-get patched."""
import json
import os
import time

import pytest

from ansible_collections.llmops.serving.plugins.module_utils import apt_lists

NOW = 1_800_000_000.0
BOOKWORM = "deb.debian.org_debian_dists_bookworm_main_binary-amd64_Packages"


class FakeApt(object):
    """apt-get update as a callable: writes the given list files, or answers with errors."""

    def __init__(self, lists_dir, writes=(BOOKWORM,), answers=None):
        self.lists_dir = lists_dir
        self.writes = writes
        self.answers = list(answers or [])
        self.calls = []

    def __call__(self, argv):
        self.calls.append(argv)
        if self.answers:
            return self.answers.pop(0)
        for name in self.writes:
            with open(os.path.join(self.lists_dir, name), "w") as handle:
                handle.write("Package: nginx\n")
        return 0, "Reading package lists...", ""


@pytest.fixture
def host(tmp_path):
    lists = tmp_path / "lists"
    lists.mkdir()
    (lists / "partial").mkdir()
    (lists / "lock").write_text("")
    sources = tmp_path / "sources.list.d"
    sources.mkdir()
    main = tmp_path / "sources.list"
    main.write_text("deb http://deb.debian.org/debian bookworm main\n")
    params = {"lists_dir": str(lists), "sources": [str(main), str(sources)],
              "record_path": str(tmp_path / "state" / "apt-refresh.json"),
              "valid_time": 3600, "lock_timeout": 30, "force": False}
    return params


def run(params, apt, check_mode=False, now=NOW):
    return apt_lists.refresh(params, apt, "/usr/bin/apt-get", check_mode,
                             clock=lambda: now, sleep=lambda s: None)


def test_empty_lists_folder_with_a_fresh_mtime_is_refreshed(host):
    # The case that failed on freshly built images: lists/ was just emptied, so it looks new.
    os.utime(host["lists_dir"], (time.time(), time.time()))
    apt = FakeApt(host["lists_dir"])
    result = run(host, apt)
    assert result["refreshed"] and result["changed"]
    assert result["reason"].startswith("no package lists in ")
    assert apt.calls == [["/usr/bin/apt-get", "update", "-q"]]
    record = json.load(open(host["record_path"]))
    assert record["lists"] == [BOOKWORM] and record["refreshed_at"] == NOW


def test_second_run_within_valid_time_trusts_the_lists(host):
    run(host, FakeApt(host["lists_dir"]))
    apt = FakeApt(host["lists_dir"])
    result = run(host, apt, now=NOW + 3599)
    assert not result["changed"] and not result["refreshed"] and apt.calls == []
    assert "refreshed 3599 s ago" in result["reason"]


def test_lists_older_than_valid_time_are_refreshed(host):
    run(host, FakeApt(host["lists_dir"]))
    apt = FakeApt(host["lists_dir"])
    result = run(host, apt, now=NOW + 3601)
    assert result["refreshed"] and "3601 s old (allowed: 3600 s)" in result["reason"]


def test_changed_or_added_source_is_refreshed(host, tmp_path):
    run(host, FakeApt(host["lists_dir"]))
    (tmp_path / "sources.list.d" / "nvidia.sources").write_text("Types: deb\nURIs: http://m/\n")
    result = run(host, FakeApt(host["lists_dir"]), now=NOW + 10)
    assert result["refreshed"] and result["reason"] == "the apt sources changed since the last refresh"
    # a file apt ignores (no .list/.sources suffix) does not count
    (tmp_path / "sources.list.d" / "notes.txt").write_text("x")
    assert not run(host, FakeApt(host["lists_dir"]), now=NOW + 20)["changed"]


def test_lists_deleted_after_a_refresh_are_refreshed(host):
    run(host, FakeApt(host["lists_dir"], writes=(BOOKWORM, BOOKWORM.replace("main", "contrib"))))
    os.remove(os.path.join(host["lists_dir"], BOOKWORM))
    result = run(host, FakeApt(host["lists_dir"]), now=NOW + 10)
    assert result["refreshed"] and "1 package list(s) of the last refresh are gone" in result["reason"]


def test_lists_without_a_record_are_refreshed_once(host):
    open(os.path.join(host["lists_dir"], BOOKWORM), "w").close()
    result = run(host, FakeApt(host["lists_dir"]))
    assert result["refreshed"] and result["reason"] == "no record of an earlier refresh on this host"


def test_record_from_the_future_is_not_trusted(host):
    run(host, FakeApt(host["lists_dir"]), now=NOW + 7200)
    result = run(host, FakeApt(host["lists_dir"]), now=NOW)
    assert result["refreshed"] and "in the future" in result["reason"]


def test_check_mode_predicts_and_changes_nothing(host):
    apt = FakeApt(host["lists_dir"])
    result = run(host, apt, check_mode=True)
    assert result["changed"] and not result["refreshed"] and apt.calls == []
    assert not os.path.exists(host["record_path"])


def test_failed_update_names_the_sources_and_writes_no_record(host):
    err = "E: Failed to fetch http://mirror/dists/bookworm/InRelease  Could not resolve 'mirror'"
    apt = FakeApt(host["lists_dir"], answers=[(100, "", err)] * 3)
    with pytest.raises(RuntimeError) as exc:
        run(host, apt)
    assert "Could not resolve 'mirror'" in str(exc.value) and "/etc/apt/sources.list" in str(exc.value)
    assert len(apt.calls) == 3 and not os.path.exists(host["record_path"])


def test_a_passing_fetch_failure_is_retried(host):
    apt = FakeApt(host["lists_dir"], answers=[(100, "", "E: Failed to fetch")])
    assert run(host, apt)["refreshed"] and len(apt.calls) == 2


def test_lock_held_by_another_apt_is_waited_for(host):
    lock = (100, "", "E: Could not get lock /var/lib/apt/lists/lock. It is held by process 42")
    apt = FakeApt(host["lists_dir"], answers=[lock] * 5)
    result = run(host, apt)
    assert result["refreshed"] and len(apt.calls) == 6


def test_update_that_yields_no_lists_fails(host):
    apt = FakeApt(host["lists_dir"], writes=())
    with pytest.raises(RuntimeError) as exc:
        run(host, apt)
    assert "holds no package list" in str(exc.value)


@pytest.mark.parametrize("name, counted", [
    (BOOKWORM, True), (BOOKWORM + ".lz4", True), (BOOKWORM + ".gz", True),
    ("deb.debian.org_debian_dists_bookworm_InRelease", False),
    ("deb.debian.org_debian_dists_bookworm_main_i18n_Translation-en", False),
    ("lock", False),
])
def test_which_files_count_as_package_lists(tmp_path, name, counted):
    (tmp_path / name).write_text("x")
    assert apt_lists.package_lists(str(tmp_path)) == ([name] if counted else [])
