# -*- coding: utf-8 -*-
# Copyright: llmops.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""make cache-dirs: each scenario's apt archive folder (<suite>-<scenario>) shares the .debs of its
suite's shared one (hard links, no copy) but has a lock of its own: apt locks the lock file's inode, so a linked lock
is one lock across scenarios that run at the same time."""
import os
import subprocess

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
SCENARIO_DIRS = ["trixie-default", "bookworm-offline", "trixie-offline", "bookworm-nvidia", "bookworm-fleet"]


def cache_dirs(cache):
    res = subprocess.run(["make", "-s", "--no-print-directory", "cache-dirs", "LLMOPS_CACHE=%s" % cache], cwd=REPO,
                         capture_output=True, text=True, check=False)
    assert res.returncode == 0, res.stdout + res.stderr


def test_new_folders_link_the_debs_of_their_suite_and_no_lock(tmp_path):
    debs = {"bookworm": "nginx_1.22.1-9_amd64.deb", "trixie": "nginx_1.26.3-3_amd64.deb"}
    for suite, deb in debs.items():
        shared = tmp_path / "apt-archives" / suite
        (shared / "partial").mkdir(parents=True)
        (shared / deb).write_bytes(suite.encode())
        (shared / "lock").write_bytes(b"")
    cache_dirs(tmp_path)
    for name in SCENARIO_DIRS:
        suite = name.split("-", maxsplit=1)[0]
        folder = tmp_path / "apt-archives" / name
        inode = os.stat(str(tmp_path / "apt-archives" / suite / debs[suite])).st_ino
        assert os.stat(str(folder / debs[suite])).st_ino == inode
        other = [d for s, d in debs.items() if s != suite][0]
        assert not (folder / other).exists(), "%s has the other suite's .deb" % name
        assert (folder / "partial").is_dir() and not (folder / "lock").exists()
    for suite in debs:
        assert os.stat(str(tmp_path / "apt-archives" / suite / "lock")).st_nlink == 1


def test_a_lock_linked_across_folders_by_an_older_copy_is_removed(tmp_path):
    shared = tmp_path / "apt-archives" / "bookworm"
    (shared / "partial").mkdir(parents=True)
    (shared / "lock").write_bytes(b"")
    for name in SCENARIO_DIRS:
        (tmp_path / "apt-archives" / name).mkdir()
        os.link(str(shared / "lock"), str(tmp_path / "apt-archives" / name / "lock"))
    own = tmp_path / "apt-archives" / "trixie"
    own.mkdir()
    (own / "lock").write_bytes(b"")
    cache_dirs(tmp_path)
    locks = [tmp_path / "apt-archives" / n / "lock" for n in ["bookworm"] + SCENARIO_DIRS]
    left = [p for p in locks if p.exists()]
    # the links are removed until the last one, which is then a lock of its own
    assert len(left) <= 1 and all(os.stat(str(p)).st_nlink == 1 for p in left), left
    assert (own / "lock").exists(), "a lock of its own is apt's, and stays"
