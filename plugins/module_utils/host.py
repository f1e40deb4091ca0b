# -*- coding: utf-8 -*-
# Copyright: llmops.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Host checks that must pass before anything is installed. Read-only: statvfs, /proc, /sys,
getrlimit, a bind() test that is closed at once, and commands that only report (mokutil --sb-state,
systemd-detect-virt). Pure logic, no Ansible objects; every file location is a parameter so the
unit tests can point the checks at fixtures.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import json
import os
import re
import socket

try:
    import resource
except ImportError:  # pragma: no cover - not on Linux
    resource = None

GIB = 1024 ** 3
MIB = 1024 ** 2

CHECKS = ("disk", "shm", "memlock", "nouveau", "secure_boot", "kernel_headers", "listen_port")
SECURE_BOOT_EFIVAR = "SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c"
TCP_LISTEN = "0A"


class Paths(object):
    """Where the checks look; tests override these."""

    def __init__(self, proc="/proc", sys="/sys", modules_root="/lib/modules", shm="/dev/shm",
                 root="/"):
        self.proc = proc
        self.sys = sys
        self.modules_root = modules_root
        self.shm = shm
        self.root = root


def _read(path, mode="r"):
    try:
        with open(path, mode) as handle:
            return handle.read()
    except (IOError, OSError):
        return None


def human_bytes(value):
    if value is None:
        return "unknown"
    if value < 0:
        return "unlimited"
    if value >= GIB:
        return "%.2f GiB" % (value / float(GIB))
    return "%.1f MiB" % (value / float(MIB))


# ----------------------------------------------------------------------------------------- disk
def nearest_existing(path):
    """The path itself or its closest existing parent (the folder may not exist yet)."""
    path = os.path.abspath(path)
    while not os.path.exists(path):
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    return path


# the marker a served build keeps of what it was built from (weights.BUILD_MARKER)
BUILD_MARKER = "llmops-weights.json"
HF_SOURCE = re.compile(r"^hf://([^@]+)(?:@(.+))?$")


def served_from(weights_dir, source, hub_dir):
    """Whether the build weights_dir serves was built from source (a local folder, or
    hf://<repo>@<revision> fetched into hub_dir/<owner>--<name>/<commit>). A revision that is no
    commit (a branch, a tag) matches any fetched commit of the repo: the fetch checks its own space."""
    try:
        with open(os.path.join(weights_dir, BUILD_MARKER)) as handle:
            built_from = json.load(handle).get("source") or ""
    except (IOError, OSError, ValueError, AttributeError):
        return False
    hf = HF_SOURCE.match(source or "")
    if not hf:
        return bool(source) and os.path.realpath(built_from) == os.path.realpath(source)
    repo_dir = os.path.join(hub_dir or "", hf.group(1).replace("/", "--"))
    if os.path.dirname(built_from.rstrip("/")) != repo_dir.rstrip("/"):
        return False
    revision = hf.group(2) or ""
    commit = os.path.basename(built_from.rstrip("/"))
    return not re.match(r"^[0-9a-f]{7,40}$", revision) or commit.startswith(revision)


def check_disk(weights_dir, required_bytes, statvfs=os.statvfs, download_bytes=0, floor_bytes=0,
               source=None, hub_dir=None):
    """Free space for what this run writes, before it writes anything: the download (hub sources)
    and the build, unless the served build is already built from this source; then floor_bytes
    must stay free. The served build is never counted as room: a new build is written beside it."""
    checked = nearest_existing(weights_dir)
    st = statvfs(checked)
    free = st.f_bavail * st.f_frsize
    current = served_from(weights_dir, source, hub_dir) if source else False
    build = 0 if current else int(required_bytes or 0)
    download = 0 if current else int(download_bytes or 0)
    needed = build + download + int(floor_bytes or 0)
    return {
        "weights_dir": weights_dir,
        "path_checked": checked,
        "free_bytes": free,
        "served_build_current": current,
        "required_bytes": int(required_bytes or 0),
        "build_bytes": build,
        "download_bytes": download,
        "floor_bytes": int(floor_bytes or 0),
        "needed_bytes": needed,
        "ok": free >= needed,
    }


# ------------------------------------------------------------------------------------ shm/limits
def check_shm(path, min_bytes, statvfs=os.statvfs):
    try:
        st = statvfs(path)
    except OSError:
        return {"path": path, "size_bytes": None, "free_bytes": None, "min_bytes": min_bytes,
                "ok": False}
    size = st.f_blocks * st.f_frsize
    return {"path": path, "size_bytes": size, "free_bytes": st.f_bavail * st.f_frsize,
            "min_bytes": min_bytes, "ok": size >= (min_bytes or 0)}


def check_memlock(min_bytes, getrlimit=None):
    """RLIMIT_MEMLOCK of this (login-session) process; -1 means unlimited."""
    if resource is None:
        return {"soft_bytes": None, "hard_bytes": None, "min_bytes": min_bytes, "ok": True}
    getrlimit = getrlimit or resource.getrlimit
    soft, hard = getrlimit(resource.RLIMIT_MEMLOCK)
    soft = -1 if soft in (resource.RLIM_INFINITY, -1) else soft
    hard = -1 if hard in (resource.RLIM_INFINITY, -1) else hard
    return {"soft_bytes": soft, "hard_bytes": hard, "min_bytes": min_bytes,
            "ok": soft < 0 or soft >= (min_bytes or 0)}


# --------------------------------------------------------------------------------- kernel/driver
def loaded_modules(proc_modules_text):
    return set(line.split()[0] for line in (proc_modules_text or "").splitlines() if line.strip())


def secure_boot_state(run_command, mokutil, sys_root="/sys"):
    """'enabled', 'disabled', 'not-efi' or 'unknown', and where the answer came from."""
    if mokutil:
        rc, out, err = run_command([mokutil, "--sb-state"])
        text = ((out or "") + (err or "")).lower()
        if "secureboot enabled" in text:
            return "enabled", "mokutil"
        if "secureboot disabled" in text:
            return "disabled", "mokutil"
        if "not supported" in text or "doesn't support" in text:
            return ("not-efi" if not os.path.isdir(os.path.join(sys_root, "firmware/efi"))
                    else "disabled"), "mokutil"
    efi = os.path.join(sys_root, "firmware/efi")
    if not os.path.isdir(efi):
        return "not-efi", "sysfs"
    raw = _read(os.path.join(efi, "efivars", SECURE_BOOT_EFIVAR), "rb")
    if raw:
        # 4 bytes of attributes, then the 1-byte value.
        value = raw[-1] if isinstance(raw[-1], int) else ord(raw[-1])
        return ("enabled" if value == 1 else "disabled"), "efivars"
    return "unknown", "efivars"


def check_kernel_headers(release, modules_root="/lib/modules"):
    build = os.path.join(modules_root, release, "build")
    return {"kernel": release, "build_dir": build, "present": os.path.isdir(build)}


# -------------------------------------------------------------------------------------- network
def parse_listen(listen):
    """'127.0.0.1:8000', '[::1]:8000', ':8000', '8000' -> (host, port)."""
    listen = str(listen).strip()
    match = re.match(r"^\[([^\]]+)\]:(\d+)$", listen)
    if match:
        return match.group(1), int(match.group(2))
    if listen.isdigit():
        return "0.0.0.0", int(listen)
    host, sep, port = listen.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError("serving_listen must look like HOST:PORT, got %r" % listen)
    return (host or "0.0.0.0"), int(port)


def _hex_to_addr(hex_addr):
    if len(hex_addr) == 8:
        return socket.inet_ntop(socket.AF_INET, bytes(bytearray.fromhex(hex_addr))[::-1])
    raw = bytes(bytearray.fromhex(hex_addr))
    # /proc/net/tcp6 prints four host-order 32-bit words.
    words = b"".join(raw[i:i + 4][::-1] for i in range(0, 16, 4))
    return socket.inet_ntop(socket.AF_INET6, words)


def parse_proc_net_tcp(text):
    """Listening sockets from /proc/net/tcp or tcp6: list of {address, port, inode}."""
    found = []
    for line in (text or "").splitlines()[1:]:
        cols = line.split()
        if len(cols) < 10 or cols[3] != TCP_LISTEN:
            continue
        hex_addr, hex_port = cols[1].split(":")
        found.append({"address": _hex_to_addr(hex_addr), "port": int(hex_port, 16),
                      "inode": cols[9]})
    return found


def _wildcard(address):
    return address in ("0.0.0.0", "::", "")


def _overlaps(ours, theirs):
    if _wildcard(ours) or _wildcard(theirs) or ours == theirs:
        return True
    # an IPv4 address bound through an IPv6 socket (::ffff:a.b.c.d)
    return theirs.startswith("::ffff:") and theirs[7:] == ours


def socket_owners(inodes, proc="/proc"):
    """{inode: {pid, comm, cmdline}} by scanning /proc/<pid>/fd (needs root for other users)."""
    wanted = dict(("socket:[%s]" % inode, inode) for inode in inodes)
    owners = {}
    if not wanted:
        return owners
    try:
        pids = [p for p in os.listdir(proc) if p.isdigit()]
    except OSError:
        return owners
    for pid in pids:
        fd_dir = os.path.join(proc, pid, "fd")
        try:
            fds = os.listdir(fd_dir)
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.readlink(os.path.join(fd_dir, fd))
            except OSError:
                continue
            if target in wanted:
                cmdline = (_read(os.path.join(proc, pid, "cmdline")) or "").replace("\0", " ")
                owners[wanted[target]] = {"pid": int(pid),
                                          "comm": (_read(os.path.join(proc, pid, "comm")) or "")
                                          .strip(),
                                          "cmdline": cmdline.strip()}
        if len(owners) == len(wanted):
            break
    return owners


def bind_test(host, port):
    """None when the address can be bound now, else the errno name."""
    try:
        infos = socket.getaddrinfo(host, port, 0, socket.SOCK_STREAM)
    except socket.gaierror as exc:
        return "EAI:%s" % exc
    family, socktype, proto, _canon, sockaddr = infos[0]
    sock = socket.socket(family, socktype, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(sockaddr)
        return None
    except (OSError, socket.error) as exc:
        return errno.errorcode.get(exc.errno, str(exc.errno))
    finally:
        sock.close()


def check_listen(listen, allowed_owners=(), proc="/proc", try_bind=True):
    host, port = parse_listen(listen)
    listeners = []
    for name in ("tcp", "tcp6"):
        listeners.extend(parse_proc_net_tcp(_read(os.path.join(proc, "net", name))))
    clashing = [item for item in listeners if item["port"] == port and
                _overlaps(host, item["address"])]
    owners = socket_owners([item["inode"] for item in clashing], proc)
    for item in clashing:
        item["owner"] = owners.get(item["inode"])
    bind_error = bind_test(host, port) if try_bind and not clashing else None
    allowed = False
    if clashing:
        allowed = all(item["owner"] and any(word in item["owner"]["cmdline"]
                                            for word in allowed_owners)
                      for item in clashing)
    state = "free"
    if clashing:
        state = "ours" if allowed else "taken"
    elif bind_error == "EADDRINUSE":
        state = "taken"
    elif bind_error:
        state = "unbindable"
    return {"listen": listen, "host": host, "port": port, "state": state,
            "listeners": clashing, "bind_error": bind_error,
            "ok": state in ("free", "ours")}


# ------------------------------------------------------------------------------------ container
def container_state(run_command, systemd_detect_virt, root="/"):
    if systemd_detect_virt:
        rc, out, _err = run_command([systemd_detect_virt, "-c"])
        kind = (out or "").strip()
        if rc == 0 and kind and kind != "none":
            return {"container": True, "kind": kind, "source": "systemd-detect-virt"}
    if os.path.exists(os.path.join(root, "run/.containerenv")):
        return {"container": True, "kind": "podman", "source": "/run/.containerenv"}
    if os.path.exists(os.path.join(root, ".dockerenv")):
        return {"container": True, "kind": "docker", "source": "/.dockerenv"}
    return {"container": False, "kind": "none",
            "source": "systemd-detect-virt" if systemd_detect_virt else "marker files"}


# ----------------------------------------------------------------------------------------- main
def run_host_preflight(params, run_command, which, paths=None, statvfs=os.statvfs,
                       getrlimit=None, kernel_release=None):
    """params: weights_dir, required_bytes, shm_min_bytes, memlock_min_bytes, listen,
    listen_allowed_owners, driver_checks (bool), fail_on (list), checks (list or None: all).
    ``which(name)`` returns an absolute path or None. Returns facts with ``problems``."""
    paths = paths or Paths()
    checks = params.get("checks") or list(CHECKS)
    fail_on = set(params.get("fail_on") or [])
    facts = {}
    problems = []

    def problem(check, variable, msg, fix):
        problems.append({"check": check, "variable": variable, "msg": msg, "fix": fix,
                         "fatal": check in fail_on})

    container = container_state(run_command, which("systemd-detect-virt"), paths.root)
    facts["container"] = container
    modules = loaded_modules(_read(os.path.join(paths.proc, "modules")))
    facts["nvidia_module_loaded"] = "nvidia" in modules
    driver_checks = bool(params.get("driver_checks", True))
    # A driver still to be built: DKMS needs headers and, under Secure Boot, a signing key.
    driver_to_build = driver_checks and not facts["nvidia_module_loaded"] and \
        not container["container"]

    if "disk" in checks and params.get("weights_dir"):
        disk = check_disk(params["weights_dir"], params.get("required_bytes") or 0, statvfs,
                          download_bytes=params.get("download_bytes") or 0, floor_bytes=params.get("floor_bytes") or 0,
                          source=params.get("source"), hub_dir=params.get("hub_dir"))
        facts["disk"] = disk
        if not disk["ok"]:
            problem("disk", "serving_models_root",
                    "%s has %s free; this run needs %s (download %s, build %s, and %s left free)" % (
                        disk["path_checked"], human_bytes(disk["free_bytes"]),
                        human_bytes(disk["needed_bytes"]), human_bytes(disk["download_bytes"]),
                        human_bytes(disk["build_bytes"]), human_bytes(disk["floor_bytes"])),
                    "free %s on %s or point serving_models_root at a larger filesystem" % (
                        human_bytes(disk["needed_bytes"] - disk["free_bytes"]),
                        disk["path_checked"]))
    if "shm" in checks:
        shm = check_shm(paths.shm, params.get("shm_min_bytes") or 0, statvfs)
        facts["shm"] = shm
        if not shm["ok"]:
            problem("shm", "preflight_shm_min_bytes",
                    "/dev/shm is %s, below %s (NCCL and the engines' worker processes exchange "
                    "tensors through it)" % (human_bytes(shm["size_bytes"]),
                                             human_bytes(shm["min_bytes"])),
                    "enlarge it (mount -o remount,size=%dG /dev/shm, or a container's --shm-size)"
                    % max(1, -(-(shm["min_bytes"] or GIB) // GIB)))
    if "memlock" in checks:
        memlock = check_memlock(params.get("memlock_min_bytes") or 0, getrlimit)
        facts["memlock"] = memlock
        if not memlock["ok"]:
            problem("memlock", "preflight_memlock_min_bytes",
                    "memlock limit of this session is %s, below %s" % (
                        human_bytes(memlock["soft_bytes"]), human_bytes(memlock["min_bytes"])),
                    "the engine's systemd unit sets LimitMEMLOCK=infinity; for other launchers "
                    "raise memlock in /etc/security/limits.d")
    if "nouveau" in checks:
        facts["nouveau_loaded"] = "nouveau" in modules
        if facts["nouveau_loaded"] and driver_checks:
            problem("nouveau", "preflight_fail_on",
                    "the nouveau kernel module is loaded; the NVIDIA driver cannot bind the GPUs",
                    "blacklist nouveau, rebuild the initramfs and reboot (the nvidia_driver role "
                    "does this)")
    if "secure_boot" in checks:
        state, source = secure_boot_state(run_command, which("mokutil"), paths.sys)
        facts["secure_boot"] = {"state": state, "source": source}
        if state == "enabled" and driver_to_build:
            problem("secure_boot", "preflight_fail_on",
                    "Secure Boot is enabled and the NVIDIA module is not loaded yet: an unsigned "
                    "DKMS build will be refused by the kernel",
                    "enroll a Machine Owner Key for DKMS (mokutil --import) or disable Secure "
                    "Boot before the driver is installed")
    if "kernel_headers" in checks:
        release = kernel_release or os.uname()[2]
        headers = check_kernel_headers(release, paths.modules_root)
        headers["needed"] = driver_to_build
        facts["kernel_headers"] = headers
        if driver_to_build and not headers["present"]:
            problem("kernel_headers", "preflight_fail_on",
                    "no kernel headers for the running kernel %s (%s missing): DKMS cannot build "
                    "the NVIDIA module" % (release, headers["build_dir"]),
                    "install linux-headers-%s (Debian/Ubuntu) or kernel-devel-%s (RHEL); the "
                    "nvidia_driver role installs them" % (release, release))
    if "listen_port" in checks and params.get("listen"):
        listen = check_listen(params["listen"], params.get("listen_allowed_owners") or [],
                              paths.proc, try_bind=params.get("bind_test", True))
        facts["listen"] = listen
        if listen["state"] == "taken":
            owner = ", ".join("%s (pid %s)" % (item["owner"]["comm"], item["owner"]["pid"])
                              for item in listen["listeners"] if item.get("owner")) or "unknown"
            problem("listen_port", "serving_listen",
                    "%s is already in use by %s" % (params["listen"], owner),
                    "stop that service or choose another port in serving_listen")
        elif listen["state"] == "unbindable":
            problem("listen_port", "serving_listen",
                    "cannot bind %s (%s)" % (params["listen"], listen["bind_error"]),
                    "use an address this host owns (127.0.0.1 behind the gateway) in "
                    "serving_listen")
    facts["problems"] = problems
    facts["fatal"] = [p for p in problems if p["fatal"]]
    return facts


def host_summary_lines(facts):
    """Human lines for the preflight summary."""
    parts = []
    container = facts.get("container") or {}
    parts.append("container %s" % (container.get("kind") if container.get("container") else "no"))
    disk = facts.get("disk")
    if disk:
        parts.append("disk %s: %s free, %s" % (
            disk["path_checked"], human_bytes(disk["free_bytes"]),
            ("served build current, %s kept free" % human_bytes(disk["floor_bytes"]))
            if disk["served_build_current"] else
            ("this run writes %s" % human_bytes(disk["build_bytes"] + disk["download_bytes"]))
            if disk["required_bytes"] else "model size unknown"))
    shm = facts.get("shm")
    if shm:
        parts.append("/dev/shm %s" % human_bytes(shm["size_bytes"]))
    memlock = facts.get("memlock")
    if memlock and memlock.get("soft_bytes") is not None:
        parts.append("memlock %s" % human_bytes(memlock["soft_bytes"]))
    if "nouveau_loaded" in facts:
        parts.append("nouveau %s" % ("loaded" if facts["nouveau_loaded"] else "not loaded"))
    parts.append("nvidia module %s" % ("loaded" if facts.get("nvidia_module_loaded") else
                                       "not loaded"))
    if facts.get("secure_boot"):
        parts.append("secure boot %s" % facts["secure_boot"]["state"])
    headers = facts.get("kernel_headers")
    if headers and headers.get("needed"):
        parts.append("kernel %s headers %s" % (headers["kernel"],
                                               "present" if headers["present"] else "missing"))
    listen = facts.get("listen")
    if listen:
        parts.append("%s %s" % (listen["listen"], listen["state"]))
    return ["host: " + "; ".join(parts)]
