# -*- coding: utf-8 -*-
# Copyright: llmops.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a source build of sgl-kernel installs and downloads is pinned: every GPU profile's kernel has
an entry in the role's sha256 table, and a hash lock of its build requirements that agrees with the
engine lock on every package both pin (so the build changes nothing the engine venv's lock installed).
"""
import os
import re

import pytest
import yaml

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
LOCKS = os.path.join(REPO, "stacks", "locks")
ROLE = os.path.join(REPO, "roles", "sglang_kernels")
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)")
HASH = re.compile(r"--hash=sha256:([0-9a-f]{64})")
BUILD_REQUIREMENTS = {"scikit-build-core", "cmake", "ninja", "wheel"}

with open(os.path.join(REPO, "stacks", "profiles.yml")) as _f:
    PROFILES = yaml.safe_load(_f)["serving_stack_profiles"]
KERNELS = [(name, prof["engines"]["sglang"]) for name, prof in sorted(PROFILES.items())
           if "sgl_kernel" in prof["engines"].get("sglang", {})]
IDS = [name for name, engine in KERNELS]


def pins(path):
    """{name: (version, {sha256, ...})} of a uv-compiled lock."""
    out, current = {}, None
    with open(path) as f:
        for line in f:
            m = PIN.match(line)
            if m:
                current = re.sub(r"[-_.]+", "-", m.group(1)).lower()
                out[current] = (m.group(2), set())
            elif line.startswith(" "):  # a pin's --hash and "# via" lines
                if current:
                    out[current][1].update(HASH.findall(line))
            else:
                current = None
    return out


def build_lock(profile, engine):
    sk = engine["sgl_kernel"]
    return os.path.join(LOCKS, profile, "build", "%s-%s.txt" % (sk["package"], sk["version"]))


def test_every_gpu_profile_has_a_kernel():
    assert sorted(IDS) == ["cuda12.4", "cuda12.8", "cuda13.0"]


@pytest.mark.parametrize("profile, engine", KERNELS, ids=IDS)
def test_source_sha256_table_names_the_kernel(profile, engine):
    with open(os.path.join(ROLE, "vars", "main.yml")) as f:
        table = yaml.safe_load(f)["__sglang_kernels_source_sha256s"]
    key = "%s-%s" % (engine["sgl_kernel"]["package"], engine["sgl_kernel"]["version"])
    assert key in table, "add %s to __sglang_kernels_source_sha256s (a sha256, or null: downloads refused)" % key
    digest = table[key]
    assert digest is None or re.match(r"^[0-9a-f]{64}$", digest), (key, digest)


@pytest.mark.parametrize("profile, engine", KERNELS, ids=IDS)
def test_build_lock_is_hashed_and_agrees_with_the_engine_lock(profile, engine):
    lock = build_lock(profile, engine)
    assert os.path.isfile(lock), "no build lock %s (stacks/locks/compile.sh %s)" % (lock, profile)
    built = pins(lock)
    assert BUILD_REQUIREMENTS <= set(built), sorted(built)
    for name, (version, hashes) in built.items():
        assert hashes, "%s: %s has no hash (pip --require-hashes refuses it)" % (lock, name)
    engine_pins = pins(os.path.join(LOCKS, engine["lock"]))
    for name in set(built) & set(engine_pins):
        assert built[name] == engine_pins[name], "%s pins %s %s, the engine lock %s" % (
            lock, name, built[name][0], engine_pins[name][0])
    # torch comes from the engine venv (no build isolation), never from the build lock
    assert "torch" not in built


@pytest.mark.parametrize("profile, engine", KERNELS, ids=IDS)
def test_build_lock_source_is_constrained_by_the_engine_lock(profile, engine):
    source = build_lock(profile, engine)[:-len(".txt")] + ".in"
    with open(source) as f:
        text = f.read()
    assert re.search(r"^-c \.\./%s$" % re.escape(os.path.basename(engine["lock"])), text, re.M), source
    with open(build_lock(profile, engine)) as f:
        assert "stacks/locks/compile.sh %s" % profile in f.read()


def test_scenario_probe_lock_is_the_cpu_locks_pin():
    # molecule/nvidia installs it offline from the cpu wheelhouse: the cpu lock's pins and hashes
    probe = pins(os.path.join(REPO, "molecule", "nvidia", "probe-build-requirements.txt"))
    cpu = pins(os.path.join(LOCKS, "cpu", "vllm-0.32.0.txt"))
    assert probe and all(cpu.get(name) == pin for name, pin in probe.items()), probe
