# -*- coding: utf-8 -*-
"""weights.convert(): the weights_convert module's job (verify or record the source, skip a current
folder, build, prove the tokenizer, swap in), on a tiny safetensors checkpoint.

The build is weights' own (run_in_venv(fn="build"), which needs only the standard library for a
safetensors source); the tokenizer check, which needs transformers, is a fake. The module itself
runs the build in a real child interpreter through venv_runner."""
import json
import os
import subprocess
import sys

import pytest
import yaml

from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args

from ansible_collections.llmops.serving.plugins.module_utils import weights
from ansible_collections.llmops.serving.plugins.modules import weights_convert
from safetensors_file import safetensors_bytes

IDS = {"<|endoftext|>": 151643, "<|im_start|>": 151644}
UNTOUCHED = "Nothing served was changed."


def write(path, data):
    d = os.path.dirname(str(path))
    if not os.path.isdir(d):
        os.makedirs(d)
    with open(str(path), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode("utf-8"))


@pytest.fixture()
def tree(tmp_path):
    src = tmp_path / "src"
    write(src / "config.json", '{"architectures": ["Qwen3ForCausalLM"]}')
    write(src / "tokenizer_config.json", '{"model_max_length": 4096}')
    tensors = {"w": ([2, 2], "F32", b"\0" * 16), "b": ([2], "F32", b"\1" * 8)}
    write(src / "model.safetensors", safetensors_bytes(tensors))
    write(tmp_path / "chat.jinja", "{{ messages }}")
    return tmp_path


def params(tree, **over):
    out = {"src": str(tree / "src"), "dest": str(tree / "served"), "adapter": None, "template_path": None,
           "template": None, "source_manifest": None, "verify": "cheap", "max_shard_size": "5GB",
           "progress_file": None}
    out.update(over)
    return out


class Venv(object):
    """run_build / run_check for convert(): weights' real build in-process, a fake tokenizer check."""

    def __init__(self, problems=(), build_error=None):
        self.problems, self.build_error = list(problems), build_error
        self.builds, self.checks = [], []

    def build(self, args):
        self.builds.append(args)
        if self.build_error:
            return {"ok": False, "error": self.build_error}
        return weights.run_in_venv(**args)

    def check(self, args):
        self.checks.append(args)
        assert os.path.isfile(os.path.join(args["tokenizer_path"], "config.json"))  # the built folder
        return {"problems": self.problems, "special_token_ids": IDS, "renders": {"probe": "text"}}


def convert(tree, venv=None, check_mode=False, **over):
    venv = venv or Venv()
    return weights.convert(params(tree, **over), check_mode, venv.build, venv.check), venv


def no_call(args):
    raise AssertionError("must not run: %s" % args)


def leftovers(tree):
    return sorted(p for p in os.listdir(str(tree)) if p.startswith(".served"))


# ------------------------------------------------------------------------------ success paths
def test_first_run_records_the_source_builds_proves_and_swaps_in(tree):
    result, venv = convert(tree, template_path=str(tree / "chat.jinja"), template="qwen3")
    dest = str(tree / "served")
    built = weights.read_manifest(os.path.join(dest, weights.MANIFEST))
    assert result == {"changed": True, "path": dest, "digest": result["digest"], "manifest_recorded": True,
                      "source_format": "safetensors", "tensors": 2, "merged_dtype": None,
                      "total_bytes": built["total_bytes"], "special_token_ids": IDS, "adapters": {}, "reused": None,
                      "build": str(tree / ".builds" / "served" / result["digest"][:16]), "previous_build": None,
                      "pruned": [], "cleaned": []}
    assert os.path.islink(dest) and os.path.realpath(dest) == result["build"]
    assert len(result["digest"]) == 64
    # the source's manifest, recorded at first sight
    source_man = weights.read_manifest(str(tree / "src" / weights.MANIFEST))
    assert source_man["source"] == str(tree / "src") and "model.safetensors" in source_man["files"]
    # the build got the recipe; the check ran on the temporary folder, before the swap
    assert venv.builds[0]["fn"] == "build" and venv.builds[0]["digest"] == result["digest"]
    assert venv.builds[0]["chat_template"] == "{{ messages }}" and venv.builds[0]["max_shard_size"] == "5GB"
    tmp = venv.checks[0]["tokenizer_path"]
    assert venv.checks == [{"tokenizer_path": tmp, "template_path": str(tree / "chat.jinja"), "template_name": "qwen3"}]
    assert os.path.dirname(tmp) == str(tree) and os.path.basename(tmp).startswith(".served.build-")
    with open(os.path.join(dest, "tokenizer_config.json")) as f:
        assert json.load(f)["chat_template"] == "{{ messages }}"
    assert weights.is_current(dest, result["digest"]) == (True, [])
    assert leftovers(tree) == []


@pytest.fixture()
def layered(tree):
    """The tree with its 2 x 2 weight named as a layer's (layer.weight), which adapters target."""
    write(tree / "src" / "model.safetensors", safetensors_bytes({"layer.weight": ([2, 2], "F32", b"\0" * 16),
                                                                 "b": ([2], "F32", b"\1" * 8)}))
    return tree


def adapter(tree, name, rank, out_features=2, module="layer"):
    """A PEFT adapter folder for the layered tree's model (its layer is 2 x 2)."""
    folder = tree / "adapters" / name
    write(folder / "adapter_config.json", json.dumps({"peft_type": "LORA", "r": rank, "target_modules": [module]}))
    write(folder / "adapter_model.safetensors", safetensors_bytes({
        "base_model.model.%s.lora_A.weight" % module: ([rank, 2], "F32", b"\0" * 8 * rank),
        "base_model.model.%s.lora_B.weight" % module: ([out_features, rank], "F32", b"\0" * 4 * rank * out_features)}))
    return str(folder)


def test_adapters_served_by_name_are_checked_copied_ranked_and_in_the_digest(layered):
    tree = layered
    plain, dummy = convert(tree)
    served = [{"name": "support", "path": adapter(tree, "support", 4)},
              {"name": "long", "path": adapter(tree, "long", 8), "source": "hf://org/long@abc"}]
    result, venv = convert(tree, adapters=served)
    assert result["changed"] and result["digest"] != plain["digest"]
    assert result["adapters"] == {
        "support": {"rank": 4, "target_modules": ["layer"], "source": served[0]["path"]},
        "long": {"rank": 8, "target_modules": ["layer"], "source": "hf://org/long@abc"}}
    dest = str(tree / "served")
    with open(os.path.join(dest, "adapters.json")) as f:
        assert json.load(f) == result["adapters"]
    for name in ("support", "long"):
        assert sorted(os.listdir(os.path.join(dest, "adapters", name))) == ["adapter_config.json",
                                                                            "adapter_model.safetensors"]
    # the adapters are in the build's manifest: a full verify sees them
    assert weights.verify(dest, weights.read_manifest(os.path.join(dest, weights.MANIFEST)), "full") == []
    assert "adapters/long/adapter_model.safetensors" in weights.read_manifest(os.path.join(dest, weights.MANIFEST))["files"]
    # unchanged adapters: current; a changed one: a new build
    again = weights.convert(params(tree, adapters=served), False, no_call, no_call)
    assert not again["changed"] and again["digest"] == result["digest"]
    adapter(tree, "long", 16)
    rebuilt, dummy = convert(tree, adapters=served)
    assert rebuilt["digest"] != result["digest"] and rebuilt["adapters"]["long"]["rank"] == 16
    # only the adapters changed: the weights are the served build's, copied, not built again
    assert rebuilt["reused"] == result["build"] and plain["build"] not in (rebuilt["build"], result["build"])
    # without adapters again: the digest of the plain build, its weights reused from the served one
    back, venv = convert(tree)
    assert back["digest"] == plain["digest"] and back["reused"] == rebuilt["build"]
    assert not os.path.exists(os.path.join(str(tree / "served"), "adapters.json"))
    assert not os.path.exists(os.path.join(str(tree / "served"), "adapters"))
    assert weights.is_current(str(tree / "served"), plain["digest"]) == (True, [])


def fake_merge(stage, adapter_path, out, max_shard_size):
    """merge_lora's outcome without peft: the base's tensors, 1.0 added to each, in out."""
    merged = {}
    for name, (shape, dtype) in weights._safetensors_names(stage).items():
        count = 1
        for n in shape:
            count *= n
        merged[name] = (list(shape), dtype, b"\x3f" * (4 * count))
    write(os.path.join(out, "model.safetensors"), safetensors_bytes(merged))
    return "float32"


def test_a_change_of_the_served_adapters_needs_no_merge_again(layered, monkeypatch):
    """The merged base is built once (the venv with peft); a change of the adapters served by name
    copies its weights, in a venv whose merge would fail (an engine venv without peft)."""
    tree = layered
    monkeypatch.setattr(weights, "merge_lora", fake_merge)
    merged_adapter = adapter(tree, "merged", 2)
    merged, dummy = convert(tree, adapter=merged_adapter)
    assert merged["merged_dtype"] == "float32" and merged["reused"] is None
    weights_before = weights.read_manifest(os.path.join(merged["build"], weights.MANIFEST))["files"]["model.safetensors"]

    def no_peft(*args):
        raise weights.WeightsError("No module named 'peft'")
    monkeypatch.setattr(weights, "merge_lora", no_peft)
    served = [{"name": "support", "path": adapter(tree, "support", 4)}]
    result, venv = convert(tree, adapter=merged_adapter, adapters=served)
    assert result["changed"] and result["reused"] == merged["build"] and result["merged_dtype"] == "float32"
    assert venv.builds[0]["reuse"] == merged["build"] and venv.builds[0]["base_digest"] == merged["digest"]
    built = weights.read_manifest(os.path.join(result["build"], weights.MANIFEST))["files"]
    assert built["model.safetensors"]["sha256"] == weights_before["sha256"]
    assert sorted(built) == sorted(["adapters/support/adapter_config.json", "adapters/support/adapter_model.safetensors",
                                    "adapters.json", "config.json", "model.safetensors", "tokenizer_config.json"])
    # a damaged served build is not reused: the merge runs again (and here fails, nothing served changed)
    with open(os.path.join(result["build"], "model.safetensors"), "r+b") as f:
        f.seek(-1, 2)
        f.write(b"\x00")
    os.utime(os.path.join(result["build"], "model.safetensors"), (1, 1))
    with pytest.raises(weights.ConvertError) as err:
        convert(tree, adapter=merged_adapter)
    assert "No module named 'peft'" in err.value.msg and err.value.msg.rstrip().endswith(UNTOUCHED)
    assert os.path.realpath(str(tree / "served")) == result["build"] and leftovers(tree) == []


def _rot(path):
    """Flip the last byte of a file, keeping its size and mtime (what a cheap check cannot see)."""
    st = os.stat(path)
    with open(path, "r+b") as f:
        f.seek(-1, 2)
        last = f.read(1)
        f.seek(-1, 2)
        f.write(b"\x01" if last != b"\x01" else b"\x02")
    os.utime(path, (st.st_atime, st.st_mtime))


def _sha(path):
    return weights.sha256_file(path)


def test_a_served_build_that_rotted_unseen_is_never_copied(layered):
    """Reuse copies only what the served manifest records, and only bytes that still hash as
    recorded; a repair (the same recipe, found damaged by a full verify) builds from the source."""
    tree = layered
    source_sha = _sha(str(tree / "src" / "model.safetensors"))
    served = [{"name": "support", "path": adapter(tree, "support", 4)}]
    first, dummy = convert(tree, adapters=served)
    # a repair: the same recipe, damaged bytes under an unchanged size and mtime
    _rot(os.path.join(first["build"], "model.safetensors"))
    cheap = weights.convert(params(tree, adapters=served), False, no_call, no_call)
    assert not cheap["changed"]  # what a cheap check cannot see
    repaired, venv = convert(tree, adapters=served, verify="full")
    assert repaired["changed"] and repaired["reused"] is None and venv.builds[0]["reuse"] is None
    assert _sha(os.path.join(repaired["build"], "model.safetensors")) == source_sha
    # an adapter change over unseen rot, and a file added to the build after it was published
    _rot(os.path.join(repaired["build"], "model.safetensors"))
    with open(os.path.join(repaired["build"], "stray.txt"), "w") as f:
        f.write("added by hand")
    served.append({"name": "long", "path": adapter(tree, "long", 8)})
    rebuilt, venv = convert(tree, adapters=served)
    assert venv.builds[0]["reuse"] == repaired["build"]  # tried, then found the copy's hash wrong
    assert rebuilt["reused"] is None and _sha(os.path.join(rebuilt["build"], "model.safetensors")) == source_sha
    assert sorted(rebuilt["adapters"]) == ["long", "support"]
    # a healthy served build is copied, without the file its manifest does not record
    with open(os.path.join(rebuilt["build"], "stray.txt"), "w") as f:
        f.write("added by hand")
    served.pop()
    again, dummy = convert(tree, adapters=served)
    assert again["reused"] == rebuilt["build"] and not os.path.exists(os.path.join(again["build"], "stray.txt"))
    assert weights.verify(again["build"], weights.read_manifest(os.path.join(again["build"], weights.MANIFEST)),
                          "full") == []


@pytest.mark.parametrize("make,message", [
    (lambda tree: adapter(tree, "wide", 4, out_features=3), "adapter produces 3 output features, the base has 2"),
    (lambda tree: adapter(tree, "elsewhere", 4, module="q_proj"), "q_proj: no such layer in the base model"),
    (lambda tree: str(tree / "adapters" / "empty"), "has no adapter_config.json"),
])
def test_an_adapter_that_does_not_fit_is_refused_by_name(layered, make, message):
    tree = layered
    first, dummy = convert(tree)
    path = make(tree)
    if not os.path.isdir(path):
        os.makedirs(path)
    with pytest.raises(weights.ConvertError) as err:
        convert(tree, adapters=[{"name": "odd", "path": path}])
    assert "serving_lora_adapters[odd]" in err.value.msg and message in err.value.msg, err.value.msg
    assert err.value.msg.rstrip().endswith(UNTOUCHED) or "does not fit" in err.value.msg
    assert os.path.realpath(str(tree / "served")) == first["build"] and leftovers(tree) == []


def test_a_current_folder_is_left_alone(tree):
    first, dummy = convert(tree)
    again = weights.convert(params(tree), False, no_call, no_call)
    assert again == {"changed": False, "path": str(tree / "served"), "digest": first["digest"],
                     "manifest_recorded": False, "build": first["build"], "cleaned": []}
    # a given manifest location is honoured, and recording it alone is a change
    man = str(tree / "manifests" / "src.json")
    recorded = weights.convert(params(tree, source_manifest=man), False, no_call, no_call)
    assert recorded == dict(again, changed=True, manifest_recorded=True) and os.path.isfile(man)


def test_check_mode_at_first_sight_records_nothing(tree):
    result = weights.convert(params(tree), True, no_call, no_call)
    assert result == {"changed": True, "path": str(tree / "served"), "digest": None, "manifest_recorded": False,
                      "msg": "would record the source's manifest and build %s" % (tree / "served")}
    assert not os.path.exists(str(tree / "src" / weights.MANIFEST)) and not os.path.exists(str(tree / "served"))


def test_check_mode_reports_why_it_would_rebuild(tree):
    first, dummy = convert(tree)
    result = weights.convert(params(tree, template_path=str(tree / "chat.jinja")), True, no_call, no_call)
    assert result["digest"] != first["digest"]
    assert result == {"changed": True, "path": str(tree / "served"), "digest": result["digest"],
                      "manifest_recorded": False,
                      "msg": "would build %s: not built from this source/adapter/template" % (tree / "served")}


@pytest.mark.parametrize("mode,rebuilt", [("cheap", False), ("full", True)])
def test_full_verify_catches_a_served_file_altered_in_place(tree, mode, rebuilt):
    first, dummy = convert(tree)
    served = str(tree / "served" / "config.json")  # the build's own copy
    st = os.stat(served)
    with open(served, "r+b") as f:  # same size, same mtime: only a hash sees it
        f.write(b"[")
    os.utime(served, (st.st_atime, st.st_mtime))
    result = weights.convert(params(tree, verify=mode), True, no_call, no_call)
    assert result["changed"] is rebuilt
    if rebuilt:
        assert result["msg"].startswith("would build %s: config.json: sha256 " % (tree / "served"))
    else:
        assert result == {"changed": False, "path": str(tree / "served"), "digest": first["digest"],
                          "manifest_recorded": False, "build": first["build"], "cleaned": []}


# ------------------------------------------------------------------------------ failures
def _no_config(tree):
    os.remove(str(tree / "src" / "config.json"))


def _missing_shard(tree):
    write(tree / "src" / "model.safetensors.index.json",
          json.dumps({"weight_map": {"w": "model.safetensors", "b": "model-00002.safetensors"}}))


def _altered_source(tree):
    convert(tree)  # built and served from this source, whose manifest is recorded
    with open(str(tree / "src" / "model.safetensors"), "r+b") as f:
        f.truncate(10)


def _no_adapter_config(tree):
    write(tree / "lora" / "adapter_model.safetensors", b"x")


FAILURES = [
    # (id, setup, over, venv, message (with {src}, {tmp}), extra keys)
    ("no config.json", _no_config, {}, {}, "source {src} holds no config.json: not a model folder", {}),
    ("a shard the index names is missing", _missing_shard, {}, {},
     "source {src} is incomplete (copy the missing files, or fetch again):\n"
     "  model.safetensors.index.json names shard model-00002.safetensors, which is missing\n" + UNTOUCHED,
     {"problems": ["model.safetensors.index.json names shard model-00002.safetensors, which is missing"]}),
    ("source altered after its manifest", _altered_source, {}, {},
     "source {src} does not match its integrity manifest {src}/.llmops-manifest.json (damaged or altered files; "
     "restore them, or delete the manifest to accept the folder as it is now):\n"
     "  model.safetensors: truncated (10 bytes, the manifest says {size})\n" + UNTOUCHED,
     {"problems": ["model.safetensors: truncated (10 bytes, the manifest says {size})"]}),
    ("adapter without adapter_config.json", _no_adapter_config, {"adapter": "{tmp}/lora"}, {},
     "adapter {tmp}/lora has no adapter_config.json: not a PEFT adapter folder", {}),
    ("the build fails", None, {}, {"build_error": "merge check failed: x"},
     "merge check failed: x\n" + UNTOUCHED, {}),
    ("the built tokenizer is wrong", None, {}, {"problems": ["<|im_start|> is not one token"]},
     "the built folder's tokenizer or chat template is wrong; nothing served was changed:\n"
     "- <|im_start|> is not one token",
     {"problems": ["<|im_start|> is not one token"], "renders": {"probe": "text"}}),
]


@pytest.mark.parametrize("setup,over,venv_kw,message,extra", [c[1:] for c in FAILURES], ids=[c[0] for c in FAILURES])
def test_failures_name_the_problem_and_change_nothing_served(tree, setup, over, venv_kw, message, extra):
    # something is served already (another recipe): it must survive every failure
    write(tree / "served" / "config.json", "old")
    fmt = dict(src=str(tree / "src"), tmp=str(tree), size=os.path.getsize(str(tree / "src" / "model.safetensors")))
    if setup:
        setup(tree)
    over = dict((k, v.format(**fmt)) for k, v in over.items())
    before = sorted(os.listdir(str(tree / "served")))
    with pytest.raises(weights.ConvertError) as err:
        convert(tree, Venv(**venv_kw), **over)
    assert err.value.msg == str(err.value) == message.format(**fmt)
    assert err.value.extra == dict((k, [p.format(**fmt) for p in v] if k == "problems" else v) for k, v in extra.items())
    assert sorted(os.listdir(str(tree / "served"))) == before
    assert leftovers(tree) == []  # no temporary folder left beside dest


# ------------------------------------------------------------------- the module around convert()
class Exit(Exception):
    pass


def run_module(monkeypatch, args, tokenizer_rc=0, check_mode=False):
    """weights_convert.main(): weights' build really runs in a child interpreter (this one); the
    tokenizer check answers like the venv would (or fails with tokenizer_rc)."""
    calls = []

    def run_command(self, argv, data=None, binary_data=False, environ_update=None, **kwargs):
        calls.append(argv)
        if "_result = check(**_args)" not in argv[2]:  # weights.run_in_venv: run it for real
            proc = subprocess.run(argv, input=data, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  universal_newlines=True, check=False)
            return proc.returncode, proc.stdout, proc.stderr
        if tokenizer_rc:
            return tokenizer_rc, "", "Traceback ...\nModuleNotFoundError: No module named 'transformers'"
        return 0, "\n@@LLMOPS-RESULT@@" + json.dumps({"problems": [], "special_token_ids": IDS}) + "\n", ""

    def leave(self, **kwargs):
        raise Exit(kwargs)

    monkeypatch.setattr(basic.AnsibleModule, "run_command", run_command)
    monkeypatch.setattr(basic.AnsibleModule, "exit_json", leave)
    monkeypatch.setattr(basic.AnsibleModule, "fail_json", lambda self, **kw: leave(self, failed=True, **kw))
    args = dict(args, python=sys.executable)
    if check_mode:
        args["_ansible_check_mode"] = True
    with patch_module_args(args):
        with pytest.raises(Exit) as err:
            weights_convert.main()
    return err.value.args[0], calls


def test_module_builds_through_a_child_interpreter(tree, monkeypatch):
    args = {"src": str(tree / "src"), "dest": str(tree / "served")}
    result, calls = run_module(monkeypatch, args)
    assert [c[:2] for c in calls] == [[sys.executable, "-c"]] * 2
    assert result == {"changed": True, "path": str(tree / "served"), "digest": result["digest"],
                      "manifest_recorded": True, "source_format": "safetensors", "tensors": 2,
                      "merged_dtype": None, "total_bytes": result["total_bytes"], "special_token_ids": IDS, "adapters": {},
                      "reused": None, "build": result["build"], "previous_build": None, "pruned": [], "cleaned": []}
    again, calls = run_module(monkeypatch, args, check_mode=True)
    assert again == {"changed": False, "path": str(tree / "served"), "digest": result["digest"],
                     "manifest_recorded": False, "build": result["build"], "cleaned": []} and calls == []


def test_module_fails_when_python_is_no_engine_venv(tree, monkeypatch):
    result, dummy = run_module(monkeypatch, {"src": str(tree / "src"), "dest": str(tree / "served")}, tokenizer_rc=1)
    assert result["failed"] and result["rc"] == 1 and set(result) == {"failed", "msg", "rc"}
    assert result["msg"].startswith("tokenizer_check.check failed under %s (rc=1):\n" % sys.executable)
    assert result["msg"].endswith("No module named 'transformers'; python must be an engine venv's interpreter "
                                  "(torch, safetensors, transformers)")
    assert leftovers(tree) != [] and not os.path.exists(str(tree / "served"))  # as before: the temp folder stays


def test_module_failure_carries_the_problems(tree, monkeypatch):
    _missing_shard(tree)
    result, calls = run_module(monkeypatch, {"src": str(tree / "src"), "dest": str(tree / "served")})
    assert result["failed"] and calls == []
    assert result["problems"] == ["model.safetensors.index.json names shard model-00002.safetensors, which is missing"]
    assert result["msg"].endswith(UNTOUCHED)


def test_module_documentation_matches_spec_and_results():
    doc = yaml.safe_load(weights_convert.DOCUMENTATION)
    yaml.safe_load(weights_convert.EXAMPLES)
    returns = yaml.safe_load(weights_convert.RETURN)
    spec = weights_convert.ARGUMENT_SPEC
    assert set(doc["options"]) == set(spec)
    for name, opt in spec.items():
        documented = doc["options"][name]
        for key in ("type", "default", "choices"):
            assert documented.get(key) == opt.get(key), (name, key)
        assert bool(documented.get("required")) == bool(opt.get("required")), name
    built = {"changed", "path", "digest", "manifest_recorded", "source_format", "tensors", "merged_dtype",
             "total_bytes", "special_token_ids", "adapters", "reused", "build", "previous_build", "pruned", "cleaned"}
    # and what a refused build or a failed check returns beside its message
    assert set(returns) == (built - {"changed"}) | {"msg", "problems", "renders", "rc"}
    assert set(k for k, v in returns.items() if v["returned"] == "success") == {"path", "digest", "manifest_recorded"}


def test_a_build_that_would_leave_less_than_the_floor_free_is_refused_before_it_starts(tree):
    with pytest.raises(weights.ConvertError) as err:
        convert(tree, venv=Venv(build_error="the build must not start"), min_free_bytes=1 << 60)
    assert "serving_models_min_free_bytes" in str(err.value) and UNTOUCHED in str(err.value)
    assert not os.path.exists(str(tree / "served"))
    built, venv = convert(tree, min_free_bytes=1 << 20)
    assert built["changed"] and len(venv.builds) == 1
