# Copyright: llmops.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""tests/harness/podman_enter.py: the cached PID of a test host's init, and the command that enters it."""
import os
import shutil
import subprocess
import time

import pytest

import podman_enter


def counting(pid):
    calls = []

    def inspect(name, podman):
        calls.append(name)
        return pid
    return inspect, calls


def test_the_pid_is_asked_once_while_its_process_lives(tmp_path):
    inspect, calls = counting(str(os.getpid()))
    assert podman_enter.container_pid("host-a", cache_dir=str(tmp_path), inspect=inspect) == str(os.getpid())
    assert podman_enter.container_pid("host-a", cache_dir=str(tmp_path), inspect=inspect) == str(os.getpid())
    assert calls == ["host-a"]


def test_a_container_created_again_is_asked_again(tmp_path):
    # the cached PID now belongs to a process that started at another time (a new init, a reused PID)
    (tmp_path / "host-a").write_text("%d 1\n" % os.getpid())
    inspect, calls = counting(str(os.getpid()))
    assert podman_enter.container_pid("host-a", cache_dir=str(tmp_path), inspect=inspect) == str(os.getpid())
    assert calls == ["host-a"]
    assert (tmp_path / "host-a").read_text().split() == [str(os.getpid()), podman_enter.start_time(os.getpid())]


def test_a_container_that_is_not_running_has_no_pid_and_no_entry(tmp_path):
    inspect, calls = counting(None)
    assert podman_enter.container_pid("host-b", cache_dir=str(tmp_path), inspect=inspect) is None
    assert podman_enter.container_pid("host-b", cache_dir=str(tmp_path), inspect=inspect) is None
    assert calls == ["host-b", "host-b"] and not (tmp_path / "host-b").exists()


def test_the_start_time_is_read_past_a_command_name_with_spaces_and_parentheses(tmp_path):
    odd = tmp_path / "a b) (c"
    shutil.copy("/bin/sleep", str(odd))
    proc = subprocess.Popen([str(odd), "30"])
    try:
        with open("/proc/%d/stat" % proc.pid) as handle:
            # field 22 of 52: the 31st from the end
            expected = handle.read().split()[-31]
        assert podman_enter.start_time(proc.pid) == expected
    finally:
        proc.kill()
        proc.wait()
    assert podman_enter.start_time(proc.pid) is None


def test_the_command_gets_the_environment_podman_exec_gives_and_nothing_of_the_controllers():
    init = subprocess.Popen(["sleep", "30"], env={"PATH": "/usr/bin:/bin", "container": "podman", "TERM": "xterm",
                                                  "HOSTNAME": "abc", "container_uuid": "0123"})
    try:
        # until the child has exec'd sleep, /proc/PID/environ is still the test's own
        for dummy in range(500):
            with open("/proc/%d/cmdline" % init.pid, "rb") as handle:
                if handle.read().startswith(b"sleep"):
                    break
            time.sleep(0.01)
        assert podman_enter.container_env(init.pid) == {"PATH": "/usr/bin:/bin", "container": "podman",
                                                        "TERM": "xterm", "HOME": "/root"}
        argv = podman_enter.command(init.pid, ["sh", "-c", "env"])
        if not (os.geteuid() == 0 and shutil.which("nsenter")):
            pytest.skip("entering namespaces needs root and nsenter")
        out = subprocess.run(argv, capture_output=True, text=True, check=True,
                             env=dict(os.environ, LEAKED="controller")).stdout
    finally:
        init.kill()
        init.wait()
    env = dict(line.partition("=")[::2] for line in out.splitlines())
    assert "LEAKED" not in env and "HOSTNAME" not in env and "container_uuid" not in env, out
    assert (env["PATH"], env["HOME"], env["TERM"], env["container"]) == ("/usr/bin:/bin", "/root", "xterm", "podman"), out


def test_without_root_or_for_another_user_it_is_podman_exec(monkeypatch):
    monkeypatch.setenv("LLMOPS_PODMAN_NSENTER", "0")
    assert podman_enter.exec_argv("host-c", ["true"]) == ["podman", "exec", "-i", "host-c", "true"]
    monkeypatch.delenv("LLMOPS_PODMAN_NSENTER")
    assert podman_enter.exec_argv("host-c", ["true"], user="nobody") == [
        "podman", "exec", "-i", "--user", "nobody", "host-c", "true"]


def test_a_path_through_a_link_is_not_taken_through_the_proc_root(tmp_path):
    root = tmp_path / "root"
    (root / "var" / "lib").mkdir(parents=True)
    (root / "run").mkdir()
    (root / "var" / "run").symlink_to("/run")  # as Debian's /var/run: absolute, the controller's under /proc
    (root / "etc").mkdir()
    (root / "etc" / "os-release").symlink_to("../usr/lib/os-release")
    assert not podman_enter.through_symlink(str(root), "/var/lib/llmops-bench/result.json")
    assert podman_enter.through_symlink(str(root), "/var/run/llmops/x")
    assert podman_enter.through_symlink(str(root), "/etc/os-release")
