# Copyright: llmops.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""nvidia scenario: the state the nvidia_driver and cuda_toolkit roles leave, and their bad inputs.

llmops-nvidia-1: Debian 13 with Debian's real packages. llmops-nvidia-2: an Ubuntu 24.04 stand-in (Debian 12 underneath) through the NVIDIA
repository path against a local stand-in repository (tests/fixtures/nvidia_repo).
"""
import fnmatch
import json
import os
import re
import subprocess

import pytest
import yaml

# the container names end with the checkout's suffix (LLMOPS_HOST_SUFFIX, set by the Makefile)
DEBIAN = "llmops-nvidia-1" + os.environ.get("LLMOPS_HOST_SUFFIX", "")
REPO = "llmops-nvidia-2" + os.environ.get("LLMOPS_HOST_SUFFIX", "")
HERE = os.path.dirname(os.path.abspath(__file__))
CONVERGE = os.path.join(HERE, "..", "converge.yml")
REPO_VARS = {
    "nvidia_driver_enabled": True,
    "cuda_toolkit_enabled": True,
    "nvidia_driver_source": "nvidia_repo",
    "nvidia_driver_repo_url": "http://127.0.0.1:8765",
    "nvidia_driver_repo_key_url": "http://127.0.0.1:8765/ubuntu2404/x86_64/llmops-test.pub",
    "nvidia_driver_fabricmanager": True,
    "nvidia_driver_dcgm": True,
    "cuda_toolkit_probe": False,
    # the serving spec has no default model: the driver-only runs name the synthetic one (no GPU here)
    "serving_model": {"name": "qwen3-tiny", "source": "synthetic://qwen3-tiny", "lora": None},
    "serving_allow_synthetic": True,
}


def version(host, pkg):
    return host.check_output("dpkg-query -W -f='${Version}' %s" % pkg)


def holds(host):
    return set(host.check_output("apt-mark showhold").split())


DEBIAN_DRIVER = ["nvidia-open-kernel-dkms", "nvidia-smi", "libcuda1", "libnvidia-ml1", "nvidia-persistenced"]
# What the roles pin (their defaults, which the scenario keeps): the driver branch, and the CUDA line.
with open(os.path.join(HERE, "..", "..", "..", "roles", "nvidia_driver", "defaults", "main.yml")) as _f:
    BRANCH = yaml.safe_load(_f)["nvidia_driver_branch"]
with open(os.path.join(HERE, "..", "..", "..", "roles", "cuda_toolkit", "defaults", "main.yml")) as _f:
    CUDA_LINE = yaml.safe_load(_f)["cuda_toolkit_version"]


@pytest.mark.on_host(DEBIAN)
def test_debian_driver_packages_are_of_the_pinned_branch_one_build_and_held(host):
    held = holds(host)
    versions = dict((pkg, version(host, pkg)) for pkg in DEBIAN_DRIVER)
    # the branch the role pins (Pin: version <branch>.*), one driver build across the packages
    assert all(fnmatch.fnmatch(v, "%s.*" % BRANCH) for v in versions.values()), versions
    assert len(set(v.split("-")[0] for v in versions.values())) == 1, versions
    for pkg in DEBIAN_DRIVER:
        assert pkg in held, pkg
    # the proprietary module package was not pulled in next to the open one
    assert not host.package("nvidia-kernel-dkms").is_installed


@pytest.mark.on_host(DEBIAN)
def test_debian_branch_pin(host):
    pin = host.file("/etc/apt/preferences.d/llmops-nvidia-driver").content_string
    assert "Pin: version %s.*" % BRANCH in pin
    policy = host.check_output("apt-cache policy nvidia-smi")
    assert "1001" in policy


@pytest.mark.on_host(DEBIAN)
def test_debian_dkms_registered_not_built(host):
    # the open module source of the installed build (Debian's DKMS name nvidia-current-open) is
    # unpacked and registered with DKMS; no module is loaded in the container
    build = version(host, "nvidia-open-kernel-dkms").split("-")[0]
    assert host.file("/usr/src/nvidia-current-open-%s" % build).is_directory
    status = host.check_output("dkms status")
    assert re.search(r"^nvidia-current-open/%s\b" % re.escape(build), status, re.M), status
    assert not host.file("/sys/module/nvidia").exists


def test_nouveau_blacklisted(host):
    f = host.file("/etc/modprobe.d/llmops-blacklist-nouveau.conf")
    assert "blacklist nouveau" in f.content_string


def test_persistenced_enabled(host):
    assert host.service("nvidia-persistenced").is_enabled


@pytest.mark.on_host(DEBIAN)
def test_cuda_toolkit_of_the_pinned_line_held(host):
    assert fnmatch.fnmatch(version(host, "nvidia-cuda-toolkit"), "%s.*" % CUDA_LINE)
    assert fnmatch.fnmatch(version(host, "nvidia-cuda-dev"), "%s.*" % CUDA_LINE)
    assert {"nvidia-cuda-toolkit", "nvidia-cuda-dev"} <= holds(host)


def test_cuda_home_and_profile(host):
    link = host.file("/usr/local/cuda")
    assert link.is_symlink and link.linked_to == "/usr/local/cuda-12.4"
    cuda_home, cuda_path, path = host.check_output("bash -lc 'echo \"$CUDA_HOME|$CUDA_PATH|$PATH\"'").split("|")
    assert cuda_home == "/usr/local/cuda" and cuda_path == "/usr/local/cuda", (cuda_home, cuda_path)
    assert "/usr/local/cuda/bin" in path.split(":"), path


@pytest.mark.on_host(DEBIAN)
def test_real_nvcc_124_compiles_and_links_the_probe_for_sm90(host):
    out = host.check_output("bash -lc 'nvcc --version'")
    assert "release 12.4, V12.4.131" in out
    build = host.run("bash -lc 'cd /tmp && nvcc -arch=sm_90 -o /tmp/probe /opt/llmops/cuda-probe/cuda_probe.cu'")
    assert build.rc == 0, build.stderr
    # the binary carries sm_90 code (cuobjdump lists the embedded cubin)
    objdump = host.run("bash -lc 'cuobjdump --list-elf /tmp/probe'")
    assert "sm_90" in objdump.stdout, objdump.stdout + objdump.stderr
    # no GPU here: the CUDA runtime starts, finds no device, and the probe says so (exit 2)
    run = host.run("/tmp/probe")
    assert run.rc == 2, run.stdout + run.stderr
    assert "cuda runtime 12040" in run.stdout


@pytest.mark.on_host(REPO)
def test_repo_source_is_signed_and_points_at_the_mirror(host):
    src = host.file("/etc/apt/sources.list.d/llmops-nvidia-cuda.sources").content_string
    assert "URIs: http://127.0.0.1:8765/ubuntu2404/x86_64/" in src
    assert "Signed-By: /etc/apt/keyrings/llmops-nvidia-cuda.asc" in src
    assert host.file("/etc/apt/keyrings/llmops-nvidia-cuda.asc").content_string.startswith(
        "-----BEGIN PGP PUBLIC KEY BLOCK-----")


@pytest.mark.on_host(REPO)
def test_repo_key_trusted_is_the_served_one(host):
    # the role wrote the text it checked against the stand-in key's fingerprint, byte for byte
    served = host.file("/srv/nvidia-repo/ubuntu2404/x86_64/llmops-test.pub").content_string
    assert host.file("/etc/apt/keyrings/llmops-nvidia-cuda.asc").content_string == served


@pytest.mark.on_host(REPO)
def test_repo_driver_open_flavour_held(host):
    held = holds(host)
    for pkg in ("nvidia-driver-550-open", "nvidia-dkms-550-open"):
        assert version(host, pkg) == "550.163.01-1"
        assert pkg in held
    assert not host.package("cuda-drivers-550").is_installed


@pytest.mark.on_host(REPO)
def test_repo_fabricmanager_pinned_to_driver_build(host):
    assert version(host, "nvidia-fabricmanager-550") == version(host, "nvidia-dkms-550-open")
    assert "nvidia-fabricmanager-550" in holds(host)
    pin = host.file("/etc/apt/preferences.d/llmops-nvidia-fabricmanager").content_string
    assert "Pin: version 550.163.01-1" in pin
    assert host.service("nvidia-fabricmanager").is_enabled
    assert "After=nvidia-persistenced.service" in host.file(
        "/etc/systemd/system/nvidia-fabricmanager.service.d/llmops.conf").content_string


@pytest.mark.on_host(REPO)
def test_repo_dcgm_and_toolkit(host):
    assert host.service("nvidia-dcgm").is_enabled
    assert version(host, "cuda-toolkit-12-4") == "12.4.1-1"
    assert "cuda-toolkit-12-4" in holds(host)
    assert host.file("/usr/local/cuda/version.json").contains("12.4.1")


# ------------------------------------------------------------------ bad inputs (llmops-nvidia-2)
def stand_in_key_fingerprint():
    """The fingerprint of the stand-in repository's key, which prepare.yml's build.py made and wrote."""
    path = os.path.join(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"], "nvidia_repo", "ubuntu2404", "x86_64",
                        "llmops-test.fingerprint")
    with open(path) as f:
        return f.read().strip()


def converge(extra):
    extra = dict(dict(REPO_VARS, nvidia_driver_repo_key_fingerprint=stand_in_key_fingerprint()), **extra)
    return subprocess.run(
        ["ansible-playbook", "-i", REPO + ",", "-c", "llmops_podman", CONVERGE,
         "-e", json.dumps(extra)],
        capture_output=True, text=True, timeout=600, check=False)


def snapshot(host):
    return host.check_output(
        "md5sum /etc/apt/sources.list.d/llmops-nvidia-cuda.sources /etc/apt/keyrings/llmops-nvidia-cuda.asc "
        "/etc/apt/preferences.d/*; dpkg-query -W | md5sum; apt-mark showhold | md5sum")


@pytest.mark.parametrize("extra, message", [
    ({"nvidia_driver_branch": 999}, "nvidia_driver_branch 999 is not a branch this role knows"),
    # below the stack profile (cuda12.4 needs 550): the driver role's own check
    ({"nvidia_driver_branch": 535}, "nvidia_driver_branch 535 is older than serving_stack cuda12.4 needs (branch 550"),
    # a profile without a minimum (cpu), a CUDA line the branch cannot run: the toolkit role's check
    ({"nvidia_driver_branch": 535, "serving_stack": "cpu"}, "Driver branch 535 (nvidia_driver_branch) is too old for CUDA 12.4"),
    ({"nvidia_driver_repo_url": "http://127.0.0.1:9/mirror"},
     "NVIDIA's repository http://127.0.0.1:9/mirror/ubuntu2404/x86_64 is unreachable"),
    # a key other than the one the inventory names is never trusted (nor written to /etc/apt/keyrings)
    ({"nvidia_driver_repo_key_fingerprint": "0" * 40},
     "and nvidia_driver_repo_key_fingerprint is %s. The file must hold exactly that one key." % ("0" * 40)),
    # NVIDIA's own key, expected of the stand-in's (the role's default for a mirror without its own key)
    ({"nvidia_driver_repo_key_fingerprint": "EB69 3B30 35CD 5710 E231 E123 A4B4 6996 3BF8 63CC"},
     "is EB693B3035CD5710E231E123A4B469963BF863CC (NVIDIA's published fingerprint of 3bf863cc.pub)."),
    # a short key ID names no key: anyone can make one with a chosen ID
    ({"nvidia_driver_repo_key_fingerprint": "3BF863CC"}, "A short key ID is not enough."),
], ids=["unknown-branch", "branch-below-stack", "branch-too-old-for-cuda", "repo-unreachable",
        "key-fingerprint-differs", "key-not-nvidias", "key-fingerprint-short"])
@pytest.mark.on_host(REPO)
def test_bad_input_fails_before_any_change(host, extra, message):
    before = snapshot(host)
    res = converge(extra)
    out = res.stdout + res.stderr
    assert res.returncode != 0, out[-3000:]
    assert message in " ".join(out.split()), out[-3000:]
    # the validate play failed: the roles' play never started
    assert "Install the NVIDIA driver and the CUDA toolkit" not in out
    assert snapshot(host) == before


INTERPRETER_CHOICE = """- hosts: all
  gather_facts: true
  tasks:
    - ansible.builtin.include_role: {name: llmops.serving.python_env, tasks_from: interpreter_facts.yml}
    - ansible.builtin.debug:
        msg: >-
          FACTS {{ ansible_facts.distribution }} {{ ansible_facts.distribution_version }}
          CHOICE {{ python_env_interpreter_choice.summary | default(python_env_interpreter_choice.error) }}
"""


@pytest.mark.parametrize("stack, choice", [
    # Ubuntu 24.04 packages no 3.11: the host's own (Debian 12's python3.11 underneath) is taken
    ("cpu", "CHOICE the host's own python 3.11"),
    # 3.12 is Ubuntu 24.04's own package
    ("cuda12.8", "CHOICE python3.12 from Ubuntu 24.04's packages (python3.12, python3.12-venv)"),
])
@pytest.mark.on_host(REPO)
def test_ubuntu_host_gets_each_profiles_python_from_its_source(host, stack, choice, tmp_path):
    play = tmp_path / "choice.yml"
    play.write_text(INTERPRETER_CHOICE)
    spec = {"serving_stack": stack, "serving_model": REPO_VARS["serving_model"], "serving_allow_synthetic": True}
    res = subprocess.run(["ansible-playbook", "-i", REPO + ",", "-c", "llmops_podman", str(play), "-e", json.dumps(spec)],
                         capture_output=True, text=True, timeout=300, check=False)
    out = " ".join((res.stdout + res.stderr).split())
    assert res.returncode == 0, out[-3000:]
    assert "FACTS Ubuntu 24.04" in out, out[-2000:]
    assert choice in out, out[-2000:]
