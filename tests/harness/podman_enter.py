# Copyright: llmops.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A command in a test host's namespaces without one podman process per command.

``podman exec`` costs about 0.2 s of wall and 0.08 s of CPU per command on a 2-core machine (a Go
binary that reads the container database, then conmon and runc), and the stock connection adds a
``podman mount`` per task. On a root controller the same command can enter the container's
namespaces directly: ``nsenter`` into the mount, UTS, IPC, network, PID and cgroup namespaces of the
container's init, with the environment ``podman exec`` gives (the image's PATH, TERM, HOME and
``container=podman``), in about 3 ms. The module is pipelined the same way (its source on stdin).

The container's PID is cached per name in a file, with the process's start time: a container
created again under the same name has a new init, whose start time differs, so a stale entry is
never used. Anything else (not root, no nsenter, a non-root remote user, LLMOPS_PODMAN_NSENTER=0)
keeps ``podman exec``.
"""

import os
import shutil
import subprocess
import tempfile

CACHE_DIR = os.path.join(tempfile.gettempdir(), "llmops-podman-pids-%d" % os.geteuid())
# What `podman exec` puts in a command's environment: the image's, less what only init gets.
KEPT_ENV = ("PATH", "TERM", "container")
NAMESPACES = ("-m", "-u", "-i", "-n", "-p", "-C")


def enabled(user=None):
    """Whether commands may enter the namespaces directly."""
    return (os.environ.get("LLMOPS_PODMAN_NSENTER", "1") != "0" and os.geteuid() == 0
            and user in (None, "", "root", "0") and shutil.which("nsenter") is not None)


def start_time(pid):
    """The process's start time (field 22 of /proc/PID/stat), or None when there is no such process."""
    try:
        with open("/proc/%s/stat" % pid) as handle:
            stat = handle.read()
    except OSError:
        return None
    # the command name (field 2) may hold spaces and parentheses: the fields after it follow the last ')'
    fields = stat.rsplit(")", 1)[-1].split()
    return fields[19] if len(fields) > 19 else None


def inspect_pid(name, podman="podman"):
    """The PID of the container's init according to podman, or None when it is not running."""
    res = subprocess.run([podman, "inspect", "--format", "{{.State.Pid}}", name],
                         capture_output=True, text=True, check=False)
    pid = res.stdout.strip()
    return pid if res.returncode == 0 and pid.isdigit() and pid != "0" else None


def container_pid(name, podman="podman", cache_dir=None, inspect=inspect_pid):
    """The PID of the container's init: the cached one while that process lives, else podman's."""
    cache_dir = cache_dir or CACHE_DIR
    path = os.path.join(cache_dir, name.replace("/", "_"))
    try:
        with open(path) as handle:
            pid, started = handle.read().split()
        if start_time(pid) == started:
            return pid
    except (OSError, ValueError):
        pass
    pid = inspect(name, podman)
    started = start_time(pid) if pid else None
    if not started:
        return None
    os.makedirs(cache_dir, mode=0o700, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=cache_dir)
    with os.fdopen(fd, "w") as handle:
        handle.write("%s %s\n" % (pid, started))
    os.replace(tmp, path)
    return pid


def container_env(pid):
    """The environment `podman exec` gives a root command: the init's PATH, TERM and container, HOME=/root."""
    try:
        with open("/proc/%s/environ" % pid, "rb") as handle:
            pairs = [item.decode("utf-8", "surrogateescape").partition("=") for item in handle.read().split(b"\0") if item]
    except OSError:
        pairs = []
    env = dict((key, value) for key, dummy, value in pairs if key in KEPT_ENV)
    env.setdefault("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
    env["HOME"] = "/root"
    return env


def command(pid, argv):
    """The nsenter command line that runs argv (a list) in the container whose init is pid."""
    env = ["%s=%s" % item for item in sorted(container_env(pid).items())]
    return ["nsenter", "-t", str(pid)] + list(NAMESPACES) + ["--", "/usr/bin/env", "-i"] + env + list(argv)


def through_symlink(root, path):
    """Whether `path` inside the container crosses a symbolic link. Under /proc/PID/root the kernel
    resolves an absolute link target against the controller's root, not the container's, so such a
    path is not read or written there."""
    current = root
    for part in [p for p in path.split("/") if p]:
        current = os.path.join(current, part)
        if os.path.islink(current):
            return True
    return False


def exec_argv(name, argv, podman="podman", user=None):
    """The command line that runs argv in container `name`: nsenter where it may, else podman exec."""
    pid = container_pid(name, podman) if enabled(user) else None
    if pid:
        return command(pid, argv)
    return [podman, "exec", "-i"] + (["--user", user] if user else []) + [name] + list(argv)
