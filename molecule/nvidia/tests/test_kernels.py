# -*- coding: utf-8 -*-
# Copyright: llmops.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""sglang_kernels' source path: the probe extension was compiled by nvcc 12.4 for the GPUs' architecture
and installed (Debian 13 host of the nvidia scenario)."""
import glob
import os

import pytest

VENV = "/opt/llmops/venvs/sglang-probe"
KEY = "sgl-kernel-0.1.4-cu124-sm90"


# the kernels are built on the Debian 13 host (conftest.py: the other host does not collect these)
pytestmark = pytest.mark.on_host("llmops-nvidia-1" + os.environ.get("LLMOPS_HOST_SUFFIX", ""))


def test_nvcc_is_debian_12_4(host):
    out = host.check_output("nvcc --version")
    assert "release 12.4" in out


def test_wheel_built_for_the_gpu_arch(host):
    wheels = host.check_output("ls /var/cache/llmops/kernels/wheels/%s" % KEY).split()
    assert len(wheels) == 1 and wheels[0].endswith(".whl")
    out = host.check_output(
        "%s/bin/python -c 'import llmops_cuda_probe as p; print(p.arch_list()); print(p.__file__)'" % VENV)
    arch, path = out.splitlines()
    assert arch == "9.0"
    lib = os.path.join(os.path.dirname(path), "libllmops_cuda_probe.so")
    elf = host.check_output("cuobjdump --list-elf %s" % lib)
    assert "sm_90" in elf and "sm_80" not in elf


def test_build_reported_ninja_progress_and_used_ccache(host):
    log = host.file("/var/cache/llmops/kernels/build/%s.log" % KEY).content_string
    assert "[5/5]" in log and "-gencode=arch=compute_90,code=sm_90" in log
    assert "ccache" in log
    assert int(host.check_output("find /var/cache/llmops/ccache -type f | wc -l")) > 0


def test_marker_and_cache_dir(host):
    assert host.file(VENV + "/.llmops-sgl-kernel").content_string.startswith(KEY + " ")
    cache = host.file("/var/cache/llmops/engine")
    assert cache.is_directory and cache.user == "llmops" and cache.mode == 0o750
    assert host.file("/var/cache/llmops/engine/triton").user == "llmops"


def test_wheel_kept_on_the_controller(host):
    # converge.yml fetches the built wheel into the scenario's ephemeral folder, which Molecule names
    eph = os.environ["MOLECULE_EPHEMERAL_DIRECTORY"]
    assert glob.glob(os.path.join(eph, "kernels", KEY, "*.whl"))
