# -*- coding: utf-8 -*-
"""host_preflight logic against fake /proc, /sys and statvfs trees, plus a real bind clash."""
import json
import os
import socket

import pytest

from ansible_collections.llmops.serving.plugins.module_utils import host as H

GIB = 1024 ** 3


class StatVFS(object):
    def __init__(self, free_bytes, size_bytes=None, frsize=4096):
        self.f_frsize = frsize
        self.f_bavail = free_bytes // frsize
        self.f_blocks = (size_bytes if size_bytes is not None else free_bytes) // frsize


def statvfs_map(mapping):
    def statvfs(path):
        for prefix, value in sorted(mapping.items(), key=lambda kv: -len(kv[0])):
            if path.startswith(prefix):
                return value
        raise OSError(2, "No such file", path)
    return statvfs


def no_commands(argv):
    return 127, "", "not found"


def which_none(_name):
    return None


def fake_proc(tmp_path, modules=("ext4 1 0 - Live 0x0",), tcp="", tcp6=""):
    proc = tmp_path / "proc"
    (proc / "net").mkdir(parents=True)
    (proc / "modules").write_text("\n".join(modules) + "\n")
    header = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  " \
             "timeout inode\n"
    (proc / "net" / "tcp").write_text(header + tcp)
    (proc / "net" / "tcp6").write_text(header + tcp6)
    return proc


def tcp_line(hex_local, inode, state="0A"):
    return "   0: %s 00000000:0000 %s 00000000:00000000 00:00000000 00000000     0        0 %s 1 " \
           "0000000000000000 100 0 0 10 0\n" % (hex_local, state, inode)


def owner(proc, pid, inode, cmdline):
    fd = proc / str(pid) / "fd"
    fd.mkdir(parents=True)
    os.symlink("socket:[%s]" % inode, str(fd / "7"))
    (proc / str(pid) / "cmdline").write_bytes(cmdline.replace(" ", "\0").encode())
    (proc / str(pid) / "comm").write_text(cmdline.split()[0].split("/")[-1] + "\n")


def paths(tmp_path, proc):
    return H.Paths(proc=str(proc), sys=str(tmp_path / "sys"), modules_root=str(tmp_path / "lib"),
                   shm="/dev/shm", root=str(tmp_path / "root"))


def params(**over):
    base = {"weights_dir": None, "required_bytes": 0, "shm_min_bytes": GIB,
            "memlock_min_bytes": 0, "listen": None, "listen_allowed_owners": ["vllm", "sglang"],
            "driver_checks": True, "fail_on": ["disk", "listen_port"], "checks": [],
            "bind_test": False}
    base.update(over)
    return base


# ------------------------------------------------------------------------------------- disk
def served_build(tmp_path, source):
    """<models>/qwen -> a build whose marker records the source it was built from (as weights_convert writes it)."""
    build = tmp_path / "models" / ".builds" / "qwen" / "b1"
    build.mkdir(parents=True)
    (build / "model-00001.safetensors").write_bytes(b"\0" * 55 * (1 << 20))
    (build / H.BUILD_MARKER).write_text(json.dumps({"digest": "d", "source": source}))
    os.symlink(str(build), str(tmp_path / "models" / "qwen"))
    return str(tmp_path / "models" / "qwen")


def test_disk_measures_the_closest_existing_parent(tmp_path):
    weights = tmp_path / "models" / "qwen"
    assert H.check_disk(str(weights), 10 * GIB, statvfs_map({str(tmp_path): StatVFS(5 * GIB)}))[
        "path_checked"] == str(tmp_path)


def test_a_new_build_beside_the_served_one_needs_its_own_room(tmp_path):
    # the served 55 MiB build came from another source: the new build is written beside it, so it
    # is no room for the new one (10 MiB free is not enough for a 55 MiB build)
    weights = served_build(tmp_path, "/srv/models/qwen3-old")
    disk = H.check_disk(weights, 55 * (1 << 20), statvfs_map({str(weights): StatVFS(10 * (1 << 20))}),
                        source="/srv/models/qwen3-new")
    assert not disk["served_build_current"] and disk["needed_bytes"] == 55 * (1 << 20) and not disk["ok"]


def test_the_download_and_the_floor_count_and_a_current_build_needs_only_the_floor(tmp_path):
    hub = str(tmp_path / "models" / ".hub")
    commit = "0123456789abcdef0123456789abcdef01234567"
    weights = served_build(tmp_path, hub + "/Qwen--Qwen3-0.6B/" + commit)
    fs = statvfs_map({weights: StatVFS(3 * GIB)})
    args = dict(download_bytes=GIB, floor_bytes=GIB, hub_dir=hub)
    # another commit of the same repo: download and build, then the floor
    moved = H.check_disk(weights, GIB, fs, source="hf://Qwen/Qwen3-0.6B@fedcba98", **args)
    assert moved["needed_bytes"] == 3 * GIB and moved["download_bytes"] == GIB and moved["ok"]
    assert not H.check_disk(weights, GIB + 1, fs, source="hf://Qwen/Qwen3-0.6B@fedcba98", **args)["ok"]
    # the commit served (by its prefix), or a branch of that repo: only the floor
    for source in ("hf://Qwen/Qwen3-0.6B@0123456789ab", "hf://Qwen/Qwen3-0.6B@main", "hf://Qwen/Qwen3-0.6B"):
        current = H.check_disk(weights, 100 * GIB, fs, source=source, **args)
        assert current["served_build_current"] and current["needed_bytes"] == GIB and current["ok"], source
    # another repo is never the served build
    assert not H.check_disk(weights, GIB, fs, source="hf://Qwen/Qwen3-4B@main", **args)["served_build_current"]
    # below the floor even with nothing to write
    assert not H.check_disk(weights, 0, statvfs_map({weights: StatVFS(GIB - 1)}), source="hf://Qwen/Qwen3-0.6B",
                            **args)["ok"]


def test_too_little_disk_is_a_fatal_problem_naming_the_variable(tmp_path):
    proc = fake_proc(tmp_path)
    facts = H.run_host_preflight(
        params(weights_dir=str(tmp_path / "models" / "qwen"), required_bytes=70 * GIB),
        no_commands, which_none, paths(tmp_path, proc),
        statvfs=statvfs_map({str(tmp_path): StatVFS(20 * GIB), "/dev/shm": StatVFS(8 * GIB)}),
        kernel_release="6.1.0-test")
    disk = [p for p in facts["problems"] if p["check"] == "disk"][0]
    assert disk["fatal"] and disk["variable"] == "serving_models_root"
    assert "20.00 GiB free" in disk["msg"] and "70.00 GiB" in disk["msg"]
    assert "download 0.0 MiB" in disk["msg"]
    assert facts["fatal"] == [disk]


# ---------------------------------------------------------------------------- shm, memlock
def test_small_dev_shm_is_reported_not_fatal_by_default(tmp_path):
    proc = fake_proc(tmp_path)
    facts = H.run_host_preflight(params(), no_commands, which_none, paths(tmp_path, proc),
                                 statvfs=statvfs_map({"/dev/shm": StatVFS(64 << 20)}),
                                 kernel_release="6.1.0-test")
    shm = [p for p in facts["problems"] if p["check"] == "shm"][0]
    assert "64.0 MiB" in shm["msg"] and not shm["fatal"] and "--shm-size" in shm["fix"]
    facts = H.run_host_preflight(params(fail_on=["shm"]), no_commands, which_none,
                                 paths(tmp_path, proc),
                                 statvfs=statvfs_map({"/dev/shm": StatVFS(64 << 20)}),
                                 kernel_release="6.1.0-test")
    assert [p["check"] for p in facts["fatal"]] == ["shm"]


def test_memlock_limits():
    assert H.check_memlock(64 << 20, lambda _r: (8 << 20, 8 << 20))["ok"] is False
    unlimited = H.check_memlock(64 << 20, lambda _r: (-1, -1))
    assert unlimited["ok"] and unlimited["soft_bytes"] == -1
    assert H.human_bytes(-1) == "unlimited"


# ----------------------------------------------------------------- nouveau, secure boot, headers
def test_nouveau_headers_and_secure_boot_on_a_fresh_host(tmp_path):
    proc = fake_proc(tmp_path, modules=("nouveau 2961408 0 - Live 0x0", "drm 1 1 nouveau"))
    efivars = tmp_path / "sys" / "firmware" / "efi" / "efivars"
    efivars.mkdir(parents=True)
    (efivars / H.SECURE_BOOT_EFIVAR).write_bytes(b"\x06\x00\x00\x00\x01")
    facts = H.run_host_preflight(params(fail_on=["nouveau"]), no_commands, which_none,
                                 paths(tmp_path, proc),
                                 statvfs=statvfs_map({"/dev/shm": StatVFS(8 * GIB)}),
                                 kernel_release="6.1.0-28-amd64")
    checks = dict((p["check"], p) for p in facts["problems"])
    assert sorted(checks) == ["kernel_headers", "nouveau", "secure_boot"]
    assert checks["nouveau"]["fatal"] and not checks["secure_boot"]["fatal"]
    assert facts["secure_boot"] == {"state": "enabled", "source": "efivars"}
    assert "linux-headers-6.1.0-28-amd64" in checks["kernel_headers"]["fix"]


def test_driver_already_loaded_needs_no_headers_nor_signing(tmp_path):
    proc = fake_proc(tmp_path, modules=("nvidia 1 0 - Live 0x0",))
    mok = {"mokutil": "/usr/bin/mokutil"}

    def run(argv):
        return 0, "SecureBoot enabled\n", ""
    facts = H.run_host_preflight(params(), run, mok.get, paths(tmp_path, proc),
                                 statvfs=statvfs_map({"/dev/shm": StatVFS(8 * GIB)}),
                                 kernel_release="6.1.0-test")
    assert facts["nvidia_module_loaded"] is True
    assert facts["secure_boot"]["state"] == "enabled"
    assert facts["problems"] == []


def test_kernel_headers_present(tmp_path):
    (tmp_path / "lib" / "6.1.0-x" / "build").mkdir(parents=True)
    assert H.check_kernel_headers("6.1.0-x", str(tmp_path / "lib"))["present"] is True
    assert H.check_kernel_headers("6.1.0-y", str(tmp_path / "lib"))["present"] is False


@pytest.mark.parametrize("answer,expected", [
    ("SecureBoot disabled\n", "disabled"),
    ("SecureBoot enabled\n", "enabled"),
    ("EFI variables are not supported on this system\n", "not-efi"),
])
def test_mokutil_answers(tmp_path, answer, expected):
    state, source = H.secure_boot_state(lambda argv: (0, answer, ""), "/usr/bin/mokutil",
                                        str(tmp_path))
    assert (state, source) == (expected, "mokutil")


def test_cpu_stack_skips_driver_checks(tmp_path):
    proc = fake_proc(tmp_path, modules=("nouveau 1 0 - Live 0x0",))
    facts = H.run_host_preflight(params(driver_checks=False), no_commands, which_none,
                                 paths(tmp_path, proc),
                                 statvfs=statvfs_map({"/dev/shm": StatVFS(8 * GIB)}),
                                 kernel_release="6.1.0-test")
    assert facts["nouveau_loaded"] is True
    assert facts["problems"] == []


# -------------------------------------------------------------------------------- container
def test_container_detection(tmp_path):
    def detect(argv):
        return (0, "podman\n", "") if argv[-1] == "-c" else (1, "", "")
    assert H.container_state(detect, "/usr/bin/systemd-detect-virt", str(tmp_path))["kind"] == \
        "podman"
    none = H.container_state(lambda argv: (1, "none\n", ""), "/usr/bin/systemd-detect-virt",
                             str(tmp_path))
    assert none["container"] is False
    (tmp_path / ".dockerenv").write_text("")
    assert H.container_state(no_commands, None, str(tmp_path))["kind"] == "docker"


def test_container_host_needs_no_driver_build(tmp_path):
    proc = fake_proc(tmp_path)
    (tmp_path / "root" / "run").mkdir(parents=True)
    (tmp_path / "root" / "run" / ".containerenv").write_text("")
    facts = H.run_host_preflight(params(), no_commands, which_none, paths(tmp_path, proc),
                                 statvfs=statvfs_map({"/dev/shm": StatVFS(8 * GIB)}),
                                 kernel_release="6.1.0-test")
    assert facts["container"]["container"] is True
    assert facts["kernel_headers"]["needed"] is False
    assert facts["problems"] == []


# ------------------------------------------------------------------------------------ listen
@pytest.mark.parametrize("text,expected", [
    ("127.0.0.1:8000", ("127.0.0.1", 8000)), ("[::1]:30000", ("::1", 30000)),
    (":8000", ("0.0.0.0", 8000)), ("8000", ("0.0.0.0", 8000)),
])
def test_parse_listen(text, expected):
    assert H.parse_listen(text) == expected


def test_parse_listen_rejects_garbage():
    with pytest.raises(ValueError):
        H.parse_listen("localhost")


def test_proc_net_tcp_parsing():
    assert H.parse_proc_net_tcp("hdr\n" + tcp_line("0100007F:1F40", "111")) == \
        [{"address": "127.0.0.1", "port": 8000, "inode": "111"}]
    six = H.parse_proc_net_tcp("hdr\n" + tcp_line("00000000000000000000000001000000:7530", "5"))
    assert six == [{"address": "::1", "port": 30000, "inode": "5"}]
    assert H.parse_proc_net_tcp("hdr\n" + tcp_line("0100007F:1F40", "9", state="01")) == []


def test_port_taken_by_another_service_names_it(tmp_path):
    proc = fake_proc(tmp_path, tcp=tcp_line("00000000:1F40", "4242"))
    owner(proc, 812, 4242, "/usr/sbin/nginx -g daemon")
    listen = H.check_listen("127.0.0.1:8000", ["vllm"], str(proc), try_bind=False)
    assert listen["state"] == "taken" and not listen["ok"]
    assert listen["listeners"][0]["owner"]["pid"] == 812
    facts = H.run_host_preflight(params(listen="127.0.0.1:8000"), no_commands, which_none,
                                 paths(tmp_path, proc),
                                 statvfs=statvfs_map({"/dev/shm": StatVFS(8 * GIB)}),
                                 kernel_release="6.1.0-test")
    problem = [p for p in facts["problems"] if p["check"] == "listen_port"][0]
    assert problem["fatal"] and problem["variable"] == "serving_listen"
    assert "nginx (pid 812)" in problem["msg"]


def test_port_held_by_our_own_engine_is_fine(tmp_path):
    proc = fake_proc(tmp_path, tcp=tcp_line("0100007F:1F40", "77"))
    owner(proc, 900, 77, "/opt/llmops/venvs/vllm-0.26.0/bin/python -m vllm.entrypoints.openai")
    assert H.check_listen("127.0.0.1:8000", ["vllm", "sglang"], str(proc), False)["state"] == "ours"
    # another address on the same port does not clash
    assert H.check_listen("10.0.0.5:8000", ["sglang"], str(proc), False)["state"] == "free"


def test_real_bind_clash_on_this_machine():
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    try:
        listen = H.check_listen("127.0.0.1:%d" % port, [], "/proc", try_bind=True)
        assert listen["state"] == "taken"
        assert listen["listeners"] and listen["listeners"][0]["owner"]["pid"] == os.getpid()
    finally:
        server.close()
    assert H.check_listen("127.0.0.1:%d" % port, [], "/proc", try_bind=True)["state"] == "free"


def test_unbindable_address(tmp_path):
    proc = fake_proc(tmp_path)
    listen = H.check_listen("192.0.2.77:8000", [], str(proc), try_bind=True)  # TEST-NET-1
    assert listen["state"] == "unbindable" and listen["bind_error"] == "EADDRNOTAVAIL"
